"""Workers that outnumber the CPUs (a node emulated on a small machine) are given longer to start:
each imports Parsl, about 2 s of CPU, and 64 of them on 2 CPUs took more than the 60 s one may take."""

import os

from scalpel_executor.core.batching import Batching
from scalpel_executor.core.domains import Topology
from scalpel_executor.runtime.driver.manager_client import START_TIMEOUT, ManagerClient
from scalpel_executor.runtime.options import PoolOptions
from scalpel_executor.runtime.node.pool import READY_TIMEOUT, start_timeout


def test_the_start_deadline_stretches_with_the_workers_per_cpu_and_never_shrinks(monkeypatch):
    from scalpel_executor.runtime.node import pool

    monkeypatch.setattr(pool, "READY_TIMEOUT", READY_TIMEOUT)  # a harness may have shortened it for its rounds
    cpus = len(os.sched_getaffinity(0))
    assert start_timeout(1) == start_timeout(cpus) == READY_TIMEOUT
    assert start_timeout(32 * cpus) == 32 * READY_TIMEOUT
    assert start_timeout(cpus + 1) > READY_TIMEOUT


def test_the_driver_waits_for_an_emulated_nodes_manager_as_long_as_its_workers_may_take():
    cpus = len(os.sched_getaffinity(0))
    wide = ManagerClient(Topology.from_spec(f"1x{64 * cpus}:32MiB"), PoolOptions(), lambda task, outcome: None)
    assert wide._start_timeout == START_TIMEOUT + start_timeout(64 * cpus) - start_timeout(1) > START_TIMEOUT
    narrow = ManagerClient(Topology.from_spec(f"1x{cpus}:32MiB"), PoolOptions(), lambda task, outcome: None)
    assert narrow._start_timeout == START_TIMEOUT  # never shorter, whatever the pool's own deadline is


def test_the_deadline_scan_reads_only_workers_with_a_deadline_and_still_kills_past_a_walltime():
    """The dispatch thread's scan for deadlines (a worker not ready yet, a task past its walltime)
    read every worker at every pass of its loop: work proportional to the node per task. It reads
    the slots that may have one, drops those that have none, and a walltime is still enforced."""
    import time

    from scalpel_executor.host.sysfs import resolve_topology
    from scalpel_executor.runtime.errors import WalltimeExceeded
    from scalpel_executor.runtime.node.pool import WorkerPool
    from tests.runtime.helpers import Outcomes, call, wait_until, where

    cpu = sorted(os.sched_getaffinity(0))[0]
    outcomes = Outcomes()
    pool = WorkerPool(resolve_topology([[cpu]]), PoolOptions(batching=Batching(window=0)), outcomes)
    pool.start()
    try:
        pool.submit(call(1, where, "x"))
        assert outcomes.wait([1])[1].ok
        assert wait_until(lambda: not pool._timed)  # every worker ready, no task timed: nothing to scan
        pool.walltime_grace = 0.5
        pool.submit(call(2, time.sleep, 30, walltime=0.2))  # stuck in C, past Parsl's own walltime
        outcome = outcomes.wait([2])[2]
        assert isinstance(outcome.error, WalltimeExceeded), outcome.error
    finally:
        pool.shutdown()
