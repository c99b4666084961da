"""Planted contention: the board across processes (claim, partners by domain, dead tasks' slots
free, the file removed), the stretch by a planted factor on a fake clock, the matrix and its
oracle terms."""

import math
import multiprocessing
import os

import pytest

from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.interference import corun_slowdowns
from scalpel_executor.workloads.planted import PLANTED, RETUNED, Board, PlantedMatrix, gather, oracle_terms, planted, \
    stretch

MiB = 2**20


def hold(path, kind, cpu, claimed, done):
    board = Board(path)
    board.claim(kind, cpu)
    claimed.set()
    done.wait(30)
    board.close()


def die_holding(path, kind, cpu):
    Board(path).claim(kind, cpu)
    os._exit(1)  # no release, no close: as a task killed in its worker


@pytest.fixture
def context():
    return multiprocessing.get_context("fork")


def test_a_task_sees_the_kinds_on_its_own_domain_in_other_processes(tmp_path, context):
    path = tmp_path / "board"
    with Board.create(path, [[0, 1], [2, 3]], PLANTED) as board:
        claimed, done = [context.Event() for _ in range(3)], context.Event()
        others = [context.Process(target=hold, args=(str(path), kind, cpu, event, done))
                  for (kind, cpu), event in zip((("stream", 1), ("compute", 2), ("sensitive", 0)), claimed)]
        for process in others:
            process.start()
        try:
            assert all(event.wait(30) for event in claimed)
            own = board.claim("compute", 0)
            assert sorted(board.partners(own)) == ["sensitive", "stream"]  # CPU 2's compute is on the other domain
            assert len(board.running()) == 4
            board.release(own)
            assert len(board.running()) == 3
        finally:
            done.set()
            for process in others:
                process.join(30)
    assert not path.exists()  # the creator's close removes it


def test_a_dead_tasks_slot_counts_as_free_and_is_reused(tmp_path, context):
    path = tmp_path / "board"
    with Board.create(path, [[0, 1]], PLANTED, slots=2) as board:
        for cpu in (0, 1):
            process = context.Process(target=die_holding, args=(str(path), "stream", cpu))
            process.start()
            process.join(30)
        assert board.running() == []  # both holders are gone
        first = board.claim("compute", 0)
        assert board.claim("compute", 1, pid=os.getppid()) != first  # the second dead slot, reused
        assert board.partners(first) == ["compute"]


def test_a_process_claiming_again_clears_the_slot_it_left_and_a_full_board_says_how_to_grow(tmp_path):
    with Board.create(tmp_path / "board", [[0, 1]], PLANTED, slots=2) as board:
        board.claim("stream", 0)
        board.claim("stream", 0)  # the same process: its earlier slot is cleared, not doubled
        assert len(board.running()) == 1
        board.claim("compute", 1, pid=os.getppid())
        with pytest.raises(RuntimeError, match="no free slot.*slots="):
            board.claim("other", 1, pid=1)


def test_bad_boards_and_kinds_are_refused_with_the_fix(tmp_path):
    (tmp_path / "junk").write_bytes(b"not a board at all")
    with pytest.raises(ValueError, match="Board.create"):
        Board(tmp_path / "junk")
    with pytest.raises(ValueError, match=r"\[\[0, 1\]\]"):
        Board.create(tmp_path / "board", [[]], PLANTED)
    with Board.create(tmp_path / "board", [[0]], RETUNED) as board:
        with pytest.raises(ValueError, match="1 to 16 ASCII"):
            board.claim("a-kind-name-longer-than-sixteen", 0)


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def sleep(self, seconds):
        self.now += seconds

    def __call__(self):
        return self.now


def test_work_is_stretched_step_by_step_as_partners_come_and_go():
    clock = FakeClock()
    # A stream beside another stream for its first 1.1 s of wall time (half a second of work at
    # 2.2x), then alone: 1.1 + 0.5 = 1.6 s.
    factor = lambda: PLANTED.factor("stream", ["stream"] if clock.now < 1.1 - 1e-9 else [])  # noqa: E731
    assert stretch(1.0, factor, sleep=clock.sleep, clock=clock, step=0.01) == pytest.approx(1.6)
    clock = FakeClock()
    assert stretch(1.0, lambda: 1.0, sleep=clock.sleep, clock=clock) == pytest.approx(1.0)  # alone: its own seconds


def test_a_planted_task_alone_publishes_its_kind_only_while_it_runs(tmp_path):
    path = tmp_path / "board"
    with Board.create(path, [[cpu] for cpu in range(os.cpu_count() or 1)], PLANTED) as board:
        assert board.matrix.to_dict() == PLANTED.to_dict()  # the tasks read the matrix from the board
        result = planted(str(path), "sensitive", 0.05)
        assert result["kind"] == "sensitive" and result["name"].startswith("sensitive-")
        assert result["slowdown"] >= 1.0 and result["t1"] >= result["t0"]
        assert board.running() == []
    assert gather(result, result)["kinds"] == {"sensitive": 2}


def test_the_matrix_refuses_a_speedup_and_multiplies_partners():
    with pytest.raises(ValueError, match="finite number >= 1.*'a' beside 'b'"):
        PlantedMatrix({"a": {"b": 0.5}})
    assert PLANTED.factor("compute", ["stream", "stream"]) == pytest.approx(1.3 ** 2)
    assert PLANTED.factor("unknown", ["stream"]) == 1.0
    assert PLANTED.kinds == ["compute", "sensitive", "stream"]


@pytest.mark.parametrize("matrix, within", [(PLANTED, 0.01), (RETUNED, 0.16)])
def test_the_oracle_terms_reproduce_the_planted_pairs(matrix, within):
    terms = oracle_terms(matrix, 32 * MiB)
    for a in matrix.kinds:
        for b in matrix.kinds:
            told = corun_slowdowns(ContentionModel(), [MiB, MiB], [1.0, 1.0], 32 * MiB, [terms[a], terms[b]])[0]
            assert told == pytest.approx(matrix.factor(a, [b]), rel=within)
    # The stream, the kind that hurts everyone, presses hardest in the first world.
    first = oracle_terms(PLANTED, 32 * MiB)
    assert max(first, key=lambda k: first[k].pressure + first[k].bandwidth) == "stream"


def test_the_oracle_terms_are_residuals_at_the_footprints_the_run_plans_with():
    # A host's fit on planted co-runs can see contention in footprints (capacity 2 MiB here): the
    # terms are then what the matrix adds to it at each kind's own footprint.
    model, llc = ContentionModel(0.06, 1.6), 32 * MiB
    sizes = {"stream": 1.45 * MiB, "sensitive": 1.27 * MiB, "compute": 0.46 * MiB}
    terms = oracle_terms(PLANTED, llc, model, sizes)
    for a in PLANTED.kinds:
        for b in PLANTED.kinds:
            told = corun_slowdowns(model, [sizes[a], sizes[b]], [1.6, 1.6], llc, [terms[a], terms[b]])[0]
            assert told == pytest.approx(PLANTED.factor(a, [b]), rel=0.1), (a, b)
    stale = oracle_terms(PLANTED, llc, model)  # at 512 KiB each: wrong at these footprints
    wrong = corun_slowdowns(model, [sizes["sensitive"], sizes["stream"]], [1.6, 1.6], llc,
                            [stale["sensitive"], stale["stream"]])[0]
    assert abs(math.log(wrong / PLANTED.factor("sensitive", ["stream"]))) > 0.1
