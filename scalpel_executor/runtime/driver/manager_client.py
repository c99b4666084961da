"""The driver's side of a node manager: a pool (:mod:`scalpel_executor.runtime.contract`) in another process.

:class:`ManagerClient` starts ``python -m scalpel_executor.runtime.node.manager`` (the ``scalpel-manager``
console script) with one end of a private ``socketpair`` (no listening socket, no address, no file
anyone else could open), configures it (``Configure``: the topology and the
:class:`~scalpel_executor.runtime.options.PoolOptions`, heartbeats included), and from then on only
sends tasks and reads what comes back. It keeps the pool contract
(:mod:`scalpel_executor.runtime.contract`) as :class:`~scalpel_executor.runtime.node.pool.WorkerPool`
does, with each task's placement (slot, domain, CPU, start time) filled into its ``Job``.

Data flow::

    submit(Task) (any thread) ── ledger.hold(task) ── Submit ──> outbox ──> manager socket ──┐
                                  (runtime.wire.outbox: its sender thread writes what   │
                                   accumulated as one frame)                       v
    on_complete(task, Outcome) <── reader thread <── frames of Began / Result / Failed / Heartbeat / Log / Fatal
                                        │             (runtime.driver.ledger.receive: the rules the hub shares)
                                        │
                                        └── EOF, malformed message, or silent for heartbeat_threshold:
                                            the manager is lost: SIGKILL it, start a replacement and send
                                            it the outstanding tasks no Began named (they never ran), then
                                            fail each task it had begun once with NodeManagerLost
                                        └── a replacement lost before its Started: start another after
                                            a back-off (0.5 s, doubling) and send it the tasks the dead
                                            one held, unspent; give up after MAX_REPLACEMENT_STARTS in a row

The reader thread is the only reader (it takes every whole frame the socket holds in one read:
``LocalManager.read_frames``); it calls ``on_complete`` itself, holding no lock (Parsl's
callbacks may submit again, and a retry goes to the replacement). A task is in the client's one
:class:`~scalpel_executor.runtime.driver.ledger.Ledger` (outstanding) from the moment ``submit`` accepts
it until exactly one outcome is delivered: from the manager, from the loss of the manager it was
sent to, or from shutdown. A result for a task that is not outstanding (a duplicate, or one for a
task already failed) is dropped and logged.

A manager names the tasks of each dispatch pass (``Began``) before it sends them to its workers,
and messages arrive in order, so when a manager is lost the outstanding tasks no ``Began`` named
never ran on it: they go to the replacement without costing a retry, and only the tasks it had
begun fail with ``NodeManagerLost``. (Before: every task it held failed, started or not; five
kills used up the retries of 1,062 tasks.)

``start(wait=False)`` (what the executor, so ``parsl.load()``, uses) returns once the process is
launched; the reader thread reads the manager's ``Started`` like any later message. A manager
runs no task before it has sent ``Started`` (it holds earlier Submits until then), and messages
arrive in order, so a replacement that ends before its ``Started`` was read ran none of the tasks
sent to it: they go to the next replacement without costing a retry. The first manager is treated
as a replacement when a signal ends it before ``Started``; when it says why it cannot start
(``Fatal``) or exits by itself (a failing ``worker_init``), the client gives up at once, failing
every task with ExecutorFailed naming the cause (what ``start(wait=True)`` raises). Replacements are
started again (a SIGKILL during start, a transient fork or import failure), and only after
``MAX_REPLACEMENT_STARTS`` in a row fail does the client give up: every unfinished task fails with
``ExecutorFailed`` naming the last cause, and ``submit`` raises it. (Before: the first replacement
killed while it started ended the executor for good.)

The manager's stderr (its own and its workers') comes back through a pipe and is written to this
process's stderr; its last lines name the cause when the manager cannot start.
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from multiprocessing.connection import Connection

from scalpel_executor.core.cpulist import format_cpu_list
from scalpel_executor.core.tasks import Task
from scalpel_executor.core.domains import Topology
from scalpel_executor.runtime.contract import OnComplete, Outcome
from scalpel_executor.runtime.errors import ExecutorFailed, ExecutorShutdown
from scalpel_executor.runtime.driver.ledger import Ledger, Settled, lost_outcome, receive
from scalpel_executor.runtime.driver.manager_process import LocalManager
from scalpel_executor.runtime.wire.manager_messages import (Configure, Heartbeat, Lengthen, ManagerConfig, Shutdown,
                                                       Started, decode_frame, encode, submit_row)
from scalpel_executor.runtime.threads import name_this_thread
from scalpel_executor.runtime.options import PoolOptions
from scalpel_executor.runtime.node.pool import NO_WORKERS_LEFT, READY_TIMEOUT, RESPAWNS_KEPT, start_timeout
from scalpel_executor.runtime.node.processes import OWN_GROUP

__all__ = ["ManagerClient"]

logger = logging.getLogger(__name__)

START_TIMEOUT = READY_TIMEOUT + 30.0  # seconds: the manager's imports plus its workers' start (no more workers than CPUs)
INIT_POLL = 1.0  # seconds between looks at whether worker_init is still running (its time has no limit)
MAX_REPLACEMENT_STARTS = 5  # replacements in a row lost before Started, after which the client gives up
REPLACEMENT_BACKOFF = 0.5  # seconds before starting the second of them, doubling for each later one


class ManagerClient:
    """A :class:`~scalpel_executor.runtime.node.pool.WorkerPool` run by a node manager process.

    Parameters
    ----------
    topology : Topology
        What the manager's pool schedules for (resolved in the driver).
    options : PoolOptions
        Sent to the manager as they are; ``heartbeat_period`` is how often it heartbeats (its
        heartbeats carry its worker pids, ``respawns``, ``respawn_seconds`` and ``retired_slots``,
        also sent as soon as they change), ``heartbeat_threshold`` the silence after which a
        started manager is declared lost and killed.
    on_complete : callable(Task, Outcome)
        Called once per task, on the reader thread, holding no lock.
    env : mapping, optional
        The manager's environment (default this process's); workers get it plus ``worker_env``.
    log_dir : str, optional
        The executor's log directory (``<run_dir>/<label>``): the manager's ``--log-dir``, below which
        it and its workers write their log files (:mod:`scalpel_executor.runtime.logs`); None: none.
    cpus : sequence of int, optional
        The CPUs the manager (and so its workers) may use, its ``--cpus``; given while the driver's
        threads are pinned to one (``pin_driver``), which the manager would inherit. None: the driver's.
    """

    def __init__(self, topology: Topology, options: PoolOptions, on_complete: OnComplete, *,
                 env: Mapping[str, str] | None = None, worker_init: str | None = None, log_dir: str | None = None,
                 cpus: Sequence[int] | None = None):
        self.topology = topology
        self.options = options
        self._configure = encode(Configure(ManagerConfig.of_driver(topology).to_dict(), options.to_dict()))
        self._env = dict(os.environ if env is None else env)
        # the manager's own start, longer where its workers outnumber the CPUs (pool.start_timeout)
        self._start_timeout = START_TIMEOUT + start_timeout(len(topology.cpus)) - start_timeout(1)
        self._worker_init = worker_init  # shell commands run before the manager (and so its workers) starts
        self._log_dir = log_dir
        self._cpus = None if cpus is None else format_cpu_list(sorted(cpus))  # the manager's --cpus (pin_driver)
        self._on_complete = on_complete
        self._lock = threading.Lock()  # guards _manager, _stopping, _failure, and holding a task against them
        self._ledger = Ledger()  # the outstanding tasks: what the current manager holds
        self._manager: LocalManager | None = None
        self._stopping = False
        self._failure: str | None = None  # why no task can run any more (no replacement could start)
        self._stop_requested = threading.Event()  # shutdown() was called: a back-off ends at once
        self._failed_starts = 0  # replacements in a row lost before Started (the reader's)
        self._reader: threading.Thread | None = None
        self._worker_pids: list[int] = []
        self._slot_cpus: list[tuple[int, ...]] = []
        # As the current manager's pool reported them (heartbeats, and at once when they change):
        self.respawns = 0  # workers respawned
        self.respawn_seconds: deque[float] = deque(maxlen=RESPAWNS_KEPT)  # death noticed -> replacement ready
        self.retired_slots: set[int] = set()  # slots whose replacements kept dying before "ready"
        self.managers_lost = 0
        self.frames_read = 0  # frames (or lone messages) read from every manager: the channel's cost, which is per read
        self.messages_read = 0  # the messages in them: per frame, how well a manager's messages shared their frames
        self.manager_topology: dict | None = None  # what the manager said it schedules for
        self._first_start = threading.Event()  # the first manager started, or could not
        self._start_failure: str | None = None  # why the first manager could not start

    # -- lifecycle --------------------------------------------------------------------------

    def start(self, wait: bool = True) -> None:
        """Start the manager; with ``wait``, until it reports its workers ready.

        Without ``wait`` it returns as soon as the process is launched (milliseconds; what
        ``parsl.load()`` pays, as HTEX returns before its workers connect): tasks submitted
        meanwhile are held by the manager until its workers are warm, and a manager that cannot
        start fails them with ExecutorFailed naming why, as :meth:`wait_started` raises it.

        Raises RuntimeError naming the manager's exit status and its last error output (or its
        own report: a bad policy, workers that cannot start) if it does not get there (``wait``).
        """
        manager = self._launch()
        with self._lock:
            self._manager = manager
        self._reader = threading.Thread(target=self._read_loop, name="scalpel-manager-reader", daemon=True)
        self._reader.start()
        # As WorkerPool: at interpreter exit, unfinished tasks end as ExecutorShutdown and the manager goes.
        atexit.register(self.shutdown)
        if wait:
            self.wait_started()

    def wait_started(self, timeout: float | None = None) -> bool:
        """Wait until the first manager has started its workers (True) or ``timeout`` passed (False).

        Raises RuntimeError naming why the manager could not start; the client is then shut down."""
        if not self._first_start.wait(timeout):
            return False
        with self._lock:
            failure = self._start_failure
            if failure is not None:
                self._stopping = True
        if failure is not None:
            raise RuntimeError(failure)
        return True

    def _initialising(self, manager: LocalManager) -> bool:
        """Whether ``manager`` still runs ``worker_init``: its shell has not yet become the manager.
        HTEX waits for its worker_init however long it takes, and so does the start here: the
        START_TIMEOUT for the manager's own start counts from then (a 100 s ``module load`` was
        killed at 90 s and tried again five times)."""
        if not self._worker_init or manager.process.poll() is not None:
            return False
        try:
            with open(f"/proc/{manager.pid}/cmdline", "rb") as cmdline:
                return cmdline.read().split(b"\0", 1)[0] == b"/bin/bash"
        except OSError:  # no /proc (macOS): the deadline holds as it is
            return False

    def _launch(self) -> LocalManager:
        """Start a manager process and send it its configuration; it reports Started later."""
        ours, theirs = socket.socketpair()
        command = [sys.executable, "-m", "scalpel_executor.runtime.node.manager", "--fd", str(theirs.fileno()),
                   "--parent", str(os.getpid())] + (["--log-dir", self._log_dir] if self._log_dir else []) \
            + (["--cpus", self._cpus] if self._cpus else [])
        if self._worker_init:  # as HTEX's: the commands run first, in the shell that then becomes the manager
            command = ["/bin/bash", "-c", f'{self._worker_init}\nexec "$0" "$@"', *command]
        try:
            # Its own process group: a terminal's Ctrl-C reaches the driver, which shuts the manager down.
            process = subprocess.Popen(command, pass_fds=(theirs.fileno(),), env=self._env, **OWN_GROUP,
                                       stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        initialising = bool(self._worker_init)
        manager = LocalManager(process, Connection(ours.detach()), self._ledger, initialising=initialising,
                               started_by=time.monotonic() + (INIT_POLL if initialising else self._start_timeout))
        manager.start_forwarding()
        manager.send_encoded(self._configure)
        logger.debug("started node manager pid %d", process.pid)
        return manager

    def submit(self, task: Task) -> None:
        """Send a task whose payload is a :class:`~scalpel_executor.runtime.contract.Job` (thread-safe).

        Raises ExecutorShutdown after shutdown, ExecutorFailed once no manager can run tasks.
        """
        message = submit_row(task)
        with self._lock:
            if self._failure is not None:
                raise ExecutorFailed(self._failure)
            if self._slot_cpus and len(self.retired_slots) >= len(self._slot_cpus):
                raise ExecutorShutdown(NO_WORKERS_LEFT)  # the manager's pool gave up every slot
            if self._stopping or self._manager is None:
                raise ExecutorShutdown("the executor is shut down; no new tasks are accepted" if self._stopping
                                       else "the node manager has not been started; call start() first")
            manager = self._manager
            self._ledger.hold(task)
        manager.put(message)  # if it is gone, the reader fails this task with NodeManagerLost

    def lengthen(self, task_id: int, tail: float, wide_tail: float) -> None:
        """Tell the manager the chain behind task ``task_id`` grew (queued after its Submit, in order);
        nothing once the manager is stopping or gone."""
        with self._lock:
            manager = None if self._stopping or self._failure is not None else self._manager
        if manager is not None:
            manager.put(Lengthen(task_id, float(tail), float(wide_tail)))

    def shutdown(self, timeout: float = 10.0) -> None:
        """Fail unfinished tasks with ExecutorShutdown and end the manager and its workers. Idempotent."""
        with self._lock:
            already, self._stopping = self._stopping, True
            manager = self._manager
        self._stop_requested.set()
        atexit.unregister(self.shutdown)
        if manager is None or already and self._reader is None:
            return
        manager.send(Shutdown())
        reader = self._reader
        if reader is not None and reader is not threading.current_thread():
            reader.join(timeout)
            if reader.is_alive():
                logger.error("node manager pid %d did not end within %.0f s of shutdown; killing it",
                             manager.pid, timeout)
                manager.kill()
                reader.join(timeout)
        if reader is None:  # never started: nothing but the process to end
            manager.kill()
            self._fail_outstanding(lambda task: ExecutorShutdown(
                f"task {task.id} had not started when the executor shut down"))
        with self._lock:
            manager = self._manager
        manager.stop_forwarding()

    @property
    def worker_pids(self) -> list[int]:
        """The manager's workers, as of its latest heartbeat."""
        return list(self._worker_pids)

    @property
    def slot_cpus_map(self) -> list[tuple[int, ...]]:
        return list(self._slot_cpus)

    def driver_threads(self) -> list[threading.Thread]:
        """This client's threads in the driver's process: its reader, and the current manager's sender."""
        manager = self._manager
        return [thread for thread in (self._reader, None if manager is None else manager.outbox.thread)
                if thread is not None]

    @property
    def pid(self) -> int | None:
        """The current manager process's pid (None before start)."""
        manager = self._manager
        return None if manager is None else manager.pid

    # -- the reader thread ------------------------------------------------------------------

    def _read_loop(self) -> None:
        name_this_thread("reader")
        try:
            while (manager := self._manager) is not None:
                timeout = self.options.heartbeat_threshold if manager.started \
                    else max(0.0, manager.started_by - time.monotonic())
                try:
                    if not manager.readable(timeout):
                        if not manager.started and manager.initialising:  # worker_init runs: no deadline yet
                            manager.initialising = self._initialising(manager)
                            manager.started_by = time.monotonic() + (INIT_POLL if manager.initialising
                                                                     else self._start_timeout)  # its own start, from now
                            continue
                        if not self._lost(manager, f"was silent for {timeout:.0f} s and was killed" if manager.started
                                          else f"did not start within {self._start_timeout:.0f} s and was killed"):
                            return
                        continue
                    frames = manager.read_frames()
                except (EOFError, OSError):
                    if not self._lost(manager, None):
                        return
                    continue
                for data in frames:
                    try:
                        messages = decode_frame(data)
                        self.frames_read += 1
                        self.messages_read += len(messages)
                    except ValueError as error:
                        # The rows before a malformed one were sent before it: they count (a Began among them
                        # says its tasks may have run), as the messages before a malformed one did; the
                        # frames after it are the killed manager's.
                        for message in getattr(error, "messages", ()):
                            self._handle(manager, message)
                        logger.error("node manager pid %d sent a malformed message: %s", manager.pid, error)
                        if not self._lost(manager, f"sent a malformed message ({error}) and was killed"):
                            return
                        break
                    for message in messages:
                        self._handle(manager, message)
        except BaseException as error:  # noqa: BLE001 - a bug here must not leave futures pending forever
            logger.exception("the node manager's reader thread failed; failing every unfinished task")
            with self._lock:
                self._failure = (f"the executor's reader thread failed with {error!r} (a bug: please report it "
                                 f"with the log); no new tasks are accepted")
                manager = self._manager
            if manager is not None:
                manager.kill()
            self._fail_outstanding(lambda task: ExecutorFailed(f"task {task.id} was lost: {self._failure}"))

    def _handle(self, manager: LocalManager, message) -> None:
        reading = receive(manager, message, (Heartbeat, Started))
        if isinstance(reading, Settled):
            self._deliver(*reading)
        elif isinstance(reading, Heartbeat):
            self._worker_pids, self.respawns = list(reading.worker_pids), reading.respawns
            self.respawn_seconds = deque(reading.respawn_seconds, maxlen=RESPAWNS_KEPT)
            self.retired_slots = set(reading.retired_slots)
        elif isinstance(reading, Started):
            manager.started = True
            self._first_start.set()
            self._failed_starts = 0
            self._worker_pids = list(reading.worker_pids)
            self._slot_cpus = [tuple(cpus) for cpus in reading.slot_cpus]
            self.manager_topology = reading.topology
            self.respawns, self.respawn_seconds, self.retired_slots = 0, deque(maxlen=RESPAWNS_KEPT), set()
            logger.info("node manager pid %d started %d workers", reading.pid, len(reading.worker_pids))

    def _lost(self, manager: LocalManager, cause: str | None) -> bool:
        """The manager is gone or given up on; True when the reader goes on with a replacement."""
        code = manager.kill()
        # Before it started, as start() said it: its own report, else how it ended.
        start_failure = manager.fatal or (f"it {cause}" if cause else f"it {manager.exit_cause(code)} before it started")
        cause = cause or manager.exit_cause(code)
        if manager.fatal:
            cause += f" after reporting: {manager.fatal}"
        with self._lock:
            stopping, started = self._stopping, manager.started
            lost: list[Task] = []
            if started and not stopping:
                lost, unbegun = self._ledger.lose()
                for task in unbegun:  # they never ran: the replacement takes them, unspent
                    self._ledger.hold(task)
                self._worker_pids = []
        if stopping:
            self._fail_shutdown()
            return False
        if not started and not self._first_start.is_set() and (manager.fatal or code > 0):
            # The first manager said why it cannot start, or exited by itself: its configuration, its
            # environment or worker_init, which a replacement would meet again. A signal is bad luck.
            self._give_up(f"the node manager (pid {manager.pid}) could not start: {start_failure}{manager.tail()}")
            return False
        if started:
            self.managers_lost += 1
            failure = None
        else:  # it ran none of the tasks it held (none starts before Started): the next one takes them
            self._failed_starts += 1
            failure = (f"the node manager (pid {manager.pid}) that replaced a lost one could not start: {cause}"
                       f"{manager.tail()}")
            logger.warning("%s (%d of %d in a row)", failure, self._failed_starts, MAX_REPLACEMENT_STARTS)
        replacement = self._replace(failure)  # before failing them: a retry needs a manager
        if started:
            taker = (f"a new manager (pid {replacement.pid}) takes later tasks" if replacement is not None
                     else "no new manager could be started")
            logger.error("node manager pid %d was lost (%s); the %d tasks it had started fail with ManagerLost; %s",
                         manager.pid, cause, len(lost), taker)
            for task in lost:
                self._deliver(task, lost_outcome(task, f"(pid {manager.pid})", cause, pid=manager.pid, then=taker))
        return replacement is not None

    def _replace(self, failure: str | None) -> LocalManager | None:
        """Start a replacement manager and send it every outstanding task (those a manager lost before
        its Started held), after a back-off when replacements have been failing; None once
        MAX_REPLACEMENT_STARTS in a row failed (every unfinished task then fails) or on shutdown."""
        while True:
            if self._failed_starts >= MAX_REPLACEMENT_STARTS:
                self._give_up(f"{self._failed_starts} node managers in a row could not start to replace a lost "
                              f"one; the last: {failure}")
                return None
            if self._failed_starts and self._stop_requested.wait(
                    REPLACEMENT_BACKOFF * 2 ** (self._failed_starts - 1)):
                self._fail_shutdown()
                return None
            with self._lock:
                # Under the lock, so shutdown() either stops this replacement or sees it, and a submit
                # goes to the lost manager (and is sent on below) or to the replacement.
                if self._stopping:
                    replacement = None
                else:
                    try:
                        replacement = self._manager = self._launch()
                    except OSError as error:  # fork or exec failed (EAGAIN, ENOMEM): try again
                        replacement, failure = None, f"a node manager could not be launched: {error}"
                        self._failed_starts += 1
                        logger.warning("%s (%d of %d in a row)", failure, self._failed_starts,
                                       MAX_REPLACEMENT_STARTS)
                        continue
                    waiting = self._ledger.tasks()
            if replacement is None:
                self._fail_shutdown()
                return None
            for task in waiting:  # outside the lock: a starting manager reads its socket only once imported
                replacement.put(submit_row(task))
            if waiting:
                logger.info("node manager pid %d takes the %d tasks its lost predecessor had not started",
                            replacement.pid, len(waiting))
            return replacement

    def _give_up(self, failure: str) -> None:
        first = not self._first_start.is_set()
        with self._lock:  # before the waiter wakes: a submit after start() raised sees ExecutorFailed
            self._failure = failure + "; no new tasks are accepted"
            if first:  # what start() raises when it waits
                self._start_failure = failure
        if first:
            self._first_start.set()
        failure = self._failure
        logger.error("%s", failure)
        self._fail_outstanding(lambda task: ExecutorFailed(f"task {task.id} cannot run: {failure}"))

    def _fail_shutdown(self) -> None:
        self._fail_outstanding(lambda task: ExecutorShutdown(
            f"task {task.id} had not finished when the executor shut down"))

    def _fail_outstanding(self, error_for: Callable[[Task], BaseException]) -> None:
        with self._lock:
            unfinished = self._ledger.take_all()
        for task in unfinished:
            self._deliver(task, Outcome(False, error=error_for(task)))

    def _deliver(self, task: Task, outcome: Outcome) -> None:
        try:
            self._on_complete(task, outcome)
        except BaseException:  # noqa: BLE001 - not even SystemExit from a callback may stop the others
            logger.exception("completion callback failed for task %s", task.id)
