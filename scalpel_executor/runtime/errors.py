"""The errors a task can end with besides its own exception, and the one a broken executor gives.

Every task ends exactly once: with its result, its own exception, or one of these.

- :class:`WorkerDied` — its worker process died (signal, ``os._exit``, out of memory); a
  subclass of Parsl's ``WorkerLost``, so handlers written for HighThroughputExecutor keep working.
- :class:`WalltimeExceeded` — it ran past ``walltime`` plus a grace period, blocked where Parsl's
  own timeout cannot reach it, and its worker was killed; a subclass of Parsl's ``AppTimeout``.
- :class:`TaskExit` — it raised a ``BaseException`` that is not an ``Exception``
  (``sys.exit()``, ``KeyboardInterrupt``, an ``argparse`` error); the original is its
  ``__cause__``. Parsl's DataFlowKernel only handles ``Exception``, so the executor wraps these.
- :class:`NodeManagerLost` — the node manager running it was lost (killed, crashed, silent past
  ``heartbeat_threshold``); a subclass of Parsl's ``ManagerLost``, so ``retries=`` reruns it.
- :class:`ExecutorShutdown` — the executor was shut down before it finished.
- :class:`ExecutorFailed` — the executor itself broke (a bug in its dispatch thread); the
  message says what broke.
"""

from __future__ import annotations

import platform
import re

from parsl.app.errors import AppTimeout
from parsl.executors.high_throughput.errors import ManagerLost, WorkerLost


__all__ = ["WorkerDied", "WalltimeExceeded", "NodeManagerLost", "ExecutorShutdown", "ExecutorFailed", "TaskExit",
           "named"]


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


class ExecutorShutdown(RuntimeError):
    """The executor was shut down before the task finished."""


class ResourcesUnavailable(ValueError):
    """The task asks for more cores, memory or accelerators than its node has (it would wait forever)."""


class MemoryExceeded(MemoryError):
    """The task went past the memory it declared, under ``enforce_memory=True``: it failed alone.

    ``declared`` is its declaration in bytes, ``limit`` the limit it ran under (its worker's
    memory when the task began plus the declaration and a margin) and ``mechanism`` what enforced
    it: ``"cgroup v2"`` or ``"cgroup v1"`` (resident memory: the kernel's OOM killer ended the
    worker, which was replaced), or ``"RLIMIT_AS"`` (address space: an allocation failed).
    """

    def __init__(self, message: str, declared: float | None = None, limit: int | None = None,
                 mechanism: str | None = None):
        super().__init__(message)
        self.declared, self.limit, self.mechanism = declared, limit, mechanism

    def __reduce__(self):
        return (type(self), (self.args[0], self.declared, self.limit, self.mechanism))

    @classmethod
    def of(cls, task_id: int, declared: float, limit: int, before: int, mechanism: str, what: str) -> MemoryExceeded:
        """The one message: the task, both figures, the mechanism, what happened and the fix."""
        return cls(f"task {task_id} allocated past its declared memory of {declared / 2**20:.0f} MiB "
                   f"(enforce_memory=True: {mechanism} limit of {limit / 2**20:.0f} MiB, the worker's "
                   f"{before / 2**20:.0f} MiB before it plus the declaration and a margin): {what}; "
                   f"declare more memory, or enforce_memory=False",
                   declared=declared, limit=limit, mechanism=mechanism)


class ExecutorFailed(RuntimeError):
    """The executor's dispatch thread failed; unfinished tasks end with this, naming the cause."""


class TaskExit(Exception):
    """The task raised a BaseException that is not an Exception, such as ``SystemExit(3)``.

    ``exception`` (and ``__cause__``) is the original. A plain ``Exception``, so Parsl's retries,
    dependency failures and ``future.exception()`` treat the task as failed, as with any error.
    """

    def __init__(self, message: str, exception: BaseException | None = None):
        super().__init__(message)
        self.exception = exception

    def __reduce__(self):
        return (type(self), (self.args[0], self.exception))

    @classmethod
    def wrap(cls, exception: BaseException) -> "TaskExit":
        """``exception`` as a TaskExit whose message names it, with it as the cause."""
        detail = {SystemExit: "the task called sys.exit()", KeyboardInterrupt: "the task raised KeyboardInterrupt"}
        reason = next((text for kind, text in detail.items() if isinstance(exception, kind)),
                      f"the task raised {type(exception).__name__}, a BaseException that is not an Exception")
        wrapped = cls(f"{reason}: {exception!r}", exception)
        wrapped.__cause__ = exception
        return wrapped


def named(error: BaseException, task_id: int, name: str | None) -> BaseException:
    """``error`` with the task it names as ``task {task_id}`` (the executor's own id, where the
    error was made) named ``name`` instead (``task 12 (simulate)``: the id Parsl's log, monitoring
    and the run report's ``parsl_task_id`` give it); the same error object, its ``task_id``
    attribute kept; unchanged where ``name`` is None. Only the errors of this module are renamed: a
    task's own exception is its own.

    >>> str(named(ExecutorShutdown("task 3 had not started when the executor shut down"), 3, "task 7 (fit)"))
    'task 7 (fit) had not started when the executor shut down'
    """
    own = (WorkerDied, WalltimeExceeded, NodeManagerLost, ExecutorShutdown, ExecutorFailed, MemoryExceeded)
    if name is not None and isinstance(error, own) and error.args and isinstance(error.args[0], str):
        renamed = re.sub(rf"\btask {task_id}\b", lambda _: name, error.args[0])
        if renamed != error.args[0]:
            error.args = (renamed, *error.args[1:])
    return error
