"""The pool contract (runtime.contract.Pool): WorkerPool, ManagerClient and ManagerHub each keep it,
by their signatures and by what they do: start, run a submitted task, call on_complete once, shut down."""

import inspect
import threading
import os
import time

import pytest

from scalpel_executor.core.batching import Batching
from scalpel_executor.host.sysfs import resolve_topology
from scalpel_executor.runtime.contract import Pool
from scalpel_executor.runtime.errors import ExecutorShutdown
from scalpel_executor.runtime.driver.hub import ManagerHub
from scalpel_executor.runtime.driver.manager_client import ManagerClient
from scalpel_executor.runtime.options import PoolOptions
from scalpel_executor.runtime.node.pool import WorkerPool
from tests.runtime.helpers import GENEROUS, Outcomes, alive, call, wait_until, where
from tests.runtime.test_manager_connect import hub_and_managers  # noqa: F401 - a fixture used below

POOLS = [WorkerPool, ManagerClient, ManagerHub]
MEMBERS = sorted(name for name in vars(Pool) if not name.startswith("_"))
CPU = sorted(os.sched_getaffinity(0))[0]


def mismatches(protocol_member, member) -> list[str]:
    """How ``member`` of a class fails to stand in for ``protocol_member`` of Pool (empty: it does)."""
    if isinstance(protocol_member, property):
        if not isinstance(member, property):
            return [f"is {type(member).__name__}, not a property"]
        wanted, got = (inspect.signature(p.fget).return_annotation for p in (protocol_member, member))
        return [] if wanted == got else [f"returns {got}, not {wanted}"]
    if not callable(member) or isinstance(member, property):
        return [f"is {type(member).__name__}, not a method"]
    wanted, got = inspect.signature(protocol_member), inspect.signature(member)
    problems = [] if wanted.return_annotation == got.return_annotation else \
        [f"returns {got.return_annotation}, not {wanted.return_annotation}"]
    extra = list(got.parameters.values())
    for parameter in wanted.parameters.values():  # each one, at its place, of its kind, name, type and default-ness
        if not extra:
            problems.append(f"lacks parameter {parameter.name!r}")
            continue
        theirs = extra.pop(0)
        if (theirs.name, theirs.kind, theirs.annotation) != (parameter.name, parameter.kind, parameter.annotation):
            problems.append(f"has {theirs} where Pool has {parameter}")
        if parameter.default is not parameter.empty and theirs.default is theirs.empty:
            problems.append(f"requires {parameter.name!r}, which Pool lets callers leave out")
    problems += [f"requires the extra parameter {p.name!r}" for p in extra
                 if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return problems


def test_the_contract_is_what_the_executor_uses():
    assert MEMBERS == ["lengthen", "shutdown", "slot_cpus_map", "start", "submit", "worker_pids"]


@pytest.mark.parametrize("pool", POOLS, ids=lambda cls: cls.__name__)
def test_each_pool_has_every_member_of_the_contract_with_a_compatible_signature(pool):
    problems = {name: mismatches(getattr(Pool, name), getattr(pool, name, None)) for name in MEMBERS}
    assert not {name: found for name, found in problems.items() if found}, problems


@pytest.mark.parametrize("pool", POOLS, ids=lambda cls: cls.__name__)
def test_each_pool_is_built_from_where_options_and_the_completion_callback(pool):
    where_, options, on_complete, *rest = inspect.signature(pool).parameters.values()
    assert (options.name, options.annotation) == ("options", "PoolOptions")
    assert (on_complete.name, on_complete.annotation) == ("on_complete", "OnComplete")
    assert where_.annotation in ("Topology", "ManagerConfig")
    assert all(p.kind is p.KEYWORD_ONLY for p in rest), rest  # anything else is the pool's own, by name


def test_the_signature_check_finds_what_breaks_the_contract():
    class Wrong:
        def start(self, now: float) -> None: ...
        def submit(self, job: "Task") -> None: ...  # noqa: F821 - compared as text
        def shutdown(self) -> None: ...
        def lengthen(self, task_id: int) -> None: ...
        worker_pids: list = []

        @property
        def slot_cpus_map(self) -> "list[int]": ...

    found = {name: mismatches(getattr(Pool, name), getattr(Wrong, name)) for name in MEMBERS}
    assert all(found.values()), found


# -- what each pool does -----------------------------------------------------------------------


@pytest.fixture(params=POOLS, ids=lambda cls: cls.__name__)
def started_pool(request):
    """Each kind of pool on one CPU, started, with the outcomes it delivers."""
    options = PoolOptions(batching=Batching(window=0))
    if request.param is ManagerHub:
        hub, outcomes, launch = request.getfixturevalue("hub_and_managers")()
        launch("0", CPU)
        assert wait_until(lambda: hub.slot_cpus_map, GENEROUS), "the manager did not report Started"
        yield hub, outcomes
        return
    outcomes = Outcomes()
    pool = request.param(resolve_topology([[CPU]]), options, outcomes)
    pool.start()
    try:
        yield pool, outcomes
    finally:
        pool.shutdown()


def test_each_pool_runs_a_task_calls_on_complete_once_and_shuts_down(started_pool):
    pool, outcomes = started_pool
    assert isinstance(pool, Pool)
    assert [tuple(cpus) for cpus in pool.slot_cpus_map] == [(CPU,)]
    workers = pool.worker_pids
    pool.submit(call(1, where, "x"))
    assert outcomes.wait([1])[1].ok and outcomes.value(1)[0] == "x"
    (task, _), = outcomes.by_task[1]
    assert task.payload.cpu == CPU and task.payload.slot == 0 and outcomes.value(1)[1] in workers
    pool.submit(call(2, time.sleep, 60))
    pool.shutdown()
    assert isinstance(outcomes.wait([2])[2].error, ExecutorShutdown)
    with pytest.raises(ExecutorShutdown):
        pool.submit(call(3, where, "y"))
    pool.shutdown()  # idempotent
    time.sleep(0.2)  # nothing may arrive twice, however late
    assert [len(outcomes.by_task[i]) for i in (1, 2, 3)] == [1, 1, 0]
    assert wait_until(lambda: not alive(workers)), alive(workers)


def test_a_longer_chain_told_after_its_submit_starts_a_waiting_task_first(started_pool):
    """Two tasks wait behind a third on the one core, told no chain; the second is then told a
    long one (``lengthen``): it starts first. (The hub deals by priority and arrival, a task at a
    time as a manager has room: the first two are the manager's, the third the hub's, and a chain
    reorders only what one node holds: there only that nothing breaks; the test below tells a
    manager.) A task running or unknown is left alone."""
    pool, outcomes = started_pool
    pool.submit(call(1, time.sleep, 0.5))
    pool.submit(call(2, time.monotonic))
    pool.submit(call(3, time.monotonic))
    pool.lengthen(3, 100.0, 100.0)
    pool.lengthen(1, 100.0, 100.0)  # running, or about to
    pool.lengthen(99, 100.0, 100.0)  # never submitted
    results = outcomes.wait([1, 2, 3])
    assert all(results[i].ok for i in (1, 2, 3)) and len(outcomes.by_task[3]) == 1
    if not isinstance(pool, ManagerHub):
        assert outcomes.value(3) < outcomes.value(2)


def test_the_hub_tells_the_manager_holding_a_waiting_task_its_longer_chain(hub_and_managers):
    """Three tasks dealt to one manager (a slot and two prefetched): the last, told a long chain
    once the manager holds it, starts before the second there; the hub's copy keeps it too."""
    hub, outcomes, launch = hub_and_managers(prefetch=2)
    launch("0", CPU)
    assert wait_until(lambda: hub.slot_cpus_map, GENEROUS), "the manager did not report Started"
    tasks = [call(1, time.sleep, 0.5), call(2, time.monotonic), call(3, time.monotonic)]
    for task in tasks:
        hub.submit(task)
    assert wait_until(lambda: sum(m["tasks"] for m in hub.connected_managers()) == 3, GENEROUS)
    hub.lengthen(3, 100.0, 100.0)
    results = outcomes.wait([1, 2, 3])
    assert all(results[i].ok for i in (1, 2, 3)) and outcomes.value(3) < outcomes.value(2)
    assert tasks[2].tail == 100.0 and tasks[1].tail == 0.0


def test_the_executors_pool_options_are_stored_once_and_read_only():
    from dataclasses import fields

    from scalpel_executor.runtime.driver.executor import ScalpelExecutor
    from scalpel_executor.runtime.options import PoolOption

    given = dict(policy="fifo", pin="domain", seed=7, batching=Batching(window=0.02, quiet=0.004, max_batch=9),
                 heartbeat_period=1.5, heartbeat_threshold=30, enforce_memory=True)
    executor = ScalpelExecutor(profiles=False, node_manager=False, **given)
    shown = {name for name, value in vars(ScalpelExecutor).items() if isinstance(value, PoolOption)}
    assert shown == set(given) | {"drain_period"}  # every pool option the constructor takes by that name
    assert shown <= {f.name for f in fields(PoolOptions)}
    assert not shown & set(vars(executor))  # no copy on the instance: the attribute reads the options
    for name, value in given.items():
        assert getattr(executor, name) == value == getattr(executor._options, name)
    with pytest.raises(AttributeError, match=r"seed is fixed when the executor is made: give seed=8"):
        executor.seed = 8
    assert "policy='fifo'" in repr(executor) and "seed=7" in repr(executor)  # Parsl's repr reads them


def test_a_shutdown_while_the_workers_start_ends_the_start_quietly_and_leaves_no_worker(caplog):
    pool = WorkerPool(resolve_topology(None), PoolOptions(), lambda task, outcome: None)
    starting = threading.Thread(target=pool.start)
    with caplog.at_level("DEBUG", logger="scalpel_executor.runtime.node.pool"):
        starting.start()
        wait_until(lambda: pool.worker_pids, GENEROUS)  # spawned; their imports take a second or more
        pids = pool.worker_pids
        pool.shutdown()
        starting.join(GENEROUS)
    assert not starting.is_alive()
    assert not any(record.levelname == "WARNING" and "before it was ready" in record.getMessage()
                   for record in caplog.records)  # a worker its own shutdown killed is no failed start
    assert not alive(pids)
