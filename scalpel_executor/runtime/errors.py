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

The three subclasses of Parsl's errors live in :mod:`scalpel_executor.runtime.lost` and are read
from here on first use: a node manager makes one only when a task fails, and importing Parsl at
its start delayed every run's first result by 0.8 s on two cores (docs/results/whole-process.md,
"A node manager that starts without Parsl").
"""

from __future__ import annotations

import re

__all__ = ["WorkerDied", "WalltimeExceeded", "NodeManagerLost", "ExecutorShutdown", "ExecutorFailed", "TaskExit",
           "named"]


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


#: The errors that subclass Parsl's, loaded with Parsl on first use (module docstring).
LOST = ("WorkerDied", "WalltimeExceeded", "NodeManagerLost", "_rebuild_lost")


def __getattr__(name: str):
    if name in LOST:
        from scalpel_executor.runtime import lost  # Parsl with it: only where a task failed so (module docstring)

        return getattr(lost, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def named(error: BaseException, task_id: int, name: str | None) -> BaseException:
    """``error`` with the task it names as ``task {task_id}`` (the executor's own id, where the
    error was made) named ``name`` instead (``task 12 (simulate)``: the id Parsl's log, monitoring
    and the run report's ``parsl_task_id`` give it); the same error object, its ``task_id``
    attribute kept; unchanged where ``name`` is None. Only the errors of this module are renamed: a
    task's own exception is its own.

    >>> str(named(ExecutorShutdown("task 3 had not started when the executor shut down"), 3, "task 7 (fit)"))
    'task 7 (fit) had not started when the executor shut down'
    """
    from scalpel_executor.runtime.lost import NodeManagerLost, WalltimeExceeded, WorkerDied  # Parsl's subclasses

    own = (WorkerDied, WalltimeExceeded, NodeManagerLost, ExecutorShutdown, ExecutorFailed, MemoryExceeded)
    if name is not None and isinstance(error, own) and error.args and isinstance(error.args[0], str):
        renamed = re.sub(rf"\btask {task_id}\b", lambda _: name, error.args[0])
        if renamed != error.args[0]:
            error.args = (renamed, *error.args[1:])
    return error
