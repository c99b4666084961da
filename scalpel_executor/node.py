"""The node-level part: one pinned worker per core, one dispatch thread, one Scheduler.

This module knows nothing of Parsl: it moves opaque task buffers to workers and results back.
The Parsl-facing :class:`~scalpel_executor.executor.ScalpelExecutor` sits on top of it, and a
later multi-node mode runs one of these per node.

Data flow::

    submit() (any thread) ──> inbox (SimpleQueue) ──┐  + a byte on the wake pipe
                                                    v
                         dispatch thread ── collects arrivals for batch_window (or max_batch),
                           │                adds them to the Scheduler, calls dispatch()
                           │   ("task", id, buffer)        ┌──────────────────────┐
                           ├──────────────────────────────>│ worker, core 0       │ ...one per slot
                           │<──────────────────────────────│ (scalpel_executor.   │
                           │   ("result", id, ok, ...)     │  worker)             │
                           │                               └──────────────────────┘
                           └──> completions (SimpleQueue) ──> completion thread: on_complete(task, outcome)
                                                              (holding no lock; Parsl's callbacks run here)

The dispatch thread owns the Scheduler and the worker table outright, so neither needs a lock;
``submit`` only appends to the inbox and writes one byte to wake the thread. A worker that dies
mid-task fails that task alone (``WorkerDied``); its slot stays busy in the Scheduler until a
replacement on the same CPUs says it is ready.
"""

from __future__ import annotations

import logging
import os
import pickle
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from scalpel_executor.scheduling import Scheduler, Task, resolve_policy
from scalpel_executor.topology import Topology

logger = logging.getLogger(__name__)

THREAD_ENV_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")
READY_TIMEOUT = 60.0  # seconds a new worker may take to import and report ready


class WorkerDied(RuntimeError):
    """The worker process running a task died (signal, os._exit, out of memory)."""


class ExecutorShutdown(RuntimeError):
    """The executor was shut down before the task finished."""


@dataclass(eq=False)
class NodeTask:
    """A task as the node scheduler sees it. ``context`` belongs to the caller."""

    id: int
    buffer: bytes
    footprint: float = 0.0
    runtime: float = 1.0
    priority: float = 0.0
    context: Any = None
    slot: int | None = field(default=None, init=False)  # where it ran, once dispatched
    domain: int | None = field(default=None, init=False)
    cpu: int | None = field(default=None, init=False)
    started: float | None = field(default=None, init=False)  # monotonic time it was sent to its worker


@dataclass
class Outcome:
    ok: bool  # True: ``payload`` is the serialized result; False: serialized RemoteExceptionWrapper
    payload: bytes | None = None
    error: BaseException | None = None  # set instead of payload when the task never returned
    stats: dict = field(default_factory=dict)


@dataclass(eq=False)
class _Worker:
    slot: int
    cpus: tuple[int, ...]
    process: subprocess.Popen
    connection: Connection
    task: NodeTask | None = None


def slot_cpus(topology: Topology, pin: str, real_cpus: Sequence[int]) -> list[tuple[int, ...]]:
    """The real CPUs each slot's worker is pinned to.

    On a real topology, slot i is CPU i of the topology (``pin="core"``) or every CPU of its domain
    (``pin="domain"``). A topology that names CPUs this process cannot use (a spec such as
    ``"2x4"`` describing a machine we do not have) is laid over the real CPUs round-robin, so its
    decisions can be exercised here.
    """
    allowed = set(real_cpus)
    if set(topology.cpus) <= allowed:
        if pin == "domain":
            return [tuple(topology.domain_of(cpu).cpus) for cpu in topology.cpus]
        return [(cpu,) for cpu in topology.cpus]
    ordered = sorted(allowed)
    return [(ordered[i % len(ordered)],) for i in range(len(topology.cpus))]


class NodeScheduler:
    """Runs task buffers on pinned workers in the order a :class:`Scheduler` decides.

    Parameters
    ----------
    topology : Topology
    policy : str
        A scheduling policy name (:data:`scalpel_executor.scheduling.POLICIES`).
    on_complete : callable(NodeTask, Outcome)
        Called once per task, in completion order, on the completion thread, with no lock held.
    pin : "core" or "domain"
    batch_window : float
        Seconds to collect arrivals before grouping them; 0 adds each arrival at once.
    max_batch : int
        Arrivals that trigger grouping before the window ends.
    worker_env : dict
        Extra environment for workers (overrides the BLAS/OpenMP thread counts set from ``pin``).
    """

    def __init__(
        self,
        topology: Topology,
        policy: str,
        on_complete: Callable[[NodeTask, Outcome], None],
        *,
        pin: str = "core",
        batch_window: float = 0.005,
        max_batch: int = 4096,
        worker_env: dict[str, str] | None = None,
        seed: int = 0,
    ):
        resolve_policy(policy)
        if pin not in ("core", "domain"):
            raise ValueError(f"pin must be 'core' or 'domain', got {pin!r}")
        self.topology = topology
        self.policy = policy
        self.pin = pin
        self.batch_window = batch_window
        self.max_batch = max_batch
        self.worker_env = dict(worker_env or {})
        self._on_complete = on_complete
        self._scheduler = Scheduler([d.cpus for d in topology.domains], policy, seed=seed)
        self._slot_cpus = slot_cpus(topology, pin, sorted(os.sched_getaffinity(0)))
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._workers: dict[int, _Worker] = {}  # slot -> worker; owned by the dispatch thread after start
        self._spawned: list[subprocess.Popen] = []  # every process ever started, for shutdown
        self._spawn_lock = threading.Lock()
        self._stopping = threading.Event()
        self._accepting = threading.Lock()
        self._thread: threading.Thread | None = None
        self._completions: queue.SimpleQueue = queue.SimpleQueue()
        self._completer: threading.Thread | None = None
        self.respawns = 0

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        workers = [self._spawn(slot) for slot in range(len(self._slot_cpus))]
        deadline = time.monotonic() + READY_TIMEOUT
        for worker in workers:
            ready = worker.connection.poll(max(0.0, deadline - time.monotonic()))
            try:
                message = pickle.loads(worker.connection.recv_bytes()) if ready else None
            except (EOFError, OSError):
                message = None
            if not message or message[0] != "ready":
                self._stopping.set()
                self._kill_all()
                raise RuntimeError(
                    f"the worker for CPUs {worker.cpus} did not start within {READY_TIMEOUT:.0f} s "
                    f"(exit code {worker.process.poll()}); its error output is above"
                )
        self._completer = threading.Thread(target=self._completion_loop, name="scalpel-complete", daemon=True)
        self._completer.start()
        self._thread = threading.Thread(target=self._loop, name="scalpel-dispatch", daemon=True)
        self._thread.start()

    def submit(self, task: NodeTask) -> None:
        """Queue a task (thread-safe, never blocks). Raises ExecutorShutdown after shutdown."""
        with self._accepting:
            if self._stopping.is_set():
                raise ExecutorShutdown("the executor is shut down; no new tasks are accepted")
            self._inbox.put(task)
        self._wake()

    def shutdown(self, timeout: float = 10.0) -> None:
        """Fail unfinished tasks with ExecutorShutdown and end every worker. Idempotent."""
        with self._accepting:  # after this, no submit can slip a task past the final drain
            self._stopping.set()
        self._wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self._kill_all()
        if self._completer is not None:
            self._completions.put(None)  # after every outcome the dispatch thread delivered
            if self._completer is not threading.current_thread():
                self._completer.join(timeout)

    @property
    def worker_pids(self) -> list[int]:
        return [w.process.pid for w in list(self._workers.values())]

    @property
    def slot_cpus_map(self) -> list[tuple[int, ...]]:
        return list(self._slot_cpus)

    # -- workers ----------------------------------------------------------------------------

    def _worker_environment(self, cpus: tuple[int, ...]) -> dict[str, str]:
        env = dict(os.environ)
        for name in THREAD_ENV_VARS:
            env[name] = str(len(cpus))
        env.update(self.worker_env)
        env["SCALPEL_SYS_PATH"] = os.pathsep.join(p for p in sys.path if p)
        return env

    def _spawn(self, slot: int) -> _Worker | None:
        cpus = self._slot_cpus[slot]
        ours, theirs = socket.socketpair()
        with self._spawn_lock:
            if self._stopping.is_set():
                ours.close()
                theirs.close()
                return None
            process = subprocess.Popen(
                [sys.executable, "-m", "scalpel_executor.worker", str(theirs.fileno()),
                 "--cpus", ",".join(map(str, cpus)), "--parent", str(os.getpid())],
                pass_fds=(theirs.fileno(),),
                env=self._worker_environment(cpus),
                start_new_session=True,  # Ctrl-C reaches the driver, which shuts workers down
                stdin=subprocess.DEVNULL,
            )
            self._spawned.append(process)
        theirs.close()
        worker = _Worker(slot, cpus, process, Connection(ours.detach()))
        self._workers[slot] = worker
        logger.debug("started worker pid %d for slot %d on CPUs %s", process.pid, slot, cpus)
        return worker

    def _kill_all(self) -> None:
        with self._spawn_lock:
            processes = list(self._spawned)
        for process in processes:
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGKILL)  # the worker and any bash_app children
                except (ProcessLookupError, PermissionError):
                    pass
        for process in processes:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                logger.error("worker pid %d did not exit after SIGKILL", process.pid)
        for worker in self._workers.values():
            worker.connection.close()

    # -- the dispatch thread ----------------------------------------------------------------

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except (BlockingIOError, OSError):
            pass  # the pipe is full of wake-ups already, or closed at shutdown

    def _loop(self) -> None:
        arrived: list[NodeTask] = []
        deadline: float | None = None
        try:
            while not self._stopping.is_set():
                timeout = None  # a completion or a submit wakes us
                if deadline is not None and (self._scheduler.waiting < 2 * len(self._slot_cpus)):
                    timeout = max(0.0, deadline - time.monotonic())
                by_connection = {w.connection: w for w in self._workers.values()}
                for ready in wait([*by_connection, self._wake_r], timeout):
                    if ready == self._wake_r:
                        os.read(self._wake_r, 4096)
                    else:
                        self._handle_message(by_connection[ready])
                while True:
                    try:
                        arrived.append(self._inbox.get_nowait())
                    except queue.Empty:
                        break
                if arrived:
                    now = time.monotonic()
                    if deadline is None:
                        deadline = now + self.batch_window
                    # Regrouping costs O(n log n) in the waiting tasks, so while the scheduler still
                    # holds plenty of work, arrivals keep collecting and join it in one regroup.
                    starving = self._scheduler.waiting < 2 * len(self._slot_cpus)
                    if (now >= deadline and starving) or len(arrived) >= self.max_batch:
                        self._scheduler.add(
                            Task(t.id, t.footprint, t.runtime, t.priority, payload=t) for t in arrived
                        )
                        arrived, deadline = [], None
                self._dispatch()
        except BaseException:  # noqa: BLE001 - a bug here must not leave futures pending forever
            logger.exception("dispatch thread failed; failing every unfinished task")
            self._stopping.set()
        finally:
            self._fail_unfinished(arrived)

    def _dispatch(self) -> None:
        for assignment in self._scheduler.dispatch():
            worker = self._workers[assignment.slot.index]
            task: NodeTask = assignment.task.payload
            task.slot, task.domain = assignment.slot.index, assignment.slot.domain
            task.cpu, task.started = worker.cpus[0], time.monotonic()
            worker.task = task
            try:
                worker.connection.send_bytes(pickle.dumps(("task", task.id, task.buffer), protocol=pickle.HIGHEST_PROTOCOL))
            except OSError:
                self._worker_lost(worker)

    def _handle_message(self, worker: _Worker) -> None:
        try:
            message = pickle.loads(worker.connection.recv_bytes())
        except (EOFError, OSError):
            self._worker_lost(worker)
            return
        if message[0] == "ready":  # a replacement: its slot was kept busy until now
            self._scheduler.release(worker.slot)
            return
        _, task_id, ok, payload, stats = message
        task, worker.task = worker.task, None
        self._scheduler.release(worker.slot)
        self._complete(task, Outcome(ok, payload, None, stats))

    def _worker_lost(self, worker: _Worker) -> None:
        try:
            code = worker.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(worker.process.pid, signal.SIGKILL)
            code = worker.process.wait()
        cause = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        worker.connection.close()
        del self._workers[worker.slot]
        task = worker.task
        logger.warning("worker pid %d on CPUs %s died (%s)%s", worker.process.pid, worker.cpus, cause,
                       f" while running task {task.id}" if task else "")
        if task is not None:
            self._complete(task, Outcome(False, error=WorkerDied(
                f"task {task.id} was lost: its worker (pid {worker.process.pid}) on core "
                f"{','.join(map(str, worker.cpus))} died from {cause}")))
        if not self._stopping.is_set():
            self._spawn(worker.slot)  # the slot stays busy in the Scheduler until it is ready
            self.respawns += 1

    def _complete(self, task: NodeTask, outcome: Outcome) -> None:
        self._completions.put((task, outcome))

    def _completion_loop(self) -> None:
        # Completing a Future runs Parsl's callbacks (state updates, logging, launching dependent
        # tasks); on their own thread they do not hold up the next dispatch.
        while (item := self._completions.get()) is not None:
            try:
                self._on_complete(*item)
            except Exception:  # noqa: BLE001 - a failing callback must not stop the others
                logger.exception("completion callback failed for task %s", item[0].id)

    def _fail_unfinished(self, arrived: list[NodeTask]) -> None:
        unfinished = list(arrived) + [t.payload for t in self._scheduler.drain()]
        while True:
            try:
                unfinished.append(self._inbox.get_nowait())
            except queue.Empty:
                break
        running = [w.task for w in self._workers.values() if w.task is not None]
        self._kill_all()
        for task in running:
            self._complete(task, Outcome(False, error=ExecutorShutdown(
                f"task {task.id} was running on core {task.cpu} when the executor shut down")))
        for task in unfinished:
            self._complete(task, Outcome(False, error=ExecutorShutdown(
                f"task {task.id} had not started when the executor shut down")))
