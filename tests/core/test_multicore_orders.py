"""Dispatch orders of tasks of several cores: the evaluator against the simulator, and the plan on it."""

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from scalpel_executor.core.admission import OVERDUE_FRACTION
from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.multicore_orders import MulticoreEvaluator, supports
from scalpel_executor.core.orders import RunningTask
from scalpel_executor.core.planning import PlanContext, scalpel_order
from scalpel_executor.core.scheduler import Scheduler
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
@example(rows=[(0.5, 1.0, False, 2, 1, None), (0.5, 5.0, False, 0.25, 3, None), (0.5, 1.75, False, 0.25, 4, None),
               (0.5, 0.5, False, 0.25, 2, None), (0.5, 1.0, False, 0.25, 1, None), (0.5, 1.0, False, 6, 2, None),
               (3.0, 1.0, True, 6, 2, None), (3.0, 1.0, True, 20, 1, None), (3.0, 1.0, True, 20, 1, None)],
         domains=[[0, 1, 2, 3], [4, 5, 6, 7]])  # the admission rule kept a 0.25 MiB task ahead: 6.0006 s, planned 6.02
def test_with_exact_estimates_scalpel_runs_its_plan_and_never_ends_after_largest_area_first(rows, domains):
    """The plan is checked in the model as the scheduler books wide tasks, and the admission rule
    leaves the co-runs it foresaw alone: the simulated schedule ends when the plan predicted, or
    sooner where the rule found a start that pays (``deferral_pays``) the plan's search missed."""
    sims = [SimTask(t.name, t.solo_time, t.footprint, cores=t.cores) for t in sim_tasks(rows, domains)]
    cores = [len(d) for d in domains]
    tasks = as_tasks(sims)
    for i, task in enumerate(tasks):
        task.seq = i
    # the scheduler's base policies: with one-core tasks only, the plan traces them
    order = scalpel_order(tasks, PlanContext(cores, llc=LLC, chooser=Scheduler(domains, "scalpel", llc=LLC)._chooser))
    predicted = MulticoreEvaluator(tasks, cores, LLC, ContentionModel()).run(order)
    scalpel = simulate(sims, domains, LLC, "scalpel").makespan
    assert scalpel <= predicted * (1 + 1e-9)
    assert scalpel <= simulate(sims, domains, LLC, "longest_first").makespan * (1 + 1e-9)


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="known: the admission rule's deferral at 2.0 s (kept-apart) does not pay here")
def test_a_deferral_that_did_not_pay_ends_after_largest_area_first():
    """Found by hypothesis, not fixed: on one 4-core domain of 12 MiB, at 2.0 s the admission rule
    keeps a 6 MiB task apart from a running 12 MiB one and starts a 0.25 MiB task instead
    (``kept-apart``), predicting that deferral pays. The 6 MiB task then starts at 2.5 s beside the
    same task, the two-core task reserved behind them starts at 3.7 s instead of 3.62 s, and the
    run ends at 5.70 s against the plan's and longest-first's 5.62 s (1.4% later). This test fails
    (strict) once that deferral is weighed right."""
    rows = [(0.5, 1.0, False, 0.25, 2, None), (0.5, 1.0, False, 0.25, 2, None), (0.5, 1.0, False, 6, 1, None),
            (0.5, 1.0, False, 6, 1, None), (0.5, 5.0, False, 0.25, 1, None), (0.5, 0.5, False, 0.25, 1, None),
            (2.0, 1.0, True, 0.25, 1, None), (3.0, 1.0, True, 12, 1, None), (3.0, 1.0, True, 2, 1, None)]
    test_with_exact_estimates_scalpel_runs_its_plan_and_never_ends_after_largest_area_first.hypothesis.inner_test(
        rows, [[0, 1, 2, 3]])


def test_a_plan_keeps_large_footprints_apart_where_largest_area_first_stacks_them():
    """Largest area first starts the two 2-core 20 MiB tasks together on the one 12 MiB domain;
    the plan pairs each with a small task."""
    sims = [SimTask("big-a", 4.0, 20 * MiB, cores=2), SimTask("big-b", 4.0, 20 * MiB, cores=2),
            SimTask("small-a", 3.9, 0.25 * MiB, cores=2), SimTask("small-b", 3.9, 0.25 * MiB, cores=2)]
    domains = [[0, 1, 2, 3]]
    lpt = simulate(sims, domains, LLC, "longest_first").makespan
    scalpel = simulate(sims, domains, LLC, "scalpel").makespan
    assert scalpel < lpt * 0.95  # 7.97 s against 8.5 s


# -- from a running state -------------------------------------------------------------------------

untied_tasks = st.lists(  # distinct solo times: two domains' ends never tie, whatever order they are taken in
    st.tuples(st.floats(0.1, 5.0), st.sampled_from([0.25, 2, 6, 12, 20]), st.sampled_from([1, 1, 2, 3, 4]),
              st.one_of(st.none(), st.floats(0.1, 5.0))),
    min_size=2, max_size=20, unique_by=lambda row: row[0],
)


def state_after(sims, domains, cut):
    """Where ``fifo`` stands on ``sims`` once every event at the ``cut``-th end (mod the ends
    before the last) is handled: that time, the running tasks as RunningTask (their cores from
    the scheduler, their work left from the simulated rates), and the tasks not yet started."""
    records = simulate(sims, domains, LLC, "fifo").records
    by_name = {r.name: r for r in records}
    ends = sorted({r.end for r in records})[:-1]
    assume(ends)  # every task ended at once: no state between two ends
    now = ends[cut % len(ends)]
    scheduler, booked = Scheduler(domains, "fifo"), {}

    def look(time):
        if time > now and not booked:
            booked.update({task.id: scheduler.booked[index] for index, task in scheduler.running.items()})

    simulate(sims, domains, LLC, "fifo", scheduler=scheduler, on_time=look)
    first_slot = [min(i for i, s in enumerate(scheduler.slots) if s.domain == d) for d in range(len(domains))]
    model, running = ContentionModel(), []
    for i, t in enumerate(sims):
        r = by_name[t.name]
        if not r.start <= now < r.end:
            continue
        beside = [o for o in records if o.domain == r.domain]
        times = sorted({r.start, now, *(x for o in beside for x in (o.start, o.end) if r.start < x < now)})
        work = t.solo_time
        for a, b in zip(times, times[1:]):
            corun = [o for o in beside if o.start <= a and o.end >= b]
            slow = model.slowdowns([o.footprint for o in corun], [model.sensitivity] * len(corun), LLC)
            work -= (b - a) / slow[corun.index(r)]
        estimate = t.solo_time if t.runtime_estimate is None else t.runtime_estimate
        running.append(RunningTask(r.domain, t.footprint, max(estimate - (now - r.start), OVERDUE_FRACTION * estimate),
                                   tuple(c - first_slot[r.domain] for c in booked[i]), estimate, work))
    waiting = [i for i, t in enumerate(sims) if by_name[t.name].start > now]
    return now, running, waiting


@settings(max_examples=120, deadline=None)
@given(untied_tasks, st.sampled_from(TOPOLOGIES), st.integers(0, 100))
def test_the_evaluator_predicts_the_rest_of_a_schedule_from_what_runs(rows, domains, cut):
    """Stopped at an end, the scheduler's state (wide tasks holding their cores, their estimates
    part run, off or not) is replayed to the simulator's makespan to 1e-9."""
    widest = max(map(len, domains))
    sims = [SimTask(f"t{i}", solo, f * MiB, cores=min(cores, widest), runtime_estimate=estimate)
            for i, (solo, f, cores, estimate) in enumerate(rows)]
    now, running, waiting = state_after(sims, domains, cut)
    ev = MulticoreEvaluator(as_tasks([sims[i] for i in waiting]), [len(d) for d in domains], LLC, ContentionModel(),
                            solo=[sims[i].solo_time for i in waiting], running=running)
    assert now + ev.run(list(range(len(waiting)))) == pytest.approx(simulate(sims, domains, LLC, "fifo").makespan,
                                                                    rel=1e-9)


running_states = st.lists(  # (domain, cores, footprint MiB, seconds left, of an estimate this much longer)
    st.tuples(st.integers(0, 2), st.integers(1, 4), st.sampled_from([0.25, 6, 20]), st.floats(0.05, 4.0),
              st.floats(0.0, 3.0)),
    max_size=6,
)


@settings(max_examples=150, deadline=None)
@given(mixed_tasks, running_states, st.sampled_from(TOPOLOGIES), st.randoms(use_true_random=False))
def test_from_a_running_state_no_core_is_booked_twice_and_running_tasks_hold_theirs_to_the_end(
        rows, held, domains, rnd):
    cpd = [len(d) for d in domains]
    idle = [list(range(c)) for c in cpd]
    running = []
    for domain, width, footprint, left, past in held:  # placed on distinct cores while they fit
        domain %= len(cpd)
        if width > len(idle[domain]):
            continue
        cores = tuple(idle[domain].pop(rnd.randrange(len(idle[domain]))) for _ in range(width))
        running.append(RunningTask(domain, footprint * MiB, left, cores, left + past))
    sims = sim_tasks(rows, domains)
    ev = MulticoreEvaluator(as_tasks(sims), cpd, LLC, ContentionModel(), solo=[t.solo_time for t in sims],
                            running=running)
    order = list(range(len(sims)))
    rnd.shuffle(order)
    timeline = []
    makespan = ev.run(order, timeline=timeline)
    assert sorted(i for i, *_ in timeline) == list(range(len(sims) + len(running)))  # every task ends once
    assert makespan == max(end for *_, end in timeline)
    for i, domain, cores, start, end in timeline:
        if i >= len(sims):  # a running task keeps the cores it held from the start until its end
            r = running[i - len(sims)]
            assert (domain, cores, start) == (r.domain, r.cores, 0.0)
            assert end >= r.remaining * (1 - 1e-9)  # contention never speeds a task up
        else:
            assert len(cores) == sims[i].cores and len(set(cores)) == len(cores)
    for core in {(d, c) for _, d, cores, *_ in timeline for c in cores}:
        spans = sorted((start, end) for _, d, cores, start, end in timeline for c in cores if (d, c) == core)
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:])), core


def test_running_tasks_that_do_not_fit_their_domain_are_refused():
    task = [Task(0, 0, 1.0)]
    with pytest.raises(ValueError, match="core 1 of domain 0"):
        MulticoreEvaluator(task, [2], LLC, ContentionModel(),
                           running=[RunningTask(0, 0.0, 1.0, (0, 1)), RunningTask(0, 0.0, 1.0, (1,))])
    with pytest.raises(ValueError, match="domain 3"):
        MulticoreEvaluator(task, [2], LLC, ContentionModel(), running=[RunningTask(3, 0.0, 1.0)])
    ev = MulticoreEvaluator([Task(0, 0, 1.0, cores=2)], [2, 2], LLC, ContentionModel(),
                            running=[RunningTask(0, 0.0, 1.0, (0,))])
    with pytest.raises(ValueError, match="cannot start on core 1 of domain 0"):
        ev.run([0], first=(0, 1))
    assert ev.run([0], first=(1, 1)) == pytest.approx(1.0)
