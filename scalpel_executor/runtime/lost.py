"""The task errors that subclass Parsl's own, so handlers and ``retries=`` written for
HighThroughputExecutor keep working: :class:`WorkerDied` (Parsl's ``WorkerLost``),
:class:`WalltimeExceeded` (``AppTimeout``) and :class:`NodeManagerLost` (``ManagerLost``).
Import them from :mod:`scalpel_executor.runtime.errors`, which loads this module, and Parsl with
it, on first use: a node manager starts without Parsl (errors' module docstring).
"""

from __future__ import annotations

import platform

from parsl.app.errors import AppTimeout
from parsl.executors.high_throughput.errors import ManagerLost, WorkerLost

__all__ = ["WorkerDied", "WalltimeExceeded", "NodeManagerLost"]


class WorkerDied(WorkerLost, RuntimeError):
    """The worker process running a task died (signal, ``os._exit``, out of memory).

    A subclass of Parsl's ``WorkerLost`` (what HighThroughputExecutor raises when a worker is lost),
    so ``except WorkerLost`` clauses and retry handlers written for Parsl's executors keep working.
    ``task_id``, ``cpus`` and ``cause`` say which task, where and why; ``worker_id`` is the pid.
    """

    def __init__(self, message: str, *, task_id: int | None = None, pid: int | None = None,
                 cpus: tuple[int, ...] = (), cause: str = ""):
        RuntimeError.__init__(self, message)  # args == (message,): pickles and prints as itself
        self.worker_id, self.hostname = pid, platform.node()
        self.task_id, self.cpus, self.cause = task_id, tuple(cpus), cause

    def __str__(self) -> str:
        return str(self.args[0])


class WalltimeExceeded(AppTimeout):
    """A task ran past its ``walltime`` plus the grace period and its worker was killed.

    Parsl's own ``walltime`` raises ``AppTimeout`` inside the task's Python bytecode; a task blocked
    in C code never sees it, so the node scheduler kills the worker as a last resort. A subclass of
    ``AppTimeout``, so callers catch both cases with one clause.
    """

    def __init__(self, message: str, *, task_id: int | None = None, walltime: float | None = None):
        super().__init__(message)
        self.task_id, self.walltime = task_id, walltime


class NodeManagerLost(ManagerLost):
    """The node manager running a task was lost (killed, crashed, or silent past the threshold).

    A subclass of Parsl's ``ManagerLost`` (what HighThroughputExecutor raises when a manager
    misses its heartbeats), so ``except ManagerLost`` clauses and ``retries=`` work as with HTEX.
    ``manager_id`` is the manager's pid (as bytes, as Parsl's), ``task_id`` and ``cause`` say
    which task and why.
    """

    def __init__(self, message: str, *, task_id: int | None = None, pid: int | None = None, cause: str = "",
                 hostname: str | None = None):
        ManagerLost.__init__(self, str(pid).encode(), hostname or platform.node())
        self.args = (message,)
        self.task_id, self.pid, self.cause = task_id, pid, cause

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self):
        return (_rebuild_lost, (self.args[0], self.task_id, self.pid, self.cause, self.hostname))


def _rebuild_lost(message: str, task_id: int | None, pid: int | None, cause: str,
                  hostname: str | None = None) -> NodeManagerLost:
    return NodeManagerLost(message, task_id=task_id, pid=pid, cause=cause, hostname=hostname)
