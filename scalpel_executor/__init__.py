"""scalpel-executor: contention-aware co-scheduling of many-task workflows on shared caches.

The package tree is the architecture (docs/design.md has the map):

- :mod:`scalpel_executor.core` — pure decisions: topology model, grouping (Algorithm 1),
  policies and the scheduler (Algorithm 2), batching, the simulator. No I/O, no numpy, no Parsl.
- :mod:`scalpel_executor.host` — reads this machine: sysfs topology, the footprint probe.
- :mod:`scalpel_executor.runtime` — the live path, a package per process: ``driver`` (the Parsl
  executor), ``node`` (the node manager and its worker pool), ``worker``, and ``wire`` between them.
- :mod:`scalpel_executor.learning` — hints, profile keys, the profile store, estimates.
- :mod:`scalpel_executor.workloads`, :mod:`scalpel_executor.experiments`,
  :mod:`scalpel_executor.cli` — what runs on it, what measures it, and the ``scalpel`` command.

Importing this package loads only the core; the names below that need Parsl or numpy load their
module when first used.
"""

from scalpel_executor.core.batching import Batching
from scalpel_executor.core.grouping import group_for_domains, group_tasks
from scalpel_executor.core.scheduler import POLICIES, Assignment, Scheduler, Task
from scalpel_executor.core.simulate import ContentionModel, SimResult, SimTask, simulate
from scalpel_executor.core.domains import Domain, Topology
from scalpel_executor.core.units import parse_size

__version__ = "0.1.0"

# name -> module that defines it, loaded on first use (Parsl and numpy stay out of `import scalpel_executor`)
_LAZY = {
    "ScalpelExecutor": "scalpel_executor.runtime.driver.executor",
    "ScalpelProviderExecutor": "scalpel_executor.runtime.driver.executor",
    "scalpel_config": "scalpel_executor.runtime.driver.executor",
    "GraphMemoizer": "scalpel_executor.runtime.driver.graph",
    "WorkerDied": "scalpel_executor.runtime.errors",
    "ExecutorShutdown": "scalpel_executor.runtime.errors",
    "ResourcesUnavailable": "scalpel_executor.runtime.errors",
    "MemoryExceeded": "scalpel_executor.runtime.errors",
    "ExecutorFailed": "scalpel_executor.runtime.errors",
    "TaskExit": "scalpel_executor.runtime.errors",
    "WalltimeExceeded": "scalpel_executor.runtime.errors",
    "Sampling": "scalpel_executor.learning.sampling",
    "app_hints": "scalpel_executor.learning.hints",
    "measure_app": "scalpel_executor.cli.profile_run",
    "CommandFailed": "scalpel_executor.cli.common",
    "average_footprint": "scalpel_executor.learning.hotl",
    "footprint_curve": "scalpel_executor.learning.hotl",
    "window_length": "scalpel_executor.learning.hotl",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'scalpel_executor' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "POLICIES",
    "Assignment",
    "Batching",
    "ContentionModel",
    "Domain",
    "Scheduler",
    "SimResult",
    "SimTask",
    "Task",
    "Topology",
    "group_for_domains",
    "group_tasks",
    "parse_size",
    "simulate",
    *_LAZY,
]
