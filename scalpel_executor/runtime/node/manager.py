"""The node manager: one process that owns everything of one node (``scalpel-manager``).

It runs a :class:`~scalpel_executor.runtime.node.pool.WorkerPool` — topology, pinned workers, the
scheduler, batching, the probe's workers, walltime kills, respawn, worker deaths — in a process of
its own, so none of that shares the driver's interpreter (and its GIL) with Parsl's DataFlowKernel.
The driver talks to it through :class:`~scalpel_executor.runtime.driver.manager_client.ManagerClient`
over one inherited socket end; the messages are defined in
:mod:`scalpel_executor.runtime.wire.manager_messages`. Learning stays in the driver: the manager sends
each task's measurements back with its result and never estimates anything.

Data flow::

    driver socket ──> main thread: Configure(config, options) ──> WorkerPool(config.topology(), options)
                        │                                   start thread: pool.start() ──> Started / Fatal
                        ├─ Submit ──> Task(payload=Job) ──> pool.submit ──> dispatch thread ──> workers
                        ├─ Lengthen ──> pool.lengthen: the chain behind a task not started grew
                        │     (held in the manager until Started is sent: none starts before the driver knows;
                        │      each dispatch pass sends Began(ids) before its Runs: the driver knows what started)
                        ├─ Shutdown ──> pool.shutdown(): unfinished tasks fail (ExecutorShutdown) ─┐
                        └─ EOF (driver gone) ──> pool.shutdown(), exit                             │
    pool's dispatch thread: on_complete(task, outcome) ──> Result / Failed ──> outbox ──> driver socket <──┘
      (the pool calls it inline, with no completion thread, and holds the outbox for each pass
       (runtime.wire.outbox.holding): the pass's Results go with the Began it sends before its
       tasks reach their workers, or as one frame at the pass's end; the sender thread writes what
       other threads put, many to a frame under a burst)
    watch thread: every PARENT_CHECK_INTERVAL s the driver's pid; every heartbeat_period a Heartbeat
    logging (scalpel_executor.*) ──> Log messages ──> re-logged by the driver under the same names

The manager never opens a listening or network socket: its only channel is the socket end it was
started with (``--fd``), and its workers' private socket pairs. It outlives nothing: EOF on that
socket, a ``Shutdown``, or its parent's pid changing (the driver was killed while a process it
forked still holds the socket) all end its workers and the process. Its own workers watch its pid
in turn (:mod:`~scalpel_executor.runtime.worker.main`), so a SIGKILLed manager leaves no worker behind.

**Connect mode** (``--connect tcp://HOST:PORT --cert-dir DIR --block-id ID``, started by a
provider block in provider mode): the socket end is replaced by a
:class:`~scalpel_executor.runtime.wire.channel.ManagerLink` (a CurveZMQ DEALER with the client keys
read from ``DIR``). The manager speaks first (``Register``: block, host, version, pid, CPUs),
then everything is as above, with one difference in how it notices the driver is gone: there is
no parent to watch, so the link reports EOF when the TCP connection drops after the handshake, or
when the driver sent nothing (not even its ``Ping``) for ``--driver-threshold`` seconds. A driver
that refuses the key, or none answering within ``--connect-timeout``, ends the manager with status 2.
``--cpus`` confines the manager (and so its workers) to those CPUs before it detects its topology.

**Draining** (the pool options' ``drain_period``, HTEX's): that many seconds after the manager's
module was loaded (when the block's job began, near enough, as HTEX counts from its worker pool's
load) the watch thread sends ``Drain`` once. The driver deals it nothing more and, once it holds no
task, tells it to shut down, so the manager exits before its block's walltime with every task it
was given finished.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
import threading
import time
from multiprocessing.connection import Connection

from scalpel_executor import __version__
from scalpel_executor.core.cpulist import cpu_set, format_cpu_list
from scalpel_executor.core.resources import counted_memory
from scalpel_executor.core.tasks import Task
from scalpel_executor.host.sysfs import AFFINITY_UNAVAILABLE, allowed_cpus, set_affinity
from scalpel_executor.runtime.wire.channel import ManagerLink
from scalpel_executor.runtime.contract import Job, Outcome
from scalpel_executor.runtime.errors import ExecutorFailed, ExecutorShutdown
from scalpel_executor.runtime.logs import LOG_DIR_ENV, log_to_file, node_log_dir
from scalpel_executor.runtime.wire.manager_messages import (Began, Configure, Drain, Failed, Fatal, Heartbeat, Lengthen,
                                                       Log, ManagerConfig, Message, Register, Result, Shutdown,
                                                       Started, Submit, decode_frame, describe_error, task_of)
from scalpel_executor.runtime.options import HEARTBEAT_PERIOD, HEARTBEAT_THRESHOLD, PoolOptions
from scalpel_executor.runtime.wire.outbox import Outbox
from scalpel_executor.runtime.node.pool import LOCAL_BLOCK_ID, WorkerPool, new_pool_id
from scalpel_executor.runtime.wire.worker_messages import PARENT_CHECK_INTERVAL
from scalpel_executor.runtime.threads import name_this_thread

__all__ = ["NodeManager", "main"]

logger = logging.getLogger("scalpel_executor.runtime.node.manager")  # not __name__: run as __main__ (-m)

CONFIGURE_TIMEOUT = 60.0  # seconds the manager waits for its first message before giving up
SHUTDOWN_TIMEOUT = 10.0  # seconds pool.shutdown may take to join its threads
LOADED = time.monotonic()  # drain_period counts from here, as HTEX's manager counts from its script's load


class _ToDriver(logging.Handler):
    """Sends the manager's log records to the driver, which logs them under the same names."""

    def __init__(self, manager: "NodeManager", level: int):
        super().__init__(level)
        self._manager = manager

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
            if record.exc_info:
                text += "\n" + logging.Formatter().formatException(record.exc_info)
            self._manager.send(Log(record.levelno, record.name, text))
        except Exception:  # noqa: BLE001 - a log record must never fail the code that logs it
            pass


class NodeManager:
    """One node's worker pool, driven by messages from one connection.

    Parameters
    ----------
    connection : Connection or ManagerLink
        The manager's end of the socket pair the driver holds the other end of, or its link to a
        driver over the network (connect mode).
    parent_pid : int or None
        The driver's pid; the manager ends its workers and exits when its parent changes. None in
        connect mode, where the link reports the driver's loss.
    register : Register, optional
        Connect mode: the first message, sent before anything is read.
    configure_timeout : float
        Seconds to wait for the driver's configuration.
    pool_id : str, optional
        This manager's id (HTEX's worker pool ``uid``; in connect mode also its routing id at the
        driver), given to each worker as ``PARSL_WORKER_POOL_ID``; made here when not given.
    """

    def __init__(self, connection, parent_pid: int | None, *, register: Register | None = None,
                 configure_timeout: float = CONFIGURE_TIMEOUT, pool_id: str | None = None):
        self._connection = connection
        self._parent_pid = parent_pid
        self._register = register
        self.pool_id = pool_id or new_pool_id()
        self.block_id = register.block_id if register is not None else LOCAL_BLOCK_ID  # PARSL_WORKER_BLOCK_ID
        self._configure_timeout = configure_timeout
        self._send_lock = threading.Lock()  # the connection's writes and its closing
        self._outbox = Outbox(self._write)  # Results and Faileds, many to a frame under a burst
        self._pool: WorkerPool | None = None
        self._started = threading.Event()
        # Submits that arrive before Started is sent wait here (then None): a manager whose Started
        # its driver never read has run none of its tasks, so a replacement may take them unspent.
        self._early: list[Submit | Lengthen] | None = []
        self._early_lock = threading.Lock()
        self._ending = threading.Event()
        self._heartbeat_period = HEARTBEAT_PERIOD  # until the driver's options say otherwise
        self._drain_at = float("inf")  # when to send Drain (LOADED + drain_period); inf: never, or sent

    def send(self, message: Message) -> None:
        """Send one message to the driver now, after what is queued; a driver that is gone makes this a
        no-op (the reader sees EOF)."""
        self._outbox.send(message)

    def _write(self, data: bytes) -> None:
        with self._send_lock:
            if not self._connection.closed:
                self._connection.send_bytes(data)

    def run(self) -> int:
        """Serve the driver until it says shutdown or goes away; the process's exit status."""
        name_this_thread("receive")
        if self._register is not None:
            self.send(self._register)
        if not self._connection.poll(self._configure_timeout):
            print(f"scalpel-manager: no configuration from the driver within {self._configure_timeout:.0f} s"
                  + (f" (is {self._connection.url} reachable from this node, and its port open?)"
                     if self._register is not None else ""), file=sys.stderr)
            self._close_link()
            return 2
        later: list[Message] = []  # what came in the configuration's frame after it
        try:
            first, *later = decode_frame(self._connection.recv_bytes())
        except (EOFError, OSError) as error:
            if getattr(self._connection, "refused", None):
                print(f"scalpel-manager: {error}", file=sys.stderr)
                self._close_link()
                return 2
            return 0  # the driver went away before configuring us: nothing to end
        except ValueError as error:
            first = error
        if isinstance(first, Shutdown) and self._register is not None:
            print(f"scalpel-manager: the driver at {self._connection.url} refused this manager before configuring "
                  f"it; a driver refuses managers of another scalpel-executor version than its own (this one runs "
                  f"{self._register.version}): its log says why", file=sys.stderr)
            self._close_link()
            return 2
        if not isinstance(first, Configure):
            self.send(Fatal(f"the node manager's first message must configure it, got {first!r:.200}"))
            return 2
        try:
            config, options = ManagerConfig.from_dict(first.config), PoolOptions.from_dict(first.options)
            self._pool = self._make_pool(config, options)
        except Exception as error:  # noqa: BLE001 - every configuration error goes back to the driver
            self.send(Fatal(f"the node manager could not be configured: {type(error).__name__}: {error}"))
            return 2
        self._heartbeat_period = options.heartbeat_period
        if options.drain_period is not None:
            self._drain_at = LOADED + options.drain_period
        threading.Thread(target=self._start_pool, name="scalpel-manager-start", daemon=True).start()
        threading.Thread(target=self._watch, name="scalpel-manager-watch", daemon=True).start()
        return self._serve(later)

    def _close_link(self) -> None:
        with self._send_lock:
            self._connection.close()

    def _make_pool(self, config: ManagerConfig, options: PoolOptions) -> WorkerPool:
        # The driver's import path first: workers inherit it (SCALPEL_SYS_PATH) to unpickle its functions.
        sys.path[:] = list(dict.fromkeys([*config.sys_path, *sys.path]))
        handler = _ToDriver(self, config.log_level)
        package = logging.getLogger("scalpel_executor")
        package.addHandler(handler)
        package.setLevel(min(config.log_level, package.getEffectiveLevel()))  # manager.log keeps INFO
        package.propagate = False
        topology = config.topology()
        missing = sorted(set(topology.cpus) - allowed_cpus())
        if missing:
            logger.warning("the driver's topology names CPUs %s that this node does not let its manager use; its %d "
                           "slots are laid over this node's CPUs %s; leave topology= out to let each node detect "
                           "its own", format_cpu_list(missing), len(topology.cpus),
                           format_cpu_list(sorted(allowed_cpus())))
        return WorkerPool(topology, options, self._send_outcome, on_state=self._report_state,
                          on_start=self._report_began, pool_id=self.pool_id, block_id=self.block_id,
                          inline=True, pass_scope=self._outbox.holding)

    def _start_pool(self) -> None:
        name_this_thread("start")
        pool = self._pool
        try:
            pool.start()
        except Exception as error:  # noqa: BLE001 - the driver's start() reports it
            cause = f"the node manager could not start its workers: {error}"
            if not self._ending.is_set():
                self.send(Fatal(cause))
            self._end(1, cause)
            return
        with self._early_lock:
            self._started.set()
            self.send(Started(os.getpid(), pool.worker_pids, [list(cpus) for cpus in pool.slot_cpus_map],
                              pool.topology.to_dict(), float(pool.memory_budget), len(pool.options.accelerators)))
            early, self._early = self._early, None
            for message in early or ():  # None: the manager is ending, and _end failed them
                self._take(message)

    def _serve(self, messages: list[Message]) -> int:
        """Take the driver's messages until Shutdown or EOF (the main thread), ``messages`` first."""
        while True:
            for message in messages:
                if isinstance(message, (Submit, Lengthen)):
                    with self._early_lock:
                        if self._early is not None:
                            self._early.append(message)
                            continue
                    self._take(message)
                elif isinstance(message, Shutdown):
                    return self._end(0)
                else:
                    self.send(Fatal(f"the node manager cannot act on {type(message).__name__} from the driver"))
                    return self._end(2)
            try:
                data = self._connection.recv_bytes()
            except (EOFError, OSError):
                logger.debug("the driver closed its end; ending every worker")
                return self._end(0)
            try:
                messages = decode_frame(data)
            except ValueError as error:
                self.send(Fatal(f"the node manager received a malformed message: {error}"))
                return self._end(2)

    def _take(self, message: Submit | Lengthen) -> None:
        if isinstance(message, Lengthen):  # after its task's Submit, in the pool's inbox as here
            self._pool.lengthen(message.task_id, message.tail, message.wide_tail)
        else:
            self._submit(message)

    def _submit(self, message: Submit) -> None:
        """Hand one task to the pool; a pool that gave up (no worker left, a bug) fails it unstarted."""
        task = task_of(message)
        # Memory the task did not declare (learned) counts at most this node's budget.
        task.memory = counted_memory(task.memory, bool(task.payload.memory_limit), self._pool.memory_budget)
        try:
            self._pool.submit(task)
        except (ExecutorShutdown, ExecutorFailed) as error:
            kind, detail = describe_error(error)
            self._outbox.put(Failed(message.task_id, kind, str(error), detail, None, None, None, None))

    def _end(self, status: int, cause: str | None = None) -> int:
        """Fail unfinished tasks (sent back as ExecutorShutdown, or as ExecutorFailed naming ``cause``
        when the manager could not start), end every worker and exit."""
        self._ending.set()
        logger.info("node manager pid %d ending (exit status %d)", os.getpid(), status)
        with self._early_lock:
            early, self._early = self._early or [], None
        for message in (message for message in early if isinstance(message, Submit)):
            kind, text = ("ExecutorShutdown", f"task {message.task_id} had not started when the node manager shut down") \
                if cause is None else ("ExecutorFailed", f"task {message.task_id} cannot run: {cause}")
            self._outbox.put(Failed(message.task_id, kind, text, {}, None, None, None, None))
        if self._pool is not None:
            self._pool.shutdown(SHUTDOWN_TIMEOUT)
        self._outbox.flush()  # every outcome the pool delivered, before the connection closes
        with self._send_lock:
            self._connection.close()
        logging.shutdown()
        # os._exit: the start thread may still sit in pool.start(); nothing of ours needs unwinding.
        os._exit(status)

    def _watch(self) -> None:
        name_this_thread("watch")
        next_beat = time.monotonic() + self._heartbeat_period
        while not self._ending.is_set():
            time.sleep(PARENT_CHECK_INTERVAL)
            if self._parent_pid is not None and os.getppid() != self._parent_pid:
                logger.debug("the driver (pid %d) is gone; ending every worker", self._parent_pid)
                self._end(0)
            if time.monotonic() >= next_beat:  # while its workers start too: a silent manager is lost
                next_beat = time.monotonic() + self._heartbeat_period
                self._report_state()
            if time.monotonic() >= self._drain_at:
                self._drain_at = float("inf")
                logger.info("drain_period over (%.0f s since this manager started): it takes no new task and "
                            "exits once those it holds are done", time.monotonic() - LOADED)
                self.send(Drain(time.monotonic() - LOADED))

    def _report_state(self) -> None:
        """A Heartbeat: the workers, and how respawns went (also the pool's on_state callback)."""
        pool = self._pool
        self.send(Heartbeat(pool.worker_pids, pool.respawns, list(pool.respawn_seconds), sorted(pool.retired_slots)))

    def _report_began(self, task_ids: list[int]) -> None:
        """The pool's start callback: sent before the tasks go to their workers, so the driver, if
        it loses this manager, knows that the tasks it held and that no Began named never ran."""
        self.send(Began(task_ids))

    def _send_outcome(self, task: Task, outcome: Outcome) -> None:
        """The pool's completion callback: the outcome as a Result or a Failed message."""
        job: Job = task.payload
        if outcome.error is None:
            self._outbox.put(Result(task.id, outcome.ok, outcome.stats, job.slot, job.domain, job.cpu, job.started,
                                    outcome.payload))
            return
        kind, detail = describe_error(outcome.error)
        self._outbox.put(Failed(task.id, kind, str(outcome.error), detail, job.slot, job.domain, job.cpu,
                                job.started, outcome.stats))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scalpel-manager",
        description="The node manager of scalpel-executor: runs one node's pinned workers and scheduler for a "
                    "driver, either through an inherited socket (local mode) or over the network (provider mode: "
                    "--connect). Started by ScalpelExecutor or by a provider block; not run by hand.")
    channel = parser.add_mutually_exclusive_group(required=True)
    channel.add_argument("--fd", type=int, help="descriptor of the inherited socket to the driver (local mode)")
    channel.add_argument("--connect", metavar="tcp://HOST:PORT", help="the driver's address (provider mode)")
    parser.add_argument("--parent", type=int, default=None,
                        help="local mode: pid of the driver; the manager ends its workers and exits when it goes "
                             "(default: the parent process)")
    parser.add_argument("--cert-dir", help="provider mode: the directory with the CurveZMQ keys the driver wrote")
    parser.add_argument("--block-id", default="", help="provider mode: the block this manager runs in")
    parser.add_argument("--cpus", default=None,
                        help="CPUs to confine the manager and its workers to, e.g. '0-3,8' (default: its affinity)")
    parser.add_argument("--connect-timeout", type=float, default=CONFIGURE_TIMEOUT,
                        help="provider mode: seconds to wait for the driver to answer (default %(default)s)")
    parser.add_argument("--log-dir", default="",
                        help="the executor's log directory, <run_dir>/<label>: this manager and its workers log "
                             "below it, in block-<block id>/<host>-<pid>/ (as HTEX's --logdir; default: no files)")
    parser.add_argument("--driver-threshold", type=float, default=HEARTBEAT_THRESHOLD,
                        help="provider mode: seconds of silence from the driver after which the manager ends "
                             "its workers and exits (default %(default)s)")
    args = parser.parse_args(argv)
    if args.cpus is not None:
        try:
            if not set_affinity(cpu_set(args.cpus)):
                parser.error(f"--cpus {args.cpus!r}: {AFFINITY_UNAVAILABLE}; leave --cpus out")
        except (ValueError, OSError) as error:
            parser.error(f"--cpus {args.cpus!r}: {error}")
    if args.log_dir:
        _log_below(args.log_dir, args.block_id)
    logger.info("node manager pid %d started on %s (block %s, scalpel-executor %s, Python %s)", os.getpid(),
                socket.gethostname(), args.block_id or "0", __version__, sys.version.split()[0])
    if args.connect is None:
        try:
            os.fstat(args.fd)
        except OSError:
            parser.error(f"--fd {args.fd} is not an open descriptor; the driver passes its socket end with pass_fds")
        manager = NodeManager(Connection(args.fd), args.parent if args.parent is not None else os.getppid())
        return manager.run()
    if not args.cert_dir:
        parser.error("--connect needs --cert-dir, the directory with the keys the driver wrote")
    stderr = logging.StreamHandler()
    stderr.setLevel(logging.WARNING)  # manager.log takes INFO
    logging.basicConfig(level=logging.WARNING, format="scalpel-manager %(asctime)s %(name)s %(levelname)s: %(message)s",
                        handlers=[stderr])
    pool_id = new_pool_id()  # its routing id at the driver too, as HTEX's manager's uid is
    try:
        link = ManagerLink(args.connect, args.cert_dir, driver_threshold=args.driver_threshold,
                           identity=pool_id.encode())
    except (ValueError, OSError) as error:
        print(f"scalpel-manager: {error}", file=sys.stderr)
        return 2
    register = Register(args.block_id, socket.gethostname(), __version__, os.getpid(),
                        sorted(allowed_cpus()))
    return NodeManager(link, None, register=register, configure_timeout=args.connect_timeout, pool_id=pool_id).run()


def _log_below(executor_dir: str, block_id: str) -> None:
    """This manager's records into manager.log below ``executor_dir``, its workers' beside it
    (:mod:`scalpel_executor.runtime.logs`); a directory that cannot be written costs the files only."""
    try:
        directory, problem = node_log_dir(executor_dir, block_id, socket.gethostname(), os.getpid())
        log_to_file(os.path.join(directory, "manager.log"))
    except OSError as error:
        print(f"scalpel-manager: no log files: {error}", file=sys.stderr)
        return
    os.environ[LOG_DIR_ENV] = directory  # its workers inherit it
    if problem is not None:
        logger.warning("%s; this node manager and its workers log to %s on this node instead", problem, directory)


if __name__ == "__main__":
    sys.exit(main())
