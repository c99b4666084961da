"""The dispatch-time admission rule of the default policy (core.admission), under any event order."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.core import admission
from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.scheduler import Scheduler, Task
from scalpel_executor.core.simulate import SimTask, simulate

MiB = 2**20
LLC = 32 * MiB
MODEL = ContentionModel()


def harm(running: list[Task], task: Task) -> float:
    increases, own = admission.slowdown_increase(MODEL, LLC, [t.footprint for t in running], task.footprint)
    return max([own, *increases])


task_specs = st.lists(
    st.tuples(st.sampled_from([0.5, 2.0, 12.0, 20.0, 28.0]), st.floats(0.1, 5.0), st.sampled_from([0.0, 0.25, 1.0]),
              st.integers(0, 1), st.booleans()),
    min_size=1, max_size=14)


@settings(max_examples=150, deadline=None)
@given(specs=task_specs, domains=st.sampled_from([[[0, 1]], [[0, 1], [2, 3]], [[0, 1, 2, 3]]]),
       events=st.lists(st.tuples(st.integers(0, 3), st.floats(0.0, 2.0)), max_size=60))
def test_no_start_overflows_while_a_fitting_task_waits_unless_the_reason_is_recorded(specs, domains, events):
    """Arrivals, completions and clock steps in any order: each start either fits its domain, or
    was foreseen by a checked plan, or no waiting task of its priority fitted (then, on guessed run
    times, the measured one that harms least starts), or, on guessed run times, no lighter company
    waits for it, or the rollout predicted that waiting costs more; the reason says which. A co-run is never taken on a plan's
    foresight or a rollout when a run time involved is the prior's guess. Every task starts and ends once."""
    s = Scheduler(domains, "scalpel", llc=LLC)
    tasks = [Task(i, footprint=f * MiB, runtime=r, priority=p, runtime_spread=spread, key=f"app{int(f)}", footprint_known=known)
             for i, (f, r, spread, p, known) in enumerate(specs)]
    pending, started, ended, now = list(tasks), set(), set(), 0.0

    def check(before, assignments):
        running = dict(before)  # what ran on each core when each start was decided
        for a in assignments:
            assert a.task.id not in started
            started.add(a.task.id)
            here = [t for index, t in running.items() if s.slots[index].domain == a.slot.domain]
            running[a.slot.index] = a.task
            if a.reason == admission.FITS:
                assert harm(here, a.task) <= admission.TOLERANCE
            elif a.reason in (admission.CORUN_NOTHING_FITS, admission.CORUN_LEAST_HARM, admission.CORUN_LESS_HARM,
                              admission.CORUN_AFTER_MEASURE_WAIT):
                waiting = [t for t in tasks if t.id not in started and t.priority == a.task.priority
                           and t in s._waiting.values()]
                assert all(harm(here, w) > admission.TOLERANCE
                           or admission.unmeasured_risk(w, [admission.Running(t, 1.0) for t in here], MODEL, LLC)
                           for w in waiting)
                if a.reason == admission.CORUN_LEAST_HARM:  # a measured task, none measured harms less
                    assert a.task.footprint_known
                    assert all(harm(here, a.task) <= harm(here, w) for w in waiting if w.footprint_known)
                if a.reason == admission.CORUN_LESS_HARM:  # a measured task lighter than the head, which waited
                    later = [b.task for b in assignments[assignments.index(a) + 1:]]
                    assert a.task.footprint_known
                    assert any(harm(here, a.task) < harm(here, w) for w in [*waiting, *later])
            elif a.reason == admission.CORUN_NO_BETTER_LATER:  # guessed run times, and no lighter company waits
                beside = [admission.Running(t, 1.0) for t in here]
                assert admission.guessed_runtimes(a.task, beside)
                later = [b.task for b in assignments[assignments.index(a) + 1:]]  # waiting when a started
                waiting = [t for t in [*s._waiting.values(), *later]
                           if t.footprint_known and t.priority == a.task.priority]
                assert any(harm(here, a.task) <= admission.company_harm(MODEL, LLC, beside, a.task, w)
                           + admission.TOLERANCE for w in waiting)
            else:
                assert a.reason in (admission.FORESEEN, admission.KEPT_APART, admission.CORUN_WAIT_COSTS_MORE)
                if a.reason in (admission.FORESEEN, admission.CORUN_WAIT_COSTS_MORE):
                    assert not admission.guessed_runtimes(a.task, [admission.Running(t, 1.0) for t in here])

    def placed_where_it_fits(before, assignments):
        # a co-run past the tolerance never leaves idle, at the end of its dispatch round, a core of
        # another domain where the task would fit (a one-core task: the round serves that core instead)
        running = dict(before)
        idle = set(s.idle_slots)
        for a in assignments:
            here = [t for index, t in running.items() if s.slots[index].domain == a.slot.domain]
            running[a.slot.index] = a.task
            if harm(here, a.task) > admission.TOLERANCE:
                for slot in idle:
                    if slot.domain != a.slot.domain:
                        there = [t for index, t in s.running.items() if s.slots[index].domain == slot.domain]
                        beside = [admission.Running(t, 1.0) for t in there]
                        # where it would be an unmeasured bet, it would not start there either
                        assert (harm(there, a.task) > admission.TOLERANCE
                                or admission.unmeasured_risk(a.task, beside, MODEL, LLC))

    def idle_only_to_measure():  # a core idles while a task waits only for a bounded measurement wait
        if s.idle_slots and s.waiting:
            assert s.wake_at is not None and now < s.wake_at <= now + admission.MEASURE_WAIT

    for kind, step in events:
        now += step
        if kind <= 1 and pending:
            s.add([pending.pop(0)])
        elif kind == 2 and s.running:
            index = min(s.running)
            ended.add(s.release(index).id)
        before = s.running
        assignments = s.dispatch(now)
        check(before, assignments)
        placed_where_it_fits(before, assignments)
        idle_only_to_measure()
    s.add(pending)
    while s.running or s.waiting:
        before = s.running
        check(before, s.dispatch(now))
        index = min(s.running)
        now += 0.1
        ended.add(s.release(index).id)
    assert started == ended == {t.id for t in tasks}


def test_a_task_arriving_beside_a_long_large_one_starts_on_the_idle_domain_where_it_fits():
    # Plans dispatch to domains in a fixed order, so a follow-up task would go to the first domain
    # with a free core, beside the long 28 MiB task, while the other domain stands idle.
    s = Scheduler([[0, 1], [2, 3]], "scalpel", llc=LLC)
    s.add([Task("long", 28 * MiB, 100.0)])
    assert [a.slot.domain for a in s.dispatch(0.0)] == [0]
    s.add([Task("child", 28 * MiB, 10.0)])
    [child] = s.dispatch(1.0)
    assert (child.task.id, child.slot.domain, child.reason) == ("child", 1, admission.FITS)


def test_a_core_passed_over_is_served_again_at_the_end_of_its_round():
    # Slot 1 (domain 0, beside the long task) is passed over for slot 2's idle domain; at the end
    # of the round it is served again, so no core idles while a task waits.
    s = Scheduler([[0, 1], [2, 3]], "scalpel", llc=LLC)
    s.add([Task("long", 28 * MiB, 100.0)])
    s.dispatch(0.0)
    s.add([Task(f"child-{i}", 28 * MiB, 10.0) for i in range(3)])
    assert [(a.task.id, a.slot.index) for a in s.dispatch(1.0)] == [("child-0", 2), ("child-1", 3), ("child-2", 1)]
    assert not s.idle_slots and not s.waiting


def test_two_large_tasks_are_kept_apart_while_small_ones_wait():
    # Longest-first would start both 28 MiB tasks together on the one 32 MiB domain; the rule starts
    # a small task beside the first large one instead (uncertain estimates: the plan is unchecked).
    s = Scheduler([[0, 1]], "scalpel", llc=LLC)
    s.add([Task("large-1", 28 * MiB, 3.0, runtime_spread=0.25), Task("large-2", 28 * MiB, 3.0, runtime_spread=0.25)]
          + [Task(f"small-{i}", 1 * MiB, 1.0, runtime_spread=0.25) for i in range(6)])
    first = s.dispatch(0.0)
    assert sorted(a.task.id.split("-")[0] for a in first) == ["large", "small"]
    assert {a.reason for a in first} <= {admission.FITS, admission.KEPT_APART}


def test_the_rollout_decides_whether_waiting_costs_more():
    large, other, small = Task("large", 28 * MiB, 3.0), Task("other", 28 * MiB, 3.0), Task("small", 1 * MiB, 1.0)
    running = [admission.Running(large, 3.0)]

    def decide(pays):
        return admission.decide(other, [small], running, deferral_pays=lambda h, w: pays, model=MODEL, llc=LLC)

    assert decide(True) == admission.Decision(small, admission.KEPT_APART, other)
    assert decide(False) == admission.Decision(other, admission.CORUN_WAIT_COSTS_MORE)
    other.foreseen_harm = 0.5  # a checked plan chose this co-run
    assert decide(True) == admission.Decision(other, admission.FORESEEN)


def test_an_unmeasured_twin_waits_while_another_apps_task_can_run_and_learn_lifts_it():
    s = Scheduler([[0, 1]], "scalpel", llc=LLC)
    lookups = [Task(f"lookup-{i}", 0.0, 2.0, key="lookup", footprint_known=False) for i in range(3)]
    s.add(lookups + [Task("fft", 1 * MiB, 1.0, key="fft")])
    first = s.dispatch(0.0)
    assert [a.task.id for a in first] == ["lookup-0", "fft"]
    assert first[1].reason == admission.KEPT_APART
    assert s.learn("lookup", 1 * MiB) == 3  # the running one and the two waiting
    assert all(t.footprint_known and t.footprint == MiB for t in lookups)
    s.release(1)
    assert s.dispatch(0.5)[0].task.id == "lookup-1"


def test_with_exact_estimates_the_plan_runs_as_planned():
    # A checked plan foresees its own co-runs: the simulated schedule is the plan's, not overridden.
    tasks = [SimTask(f"t{i}", 1.0 + i % 3, (4 + 8 * (i % 4)) * MiB) for i in range(12)]
    s = Scheduler([[0, 1], [2, 3]], "scalpel", llc=LLC)
    simulate(tasks, [[0, 1], [2, 3]], LLC, scheduler=s)
    assert s.reasons[admission.KEPT_APART] == 0 and s.reasons[admission.CORUN_WAIT_COSTS_MORE] == 0


def test_baselines_are_not_checked():
    s = Scheduler([[0, 1]], "longest_first", llc=LLC)
    s.add([Task("a", 28 * MiB, 3.0), Task("b", 28 * MiB, 3.0), Task("c", 1 * MiB, 1.0)])
    assignments = s.dispatch(0.0)
    assert {a.task.id for a in assignments} == {"a", "b"}
    assert {a.reason for a in assignments} == {admission.PLANNED}


def test_an_unmeasured_task_waits_beside_a_large_one_while_a_measured_small_one_can_run():
    large = Task("lookup", 28 * MiB, 3.0, key="lookup")
    unknown, small = Task("product", 0.0, 1.0, key="product", footprint_known=False), Task("fft", MiB, 1.0, key="fft")
    decision = admission.decide(unknown, [small], [admission.Running(large, 3.0)], deferral_pays=lambda h, w: True,
                                model=MODEL, llc=LLC)
    assert decision == admission.Decision(small, admission.KEPT_APART, unknown)
    beside_small = admission.decide(unknown, [], [admission.Running(small, 1.0)], deferral_pays=lambda h, w: True,
                                    model=MODEL, llc=LLC)
    assert beside_small.reason == admission.FITS


def test_a_follow_up_arriving_into_a_long_plan_is_merged_and_can_be_kept_apart_at_once():
    # Two cores; a long plan of large tasks: a small follow-up that arrives joins the plan without
    # planning again, and the next free core starts it beside the running large task.
    s = Scheduler([[0, 1]], "scalpel", llc=LLC)
    s.add([Task(f"large-{i}", 28 * MiB, 3.0, runtime_spread=0.25) for i in range(6)])
    first = s.dispatch(0.0)
    assert len(first) == 2 and s.waiting == 4
    s.release(first[1].slot)
    s.add([Task("follow-up", 1 * MiB, 0.5, runtime_spread=0.25)])
    assert not s._dirty  # merged, not planned again
    assert [a.task.id for a in s.dispatch(1.0)] == ["follow-up"]


def test_the_default_policys_batches_are_not_held_while_the_scheduler_is_busy():
    from scalpel_executor.core.batching import Batcher, Batching

    held = Batcher(Batching(0.005, 0.001), cores=2)
    checked = Batcher(Batching(0.005, 0.001), cores=2, hold_while_busy=False)
    for batcher in (held, checked):
        batcher.hold(["follow-up"], now=0.0)
    assert held.release(1.0, waiting=10) == [] and held.wake_at(waiting=10) is None
    assert checked.release(1.0, waiting=10) == ["follow-up"]


def test_an_unmeasured_task_goes_beside_a_large_one_rather_than_a_second_large_one():
    running = [admission.Running(Task("lookup-0", 28 * MiB, 3.0, key="lookup"), 3.0)]
    second = Task("lookup-1", 28 * MiB, 3.0, key="lookup")
    unknown = Task("spectrum", 0.0, 1.0, key="spectrum", footprint_known=False)
    decision = admission.decide(second, [unknown], running, deferral_pays=lambda h, w: True, model=MODEL, llc=LLC)
    assert decision == admission.Decision(unknown, admission.KEPT_APART, second)


def test_a_measured_overflow_on_guessed_run_times_is_kept_apart_whatever_the_plan_foresaw():
    # A first run: every run time is the prior (spread 1). Once the first lookup is measured large,
    # a checked plan may still foresee a second one beside it as cheap (the first "ends" at its prior
    # 1 s); the rule keeps them apart while a task that fits waits, without asking the rollout.
    running = [admission.Running(Task("lookup-0", 65 * MiB, 1.0, runtime_spread=1.0, key="lookup"), 0.34)]
    second = Task("lookup-1", 65 * MiB, 1.0, runtime_spread=1.0, key="lookup")
    second.foreseen_harm = 0.5
    fft = Task("fft", 3 * MiB, 1.0, runtime_spread=1.0, key="fft")
    decision = admission.decide(second, [fft], running, deferral_pays=lambda h, w: False, model=MODEL, llc=LLC)
    assert decision == admission.Decision(fft, admission.KEPT_APART, second)
    # With run times estimated (a learned store), the plan's foresight and the rollout decide as before.
    for task in (running[0].task, second, fft):
        task.runtime_spread = 0.25
    assert admission.decide(second, [fft], running, deferral_pays=lambda h, w: False, model=MODEL,
                            llc=LLC).reason == admission.FORESEEN
    second.foreseen_harm = None
    assert admission.decide(second, [fft], running, deferral_pays=lambda h, w: False, model=MODEL,
                            llc=LLC).reason == admission.CORUN_WAIT_COSTS_MORE


def test_a_first_runs_lookups_are_not_started_two_by_two_once_one_is_measured():
    # The scheduler as a first run drives it: everything on the prior (footprint 0, 1 s, spread 1),
    # the first lookup and FFT measured while they run; when the FFT ends, another FFT starts beside
    # the running lookup, not the plan's second lookup.
    s = Scheduler([[0, 1]], "scalpel", llc=56 * MiB)
    s.add([Task(f"lookup-{i}", 0.0, 1.0, runtime_spread=1.0, key="lookup", footprint_known=False) for i in range(8)]
          + [Task(f"fft-{i}", 0.0, 1.0, runtime_spread=1.0, key="fft", footprint_known=False) for i in range(16)]
          + [Task(f"product-{i}", 0.0, 1.0, runtime_spread=1.0, key="product", footprint_known=False) for i in range(4)])
    assert sorted(a.task.id.split("-")[0] for a in s.dispatch(0.0)) == ["fft", "lookup"]
    s.learn("lookup", 65 * MiB)
    s.learn("fft", 3 * MiB)
    s.release(next(index for index, t in s.running.items() if t.key == "fft"))
    [again] = s.dispatch(0.66)
    assert again.task.key == "fft" and again.reason == admission.KEPT_APART


def test_a_head_told_interference_terms_is_not_ceded_to_a_less_harmful_task():
    # Measured run times, nothing fits: a lighter waiting task takes the core when the rollout says
    # the schedule ends no later, unless the head carries per-key terms the plan already weighed.
    running = [admission.Running(Task("lookup-0", 40 * MiB, 3.0, key="lookup"), 1.0)]
    second = Task("lookup-1", 40 * MiB, 3.0, key="lookup")
    product = Task("product", 4 * MiB, 3.0, key="product")  # harm 0.1 beside the lookup, the head 0.2

    def decide(head_terms):
        second.interference = head_terms
        return admission.decide(second, [product], running, deferral_pays=lambda h, w: True, model=MODEL, llc=LLC)

    assert decide(None) == admission.Decision(product, admission.CORUN_LESS_HARM, second)
    assert decide((0.1, 0.2, 0.0)) == admission.Decision(second, admission.CORUN_NOTHING_FITS)


def test_when_nothing_fits_on_guessed_run_times_the_least_harmful_measured_task_starts():
    # 65 MiB overflows the model's 28 MiB alone: a 7 MiB FFT beside the running lookup slows it
    # (11%), a second lookup slows both more (21%). On the prior's run times the FFT goes first.
    running = [admission.Running(Task("lookup-0", 65 * MiB, 1.0, runtime_spread=1.0, key="lookup"), 0.34)]
    second = Task("lookup-1", 65 * MiB, 1.0, runtime_spread=1.0, key="lookup")
    fft, product = Task("fft", 7 * MiB, 1.0, runtime_spread=1.0, key="fft"), Task("product", 48 * MiB, 1.0, runtime_spread=1.0,
                                                                         key="product")
    decide = admission.decide
    decision = decide(second, [product, fft], running, deferral_pays=lambda h, w: False, model=MODEL, llc=56 * MiB)
    assert decision == admission.Decision(fft, admission.CORUN_LEAST_HARM, second)
    for task in (running[0].task, second, fft, product):  # estimated run times: the head, as before
        task.runtime_spread = 0.25
    assert decide(second, [product, fft], running, deferral_pays=lambda h, w: False, model=MODEL,
                  llc=56 * MiB).reason == admission.CORUN_NOTHING_FITS


def test_on_guessed_run_times_a_large_task_starts_beside_a_small_one_when_waiting_buys_nothing():
    # A 65 MiB lookup beside a running 4 MiB FFT: the model slows it 6%, as beside any
    # FFT. Keeping it apart would start another FFT and spend the small tasks the lookups need.
    running = [admission.Running(Task("fft-0", 4 * MiB, 1.0, runtime_spread=1.0, key="fft"), 0.5)]
    lookup = Task("lookup-2", 65 * MiB, 1.0, runtime_spread=1.0, key="lookup")
    ffts = [Task(f"fft-{i}", 4 * MiB, 1.0, runtime_spread=1.0, key="fft") for i in (1, 2)]
    decision = admission.decide(lookup, ffts, running, deferral_pays=lambda h, w: True, model=MODEL, llc=56 * MiB)
    assert decision == admission.Decision(lookup, admission.CORUN_NO_BETTER_LATER)


def test_the_simulator_models_the_rule_on_guessed_run_times():
    # The simulator drives the same scheduler: a first run's estimates (every task 1 s, spread 1)
    # of three 1.6 s lookups and eight 0.6 s FFTs on one 2-core domain: no two lookups overlap.
    tasks = [SimTask(f"lookup-{i}", 1.6, 65 * MiB, runtime_estimate=1.0, runtime_spread=1.0) for i in range(3)]
    tasks += [SimTask(f"fft-{i}", 0.6, 3 * MiB, runtime_estimate=1.0, runtime_spread=1.0) for i in range(8)]
    result = simulate(tasks, [[0, 1]], 56 * MiB)
    lookups = sorted((r for r in result.records if r.name.startswith("lookup")), key=lambda r: r.start)
    assert all(later.start >= earlier.end - 1e-9 for earlier, later in zip(lookups, lookups[1:])), lookups


def test_a_free_core_waits_a_bounded_time_for_a_running_twin_to_be_measured():
    # Only lookups of one unmeasured key have arrived (the FFTs are still being submitted): the
    # second core waits for the first lookup's reading, at most MEASURE_WAIT, and a task arriving
    # meanwhile starts at once.
    def first_run():
        s = Scheduler([[0, 1]], "scalpel", llc=56 * MiB)
        s.add([Task(f"lookup-{i}", 0.0, 1.0, runtime_spread=1.0, key="lookup", footprint_known=False) for i in range(4)])
        assert [a.task.id for a in s.dispatch(0.0)] == ["lookup-0"]
        assert s.wake_at == admission.MEASURE_WAIT
        assert s.dispatch(0.1) == [] and s.wake_at == admission.MEASURE_WAIT
        return s

    s = first_run()
    s.add([Task("fft-0", 0.0, 1.0, runtime_spread=1.0, key="fft", footprint_known=False)])
    [fft] = s.dispatch(0.12)
    assert fft.task.id == "fft-0" and fft.reason == admission.KEPT_APART and s.wake_at is None
    assert fft.waited == pytest.approx(0.12)  # the start that ends the wait says how long the core idled
    s = first_run()
    s.learn("lookup", 2 * MiB)  # measured small: they fit together
    [fits] = s.dispatch(0.15)
    assert (fits.task.id, fits.reason, fits.waited) == ("lookup-1", admission.FITS, pytest.approx(0.15))
    s = first_run()
    [late] = s.dispatch(admission.MEASURE_WAIT)  # never measured: the wait ends, the twin starts
    assert (late.task.id, late.reason) == ("lookup-1", admission.CORUN_AFTER_MEASURE_WAIT)
    assert late.waited == pytest.approx(admission.MEASURE_WAIT)
    s.release(0)
    assert [a.waited for a in s.dispatch(1.0)] == [0.0]  # later starts waited for nothing
    s = first_run()
    s.release(0)  # the twin ended unmeasured: the next one starts, and the other core waits for it anew
    assert [a.waited for a in s.dispatch(0.2)] == [pytest.approx(0.2)] and s.wake_at == 0.2 + admission.MEASURE_WAIT
    s = Scheduler([[0, 1]], "scalpel", llc=56 * MiB)  # no clock told: no wait
    s.add([Task(f"lookup-{i}", 0.0, 1.0, runtime_spread=1.0, key="lookup", footprint_known=False) for i in range(2)])
    assert len(s.dispatch()) == 2


def wide_head_beside_a_large_task(blocker_runtime: float, small_runtime: float) -> list:
    """One batch on an idle machine. Domain 0 (cores 0-2) starts a large one-core task (6 s) and
    domain 1 (cores 3-4) a small two-core task, the blocker (both put first by their priority);
    the rest of the plan is a large two-core task (4 s: the head, the largest area) and a small
    one-core one. The head fits domain 0's two idle cores but overflows its LLC beside the large
    task; the small task fits there."""
    llc = 12 * MiB  # a 6 MiB effective capacity: two 8 MiB tasks slow each other 1.375x
    s = Scheduler([[0, 1, 2], [3, 4]], "scalpel", llc=llc)
    large, blocker = Task("large", 8 * MiB, 6.0, priority=2), Task("blocker", 0.25 * MiB, blocker_runtime, priority=1, cores=2)
    s.add([large, blocker, Task("head", 8 * MiB, 4.0, cores=2), Task("small", 0.25 * MiB, small_runtime)])
    assert s.next_for(0, 0.0) is large and s.next_for(3, 0.0) is blocker
    return s.dispatch(0.0)


def test_with_wide_tasks_about_the_model_decides_whether_keeping_the_head_apart_pays():
    """Keeping the two-core head apart pays when the blocker frees domain 1 first (at 1 s): the
    head is reserved there and runs alone, and the schedule ends about 6.05 s in instead of 7.5 s
    (the head and the large task beside each other). It does not when the small task frees domain 0
    first (at 3 s, the blocker at 4.5 s): the head would then run beside the large task all the
    same, only later (8.1 s)."""
    kept_apart = wide_head_beside_a_large_task(blocker_runtime=1.0, small_runtime=1.5)
    assert [(a.task.id, a.reason) for a in kept_apart] == [("small", admission.KEPT_APART)]
    started = wide_head_beside_a_large_task(blocker_runtime=4.5, small_runtime=3.0)
    assert [(a.task.id, a.reason) for a in started] == [("head", admission.CORUN_WAIT_COSTS_MORE)]


def test_with_wide_tasks_joining_work_under_way_the_head_starts_unless_nothing_runs():
    """Tasks that arrive while others run are not the rest of the work (a DAG's children, a later
    wave): the multicore rollout is not trusted with them, and the head starts."""
    s = Scheduler([[0, 1, 2], [3, 4]], "scalpel", llc=12 * MiB)
    s.add([Task("large", 8 * MiB, 6.0)])
    assert s.next_for(0, 0.0).id == "large"
    s.add([Task("blocker", 0.25 * MiB, 1.0, cores=2)])
    assert s.next_for(3, 0.0).id == "blocker"
    s.add([Task("head", 8 * MiB, 4.0, cores=2), Task("small", 0.25 * MiB, 1.5)])
    assert [(a.task.id, a.reason) for a in s.dispatch(0.0)] == [("head", admission.CORUN_WAIT_COSTS_MORE)]


def test_a_short_task_released_early_is_not_passed_by_longer_arrivals_for_ever():
    # One core; the plan orders what waits longest first, so each longer arrival went before the
    # short task released at 0 (in a DAG, often a task that gates others). Once it has waited
    # more than OVERDUE_AFTER times the longest estimate (2 x 10 s), later arrivals no longer pass it.
    s = Scheduler([[0]], "scalpel", llc=LLC)
    assert s.dispatch(-100.0) == []  # an idle while: a task's wait counts from the dispatch after it arrives
    s.add([Task("long-a", 1 * MiB, 10.0), Task("short", 1 * MiB, 1.0)])
    assert [a.task.id for a in s.dispatch(0.0)] == ["long-a"]
    s.add([Task("long-b", 1 * MiB, 10.0)])
    s.release(0)
    assert [a.task.id for a in s.dispatch(10.0)] == ["long-b"]  # waited 10 s: longest first still
    s.add([Task("long-c", 1 * MiB, 10.0)])
    s.release(0)
    assert [a.task.id for a in s.dispatch(21.0)] == ["short"]  # waited 21 s > 2 x 10 s
    s.release(0)
    assert [a.task.id for a in s.dispatch(22.0)] == ["long-c"]

