"""Workers that outnumber the CPUs (a node emulated on a small machine) are given longer to start:
each imports Parsl, about 2 s of CPU, and 64 of them on 2 CPUs took more than the 60 s one may take."""

import os

from scalpel_executor.core.domains import Topology
from scalpel_executor.runtime.manager_client import START_TIMEOUT, ManagerClient
from scalpel_executor.runtime.options import PoolOptions
from scalpel_executor.runtime.pool import READY_TIMEOUT, start_timeout


def test_the_start_deadline_stretches_with_the_workers_per_cpu_and_never_shrinks():
    cpus = len(os.sched_getaffinity(0))
    assert start_timeout(1) == start_timeout(cpus) == READY_TIMEOUT
    assert start_timeout(32 * cpus) == 32 * READY_TIMEOUT
    assert start_timeout(cpus + 1) > READY_TIMEOUT


def test_the_driver_waits_for_an_emulated_nodes_manager_as_long_as_its_workers_may_take():
    cpus = len(os.sched_getaffinity(0))
    wide = ManagerClient(Topology.from_spec(f"1x{64 * cpus}:32MiB"), PoolOptions(), lambda task, outcome: None)
    assert wide._start_timeout == START_TIMEOUT - READY_TIMEOUT + 64 * READY_TIMEOUT
    narrow = ManagerClient(Topology.from_spec(f"1x{cpus}:32MiB"), PoolOptions(), lambda task, outcome: None)
    assert narrow._start_timeout == START_TIMEOUT
