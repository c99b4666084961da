"""The learning loop under planted contention: the figures from the tasks' stamps and their summary
(pure), and a small live loop through the real executor, store, detached refit and run report.

The live test asserts on what was learned (the per-key choice within three runs, a stream learned
to hurt more than a compute task) and on the first run's co-run seconds counted from the tasks' own
stamps: a planted task's wall time is its planted slowdown (it sleeps), so these do not depend on
the load of the machine running the test. Whether a plan made with learned terms then keeps the
hurting pairs apart depends on what the runs before it let the fit see (one of three repetitions
of the benchmark did not, docs/results/planted.md), so the live test does not assert it; that a
plan told the planted matrix keeps them apart on two cores is asserted in simulation, from a
live run's learned footprints and spreads."""

import os

import pytest

from scalpel_executor.core.domains import Topology
from scalpel_executor.experiments.planted_loop import FIRST, gap_closed, hurting_corun_seconds, learning_runs, \
    summarise, task_key, tell_oracle
from scalpel_executor.learning.host_model import HostModelStore, host_id

MiB = 2**20


def task(kind, t0, t1):
    return {"kind": kind, "t0": t0, "t1": t1}


def test_hurting_pairs_are_the_planted_pairs_of_1_5x_or_more_either_way():
    assert FIRST.hurting() == {frozenset({"stream"}), frozenset({"stream", "sensitive"})}
    run = [task("stream", 0, 2), task("stream", 1, 3), task("sensitive", 2.5, 4), task("compute", 0, 4)]
    # the streams' 1 s and the sensitive task's 0.5 s beside the second stream; the compute task
    # beside anything (1.3x at most) does not count
    assert hurting_corun_seconds(run, FIRST) == pytest.approx(1.5)


def test_the_summary_takes_medians_over_repetitions_and_the_gap_on_them():
    def rep(first, learned, oracle, per_key_after):
        runs = [{"run": 1, "makespan": first[0], "hurting_corun_seconds": first[1],
                 "refit_choice": {"per_key": True, "reason": "exploring: 3 keys never seen alone ..."}},
                {"run": 2, "makespan": learned[0], "hurting_corun_seconds": learned[1],
                 "refit_choice": {"per_key": per_key_after == 2,
                                  "reason": "per-key model (...)" if per_key_after == 2 else "footprint-only: ..."},
                 "planned_with": "per-key interference"}]
        return {"runs": runs, "oracle": {"makespan": oracle[0], "hurting_corun_seconds": oracle[1]}, "load": [1.0, 2.0]}

    reps = [rep((12, 4), (10, 1), (9, 0), 2), rep((12, 4), (10.5, 1), (9, 0), 2), rep((11, 2), (10, 0.5), (9, 0), None)]
    summary = summarise(reps, resamples=200)
    assert summary["makespan"] == {"first": 12, "learned": 10, "oracle": 9}
    assert summary["learned_hurting_share"] == pytest.approx(0.25) and summary["gap_closed"] == pytest.approx(2 / 3)
    low, high = summary["gap_closed_interval"]
    assert low <= 2 / 3 <= high
    assert summary["per_key_first_chosen_after_run"] == [2, 2, None] and summary["load"] == [1.0, 2.0]
    assert gap_closed(10, 12, 9) < 0 and gap_closed(9, 9, 9) is None


def test_the_oracle_is_told_through_the_table_the_refit_writes(tmp_path):
    topology = Topology.from_cpu_lists([[0, 1]], llc_size=32 * MiB)
    store = str(tmp_path / "profiles.sqlite")
    tell_oracle(store, topology, FIRST, 0.5)
    models = HostModelStore(store)
    told = models.interference(host_id(topology))
    assert not models.stale(host_id(topology))  # a run's start spawns no refit that would overwrite it
    models.close()
    assert told.per_key and told.reason.startswith("per-key: told the planted matrix")
    stream = told.terms[task_key("stream", 0.5)]
    assert stream.bandwidth > 0.5 and task_key("stream", 0.5).endswith("planted(str,stream,~0.5)")
    assert told.solo == {task_key(kind, 0.5): 0.5 for kind in ("stream", "sensitive", "compute")}  # the truth


def test_a_plan_told_the_planted_matrix_keeps_the_hurting_pairs_apart_on_two_cores():
    # A live oracle run's batch as its scheduler saw it: 16 planted tasks of 1 s, the footprints and
    # run-time spreads its store had learned, the planted matrix told as terms at those footprints.
    # With 200 starts a second (1,900 for the batch) the tail search never reached the first pairs:
    # 3.9 s of hurting pairs, live and simulated alike. The allowance for a 2-core domain reaches them.
    import itertools

    from scalpel_executor.core.simulate import SimTask, simulate
    from scalpel_executor.workloads.planted import oracle_terms

    learned = {"stream": (1.46 * MiB, 0.334), "sensitive": (0.56 * MiB, 0.215), "compute": (1.12 * MiB, 0.12)}
    told = oracle_terms(FIRST.matrix, 32 * MiB, footprints={k: f for k, (f, _) in learned.items()})
    truth = oracle_terms(FIRST.matrix, 32 * MiB)
    tasks = [SimTask(kind, 1.0, footprint=learned[kind][0], runtime_spread=learned[kind][1], key=kind,
                     interference=truth[kind], told_interference=told[kind])
             for kind, count in FIRST.kinds for _ in range(count)]
    tasks.append(SimTask("reduce", 0.05, parents=tuple(range(len(tasks))), key="reduce"))
    records = [r for r in simulate(tasks, [[0, 1]], 32 * MiB).records if r.name != "reduce"]
    hurting = FIRST.hurting()
    together = sum(max(0.0, min(a.end, b.end) - max(a.start, b.start)) for a, b in itertools.combinations(records, 2)
                   if frozenset((a.name, b.name)) in hurting)
    assert together < 1.5  # 3.9 s with the allowance of an 8-core domain


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the loop runs on two cores")
def test_the_loop_learns_the_planted_pairs_within_three_runs(tmp_path):
    cpus = sorted(os.sched_getaffinity(0))[:2]
    topology = Topology.from_cpu_lists([cpus], llc_size=32 * MiB)
    # Within three runs the hold-out chose per-key terms, learned from the runs' own co-runs. Not in
    # every loop: 2 of 15 on the development VM chose none. One read had first run its six streams
    # last, beside each other only; with one key so caught exploration does not start (it needs two,
    # core.interference_fit.exploration), the streams' run time absorbs what they cost each other,
    # and no held-out record tells the two models apart (docs/results/planted.md). So up to three
    # loops, each on a store of its own: learning that broke would fail all three.
    reasons = []
    for attempt in range(3):
        rows = learning_runs(FIRST, 0.5, topology, 3, tmp_path / f"loop-{attempt}")
        first = rows[0]
        assert first["planned_with"] == "footprint" and first["hurting_corun_seconds"] > 0
        learned = [r for r in rows if r["refit_choice"]["reason"].startswith("per-key model")]
        reasons.append([r["refit_choice"]["reason"] for r in rows])
        if learned:
            break
    assert learned, reasons
    terms = learned[-1]["refit_choice"]["terms"]
    stream, compute = terms[task_key("stream", 0.5)], terms[task_key("compute", 0.5)]
    # A stream is learned to hurt more than a compute task does (pressure plus bandwidth).
    assert stream[1] + stream[2] ** 2 > compute[1] + compute[2] * stream[2]
    # Whether a plan made with the learned terms keeps the hurting pairs apart is not asserted: it
    # did in 2 of 3 repetitions of the benchmark (docs/results/planted.md), not in every one.
