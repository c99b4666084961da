"""The batch rule both drivers apply (core.batching), and the simulator modelling its cost."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.core.batching import BURST_STRETCH, Batcher, Batching
from scalpel_executor.core.simulate import SimTask, simulate

WINDOW, QUIET = 0.005, 0.001


def test_a_lone_arrival_waits_quiet_and_a_burst_waits_the_window_from_its_first_arrival():
    batcher = Batcher(Batching(WINDOW, QUIET), cores=2)
    batcher.hold(["a"], now=1.0)
    assert batcher.wake_at(waiting=0) == pytest.approx(1.0 + QUIET)
    assert batcher.release(1.0005, waiting=0) == []
    batcher.hold(["b"], now=1.0008)
    assert batcher.wake_at(waiting=0) == pytest.approx(1.0 + WINDOW)
    assert batcher.release(1.004, waiting=0) == []
    assert batcher.release(1.005, waiting=0) == ["a", "b"]
    assert batcher.held == [] and batcher.wake_at(waiting=0) is None


def test_a_burst_still_arriving_at_the_window_is_held_until_it_goes_quiet_at_most_four_windows():
    from scalpel_executor.core.batching import BURST_STRETCH

    # a DataFlowKernel submitting 8 apps 0.7 ms apart: 4.9 ms from first to last
    batcher = Batcher(Batching(WINDOW, QUIET), cores=2)
    for i in range(8):
        batcher.hold([i], now=i * 0.0007)
        assert batcher.release(i * 0.0007, waiting=0) == []
    assert batcher.wake_at(waiting=0) == pytest.approx(0.0049 + QUIET)  # past the 5 ms window
    assert batcher.release(0.0055, waiting=0) == []
    assert batcher.release(0.0059, waiting=0) == list(range(8))  # whole
    # a stream that never goes quiet is released BURST_STRETCH windows after its first arrival
    stream = Batcher(Batching(WINDOW, QUIET), cores=2)
    t = 0.0
    while t < 0.05:
        stream.hold(["x"], now=t)
        if stream.release(t, waiting=0):
            break
        t += 0.0005
    assert t == pytest.approx(BURST_STRETCH * WINDOW, abs=0.0005)


def test_while_the_scheduler_holds_plenty_arrivals_keep_collecting_past_the_deadline():
    batcher = Batcher(Batching(WINDOW, QUIET), cores=2)
    batcher.hold(["a", "b"], now=0.0)
    assert batcher.wake_at(waiting=4) is None  # 4 waiting = 2 × cores: plenty
    assert batcher.release(1.0, waiting=4) == []
    assert batcher.release(1.0, waiting=3) == ["a", "b"]


def test_max_batch_releases_at_once():
    batcher = Batcher(Batching(WINDOW, QUIET, max_batch=3), cores=2)
    batcher.hold(["a", "b"], now=0.0)
    assert batcher.release(0.0, waiting=100) == []
    batcher.hold(["c"], now=0.0)
    assert batcher.release(0.0, waiting=100) == ["a", "b", "c"]


@pytest.mark.parametrize("settings_, message", [
    ({"window": -1}, "window.*-1"), ({"quiet": float("nan")}, "quiet.*nan"), ({"window": True}, "window.*True"),
    ({"max_batch": 0}, "max_batch"), ({"max_batch": 2.5}, "max_batch"),
])
def test_bad_settings_are_named(settings_, message):
    with pytest.raises((ValueError, TypeError), match=message):
        Batching(**settings_)


@settings(max_examples=200, deadline=None)
@given(
    window=st.floats(0, 0.1), quiet=st.floats(0, 0.1), max_batch=st.integers(1, 6), cores=st.integers(1, 4),
    events=st.lists(st.tuples(st.floats(0, 0.05), st.integers(0, 3), st.integers(0, 10)), max_size=30),
)
def test_every_task_is_released_once_in_arrival_order_and_never_before_it_is_due(window, quiet, max_batch, cores, events):
    batcher = Batcher(Batching(window, quiet, max_batch), cores)
    now, next_id, released, first_at = 0.0, 0, [], None
    for step, arrivals, waiting in events:
        now += step
        if arrivals:
            first_at = now if not batcher.held else first_at
            batcher.hold(range(next_id, next_id + arrivals), now)
            next_id += arrivals
        held = len(batcher.held)
        due = batcher.wake_at(waiting)
        batch = batcher.release(now, waiting)
        if batch:
            full = held >= max_batch
            assert full or (waiting < 2 * cores and now >= first_at + (window if held > 1 else min(quiet, window)))
        elif held:
            assert held < max_batch and (due is None or now < due)
        released.extend(batch)
    released.extend(batcher.release(float("inf"), waiting=0))
    assert released == list(range(next_id))


def test_the_simulator_pays_the_batch_window_once_for_a_batch_submitted_at_once():
    tasks = [SimTask(f"t{i}", 1.0 + i / 10, footprint=i * 2**20) for i in range(6)]
    plain = simulate(tasks, [[0, 1], [2, 3]], 8 * 2**20)
    held = simulate(tasks, [[0, 1], [2, 3]], 8 * 2**20, batching=Batching(window=0.25, quiet=0.05))
    assert held.makespan == pytest.approx(plain.makespan + 0.25)


def test_the_simulator_groups_a_late_burst_together_when_it_holds_arrivals():
    # Two heavy and two light tasks arrive 1 ms apart; without a window each arrival is dispatched
    # alone as it comes, so under the paper's algorithm (no admission) the two heavy ones land on
    # the idle domain 0 together; with a window Algorithm 1 sees all four and pairs heavy with light.
    # The default policy's admission starts the second heavy one on the idle domain 1 either way.
    tasks = [SimTask(name, 1.0, footprint=f, arrival=0.001 * i)
             for i, (name, f) in enumerate([("big1", 32 * 2**20), ("big2", 32 * 2**20), ("small1", 2**20),
                                            ("small2", 2**20)])]
    plain = simulate(tasks, [[0, 1], [2, 3]], 32 * 2**20, "scalpel-paper")
    held = simulate(tasks, [[0, 1], [2, 3]], 32 * 2**20, "scalpel-paper", batching=Batching(window=0.01, quiet=0.01))
    assert len({r.domain for r in plain.records if r.name.startswith("big")}) == 1
    assert len({r.domain for r in held.records if r.name.startswith("big")}) == 2
    assert held.makespan < plain.makespan
    for batching in (None, Batching(window=0.01, quiet=0.01)):
        admitted = simulate(tasks, [[0, 1], [2, 3]], 32 * 2**20, "scalpel", batching=batching)
        assert len({r.domain for r in admitted.records if r.name.startswith("big")}) == 2


def test_a_lone_arrival_expected_to_run_long_waits_for_company_up_to_the_window():
    batcher = Batcher(Batching(WINDOW, QUIET), cores=2, runtime_of=lambda task: task[1])
    batcher.hold([("noop", 0.0001)], now=1.0)
    assert batcher.wake_at(waiting=0) == pytest.approx(1.0 + QUIET)  # short: sent on after quiet
    assert batcher.release(1.0 + QUIET, waiting=0) == [("noop", 0.0001)]
    batcher.hold([("quarter", 0.25)], now=2.0)  # 1% of 0.25 s = 2.5 ms
    assert batcher.wake_at(waiting=0) == pytest.approx(2.0025)
    assert batcher.release(2.002, waiting=0) == []
    assert batcher.release(2.0025, waiting=0) == [("quarter", 0.25)]
    batcher.hold([("long", 60.0)], now=3.0)  # at most the window
    assert batcher.wake_at(waiting=0) == pytest.approx(3.0 + WINDOW)
    batcher.hold([("late", 1.0)], now=3.0017)  # a second submit 1.7 ms later still joins the batch
    # A burst of long tasks is held until it has been quiet 1% of its longest run time, at most
    # BURST_STRETCH windows from its first arrival: a submit that stalls a few ms still joins it.
    assert batcher.release(3.0 + WINDOW, waiting=0) == []
    assert batcher.release(3.0 + BURST_STRETCH * WINDOW, waiting=0) == [("long", 60.0), ("late", 1.0)]


def test_a_burst_of_long_tasks_waits_out_a_pause_of_a_few_ms_mid_burst():
    # A first run (every run time the prior's 1 s): eight lookups 1 ms apart, the first FFT, then
    # the DataFlowKernel pauses 6 ms before the other FFTs. A 1 ms quiet would release the lookups
    # and one FFT alone; 1% of 1 s (10 ms) waits for the rest.
    batcher = Batcher(Batching(WINDOW, QUIET), cores=2, runtime_of=lambda task: 1.0)
    for i in range(8):
        batcher.hold([f"lookup-{i}"], now=0.001 * i)
    batcher.hold(["fft-0"], now=0.008)
    assert batcher.release(0.0135, waiting=0, running=0) == []
    batcher.hold([f"fft-{i}" for i in range(1, 16)], now=0.014)
    assert batcher.wake_at(waiting=0, running=0) == pytest.approx(BURST_STRETCH * WINDOW)
    assert len(batcher.release(BURST_STRETCH * WINDOW, waiting=0, running=0)) == 24
    noops = Batcher(Batching(WINDOW, QUIET), cores=2, runtime_of=lambda task: 0.0001)
    noops.hold(["a", "b"], now=0.0)  # a burst of no-ops: held for the window, not longer
    assert noops.wake_at(waiting=0) == pytest.approx(WINDOW)


def test_the_simulator_holds_a_long_lone_first_task_for_a_longer_one_submitted_just_after():
    # The first submit is a 0.6 s task, the 1.8 s one comes 2 ms later: waiting for company lets
    # longest-first see both, so the long task is not stuck behind the short one.
    tasks = [SimTask("short", 0.6, arrival=0.0), SimTask("long", 1.8, arrival=0.002),
             SimTask("mid", 1.2, arrival=0.002), SimTask("tiny", 0.5, arrival=0.002)]
    held = simulate(tasks, [[0, 1]], 32 * 2**20, policy="longest_first", batching=Batching(window=0.005, quiet=0.001))
    first_two = {r.name for r in sorted(held.records, key=lambda r: r.start)[:2]}
    assert first_two == {"long", "mid"}


def test_a_lone_no_op_on_an_idle_machine_goes_at_once_but_waits_quiet_beside_running_work():
    batcher = Batcher(Batching(WINDOW, QUIET), cores=2, runtime_of=lambda task: task[1])
    batcher.hold([("noop", 0.0001)], now=1.0)
    assert batcher.release(1.0 + 0.0001 * 0.01, waiting=0, running=0) == [("noop", 0.0001)]
    batcher.hold([("noop", 0.0001)], now=2.0)
    assert batcher.release(2.0 + QUIET / 2, waiting=0, running=1) == []  # a burst may be arriving
    assert batcher.release(2.0 + QUIET, waiting=0, running=1) == [("noop", 0.0001)]
    batcher.hold([("long", 60.0)], now=3.0)  # long: still waits the window for company
    assert batcher.wake_at(waiting=0, running=0) == pytest.approx(3.0 + WINDOW)
