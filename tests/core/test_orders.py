"""The default policy's evaluator against the simulator, its snapshots, tracing policies, the tail search."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.core.orders import SimState, improve_tail, trace
from scalpel_executor.core.scheduler import Scheduler
from scalpel_executor.core.simulate import SimTask, simulate
from scalpel_executor.core.tasks import Task

from tests.core.order_batches import TOPOLOGIES, MiB, evaluator, sim_tasks, sim_tasks_with_terms


@settings(max_examples=80, deadline=None)
@given(sim_tasks, st.sampled_from(TOPOLOGIES), st.randoms(use_true_random=False))
def test_evaluator_predicts_what_the_simulator_does_for_any_order(tasks, domains, rnd):
    order = list(range(len(tasks)))
    rnd.shuffle(order)
    reference = simulate([tasks[i] for i in order], domains, 12 * MiB, "fifo").makespan
    assert evaluator(tasks, domains).run(order) == pytest.approx(reference, rel=1e-9)


@settings(max_examples=80, deadline=None)
@given(sim_tasks_with_terms, st.sampled_from(TOPOLOGIES), st.randoms(use_true_random=False))
def test_evaluator_predicts_what_the_simulator_does_with_interference_residuals(tasks, domains, rnd):
    """Told the truth (FcfsEvaluator.of reads each SimTask's true ``interference``), the evaluator
    and the simulator agree to 1e-9 for any order."""
    order = list(range(len(tasks)))
    rnd.shuffle(order)
    reference = simulate([tasks[i] for i in order], domains, 12 * MiB, "fifo").makespan
    assert evaluator(tasks, domains).run(order) == pytest.approx(reference, rel=1e-9)


@settings(max_examples=80, deadline=None)
@given(sim_tasks, st.sampled_from(TOPOLOGIES), st.randoms(use_true_random=False), st.floats(0.5, 1.5))
def test_a_cutoff_abandons_exactly_the_orders_that_end_past_it(tasks, domains, rnd, scale):
    ev = evaluator(tasks, domains)
    order = list(range(len(tasks)))
    rnd.shuffle(order)
    exact = ev.run(order)
    cutoff = exact * scale
    value = ev.run(order, cutoff=cutoff)
    if exact <= cutoff:
        assert value == exact
    else:
        assert value == float("inf")
    # from a snapshot, too
    snapshot = ev.run(order, stop=len(order) // 2)
    assert ev.run(order, state=snapshot, cutoff=cutoff) == value


@settings(max_examples=60, deadline=None)
@given(sim_tasks, st.sampled_from(TOPOLOGIES), st.randoms(use_true_random=False), st.data())
def test_a_snapshot_resumes_the_same_simulation_and_is_left_unchanged(tasks, domains, rnd, data):
    ev = evaluator(tasks, domains)
    order = list(range(len(tasks)))
    rnd.shuffle(order)
    stop = data.draw(st.integers(0, len(order)))
    snapshot = ev.run(order, stop=stop)
    assert isinstance(snapshot, SimState) and snapshot.position <= stop
    before = (snapshot.now, snapshot.position, repr(snapshot.running), snapshot.idle[:], snapshot.counter)
    exact = ev.run(order)
    assert ev.run(order, state=snapshot) == exact
    assert (snapshot.now, snapshot.position, repr(snapshot.running), snapshot.idle[:], snapshot.counter) == before
    assert ev.run(order, state=snapshot, reuse=True) == exact  # advanced in place this time
    assert snapshot.idle == [len(d) for d in domains] and not any(snapshot.running)


@settings(max_examples=60, deadline=None)
@given(sim_tasks, st.sampled_from(TOPOLOGIES), st.sampled_from(["scalpel-paper", "scalpel-lpt", "longest_first", "di"]))
def test_trace_reproduces_a_policys_schedule(tasks, domains, policy):
    """Fed first come first served, a traced dispatch order ends exactly when the policy does."""
    ev = evaluator(tasks, domains)
    shadow = Scheduler(domains, "fifo")._chooser(policy, [Task(i, t.footprint, t.solo_time) for i, t in enumerate(tasks)])
    order = trace(ev, shadow)
    assert sorted(order) == list(range(len(tasks)))
    reference = simulate(tasks, domains, 12 * MiB, policy).makespan
    assert ev.run(order) == pytest.approx(reference, rel=1e-9)


def test_trace_refuses_a_policy_that_leaves_cores_idle():
    ev = evaluator([SimTask("a", 1.0), SimTask("b", 1.0)], [[0, 1]])
    with pytest.raises(ValueError, match="idle cores"):
        trace(ev, lambda slots: [])


@settings(max_examples=40, deadline=None)
@given(sim_tasks, st.sampled_from(TOPOLOGIES), st.integers(0, 3000), st.integers(0, 5))
def test_the_tail_search_never_predicts_worse_and_is_a_function_of_its_seed(tasks, domains, budget, seed):
    ev = evaluator(tasks, domains)
    base = list(range(len(tasks)))
    found = improve_tail(ev, base, budget=budget, seed=seed)
    assert sorted(found) == base
    assert ev.run(found) <= ev.run(base)
    if found != base:  # only a strict improvement is kept
        assert ev.run(found) < ev.run(base) * (1 - 1e-9)
    assert improve_tail(evaluator(tasks, domains), base, budget=budget, seed=seed) == found
    assert improve_tail(ev, base, budget=0, seed=seed) == base


def test_the_tail_search_stops_when_its_budget_is_spent_and_ends_without_one():
    rnd = random.Random(5)
    tasks = [SimTask(f"t{i}", rnd.choice([1.0, 2.0, 3.5, 5.0]), rnd.choice([0.25, 6, 12, 20]) * MiB)
             for i in range(40)]
    domains = [[0, 1, 2, 3], [4, 5, 6, 7]]
    base = sorted(range(40), key=lambda i: -tasks[i].solo_time)  # longest first
    ev = evaluator(tasks, domains)
    before = ev.starts
    improve_tail(ev, base, budget=300, seed=1)
    # checked before each move: one move (the whole order, plus its charge) may overshoot it
    assert 300 <= ev.starts - before <= 300 + 41 + 40
    unlimited = evaluator(tasks, domains)
    found = improve_tail(unlimited, base, seed=1)  # ends: patience on every width up to the whole order
    assert unlimited.starts > ev.starts - before
    # on this batch longest-first stacks large footprints at the end; the search finds better
    assert unlimited.run(found) < unlimited.run(base) * 0.99


def test_the_tail_search_starts_on_the_last_wave():
    """With a budget for a few dozen moves, only the last wave (here 8 positions) is touched."""
    rnd = random.Random(7)
    tasks = [SimTask(f"t{i}", rnd.choice([1.0, 2.0, 3.5, 5.0]), rnd.choice([0.25, 6, 12, 20]) * MiB)
             for i in range(64)]
    domains = [[0, 1, 2, 3], [4, 5, 6, 7]]
    base = sorted(range(64), key=lambda i: -tasks[i].solo_time)
    ev = evaluator(tasks, domains)
    found = improve_tail(ev, base, budget=600, seed=2)
    first_changed = next((p for p, (a, b) in enumerate(zip(found, base)) if a != b), len(base))
    assert first_changed >= 64 - 8 - 8  # the snapshot is taken at a dispatch step: up to a wave earlier


def _ends_within(seconds, call):
    """``call()``'s value, or a failure if it has not returned after ``seconds`` (it loops)."""
    import threading
    out = []
    worker = threading.Thread(target=lambda: out.append(call()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert out, f"still running after {seconds} s: an event that never moves the clock"
    return out[0]


def test_a_task_too_short_for_the_clock_to_move_ends_and_the_run_returns():
    """At 1.7e7 s the clock's step is 3.7e-9 s: a task with 1.5e-9 s left (more than its 1e-9
    tolerance) ended at ``now + 1.5e-9 == now``, its event came back at the same time for ever, and a
    node manager's dispatch thread planned 1000 tasks at 100% of a core for minutes. Both the
    default policy's evaluator and the simulator end it."""
    from scalpel_executor.core.contention import ContentionModel
    from scalpel_executor.core.orders import FcfsEvaluator

    long, tiny = 1.7e7, 1.5e-9
    assert long + tiny == long
    ev = FcfsEvaluator([long, tiny], [0.0, 0.0], [None, None], [1], 12 * MiB, ContentionModel())
    assert _ends_within(10, lambda: ev.run([0, 1])) == pytest.approx(long)
    result = _ends_within(10, lambda: simulate([SimTask("long", long), SimTask("tiny", tiny)], [[0]],
                                               12 * MiB, "fifo"))
    assert result.makespan == pytest.approx(long) and len(result.records) == 2
