"""Malleable tasks in the scheduler and the simulator: widths chosen at the start (core.widths)."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.core import widths
from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.scheduler import Scheduler, Task
from scalpel_executor.core.simulate import SimTask, simulate
from scalpel_executor.core.widths import Widths, amdahl

MiB = 2**20


def test_a_malleable_task_on_an_idle_domain_books_cores_of_that_domain_and_frees_them_together():
    s = Scheduler([[0, 1, 2, 3], [4, 5, 6, 7]], "scalpel", llc=12 * MiB)
    s.add([Task("blas", runtime=10.0, key="blas", max_cores=4)])
    [start] = s.dispatch(0.0)
    # planned at the width a perfectly parallel key would be allotted: its cores reserved
    assert start.task.cores == 4 and start.task.width_reason == widths.PLANNED_EXPLORATION
    assert {slot.domain for slot in start.booked} == {start.slot.domain} and len(start.booked) == 4
    assert start.task.runtime == 2.5  # planned at its key's fit (no gain yet), started at its hope
    s.release(start.slot, 10.0 * amdahl(0.1, 4))
    assert len(s.idle_slots) == 8
    assert s.widths.model.readings("blas") == 1
    assert s.widths.model.serial_fraction("blas") == pytest.approx((0.1 + widths.SHRINK) / (1 + widths.SHRINK))
    assert s.width_reasons == {widths.PLANNED_EXPLORATION: 1}


def test_a_task_whose_run_time_is_the_priors_guess_is_explored_and_read_only_against_its_keys_run():
    """The same lone task, its run time the prior's guess (``admission.GUESSED_SPREAD``): it is
    explored wide as a measured one would be, but its run is not read against the guess (a
    single-threaded stencil estimated at 1 s ran 0.23 s on two cores and read as perfectly
    parallel). Three more of the key on one domain, guessed too: one explores wider, the others
    run narrow; a narrow one's end gives the key its run time, and the wide one, ending after it,
    is read against it (ending first, as a wide run of a like task does, it reads nothing)."""
    from scalpel_executor.core.admission import GUESSED_SPREAD
    s = Scheduler([[0, 1, 2, 3], [4, 5, 6, 7]], "scalpel", llc=12 * MiB)
    guessed = Task("stencil", runtime=1.0, key="stencil", max_cores=4, runtime_spread=GUESSED_SPREAD)
    s.add([guessed])
    [start] = s.dispatch(0.0)
    assert start.task.cores == 4 and start.task.width_reason == widths.PLANNED_EXPLORATION
    s.release(start.slot, 0.23)
    assert s.widths.model.readings("stencil") == 0 and guessed.width_reading is None
    s = Scheduler([[0, 1, 2, 3]], "scalpel", llc=12 * MiB)
    s.add([Task(f"stencil{i}", runtime=1.0, key="stencil", max_cores=4, runtime_spread=GUESSED_SPREAD)
           for i in range(3)])
    wide, narrow, _ = sorted(s.dispatch(0.0), key=lambda a: -a.task.cores)
    assert (wide.task.cores, narrow.task.cores, wide.task.width_reason) == (2, 1, widths.EXPLORING)
    s.release(narrow.slot, 0.5)  # 0.5 s on one core: the key's run time, told the wide one
    assert wide.task.runtime == pytest.approx(0.5) and s.widths.model.readings("stencil") == 0
    s.release(wide.slot, 0.8)  # a larger tile: 0.8 s on two cores, against 0.5 on one
    assert s.widths.model.readings("stencil") == 1 and wide.task.width_reading == pytest.approx(
        widths.serial_fraction_from(0.8 / 0.5, 1, 2))


def test_a_wide_run_of_a_task_whose_run_time_is_a_guess_reads_nothing():
    """A key sure of its speed-up (five readings of 0.1 from the store) whose task's run time is a
    guess: alone on the domain it starts wide for its own end, not to explore, and its run is not
    read against the guess; told a measured run time, the same run is read."""
    from scalpel_executor.core.admission import GUESSED_SPREAD
    for spread, readings in ((GUESSED_SPREAD, 5), (0.1, 6)):
        s = Scheduler([[0, 1, 2, 3]], "scalpel", llc=12 * MiB)
        task = Task("fft", runtime=1.0, key="fft", max_cores=4, serial_fraction=0.1, serial_readings=5,
                    runtime_spread=spread)
        s.add([task])
        [start] = s.dispatch(0.0)
        assert start.task.cores == 4 and start.task.width_reason not in (widths.EXPLORING,
                                                                          widths.PLANNED_EXPLORATION)
        s.release(start.slot, 0.2)
        assert s.widths.model.readings("fft") == readings
        assert (task.width_reading is None) == (spread == GUESSED_SPREAD)


def test_a_task_not_marked_malleable_keeps_its_cores_and_gets_no_width_reason():
    s = Scheduler([[0, 1, 2, 3]], "scalpel")
    s.add([Task("fixed", runtime=10.0, cores=2), Task("same", runtime=10.0, cores=2, max_cores=2)])
    starts = s.dispatch(0.0)
    assert sorted(a.task.cores for a in starts) == [2, 2]
    assert all(a.task.width_reason is None for a in starts) and not s.width_reasons


def test_a_malleable_task_handed_back_by_disable_is_as_it_came():
    s = Scheduler([[0, 1, 2, 3]], "scalpel")
    task = Task("blas", runtime=10.0, key="blas", max_cores=4)
    s.widths.model.seed("blas", 0.1, 5)
    s.add([task])
    [start] = s.dispatch(0.0)
    assert task.cores == 4 and task.runtime == pytest.approx(10.0 * amdahl(s.widths.model.serial_fraction("blas"), 4))
    assert s.disable(start.slot) is task
    assert (task.cores, task.runtime, task.width_reason) == (1, 10.0, None)
    s.enable(start.slot)
    assert len(s.idle_slots) == 4


def test_many_waiting_keep_a_learned_parallel_key_narrow_and_its_last_tasks_go_wide():
    """Twelve tasks of a key known to scale (s = 0.05) on 4 cores: the first four start on one
    core each (the backlog decides), and once nothing waits the rest take the idle cores."""
    tasks = [SimTask(f"t{i}", 4.0, key="fft", max_cores=4, serial_fraction=0.05) for i in range(10)]
    scheduler = Scheduler([[0, 1, 2, 3]], "scalpel", llc=12 * MiB)
    scheduler.widths.model.seed("fft", 0.05, 10)
    result = simulate(tasks, [[0, 1, 2, 3]], 12 * MiB, scheduler=scheduler)
    first = sorted(result.records, key=lambda r: r.start)[:4]
    assert [r.cores for r in first] == [1, 1, 1, 1]
    assert scheduler.width_reasons[widths.MANY_WAITING] >= 4 and max(r.cores for r in result.records) > 1
    fixed = simulate([dataclasses.replace(t, max_cores=None) for t in tasks], [[0, 1, 2, 3]], 12 * MiB)
    assert result.makespan < fixed.makespan  # 10 tasks on 4 cores: 3 rounds at width 1, the last half idle


def test_a_wide_task_footprint_counts_once_on_its_domain():
    """A 3-core task of 10 MiB beside a one-core task of 10 MiB on a 12 MiB LLC is slowed as two
    10 MiB tasks are, not as four."""
    model = ContentionModel()
    llc = 12 * MiB
    tasks = [SimTask("wide", 10.0, 10 * MiB, max_cores=3, serial_fraction=0.0, key="w"),
             SimTask("one", 10.0, 10 * MiB)]
    result = simulate(tasks, [[0, 1, 2, 3]], llc, model=model, scheduler=Scheduler(
        [[0, 1, 2, 3]], "fifo", llc=llc, model=model, width_rule=Widths("equipartition")))
    wide = next(r for r in result.records if r.name == "wide")
    assert wide.cores == 3 and wide.solo_time == pytest.approx(10.0 / 3)
    pair = model.slowdowns([10 * MiB, 10 * MiB], [1.0, 1.0], llc)[0]
    assert wide.slowdown == pytest.approx(pair)
    assert wide.slowdown < model.slowdowns([10 * MiB] * 4, [1.0] * 4, llc)[0]


@st.composite
def batches(draw):
    domain = draw(st.sampled_from([1, 2, 4, 6]))
    domains = [list(range(d * domain, (d + 1) * domain)) for d in range(draw(st.integers(1, 3)))]
    tasks = []
    for i in range(draw(st.integers(1, 14))):
        cores = draw(st.integers(1, domain))
        tasks.append(SimTask(f"t{i}", draw(st.floats(0.1, 10.0)), draw(st.sampled_from([0, 2, 8, 20])) * MiB,
                             cores=cores, max_cores=draw(st.none() | st.integers(cores, 2 * domain)),
                             serial_fraction=draw(st.floats(0.0, 1.0)), key=draw(st.sampled_from(["a", "b"])),
                             parents=(draw(st.integers(0, i - 1)),) if i and draw(st.booleans()) else ()))
    return domains, tasks


@settings(max_examples=60, deadline=None)
@given(batches(), st.sampled_from(widths.RULES), st.sampled_from(["scalpel", "longest_first", "scalpel-paper"]))
def test_every_width_is_within_the_task_range_and_its_domain_and_no_core_is_booked_twice(batch, rule, policy):
    domains, tasks = batch
    scheduler = Scheduler(domains, policy, llc=12 * MiB, width_rule=Widths(rule))
    result = simulate(tasks, domains, 12 * MiB, policy, scheduler=scheduler)
    by_name = {t.name: t for t in tasks}
    for record in result.records:
        task = by_name[record.name]
        top = task.cores if task.max_cores is None else max(task.cores, min(task.max_cores, len(domains[0])))
        assert task.cores <= record.cores <= top
        assert record.solo_time == pytest.approx(task.solo_at(record.cores))
    busy = sorted((r.start, +r.cores) for r in result.records) + sorted((r.end, -r.cores) for r in result.records)
    level = 0
    for _, change in sorted(busy, key=lambda e: (e[0], e[1])):
        level += change
        assert level <= sum(map(len, domains))


@settings(max_examples=40, deadline=None)
@given(batches())
def test_tasks_not_marked_malleable_are_scheduled_exactly_as_before(batch):
    """max_cores equal to cores (or None) is no malleable task: the same schedule, bit for bit."""
    domains, tasks = batch
    fixed = [dataclasses.replace(t, max_cores=None, key=None) for t in tasks]
    marked = [dataclasses.replace(t, max_cores=t.cores) for t in fixed]
    a = simulate(fixed, domains, 12 * MiB)
    b = simulate(marked, domains, 12 * MiB)
    assert [(r.name, r.cpu, r.start, r.end) for r in a.records] == [(r.name, r.cpu, r.start, r.end) for r in b.records]
    assert a.makespan == b.makespan


def test_a_malleable_sim_task_is_checked():
    with pytest.raises(ValueError, match=r"max_cores must be None or an integer ≥ cores \(2\), got 1"):
        SimTask("t", 1.0, cores=2, max_cores=1)
    with pytest.raises(ValueError, match=r"serial_fraction must be a number in \[0, 1\] \(Amdahl's\), got 1.5"):
        SimTask("t", 1.0, max_cores=4, serial_fraction=1.5)


def test_an_allotted_width_is_waited_for_when_cores_free_one_at_a_time():
    """Four one-core tasks end at 1, 2, 3 and 4 s; a 40 s task of a perfectly parallel key waits for
    the four cores it was allotted (10 s there: ends at 14 s) rather than start on the first free core
    (41 s)."""
    domains = [[0, 1, 2, 3]]
    tasks = [SimTask(f"short{i}", float(i), priority=1.0) for i in (1, 2, 3, 4)]
    tasks.append(SimTask("long", 40.0, key="fft", max_cores=4, serial_fraction=0.0))
    scheduler = Scheduler(domains, "scalpel", llc=12 * MiB)
    scheduler.widths.model.seed("fft", 0.0, 10)
    result = simulate(tasks, domains, 12 * MiB, scheduler=scheduler)
    long = next(r for r in result.records if r.name == "long")
    assert (long.cores, long.start, long.end) == (4, pytest.approx(4.0), pytest.approx(14.0))


def test_drain_hands_back_an_allotted_task_at_its_narrowest_width():
    scheduler = Scheduler([[0, 1, 2, 3]], "scalpel")
    scheduler.widths.model.seed("fft", 0.0, 10)
    task = Task("long", runtime=40.0, key="fft", max_cores=4)
    scheduler.add([Task("first", runtime=5.0, cores=4, priority=1.0), task])
    scheduler.dispatch(0.0)
    serial = scheduler.widths.model.serial_fraction("fft")
    assert task.cores == 4 and task.runtime == pytest.approx(40.0 * amdahl(serial, 4))  # allotted, waiting
    assert scheduler.drain() == [task] and (task.cores, task.runtime) == (1, 40.0)


def _mean_reading(model: widths.SpeedupModel, key: str) -> float:
    """The plain mean of ``key``'s readings, undoing the shrink toward no gain."""
    n = model.readings(key)
    return (model.serial_fraction(key) * (n + widths.SHRINK) - widths.SHRINK) / n


def test_a_width_reading_beside_a_co_runner_that_overflows_the_cache_reads_the_key_not_its_neighbour():
    """A 10 MiB hog holds half of a 12 MiB domain the whole run; tasks of a key with serial
    fraction 0.2 widen beside it and run slowed by the overflow. Their readings divide that
    slowdown out: each reads 0.2, where the raw wall time read a key that barely speeds up."""
    hog = SimTask("hog", 200.0, footprint=10 * MiB, cores=2)
    tasks = [hog] + [SimTask(f"b{i}", 4.0, footprint=10 * MiB, key="blas", max_cores=2, serial_fraction=0.2)
                     for i in range(6)]
    scheduler = Scheduler([[0, 1, 2, 3]], "scalpel", llc=12 * MiB)
    result = simulate(tasks, [[0, 1, 2, 3]], 12 * MiB, scheduler=scheduler)
    wide = [r for r in result.records if r.name != "hog" and r.cores == 2]
    assert wide and all(r.slowdown > 1.05 for r in wide)  # they did run slowed
    assert scheduler.widths.model.readings("blas") == len(wide)
    assert _mean_reading(scheduler.widths.model, "blas") == pytest.approx(0.2, abs=1e-6)
    raw = widths.serial_fraction_from(wide[0].slowdown * amdahl(0.2, 2), 1, 2)
    assert raw > 0.2 + 0.1  # what the raw wall time would have read


def test_earlier_runs_speed_up_seeds_its_key_once_and_this_runs_readings_add_to_it():
    s = Scheduler([[0, 1, 2, 3]], "scalpel", llc=12 * MiB)
    first = Task("a", runtime=10.0, key="fft", max_cores=4, serial_fraction=0.1, serial_readings=4)
    again = Task("b", runtime=10.0, key="fft", max_cores=4, serial_fraction=0.9, serial_readings=40)
    s.add([first, again])
    assert s.widths.model.readings("fft") == 4
    assert s.widths.model.serial_fraction("fft") == pytest.approx((0.4 + widths.SHRINK) / (4 + widths.SHRINK))
    for start in s.dispatch(0.0):
        s.release(start.slot, 1.0)
    assert s.widths.model.readings("fft") >= 4
    assert all(t.width_reading is None or 0 <= t.width_reading <= 1 for t in (first, again))
    assert Scheduler([[0, 1]], "scalpel").widths.model.readings("fft") == 0  # nothing is shared between schedulers


def test_a_seed_out_of_range_is_clipped_not_raised():
    s = Scheduler([[0, 1]], "scalpel")
    s.add([Task("a", runtime=1.0, key="k", max_cores=2, serial_fraction=1.5, serial_readings=-3)])
    assert s.widths.model.readings("k") == 0 and s.widths.model.serial_fraction("k") == 1.0


def test_a_batch_of_more_tasks_than_cores_explores_every_key_and_the_next_run_has_its_readings():
    """120 tasks of three keys never seen wider (serial fraction 0.05) on two 4-core domains: the
    node stays full and cores free one at a time, so an exploration at a start needs two cores free
    at once, which only the first starts see: key ``a``'s tasks, the shortest and last in the plan,
    never ran wider, and no later run learned their speed-up. Now one task of each key at a time is
    planned one size up (``exploring, planned``), its cores reserved, where no gain would cost the
    work at most EXPLORE_COST: every key ends the run with SURE_AFTER readings or more, for the
    next run. (Each plan's explorations are bounded so, not their sum over a run: here 2.0% in all.)"""
    domains = [[0, 1, 2, 3], [4, 5, 6, 7]]
    tasks = [SimTask(f"{key}{i}", runtime + (i % 5) / 10, max_cores=4, serial_fraction=0.05, key=key)
             for key, runtime in (("a", 2.0), ("b", 3.0), ("c", 4.0)) for i in range(40)]
    rule = Widths()
    scheduler = Scheduler(domains, "scalpel", width_rule=rule)
    one_core = simulate([dataclasses.replace(t, max_cores=None) for t in tasks], domains, 32 * MiB).makespan
    result = simulate(tasks, domains, 32 * MiB, scheduler=scheduler)
    assert all(rule.model.readings(key) >= widths.SURE_AFTER for key in "abc")
    assert scheduler.width_reasons[widths.PLANNED_EXPLORATION] >= 1
    assert len([r for r in result.records if r.cores > 1]) <= 3 * (widths.SURE_AFTER + 1)
    assert result.makespan <= one_core * (1 + 2 * widths.EXPLORE_COST)


def test_the_tail_orders_a_malleable_task_and_its_tail_at_the_widest_sizes_it():
    """``Task.tail`` (the chain as its tasks run) decides when a task starts, ``Task.wide_tail`` (the
    same chain at its malleable tasks' widest) how wide: a stage of many malleable tasks cannot all
    run at their widest, so the chain at the widest understated what gates the tasks before it and
    they lost their place in the order (SoyKB on ``xeon16``); but the width rule must meet the chain
    as it will run once widened (1000genome on ``wide``). 40 one-core tasks of 30 s wait on two
    8-core domains beside a malleable task of 10 s, its key's serial fraction 0.1."""
    def first_dispatch(tail, wide_tail):
        rule = Widths("scalpel")
        rule.model.seed("k", 0.1, 3)
        s = Scheduler([list(range(8)), list(range(8, 16))], "scalpel", llc=32 * MiB, width_rule=rule)
        task = Task("m", runtime=10.0, key="k", max_cores=8, tail=tail, wide_tail=wide_tail)
        s.add([Task(f"w{i}", runtime=30.0, key="w") for i in range(40)] + [task])
        started = [start.task for start in s.dispatch(0.0) if start.task is task]
        return (started[0].cores, started[0].width_reason) if started else None

    assert first_dispatch(100.0, None) == (8, widths.CRITICAL_PATH)  # one tail: both
    assert first_dispatch(100.0, 0.0) == (1, widths.MANY_WAITING)  # first for its chain, narrow for the wide one
    assert first_dispatch(0.0, 100.0) is None  # the chain at the widest does not move it up the order
