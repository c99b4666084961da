"""Dispatch orders of tasks of several cores: the evaluator against the simulator, and the plan on it."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.multicore_orders import MulticoreEvaluator, supports
from scalpel_executor.core.planning import PlanContext, scalpel_order
from scalpel_executor.core.simulate import SimTask, simulate
from scalpel_executor.core.tasks import Task

MiB = 2**20
LLC = 12 * MiB
TOPOLOGIES = [[[0, 1, 2, 3]], [[0, 1, 2, 3], [4, 5, 6, 7]], [[0, 1], [2, 3], [4, 5]], [[0, 1, 2, 3], [4, 5]]]

mixed_tasks = st.lists(
    st.tuples(st.sampled_from([0.5, 1.0, 2.0, 3.0]), st.floats(0.1, 5.0),  # solo time: tied, or not
              st.booleans(), st.sampled_from([0.25, 2, 6, 12, 20]), st.sampled_from([1, 1, 2, 3, 4]),
              st.one_of(st.none(), st.floats(0.1, 5.0))),  # the scheduler's estimate: exact, or off
    min_size=1, max_size=20,
)


def sim_tasks(rows, domains):
    widest = max(map(len, domains))
    return [SimTask(f"t{i}", tied if use_tied else untied, f * MiB, cores=min(cores, widest), runtime_estimate=estimate)
            for i, (tied, untied, use_tied, f, cores, estimate) in enumerate(rows)]


def as_tasks(sims):
    return [Task(i, t.footprint, t.solo_time if t.runtime_estimate is None else t.runtime_estimate, cores=t.cores)
            for i, t in enumerate(sims)]


def evaluator(sims, domains, model=None):
    return MulticoreEvaluator(as_tasks(sims), [len(d) for d in domains], LLC, model or ContentionModel(),
                              solo=[t.solo_time for t in sims])


@settings(max_examples=120, deadline=None)
@given(mixed_tasks, st.sampled_from(TOPOLOGIES), st.randoms(use_true_random=False))
def test_the_evaluator_predicts_what_the_scheduler_does_with_any_order(rows, domains, rnd):
    """An order fed to ``fifo`` is dispatched with the scheduler's reservations and backfilling;
    the evaluator replays it to 1e-9, run-time estimates off or not."""
    sims = sim_tasks(rows, domains)
    order = list(range(len(sims)))
    rnd.shuffle(order)
    reference = simulate([sims[i] for i in order], domains, LLC, "fifo").makespan
    assert evaluator(sims, domains).run(order) == pytest.approx(reference, rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(mixed_tasks, st.sampled_from(TOPOLOGIES), st.randoms(use_true_random=False), st.floats(0.5, 1.5))
def test_a_cutoff_abandons_exactly_the_orders_that_end_past_it(rows, domains, rnd, scale):
    ev = evaluator(sim_tasks(rows, domains), domains)
    order = list(range(len(rows)))
    rnd.shuffle(order)
    exact = ev.run(order)
    assert ev.run(order, cutoff=exact * scale) == (exact if exact <= exact * scale else float("inf"))


def test_what_the_evaluator_does_not_replay_is_refused():
    cores = [4, 4]
    assert supports([Task(0, 0, 1.0, cores=4), Task(1, 0, 1.0)], cores)
    assert not supports([Task(0, 0, 1.0, cores=5)], cores)  # wider than a domain: spans domains
    assert not supports([Task(0, 0, 1.0, cores=2, memory=2**30)], cores)
    assert not supports([Task(0, 0, 1.0, gpus=1)], cores)
    with pytest.raises(ValueError, match="widest domain"):
        MulticoreEvaluator([Task(0, 0, 1.0, cores=5)], cores, LLC, ContentionModel())
    ev = MulticoreEvaluator([Task(0, 0, 1.0, cores=2)], cores, LLC, ContentionModel())
    with pytest.raises(ValueError, match="whole orders"):
        ev.run([0], stop=0)


@settings(max_examples=40, deadline=None)
@given(mixed_tasks, st.sampled_from(TOPOLOGIES))
def test_with_exact_estimates_scalpel_runs_its_plan_and_never_ends_after_largest_area_first(rows, domains):
    """The plan is checked in the model as the scheduler books wide tasks, and the admission rule
    leaves the co-runs it foresaw alone: the simulated schedule is the predicted one."""
    sims = [SimTask(t.name, t.solo_time, t.footprint, cores=t.cores) for t in sim_tasks(rows, domains)]
    cores = [len(d) for d in domains]
    tasks = as_tasks(sims)
    for i, task in enumerate(tasks):
        task.seq = i
    order = scalpel_order(tasks, PlanContext(cores, llc=LLC))
    predicted = MulticoreEvaluator(tasks, cores, LLC, ContentionModel()).run(order)
    scalpel = simulate(sims, domains, LLC, "scalpel").makespan
    assert scalpel == pytest.approx(predicted, rel=1e-9)
    assert scalpel <= simulate(sims, domains, LLC, "longest_first").makespan * (1 + 1e-9)


def test_a_plan_keeps_large_footprints_apart_where_largest_area_first_stacks_them():
    """Largest area first starts the two 2-core 20 MiB tasks together on the one 12 MiB domain;
    the plan pairs each with a small task."""
    sims = [SimTask("big-a", 4.0, 20 * MiB, cores=2), SimTask("big-b", 4.0, 20 * MiB, cores=2),
            SimTask("small-a", 3.9, 0.25 * MiB, cores=2), SimTask("small-b", 3.9, 0.25 * MiB, cores=2)]
    domains = [[0, 1, 2, 3]]
    lpt = simulate(sims, domains, LLC, "longest_first").makespan
    scalpel = simulate(sims, domains, LLC, "scalpel").makespan
    assert scalpel < lpt * 0.95  # 7.97 s against 8.5 s
