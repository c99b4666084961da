import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.core.grouping import group_tasks
from scalpel_executor.core.scheduler import POLICIES, Scheduler, Task

XEON = [[0, 1, 2, 3], [4, 5, 6, 7]]  # the paper's 2 x 4 cores


def tasks_from(footprints, runtimes=None):
    runtimes = runtimes or [1.0] * len(footprints)
    return [Task(i, footprint=f, runtime=r) for i, (f, r) in enumerate(zip(footprints, runtimes))]


def test_first_groups_go_to_different_domains():
    s = Scheduler(XEON, "scalpel-paper")
    s.add(tasks_from([8, 7, 6, 5, 4, 3, 2, 1]))
    first = s.dispatch()
    by_domain = {d: {a.task.id for a in first if a.slot.domain == d} for d in (0, 1)}
    expected = [set(g) for g in group_tasks([8, 7, 6, 5, 4, 3, 2, 1], 2, 4)]
    assert sorted(by_domain.values(), key=min) == sorted(expected, key=min)
    assert s.waiting == 0 and not s.idle_slots


def test_full_groups_before_partial_and_longest_group_first():
    # 13 tasks on 2x4: groups of 4, 4, 3, 2. Give the partial groups the longest run times:
    # full groups must still start first, and of the full groups the longer one on domain 0.
    footprints = list(range(13, 0, -1))
    groups = group_tasks(footprints, 2, 4)
    runtimes = [1.0] * 13
    full = [g for g in groups if len(g) == 4]
    partial = [g for g in groups if len(g) < 4]
    for g in partial:
        for i in g:
            runtimes[i] = 100.0
    runtimes[full[1][0]] = 50.0  # makes full[1] the longest full group
    s = Scheduler(XEON, "scalpel-paper")
    s.add(tasks_from(footprints, runtimes))
    first = s.dispatch()
    assert {a.task.id for a in first if a.slot.domain == 0} == set(full[1])
    assert {a.task.id for a in first if a.slot.domain == 1} == set(full[0])
    # Inside a group the longest task starts first: on the first core of domain 0.
    assert first[0].slot.cpu == 0 and first[0].task.id == full[1][0]


def test_free_core_takes_its_domains_buffer_first():
    s = Scheduler([[0, 1], [2, 3]], "scalpel-paper")
    # 8 tasks -> 4 groups of 2; after the first dispatch two groups wait.
    s.add(tasks_from([80, 70, 60, 50, 40, 30, 20, 10], [5, 1, 4, 2, 3, 3, 2, 4]))
    first = {a.slot.cpu: a.task for a in s.dispatch()}
    s.release(0)  # core 0 frees: its buffer is empty, so it takes the next group...
    task = s.next_for(0)
    group_rest = s.buffered(0)
    assert task is not None and len(group_rest) == 1  # ...and the rest of that group waits on domain 0
    s.release(1)
    assert s.next_for(1) is group_rest[0]  # core 1, same domain, takes that buffered task
    assert first  # the first wave ran


def test_longest_task_first_inside_group():
    s = Scheduler([[0, 1, 2]], "scalpel-paper")
    s.add(tasks_from([3, 2, 1], [1.0, 9.0, 5.0]))
    assert [a.task.id for a in s.dispatch()] == [1, 2, 0]


def test_idle_core_steals_rather_than_idles():
    s = Scheduler([[0, 1], [2, 3]], "scalpel-paper")
    s.add(tasks_from([8, 7, 6, 5, 4, 3, 2, 1]))  # four groups of two
    s.dispatch()  # two groups run, two wait
    s.release(0)
    s.next_for(0)  # domain 0 takes the third group; its second task waits in domain 0's buffer
    stranded = s.buffered(0)
    s.release(2)
    s.next_for(2)  # domain 1 takes the last group
    s.release(3)
    s.next_for(3)  # and runs its second task: now only domain 0's buffer holds a task
    s.release(2)
    assert len(stranded) == 1 and s.next_for(2) is stranded[0]


def test_unequal_domains_take_groups_that_fit():
    s = Scheduler([[0, 1, 2, 3], [4]], "scalpel-paper")
    # The single-task group runs longest, so it is dispatched first, but it must not push the
    # four-task group onto the one-core domain.
    s.add(tasks_from([50, 40, 30, 20, 10], [1, 1, 1, 1, 1]))
    s.add([Task("long", footprint=25, runtime=9.0)])
    placed = {a.task.id: a.slot.domain for a in s.dispatch()}
    assert sum(1 for d in placed.values() if d == 0) == 4 and len(placed) == 5


def test_tasks_arriving_later_are_regrouped_with_waiting_ones():
    s = Scheduler([[0, 1]], "scalpel-paper")
    s.add(tasks_from([5, 5]))
    s.dispatch()
    late = [Task("big", footprint=100), Task("small", footprint=1), Task("mid1", footprint=50), Task("mid2", footprint=49)]
    s.add(late[:2])
    s.add(late[2:])
    s.release(0)
    s.release(1)
    started = {a.task.id for a in s.dispatch()}
    assert started == {"big", "small"}  # big pairs with small across the two arrivals


def test_priority_goes_first():
    s = Scheduler([[0]], "scalpel-paper")
    s.add([Task("low", runtime=10.0), Task("high", runtime=1.0, priority=5)])
    assert [a.task.id for a in s.dispatch()] == ["high"]


def test_higher_priority_arrival_overtakes_a_buffer():
    s = Scheduler([[0, 1]], "scalpel-paper")
    s.add(tasks_from([4, 3, 2, 1]))
    s.dispatch()
    s.release(0)
    s.add([Task("urgent", priority=1)])
    assert s.next_for(0).id == "urgent"


def test_unknown_policy_lists_the_valid_ones():
    with pytest.raises(ValueError) as error:
        Scheduler(XEON, "lpt")
    for name in POLICIES:
        assert name in str(error.value)


def test_empty_domain_rejected():
    with pytest.raises(ValueError, match="at least one core"):
        Scheduler([[0, 1], []])


def test_double_start_and_double_release_rejected():
    s = Scheduler([[0]])
    s.add(tasks_from([1, 2]))
    s.dispatch()
    with pytest.raises(ValueError, match="still running"):
        s.next_for(0)
    s.release(0)
    s.next_for(0)
    s.release(0)
    with pytest.raises(ValueError, match="no running task"):
        s.release(0)


def test_drain_returns_every_unstarted_task():
    s = Scheduler([[0, 1]], "scalpel-paper")
    s.add(tasks_from(range(7)))
    running = {a.task.id for a in s.dispatch()}
    left = {t.id for t in s.drain()}
    assert running | left == set(range(7)) and not running & left
    assert s.waiting == 0


def test_fifo_and_longer_first_orders():
    runtimes = [1.0, 3.0, 2.0]
    fifo = Scheduler([[0]], "fifo")
    lpt = Scheduler([[0]], "longest_first")
    for s in (fifo, lpt):
        s.add(tasks_from([1, 1, 1], runtimes))
    order = {"fifo": [], "longest_first": []}
    for name, s in (("fifo", fifo), ("longest_first", lpt)):
        for _ in range(3):
            order[name].append(s.dispatch()[0].task.id)
            s.release(0)
    assert order == {"fifo": [0, 1, 2], "longest_first": [1, 2, 0]}


def test_di_spreads_intensity_over_domains():
    s = Scheduler([[0, 1], [2, 3]], "di")
    s.add(tasks_from([100, 90, 2, 1]))
    placed = {a.task.id: a.slot.domain for a in s.dispatch()}
    assert placed[0] != placed[1]  # the two intensive tasks land on different domains


def test_random_is_seeded():
    def order(seed):
        s = Scheduler([[0]], "random", seed=seed)
        s.add(tasks_from(range(20)))
        out = []
        for _ in range(20):
            out.append(s.dispatch()[0].task.id)
            s.release(0)
        return out

    assert order(1) == order(1)
    assert sorted(order(1)) == list(range(20))


@settings(max_examples=200, deadline=None)
@given(
    policy=st.sampled_from(sorted(POLICIES)),
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=4),
    batches=st.lists(st.lists(st.tuples(st.floats(0, 100), st.floats(0.1, 10), st.integers(0, 2)), max_size=12), min_size=1, max_size=4),
    frees=st.lists(st.integers(0, 100), max_size=60),
)
def test_work_conserving_and_each_task_runs_once(policy, shape, batches, frees):
    cpu = iter(range(100))
    s = Scheduler([[next(cpu) for _ in range(c)] for c in shape], policy)
    started = []
    total = 0
    free_choices = iter(frees)
    for batch in batches:
        s.add(Task((total, i), footprint=f, runtime=r, priority=p) for i, (f, r, p) in enumerate(batch))
        total += len(batch)
        started += [a.task.id for a in s.dispatch()]
        assert not s.idle_slots or s.waiting == 0  # work conserving
        busy = sorted(s.running)
        if busy:
            s.release(busy[next(free_choices, 0) % len(busy)])
            started += [a.task.id for a in s.dispatch()]
            assert not s.idle_slots or s.waiting == 0
    while s.running:
        s.release(min(s.running))
        started += [a.task.id for a in s.dispatch()]
        assert not s.idle_slots or s.waiting == 0
    assert len(started) == len(set(started)) == total


@settings(max_examples=150, deadline=None)
@given(
    policy=st.sampled_from(sorted(POLICIES)),
    tasks=st.integers(min_value=0, max_value=30),
    events=st.lists(st.tuples(st.sampled_from(["disable", "enable", "release", "dispatch"]),
                              st.integers(min_value=0, max_value=5)), max_size=60),
)
def test_disabled_cores_get_no_task_and_every_task_ends_once_in_any_event_order(policy, tasks, events):
    """A worker's death (disable), its replacement's ready (enable) and results (release) may arrive in
    any order, repeated: no core is booked twice, a disabled core gets nothing, no task is lost."""
    s = Scheduler([[0, 1, 2], [3, 4, 5]], policy)
    s.add(Task(i, footprint=i % 7, runtime=1 + i % 3) for i in range(tasks))
    ended, running = [], {}

    def dispatch():
        for a in s.dispatch():
            assert a.slot.index not in s.disabled_slots and a.slot.index not in running
            running[a.slot.index] = a.task.id

    for kind, slot in events:
        if kind == "disable":
            lost = s.disable(slot)
            assert (lost.id if lost else None) == running.pop(slot, None)
            if lost:
                ended.append(lost.id)
        elif kind == "enable":
            s.enable(slot)
        elif kind == "release" and slot in running:
            assert s.release(slot).id == running[slot]
            ended.append(running.pop(slot))
        dispatch()
    for slot in range(6):
        s.enable(slot)
    dispatch()
    while running:
        slot = min(running)
        ended.append(running.pop(slot))
        s.release(slot)
        dispatch()
    assert s.waiting == 0
    assert sorted(ended) == list(range(tasks))  # each task ended exactly once


def test_the_old_name_longer_first_still_selects_longest_first_but_is_not_listed():
    from scalpel_executor.core.policies import POLICIES, resolve_policy

    assert "longer_first" in POLICIES and "longer_first" not in list(POLICIES)
    assert resolve_policy("longer_first") is resolve_policy("longest_first")
    orders = []
    for name in ("longer_first", "longest_first"):
        s = Scheduler([[0], [1]], name)
        s.add([Task(i, runtime=r) for i, r in enumerate([1.0, 5.0, 3.0])])
        orders.append([a.task.id for a in s.dispatch()])
    assert orders[0] == orders[1] == [1, 2]
