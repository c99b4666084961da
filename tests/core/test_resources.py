"""Per-task cores, memory and accelerators (core.resources) in the scheduler and the simulator."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.core import admission, resources
from scalpel_executor.core.policies import POLICIES
from scalpel_executor.core.scheduler import Scheduler, Task
from scalpel_executor.core.simulate import SimTask, simulate

GiB = 2**30
MiB = 2**20


def test_a_task_that_can_never_fit_is_refused_with_its_figures():
    s = Scheduler([[0, 1], [2, 3]], "scalpel", memory=24 * GiB, gpus=1)
    with pytest.raises(ValueError, match=r"asks for 5 cores; this node has 4 \(LLC domains of 2, 2\)"):
        s.add([Task("wide", cores=5)])
    with pytest.raises(ValueError, match=r"asks for 64.0 GiB of memory; this node.s budget is 24.0 GiB"):
        s.add([Task("big", memory=64 * GiB)])
    with pytest.raises(ValueError, match=r"asks for 2 accelerators; this node has 1"):
        s.add([Task("gpu", gpus=2)])
    assert s.waiting == 0
    capacity = resources.Capacity((2, 2), None, 0)
    assert resources.unfit_reason(Task("wide", cores=5), capacity).startswith("task 'wide' asks for 5 cores")
    assert resources.unfit_reason(Task(7, cores=5), capacity, "this call of f").startswith("this call of f asks for")
    assert resources.unfit_reason(Task(7, cores=4), capacity, "this call of f") is None


def test_a_two_core_task_books_both_cores_of_its_domain_and_releases_them_together():
    s = Scheduler([[0, 1], [2, 3]], "fifo")
    s.add([Task("pair", cores=2), Task("a"), Task("b")])
    assignments = s.dispatch()
    pair = next(a for a in assignments if a.task.id == "pair")
    assert [slot.domain for slot in pair.booked] == [pair.slot.domain] * 2
    assert {a.task.id for a in assignments} == {"pair", "a", "b"}
    cpus = [slot.cpu for a in assignments for slot in a.booked]
    assert sorted(cpus) == [0, 1, 2, 3]  # no core booked twice
    s.release(pair.slot)
    assert len(s.idle_slots) == 2


def test_memory_keeps_two_large_tasks_apart_and_a_small_one_backfills():
    s = Scheduler([[0, 1]], "fifo", memory=24 * GiB)
    s.add([Task("big1", runtime=10, memory=15 * GiB), Task("big2", runtime=10, memory=15 * GiB),
           Task("small", runtime=1, memory=1 * GiB)])
    first = s.dispatch(0.0)
    assert [a.task.id for a in first] == ["big1", "small"]  # big2 does not fit; small ends before big1 does
    assert first[1].reason == "planned"
    assert s.memory_used == 16 * GiB
    s.release(first[1].slot)
    assert s.dispatch(1.0) == []  # big2 still waits for big1's memory
    s.release(first[0].slot)
    assert [a.task.id for a in s.dispatch(10.0)] == ["big2"]


def test_a_wide_task_is_not_starved_by_a_stream_of_narrow_ones():
    """EASY backfilling: a narrow task that would end after the wide one's reservation waits."""
    tasks = [SimTask("long", 10.0)] + [SimTask("wide", 1.0, cores=2)] + [SimTask(f"n{i}", 11.0) for i in range(5)]
    result = simulate(tasks, [[0, 1]], 32 * MiB, "fifo")
    start = {r.name: r.start for r in result.records}
    assert start["wide"] == pytest.approx(10.0)
    assert all(start[f"n{i}"] >= 11.0 - 1e-9 for i in range(5))
    short = [SimTask("long", 10.0), SimTask("wide", 1.0, cores=2)] + [SimTask(f"n{i}", 2.0) for i in range(4)]
    start = {r.name: r.start for r in simulate(short, [[0, 1]], 32 * MiB, "fifo").records}
    assert start["n0"] == 0.0 and start["n3"] == pytest.approx(6.0)  # they end before the reservation: backfilled
    assert start["wide"] == pytest.approx(10.0)


def test_the_default_policy_reports_a_backfilled_start():
    s = Scheduler([[0, 1]], "scalpel", memory=24 * GiB)
    s.add([Task("running", runtime=10.0, memory=1 * GiB)])
    s.dispatch(0.0)
    s.add([Task("big", runtime=5.0, memory=23.5 * GiB), Task("short", runtime=1.0)])
    [assignment] = s.dispatch(0.0)
    assert assignment.task.id == "short" and assignment.reason == admission.BACKFILLED


def test_a_task_wider_than_any_domain_spans_domains_of_the_node():
    s = Scheduler([[0, 1], [2, 3]], "fifo")
    s.add([Task("three", cores=3)])
    [assignment] = s.dispatch()
    assert len(assignment.booked) == 3 and len({slot.domain for slot in assignment.booked}) == 2


def test_a_core_held_by_a_wide_task_stays_out_of_dispatch_when_its_worker_is_replaced():
    s = Scheduler([[0, 1]], "fifo")
    s.add([Task("pair", cores=2), Task("next")])
    [pair] = s.dispatch()
    companion = pair.booked[1].index
    assert s.disable(companion) is None  # the task runs on its own core's worker
    s.release(pair.slot)
    assert [a.slot.index for a in s.dispatch()] == [pair.slot.index]
    s.enable(companion)


def test_reservation_waits_for_the_tasks_that_free_what_it_needs():
    capacity = resources.Capacity((2,), 24 * GiB, 0)
    running = [resources.Holding(3.0, (1,), 10 * GiB, 0), resources.Holding(5.0, (1,), 10 * GiB, 0)]
    reservation = resources.reserve(Task("x", cores=1, memory=20 * GiB), [0], capacity, 20 * GiB, 0, running)
    assert reservation.at == 5.0 and reservation.domain == 0  # the first end frees a core, not 20 GiB
    assert reservation.spare_memory == pytest.approx(4 * GiB) and reservation.spare_cores == 1
    assert resources.may_backfill(Task("y", runtime=4.0), 0, reservation)
    assert resources.may_backfill(Task("z", runtime=9.0, memory=GiB), 0, reservation)  # spare then
    assert not resources.may_backfill(Task("w", runtime=9.0, memory=5 * GiB), 0, reservation)
    never = resources.reserve(Task("x", cores=2), [0], capacity, 0.0, 0, [])
    assert never.at == math.inf and resources.may_backfill(Task("y", runtime=1e9), 0, never)


task_specs = st.lists(st.tuples(st.integers(1, 4), st.sampled_from([0, 0, 2, 6, 10, 15]), st.integers(0, 2),
                                st.floats(0.1, 5.0), st.integers(0, 1)), min_size=1, max_size=16)


@settings(max_examples=200, deadline=None)
@given(specs=task_specs, domains=st.sampled_from([[[0, 1]], [[0, 1], [2, 3]], [[0, 1, 2], [3]], [[0, 1, 2, 3]]]),
       policy=st.sampled_from(sorted(POLICIES)), near=st.sampled_from([(), ({0}, {1}), ({0}, {0}), ({1}, set())]),
       events=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 7), st.floats(0.0, 2.0)), max_size=80))
def test_no_core_booked_twice_and_no_budget_exceeded_under_any_event_order(specs, domains, policy, near, events):
    """Arrivals, completions, worker losses and replacements in any order, any policy, mixed core
    counts, memory and accelerators (near some domains or not): no core or device is booked twice or
    while disabled, a task no wider than a domain gets cores of one domain, memory and accelerators
    never exceed the node's, and every task starts and ends once."""
    cores = sum(len(d) for d in domains)
    near = tuple({d for d in domains_near if d < len(domains)} for domains_near in near)
    s = Scheduler(domains, policy, llc=32 * MiB, memory=24 * GiB, gpus=2, device_domains=near)
    tasks = [Task(i, footprint=8 * MiB, runtime=r, priority=p, cores=min(c, cores), memory=m * GiB, gpus=g)
             for i, (c, m, g, r, p) in enumerate(specs)]
    pending, started, ended, lost, now = list(tasks), set(), set(), set(), 0.0
    holding: dict[int, tuple[int, ...]] = {}  # slot index -> cores its task holds
    devices: dict[int, int] = {}  # accelerator -> slot index of the task given it

    def free(index):
        del holding[index]
        for device in [d for d, slot in devices.items() if slot == index]:
            del devices[device]

    def start(assignments):
        for a in assignments:
            assert a.task.id not in started
            started.add(a.task.id)
            booked = [slot.index for slot in a.booked]
            assert len(booked) == a.task.cores and booked[0] == a.slot.index
            held = {core for cores_ in holding.values() for core in cores_}
            assert not held & set(booked), "a core booked twice"
            assert not set(booked) & s.disabled_slots, "a disabled core booked"
            if a.task.cores <= max(len(d) for d in domains):
                assert len({slot.domain for slot in a.booked}) == 1
            holding[a.slot.index] = tuple(booked)
            assert len(a.devices) == a.task.gpus and not set(a.devices) & set(devices), "a device booked twice"
            devices.update((device, a.slot.index) for device in a.devices)
        running = s.running.values()
        assert sum(t.memory for t in running) <= 24 * GiB and sum(t.gpus for t in running) <= 2

    for kind, which, step in events:
        now += step
        if kind <= 1 and pending:
            s.add(pending[:2])
            del pending[:2]
        elif kind == 2 and s.running:
            index = sorted(s.running)[which % len(s.running)]
            ended.add(s.release(index).id)
            free(index)
        elif kind == 3:  # a worker dies: its task (if it ran one there) is lost and fails
            index = which % cores
            task = s.disable(index)
            if task is not None:
                lost.add(task.id)
                free(index)
        elif kind == 4:
            s.enable(which % cores)
        start(s.dispatch(now))
    s.add(pending)
    for index in range(cores):
        s.enable(index)
    for _ in range(10 * len(tasks) + 10):  # each round starts or ends a task, or the scheduler is stuck
        if not (s.running or s.waiting):
            break
        start(s.dispatch(now))
        if s.running:
            index = min(s.running)
            ended.add(s.release(index).id)
            free(index)
        now += 1.0
    assert not (s.running or s.waiting), f"every core idle and enabled, yet {s.waiting} tasks never started"
    assert ended | lost == {t.id for t in tasks} and not ended & lost
    assert s.memory_used == 0 and s.gpus_used == 0 and len(s.idle_slots) == cores


@settings(max_examples=60, deadline=None)
@given(widths=st.lists(st.integers(1, 4), min_size=1, max_size=20), policy=st.sampled_from(sorted(POLICIES)),
       machine=st.sampled_from([[[0, 1, 2, 3]], [[0, 1, 2, 3], [4, 5, 6, 7]]]))
def test_simulated_mixed_core_batches_end_and_never_beat_the_work_bound(widths, policy, machine):
    tasks = [SimTask(f"t{i}", 1.0 + (i % 3), footprint=(i % 4) * 8 * MiB, cores=w) for i, w in enumerate(widths)]
    result = simulate(tasks, machine, 32 * MiB, policy)
    assert len(result.records) == len(tasks)
    assert result.makespan >= result.lower_bound - 1e-9
    assert 0 < result.utilisation <= 1 + 1e-9


@settings(max_examples=150, deadline=None)
@given(widths=st.lists(st.integers(1, 4), min_size=1, max_size=40),
       domains=st.sampled_from([(4, 4), (2, 2, 2), (4,), (3, 1)]))
def test_algorithm_1_groups_never_hold_more_cores_than_their_domain(widths, domains):
    """A group's demand is its cores; one-core batches group exactly as the paper's procedure."""
    from scalpel_executor.core.grouping import group_with_capacities
    from scalpel_executor.core.policies import _alg1_groups

    tasks = [Task(i, footprint=(i * 7919) % 97 * MiB, cores=min(w, max(domains)), seq=i) for i, w in enumerate(widths)]
    groups = _alg1_groups(tasks, domains)
    assert sorted(t.id for g in groups for t in g.tasks) == list(range(len(tasks)))
    assert all(len(g.tasks) == 1 or sum(t.cores for t in g.tasks) <= g.capacity for g in groups)
    narrow = [Task(i, footprint=t.footprint, seq=i) for i, t in enumerate(tasks)]
    assert [[t.id for t in g.tasks] for g in _alg1_groups(narrow, domains)] == \
        [members for members, _ in group_with_capacities([t.footprint for t in narrow], domains)]


def test_an_accelerator_task_starts_on_the_domain_near_a_free_device_and_gets_it():
    # Two domains, device 0 near domain 0 and device 1 near domain 1; device 0 is taken first.
    s = Scheduler([[0, 1], [2, 3]], "longest_first", gpus=2, device_domains=[{0}, {1}])
    s.add([Task("a", runtime=9.0, gpus=1)])
    (first,) = s.dispatch(0.0)
    assert (first.slot.domain, first.devices) == (0, (0,))
    # The second GPU task goes to domain 1, near the free device 1, though a core of domain 0 is
    # also free (and served first in the round-robin); a CPU task takes the core of domain 0.
    s.add([Task("b", runtime=5.0, gpus=1), Task("c", runtime=1.0)])
    started = {a.task.id: a for a in s.dispatch(0.0)}
    assert (started["b"].slot.domain, started["b"].devices) == (1, (1,))
    assert started["c"].slot.domain == 0


def test_an_accelerator_task_takes_a_far_device_rather_than_wait_for_a_near_core():
    s = Scheduler([[0], [1]], "longest_first", gpus=2, device_domains=[{0}, {0}])
    s.add([Task("cpu", runtime=9.0)])
    (cpu,) = s.dispatch(0.0)
    s.add([Task("gpu", runtime=1.0, gpus=1)])
    (gpu,) = s.dispatch(0.0)
    assert gpu.slot.domain != cpu.slot.domain and gpu.task.id == "gpu" and len(gpu.devices) == 1



def test_di_deals_a_task_only_to_a_domain_that_can_hold_its_cores():
    """A two-core task dealt to a one-core domain waited forever, and so did the tasks dealt behind it."""
    s = Scheduler([[0, 1, 2], [3]], "di", llc=32 * MiB)
    s.add([Task(i, footprint=8 * MiB, runtime=1.0, cores=c) for i, c in enumerate([1, 2, 1, 2, 1])])
    s.add([Task(9, footprint=8 * MiB, runtime=1.0, cores=4)])  # wider than any domain: spans both
    started, now = [], 0.0
    for _ in range(20):
        started += [(a.task.id, a.slot.domain, len(a.booked)) for a in s.dispatch(now)]
        if s.running:
            s.release(min(s.running))
        now += 1.0
    assert sorted(task for task, _, _ in started) == [0, 1, 2, 3, 4, 9] and not s.waiting and not s.running
    assert all(domain == 0 for task, domain, cores in started if cores == 2)
