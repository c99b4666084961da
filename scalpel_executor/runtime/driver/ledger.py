"""What a node manager holds, as the driver sees it: the rules both drivers of node managers share.

:class:`~scalpel_executor.runtime.driver.manager_client.ManagerClient` (local mode: one manager process
at a time, a replacement taking over from a lost one) and
:class:`~scalpel_executor.runtime.driver.hub.ManagerHub` (provider mode: any number, over CurveZMQ) keep a
:class:`Ledger` for each manager they send tasks to (the client hands its one ledger on to each
replacement) and read every message a manager sends through :func:`receive`::

    submit / deal ── hold(task) ──> Submit ──> node manager
    Began(ids) ───────> begin(ids): these may have run there
    Result / Failed ──> settle(): Settled(task, Outcome) with the Job's placement filled ──> the driver
                        (a task it does not hold, a duplicate or one already failed: dropped and logged)
    Log / Fatal ──────> re-logged here under the manager's logger name / kept as the cause of its loss
    Heartbeat, Started, Drain ──> handed back to the driver (what each tracks of a manager differs)
    manager lost ── lose() ──> (begun: each fails once with NodeManagerLost, :func:`lost_outcome`;
                                never begun: another manager takes them, unspent)

The split rests on the protocol's promise (:mod:`~scalpel_executor.runtime.wire.manager_messages`): a
manager names a dispatch pass's tasks in ``Began`` before any of them reaches a worker, on the same
ordered channel as their results, so a task it held that no ``Began`` named never ran on it.

What differs stays with each driver: routing and dealing, where an unbegun task goes (the client's
replacement, the hub's queue), replacement (the client) and draining (the hub).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable
from typing import NamedTuple, Protocol

from scalpel_executor.core.tasks import Task
from scalpel_executor.runtime.contract import Job, Outcome
from scalpel_executor.runtime.errors import NodeManagerLost
from scalpel_executor.runtime.wire.manager_messages import Began, Failed, Fatal, Log, Message, Result, rebuild_error

__all__ = ["Ledger", "Settled", "Tracked", "lost_outcome", "receive", "relog"]

logger = logging.getLogger(__name__)


class Settled(NamedTuple):
    """A task a manager held, ended by its Result or Failed: what the driver delivers (or places again)."""

    task: Task
    outcome: Outcome


class Ledger:
    """The tasks one node manager was sent and has not ended, and which of them it began.

    Each call is atomic (the ledger has a lock of its own), so a submitting thread may hold a task
    while the reader settles another; a driver that checks its own state before holding (shut
    down? failed?) does both under its own lock, which it may hold while calling here.

    >>> ledger = Ledger()
    >>> for task in (Task(1, payload=Job(b"")), Task(2, payload=Job(b""))):
    ...     ledger.hold(task)
    >>> ledger.begin([1, 7])  # 7 is not held: ignored
    >>> begun, unbegun = ledger.lose()
    >>> [task.id for task in begun], [task.id for task in unbegun], len(ledger)
    ([1], [2], 0)
    """

    __slots__ = ("_held", "_began", "_lock")

    def __init__(self) -> None:
        self._held: dict[Hashable, Task] = {}  # task id -> Task, in the order sent
        self._began: set[Hashable] = set()  # ids of held tasks a Began named: they may have run
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """How many tasks the manager holds."""
        return len(self._held)

    def hold(self, task: Task) -> None:
        """``task`` is sent to the manager (or carried over to its replacement)."""
        with self._lock:
            self._held[task.id] = task

    def begin(self, task_ids) -> None:
        """The manager's ``Began``: these tasks are about to reach its workers (ids it does not hold are ignored)."""
        with self._lock:
            self._began.update(task_id for task_id in task_ids if task_id in self._held)

    def lengthen(self, task_id: Hashable, tail: float, wide_tail: float) -> bool:
        """A held task the manager has not begun takes a longer chain (``Task.tail``, ``wide_tail``),
        kept should it be carried to another manager; whether it is such a task (the driver then
        tells the manager)."""
        with self._lock:
            task = self._held.get(task_id)
            if task is None or task_id in self._began:
                return False
            if tail > task.tail:
                task.tail, task.wide_tail = float(tail), float(wide_tail)
            return True

    def settle(self, message: Result | Failed, manager_name: str) -> Settled | None:
        """The task a Result or Failed ends, no longer held, with its outcome and its Job's placement
        (slot, domain, CPU, start time: None where it never started); None, logged, for a task the
        manager does not hold (a duplicate, or a task already failed or completed)."""
        if message.task_id not in self._held:
            logger.warning("dropped a %s from node manager %s for task %s, which it does not hold (already failed "
                           "or completed)", type(message).__name__.lower(), manager_name, message.task_id)
            return None
        # Built while the task is still held: should this raise, the manager's loss fails the task.
        outcome = (Outcome(message.ok, message.payload, None, message.stats) if isinstance(message, Result)
                   else Outcome(False, error=rebuild_error(message), stats=message.stats))
        with self._lock:
            task = self._held.pop(message.task_id, None)
            self._began.discard(message.task_id)
        if task is None:  # taken meanwhile (shutdown): it has its outcome there
            return None
        job: Job = task.payload
        job.slot, job.domain, job.cpu, job.started = message.slot, message.domain, message.cpu, message.started
        return Settled(task, outcome)

    def tasks(self) -> list[Task]:
        """Every task held, in the order sent."""
        with self._lock:
            return list(self._held.values())

    def take_all(self) -> list[Task]:
        """Every task held, in the order sent, for the driver to fail (shutdown, no manager left); it holds
        nothing after."""
        with self._lock:
            tasks = list(self._held.values())
            self._held, self._began = {}, set()
        return tasks

    def lose(self) -> tuple[list[Task], list[Task]]:
        """The manager is lost: (the tasks it began, which may have run there and so fail once with
        NodeManagerLost; those it never began, which another manager may take unspent), each in the
        order sent. It holds nothing after."""
        with self._lock:
            tasks, began = list(self._held.values()), self._began
            self._held, self._began = {}, set()
        return [task for task in tasks if task.id in began], [task for task in tasks if task.id not in began]


def lost_outcome(task: Task, where: str, cause: str, *, pid: int, hostname: str | None = None,
                 then: str = "") -> Outcome:
    """How a task a lost manager had begun ends: NodeManagerLost (Parsl's ``ManagerLost``), so
    ``retries=`` decides. ``where`` names the manager in the message, ``cause`` says what became of
    it, ``then`` what happens next (appended after a semicolon)."""
    return Outcome(False, error=NodeManagerLost(
        f"task {task.id} was lost with its node manager {where}, which {cause}" + (f"; {then}" if then else ""),
        task_id=task.id, pid=pid, cause=cause, hostname=hostname))


class Tracked(Protocol):
    """What :func:`receive` needs of a driver's record of one manager."""

    name: str  # how log lines name it ("pid 812", "node3:812 (block 2)")
    fatal: str | None  # what its Fatal said: the cause of its loss, which follows
    ledger: Ledger


def receive(manager: Tracked, message: Message, takes: tuple[type, ...]) -> Settled | Message | None:
    """One message from ``manager``, by the rules both drivers share.

    Returns what is left for the driver: :class:`Settled` for a Result or Failed of a task the
    manager held, the message itself when its type is in ``takes`` (what the driver tracks of a
    manager: ``Heartbeat``, ``Started``, ``Drain``), else None (handled here: ``Began``, ``Log``,
    ``Fatal``, a dropped result, a type a manager never sends, logged and ignored).
    """
    if isinstance(message, (Result, Failed)):
        return manager.ledger.settle(message, manager.name)
    if isinstance(message, Began):
        manager.ledger.begin(message.task_ids)
    elif isinstance(message, takes):
        return message
    elif isinstance(message, Log):
        relog(manager.name, message)
    elif isinstance(message, Fatal):
        manager.fatal = message.message  # it exits next; its loss follows and names this
        logger.error("node manager %s: %s", manager.name, message.message)
    else:
        logger.error("node manager %s sent %s, which a manager never sends; ignored", manager.name,
                     type(message).__name__)
    return None


def relog(manager_name: str, message: Log) -> None:
    """A manager's log record, logged here under its own logger's name (outside the package: the manager's)."""
    name = message.logger if message.logger.startswith("scalpel_executor") else "scalpel_executor.manager"
    logging.getLogger(name).log(message.level, "[node manager %s] %s", manager_name, message.text)
