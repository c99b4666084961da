"""A task's tail (the chain that waits for its result): how the default policy plans with it."""

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.orders import FcfsEvaluator
from scalpel_executor.core.planning import PlanContext, scalpel_order
from scalpel_executor.core.scheduler import Scheduler
from scalpel_executor.core.simulate import SimTask, graph_tails, simulate
from scalpel_executor.core.tasks import Task, rank

MiB = 2**20


def _chain_workflow(simulations: int = 10, chain: int = 5, length: float = 1.6) -> list[SimTask]:
    """Independent simulations submitted first, then a short preparation feeding a chain."""
    tasks = [SimTask(f"sim_{i}", length) for i in range(simulations)]
    tasks.append(SimTask("prepare", 0.05))
    for step in range(chain):
        tasks.append(SimTask(f"analyse_{step}", length, parents=(len(tasks) - 1,)))
    return tasks


def test_graph_tails_are_the_longest_chain_below_each_task():
    #   0 -> 1 (2 s) -> 3 (1 s)
    #   0 -> 2 (5 s) -> 3
    tasks = [SimTask("a", 1.0), SimTask("b", 2.0, parents=(0,)), SimTask("c", 5.0, parents=(0,)),
             SimTask("d", 1.0, parents=(1, 2)), SimTask("e", 9.0)]
    assert graph_tails(tasks, estimates=False) == [6.0, 1.0, 1.0, 0.0, 0.0]
    told = [dataclasses.replace(t, runtime_estimate=t.solo_time * 2) for t in tasks]
    assert graph_tails(told) == [12.0, 2.0, 2.0, 0.0, 0.0]  # on the estimates the scheduler has
    assert graph_tails(told, estimates=False) == [6.0, 1.0, 1.0, 0.0, 0.0]


def test_graph_tails_count_a_malleable_task_at_its_widest_by_its_keys_serial_fraction():
    #   a (1 s) -> b (8 s on one core, malleable to 8 cores, key "k") -> c (2 s)
    tasks = [SimTask("a", 1.0), SimTask("b", 8.0, parents=(0,), key="k", max_cores=8),
             SimTask("c", 2.0, parents=(1,), key="k")]  # c: its key's, but not malleable
    assert graph_tails(tasks) == [10.0, 2.0, 0.0]
    fits = {"k": 0.25}.get
    assert graph_tails(tasks, serial_fraction=fits) == [8.0 * (0.25 + 0.75 / 8) + 2.0, 2.0, 0.0]
    assert graph_tails(tasks, serial_fraction=fits, domain_cores=4) == [8.0 * (0.25 + 0.75 / 4) + 2.0, 2.0, 0.0]
    assert graph_tails(tasks, serial_fraction=lambda key: 1.0) == [10.0, 2.0, 0.0]  # no gain: as it is


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.1, 50), st.sets(st.integers(0, 30), max_size=3), st.sampled_from([None, 2, 8]),
                          st.sampled_from(["x", "y"]), st.sampled_from([1, 2, 8])), min_size=1, max_size=15),
       st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_a_chain_at_its_widest_is_never_longer_and_no_gain_changes_nothing(rows, x, y):
    """On any DAG: a task of 8 cores malleable to 8 or of 8 cores on a 4-core cap counts as it is."""
    tasks = [SimTask(f"t{i}", runtime, parents=tuple(sorted(p for p in parents if p < i)), key=key, cores=cores,
                     max_cores=widest if widest is None else max(widest, cores))
             for i, (runtime, parents, widest, key, cores) in enumerate(rows)]
    plain = graph_tails(tasks)
    wide = graph_tails(tasks, serial_fraction={"x": x, "y": y}.get, domain_cores=4)
    assert all(w <= p * (1 + 1e-12) for w, p in zip(wide, plain))
    assert graph_tails(tasks, serial_fraction=lambda key: 1.0) == pytest.approx(plain)


def test_graph_tails_name_a_cycle():
    with pytest.raises(ValueError, match="cycle"):
        graph_tails([SimTask("a", 1.0, parents=(1,)), SimTask("b", 1.0, parents=(0,))])


@pytest.mark.parametrize("bad", [-1.0, math.inf, math.nan])
def test_a_bad_tail_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match="'x': tail must be a finite number"):
        SimTask("x", 1.0, tail=bad)
    with pytest.raises(ValueError, match="'x': wide_tail must be a finite number"):
        SimTask("x", 1.0, wide_tail=bad)
    assert SimTask("x", 1.0, wide_tail=None).wide_tail is None  # none told: the width rule reads ``tail``


def test_the_evaluator_ends_an_order_at_the_latest_finish_plus_tail():
    ev = FcfsEvaluator([1.0, 3.0], [0.0, 0.0], [None, None], [1], math.inf, ContentionModel(), tails=[10.0, 0.0])
    assert ev.run([0, 1]) == pytest.approx(11.0)  # 0 ends at 1 s, its chain at 11 s
    assert ev.run([1, 0]) == pytest.approx(14.0)  # 0 ends at 4 s
    plain = FcfsEvaluator([1.0, 3.0], [0.0, 0.0], [None, None], [1], math.inf, ContentionModel())
    assert plain.run([0, 1]) == plain.run([1, 0]) == pytest.approx(4.0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.1, 20), st.sampled_from([0, 8, 24, 40])), min_size=1, max_size=12),
       st.sampled_from([[1], [2], [2, 2], [4]]))
def test_zero_tails_change_no_plan(tasks, domains):
    """Where no chain is known, the default policy plans exactly as before tails existed."""
    def batch(tails):
        return [Task(i, fp * MiB, runtime, tail=tail) for i, ((runtime, fp), tail) in enumerate(zip(tasks, tails))]
    for i, task in enumerate(batch([0.0] * len(tasks))):
        task.seq = i
    context = PlanContext(domains, llc=32 * MiB)
    plain, zero = batch([0.0] * len(tasks)), batch([0.0] * len(tasks))
    for i, (a, b) in enumerate(zip(plain, zero)):
        a.seq = b.seq = i
    assert scalpel_order(plain, context) == scalpel_order(zero, context)
    ev = FcfsEvaluator([r for r, _ in tasks], [f * MiB for _, f in tasks], [None] * len(tasks), domains,
                       32 * MiB, ContentionModel(), tails=[0.0] * len(tasks))
    assert ev.tails is None  # the hot loop does not pay for tails that are all 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.1, 10), st.sampled_from([0.0, 0.0, 1.0, 5.0, 30.0])), min_size=2, max_size=10),
       st.sampled_from([[1], [2], [2, 2]]))
def test_the_plan_ends_its_chains_no_later_than_rank_first(tasks, domains):
    batch = [Task(i, 0.0, runtime, tail=tail) for i, (runtime, tail) in enumerate(tasks)]
    for i, task in enumerate(batch):
        task.seq = i
    order = scalpel_order(batch, PlanContext(domains, llc=32 * MiB))
    ev = FcfsEvaluator([t.runtime for t in batch], [0.0] * len(batch), [None] * len(batch), domains, 32 * MiB,
                       ContentionModel(), tails=[t.tail for t in batch])
    rank_first = sorted(range(len(batch)), key=lambda i: (-rank(batch[i]), i))
    assert ev.run(order) <= ev.run(rank_first) * (1 + 1e-9)


def test_a_late_arrival_with_a_chain_is_merged_ahead_of_longer_tasks():
    scheduler = Scheduler([[0]], "scalpel", llc=32 * MiB)
    scheduler.add([Task(i, 0.0, 2.0) for i in range(4)])
    assert scheduler.dispatch(0.0)[0].task.id == 0
    scheduler.add([Task("gate", 0.0, 0.1, tail=8.0)])
    scheduler.release(scheduler.slots[0])
    assert scheduler.dispatch(1.0)[0].task.id == "gate"


def test_told_the_chain_the_workflow_ends_sooner():
    tasks = _chain_workflow()
    told = [dataclasses.replace(t, tail=tail) for t, tail in zip(tasks, graph_tails(tasks))]
    untold = simulate(tasks, [[0, 1]], 32 * MiB, "scalpel").makespan
    result = simulate(told, [[0, 1]], 32 * MiB, "scalpel")
    assert result.makespan < 0.9 * untold
    assert result.makespan <= result.lower_bound + 1.6  # the chain started at once: one task's granularity off
    first = min(result.records, key=lambda r: r.start)
    assert first.name == "prepare"


def test_a_task_told_a_longer_chain_while_it_waits_is_planned_again_with_it():
    """``Scheduler.lengthen``: a waiting task takes a longer chain and the plan starts it first; a
    shorter one, a running task and an unknown id change nothing."""
    s = Scheduler([[0]], "scalpel", llc=32 * MiB)
    running, first, second = (Task(i, 1 * MiB, 1.0, 0.0) for i in range(3))
    s.add([running])
    s.dispatch(0.0)
    s.add([first, second])
    assert not s.lengthen(0, 50.0, 40.0)  # running
    assert not s.lengthen(7, 50.0, 40.0)  # unknown
    assert s.lengthen(2, 50.0, 40.0) and (second.tail, second.wide_tail) == (50.0, 40.0)
    assert not s.lengthen(2, 10.0, 10.0) and second.tail == 50.0  # shorter: kept
    s.release(0, 1.0)
    [start] = s.dispatch(1.0)
    assert start.task is second
