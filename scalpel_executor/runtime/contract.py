"""The pool contract: what the executor asks of whatever runs its tasks.

Three pools keep it, and the executor holds one of them as a :class:`Pool`:

- :class:`~scalpel_executor.runtime.node.pool.WorkerPool` — pinned workers driven from this process
  (``node_manager=False``);
- :class:`~scalpel_executor.runtime.driver.manager_client.ManagerClient` — a WorkerPool in a node manager
  child process (local mode's default);
- :class:`~scalpel_executor.runtime.driver.hub.ManagerHub` — the node managers of provider blocks, over
  CurveZMQ (provider mode).

Each is built as ``Pool(where, options, on_complete, **its own keywords)``: ``where`` is the
:class:`~scalpel_executor.core.domains.Topology` to schedule for (WorkerPool, ManagerClient) or the
:class:`~scalpel_executor.runtime.wire.manager_messages.ManagerConfig` every node manager is told
(ManagerHub); ``options`` the :class:`~scalpel_executor.runtime.options.PoolOptions`; ``on_complete``
the completion callback (:data:`OnComplete`)::

    executor ── start() ────────────> pool: workers (or the managers' channel) ready
             ── submit(Task) ───────> pool ──> ... ──> on_complete(task, Outcome)   once per accepted task
             ── lengthen(id, tail, wide_tail) ──> the chain behind a task submitted earlier grew
             ── shutdown(timeout) ──> pool ──> on_complete(task, Outcome(error=ExecutorShutdown))
                                               for each task not finished yet; every process ended

``submit`` takes a :class:`~scalpel_executor.core.tasks.Task` whose ``payload`` is a
:class:`Job`; it never waits for a task to run, and raises
``ExecutorShutdown`` (shut down) or ``ExecutorFailed`` (the pool broke) instead of accepting. Every
task ``submit`` accepted ends in exactly one ``on_complete(task, outcome)``, with the task's
placement (slot, domain, CPU, start time) filled into its ``Job``: its result, its exception, or an
error the pool names (``WorkerDied``, ``WalltimeExceeded``, ``NodeManagerLost``,
``ExecutorShutdown``, ``ExecutorFailed``). The callback runs on a thread of the pool's, holding no
lock of the pool's, so it may submit again (Parsl's callbacks launch dependent tasks).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from scalpel_executor.core.tasks import Task

__all__ = ["Job", "OnComplete", "Outcome", "Pool"]


@dataclass(eq=False)
class Job:
    """What a pool needs to run a task: the ``payload`` of its :class:`~scalpel_executor.core.tasks.Task`.

    A caller that keeps more of a task subclasses it (the executor's
    :class:`~scalpel_executor.runtime.driver.executor.Submission`; no pool reads those fields);
    the placement fields are filled in when the task is sent
    (by the pool that ran it, or from the node manager's Result or Failed).
    """

    buffer: bytes
    walltime: float | None = None  # seconds; past walltime + grace the worker is killed
    measure: bool = True  # the worker's probe measures this task (the caller's sampling decision)
    memory_limit: float = 0.0  # bytes the task declared (enforced under enforce_memory); 0: none declared
    slot: int | None = field(default=None, init=False)  # where it ran, once dispatched
    domain: int | None = field(default=None, init=False)
    cpu: int | None = field(default=None, init=False)
    started: float | None = field(default=None, init=False)  # monotonic time it was sent to its worker
    admission: str | None = field(default=None, init=False)  # why it started there (core.admission)
    admitted_footprint: float | None = field(default=None, init=False)  # the footprint that start was decided on
    measure_wait: float = field(default=0.0, init=False)  # seconds a core idled for a measurement before it started
    cpus: tuple[int, ...] = field(default=(), init=False)  # every CPU it ran on (several for a k-core task)
    devices: tuple[str, ...] = field(default=(), init=False)  # accelerator ids it was given


@dataclass
class Outcome:
    """How a task ended, as every pool hands it to ``on_complete``."""

    ok: bool  # True: ``payload`` is the serialized result; False: serialized RemoteExceptionWrapper
    payload: bytes | None = None
    error: BaseException | None = None  # set instead of payload when the task never returned
    stats: dict = field(default_factory=dict)


OnComplete = Callable[[Task, Outcome], None]  # called once per task submit accepted (module docstring)


@runtime_checkable
class Pool(Protocol):
    """What runs the executor's tasks (see the module docstring for the whole contract)."""

    def start(self) -> None:
        """Start the workers (or the channel to the managers); raises RuntimeError naming why not."""

    def submit(self, task: Task) -> None:
        """Accept a task whose payload is a Job (thread-safe); its outcome comes to ``on_complete``."""

    def lengthen(self, task_id: int, tail: float, wide_tail: float) -> None:
        """The chain behind task ``task_id``, submitted earlier, is longer than it was told
        (``Task.tail``, ``Task.wide_tail``): it takes it if it has not started (thread-safe, never
        blocks; a task started, ended or unknown is left alone)."""

    def shutdown(self, timeout: float = 10.0) -> None:
        """Fail unfinished tasks with ExecutorShutdown and end every process the pool started. Idempotent."""

    @property
    def worker_pids(self) -> list[int]:
        """The pids of the workers that run tasks (as last reported, for a pool in other processes)."""

    @property
    def slot_cpus_map(self) -> list[tuple[int, ...]]:
        """The CPUs of each slot, in slot order."""
