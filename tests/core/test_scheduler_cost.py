"""The scheduler's work per arrival and per start does not grow with the tasks waiting.

Work is counted, not timed (benchmarks/scheduler_cost.py times it): the ranks ``_merge`` reads,
the waiting tasks ``admission.decide`` examines, the cores ``dispatch`` asks, the plans made. And
the faster paths decide as the walks they replace: the merge's place is the linear walk's, and
``decide`` given the indexed candidates decides as given every waiting task.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from scalpel_executor.core import admission, plan_index, scheduler
from scalpel_executor.core.scheduler import Scheduler
from scalpel_executor.core.tasks import Task, rank

MiB = 2**20
CORES = 16
LLC = 16 * MiB


def heavy(number: int) -> Task:
    """3 MiB, 1 s known to ±20%: on a 16 MiB LLC every start beside 15 others overflows."""
    return Task(number, 3 * MiB, 1.0, runtime_spread=0.2, key="heavy")


def noop(number: int) -> Task:
    return Task(number, 64 * 1024, 0.001, runtime_spread=0.2, key="noop")


def queued(policy: str, make, waiting: int) -> tuple[Scheduler, list[int]]:
    """A scheduler of 16 cores with ``waiting`` tasks waiting and every core busy."""
    s = Scheduler([list(range(CORES))], policy, llc=LLC)
    s.add(make(i) for i in range(waiting + CORES))
    running = [a.slot.index for a in s.dispatch(0.0)]
    assert s.waiting == waiting and len(running) == CORES
    return s, running


class Counter:
    def __init__(self):
        self.count = 0


@pytest.fixture
def ranks_read(monkeypatch):
    """How many times the scheduler and its plan index read a task's rank."""
    counter = Counter()

    def counted(task):
        counter.count += 1
        return rank(task)

    monkeypatch.setattr(scheduler, "rank", counted)
    monkeypatch.setattr(plan_index, "rank", counted, raising=False)
    return counter


@pytest.fixture
def examined(monkeypatch):
    """How many waiting tasks ``admission.decide`` reads from its candidates."""
    counter = Counter()
    decide = admission.decide

    def counting(head, others, running, **kwargs):
        def each():
            for task in others:
                counter.count += 1
                yield task
        return decide(head, each(), running, **kwargs)

    monkeypatch.setattr(admission, "decide", counting)
    return counter


def arrivals_and_starts(s: Scheduler, running: list[int], make, rounds: int, first: int) -> None:
    now = 0.0
    for number in range(first, first + rounds):
        now += 0.05
        s.add([make(number)])
        s.dispatch(now)
        s.release(running.pop(0))
        running += [a.slot.index for a in s.dispatch(now)]


def counted_per_event(make, counter) -> tuple[list[float], list]:
    """``counter``'s count per arrival-and-start with 100 and with 5,000 tasks waiting, and the
    scheduler's admission reasons after each."""
    counts, reasons = [], []
    for waiting in (100, 5000):
        s, running = queued("scalpel", make, waiting)
        counter.count = 0
        arrivals_and_starts(s, running, make, 20, waiting + CORES)
        counts.append(counter.count / 20)
        reasons.append(s.reasons)
    return counts, reasons


@pytest.mark.parametrize("make", [noop, heavy])
def test_an_arrival_reads_as_many_ranks_whatever_waits(make, ranks_read):
    counts, _ = counted_per_event(make, ranks_read)
    assert counts[1] <= counts[0] * 1.5 and counts[1] <= 10, counts  # the walk read 2 per waiting task


def test_a_start_that_overflows_examines_as_many_tasks_whatever_waits(examined):
    counts, reasons = counted_per_event(heavy, examined)
    assert all(r[admission.CORUN_NOTHING_FITS] >= 20 for r in reasons), reasons  # every start overflowed
    assert counts[1] <= counts[0] * 1.5 and counts[1] <= 2, counts  # the walk read every waiting task


def test_nothing_waiting_asks_no_core(monkeypatch):
    s = Scheduler([list(range(CORES))], "scalpel", llc=LLC)
    asked = Counter()
    next_for = Scheduler.next_for

    def counting(self, *args, **kwargs):
        asked.count += 1
        return next_for(self, *args, **kwargs)

    monkeypatch.setattr(Scheduler, "next_for", counting)
    assert s.dispatch(0.0) == [] and asked.count == 0
    s.add([noop(0)])
    assert len(s.dispatch(0.1)) == 1 and asked.count >= 1


@pytest.mark.parametrize("policy", ["fifo", "longest_first"])
def test_sorted_plans_take_arrivals_without_planning_again(policy, monkeypatch):
    plans = Counter()
    replan = Scheduler._replan

    def counting(self):
        plans.count += 1
        replan(self)

    monkeypatch.setattr(Scheduler, "_replan", counting)
    s, running = queued(policy, noop, 1000)
    plans.count = 0
    arrivals_and_starts(s, running, noop, 20, 1000 + CORES)
    assert plans.count == 0


# -- the faster paths decide as the walks they replace ------------------------------------------


def walked_place(s: Scheduler, task: Task) -> int:
    """Where the linear walk ``_merge`` made before the plan index put ``task``."""
    for position in range(len(s._plan) - 1, -1, -1):
        head = s._plan[position].tasks[0]
        if head.priority < task.priority or (head.priority == task.priority and rank(head) < rank(task)
                                             and (task.tail > 0 or not s._overdue(head))):
            return position + 1
    return 0


task_specs = st.tuples(st.sampled_from([0.5, 1.0, 2.0, 3.0]), st.sampled_from([0.0, 0.0, 1.0, -math.inf]),
                       st.sampled_from([0.0, 0.0, 0.0, 2.0]), st.sampled_from([1, 3, 8]))
steps = st.lists(st.tuples(st.sampled_from(["add", "add", "start", "tick"]), task_specs), max_size=80)


@settings(max_examples=150, deadline=None)
@given(st.lists(task_specs, min_size=0, max_size=60), steps)
def test_the_merge_puts_a_task_where_the_walk_would(first, later):
    """Arrivals merged into plans of mixed priorities, ranks and tails, with overdue tasks about
    (a clock that runs, arrivals stamped at later dispatches), land where the linear walk put them."""
    s = Scheduler([[0, 1], [2, 3]], "scalpel", llc=LLC)
    number, now, running, merged = 0, 0.0, [], 0

    def make(spec):
        nonlocal number
        runtime, priority, tail, footprint = spec
        number += 1
        return Task(number, footprint * MiB, runtime, priority, runtime_spread=0.2, tail=tail, key=str(footprint))

    s.add(make(spec) for spec in first)
    running += [a.slot.index for a in s.dispatch(now)]
    for action, spec in later:
        if action == "add":
            task = make(spec)
            merging = not s._dirty and len(s._plan) >= 2 * len(s.slots)
            expected = walked_place(s, task) if merging else None
            s.add([task])
            if merging:
                merged += 1
                assert s._plan[expected].tasks[0] is task
        elif action == "start" and running:
            s.release(running.pop(0))
        else:
            now += 1.5
        running += [a.slot.index for a in s.dispatch(now)]
        index = s._index
        if index is not None:  # the index keeps the plan's order
            assert len(index) == len(s._plan)
            assert all(a < b for a, b in zip(index.labels, list(index.labels)[1:]))
            assert all(index.position(group.tasks[0]) == at for at, group in enumerate(s._plan))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1, 3, 6, 12]), st.sampled_from([0.5, 1.0, 2.0]),
                          st.booleans(), st.sampled_from([0.0, 0.2, 1.0])), min_size=1, max_size=200),
       st.integers(0, 40))
@example([(12, 2.0, True, 0.2)] * 100 + [(3, 1.0, False, 0.2)] * 20 + [(1, 0.5, True, 0.2)] * 30, 10)
def test_decide_reads_the_indexed_candidates_as_every_waiting_task(specs, arrivals):
    """``decide`` given the indexed candidates (the look-ahead, then each signature's first) decides
    as given every waiting task of the head's level after it, in plan order."""
    decide = admission.decide
    checked = Counter()

    def both(head, others, running, *, deferral_pays, model, llc, held=None):
        candidates = list(others)  # what the scheduler gave: read whole, decide reads no further
        plan = [group.tasks[0] for group in reversed(s._plan)]
        at = next(i for i, task in enumerate(plan) if task is head)
        every = [task for task in plan[at + 1:] if task.priority == head.priority]
        given = set(map(id, candidates))
        asked = []

        def pays(h, w):
            asked.append(w)
            return deferral_pays(h, w) if id(w) in given else False

        reference = decide(head, every, running, deferral_pays=pays, model=model, llc=llc, held=held)
        decision = decide(head, candidates, running, deferral_pays=deferral_pays, model=model, llc=llc, held=held)
        assert all(id(w) in given for w in asked)
        assert (reference.task, reference.reason, reference.deferred) == \
            (decision.task, decision.reason, decision.deferred)
        checked.count += 1
        return decision

    s = Scheduler([[0, 1, 2, 3]], "scalpel", llc=LLC)
    number = 0

    def make(spec):
        nonlocal number
        footprint, runtime, known, spread = spec
        number += 1
        return Task(number, footprint * MiB, runtime, runtime_spread=spread, key=str(footprint),
                    footprint_known=known)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(admission, "decide", both)
        s.add(make(spec) for spec in specs)
        running = [a.slot.index for a in s.dispatch(0.0)]
        now = 0.0
        for k in range(len(specs)):
            now += 0.3
            if k < arrivals:
                s.add([make(specs[k % len(specs)])])
            if running:
                s.release(running.pop(0))
            running += [a.slot.index for a in s.dispatch(now)]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.floats(0, 1), st.sampled_from([0.5, 1.0, 2.0]),
                          st.sampled_from([0.0, 1.0]), st.sampled_from([1, 3])), max_size=400),
       st.sampled_from([0.0, 0.5, 1.0]))
def test_the_plan_index_answers_as_the_list_does(operations, crowd):
    """Inserts (many at one place, so windows are labelled again) and removals anywhere: places,
    the first task below a rank and the first of each signature are what a walk of the list finds."""
    plan: list[Task] = []
    index = plan_index.PlanIndex(plan)
    for number, (insert, where, runtime, priority, footprint) in enumerate(operations):
        if insert or not plan:
            at = min(len(plan), 1) if where < crowd else int(where * len(plan))  # crowd: one place, again and again
            task = Task(number, footprint * MiB, runtime, priority, seq=number, key="k")
            plan.insert(at, task)
            index.insert(at, task, plan.__getitem__)
        else:
            at = min(len(plan) - 1, int(where * len(plan)))
            index.remove(at, plan.pop(at))
        assert list(index.labels) == sorted(set(index.labels)) and len(index) == len(plan)
        assert all(index.position(task) == at for at, task in enumerate(plan))
        for level in (0.0, 1.0):
            for below in (0.75, 1.5, 3.0):
                walked = max((i for i, t in enumerate(plan) if t.priority == level and rank(t) < below), default=None)
                assert index.first_below(level, below) == walked
            for before in {0, len(plan) // 2, len(plan)}:
                firsts: dict = {}
                for i in range(before - 1, -1, -1):
                    if plan[i].priority == level:
                        firsts.setdefault(admission.signature(plan[i]), i)
                assert index.first_of_signatures(level, before, lambda s: False) == sorted(firsts.values(), reverse=True)
