"""scalpel-executor: contention-aware co-scheduling of many-task workflows on shared caches.

The pure core (no I/O): :class:`Topology` (what the machine looks like), :func:`group_tasks`
(Algorithm 1), :class:`Scheduler` (Algorithm 2 and the baselines), :func:`simulate`.
"""

from scalpel_executor.footprint import average_footprint, footprint_curve, window_length
from scalpel_executor.grouping import group_for_domains, group_tasks
from scalpel_executor.scheduling import POLICIES, Assignment, Scheduler, Task
from scalpel_executor.simulate import ContentionModel, SimResult, SimTask, simulate
from scalpel_executor.topology import Domain, Topology
from scalpel_executor.units import parse_size

__version__ = "0.1.0"


def __getattr__(name: str):
    # The executor imports Parsl; load it only when asked for, so the pure core stays light.
    if name in ("ScalpelExecutor", "scalpel_config", "WorkerDied", "ExecutorShutdown", "ExecutorFailed", "TaskExit",
                "WalltimeExceeded"):
        from scalpel_executor import executor

        return getattr(executor, name)
    raise AttributeError(f"module 'scalpel_executor' has no attribute {name!r}")

__all__ = [
    "POLICIES",
    "ExecutorFailed",
    "ExecutorShutdown",
    "ScalpelExecutor",
    "TaskExit",
    "WalltimeExceeded",
    "WorkerDied",
    "scalpel_config",
    "Assignment",
    "ContentionModel",
    "Domain",
    "Scheduler",
    "SimResult",
    "SimTask",
    "Task",
    "Topology",
    "average_footprint",
    "footprint_curve",
    "group_for_domains",
    "group_tasks",
    "parse_size",
    "simulate",
    "window_length",
]
