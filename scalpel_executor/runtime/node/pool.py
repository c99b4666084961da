"""The worker pool: one pinned worker per core, one dispatch thread driving the core's Scheduler.

This module never imports Parsl: it moves opaque task buffers to workers and results back. The
Parsl-facing :class:`~scalpel_executor.runtime.driver.executor.ScalpelExecutor` sits on top of it.

Data flow::

    submit(Task) (any thread) ──> inbox (SimpleQueue) ──┐  + a byte on the wake pipe
                                                        v
                         dispatch thread ── holds arrivals in the Batcher (core.batching) until the
                           │                batch is due, adds them to the Scheduler, calls dispatch()
                           │   Run(id, buffer, measure)    ┌──────────────────────┐
                           ├──────────────────────────────>│ worker, core 0       │ ...one per slot
                           │<──────────────────────────────│ (runtime.worker.main)     │
                           │   WorkerResult(id, ok, ...)         │                      │
                           │                               └──────────────────────┘
                           └──> completions (SimpleQueue) ──> completion thread: on_complete(task, outcome)
                                                              (holding no lock; Parsl's callbacks run here;
                                                               inline=True: called on the dispatch thread)

The dispatch thread owns the Scheduler and the worker table outright, so neither needs a lock;
``submit`` only appends to the inbox and writes one byte to wake the thread (none while a byte
written earlier waits unread). The thread waits on one selector that holds every worker's socket
and the wake pipe, updated as workers start and die, not built again per wait (at 64 workers that
cost 116 µs a pass), and asks the Scheduler for a dispatch only when a task waits or the latest
dispatch saw one waiting (once none waits, another finds nothing to start and changes nothing). Each dispatch pass
calls ``on_start`` with its tasks' ids before sending any ``Run``: a node manager tells its driver
(``Began``), which so knows which tasks of a lost manager never ran.

Failures, all handled on the dispatch thread::

    worker socket EOF (os._exit, signal, OOM kill) ──> task fails with WorkerDied ──┐
        (MemoryExceeded if the OOM killer ended it at its task's memory limit)       │
    task past walltime + walltime_grace ──> SIGKILL its worker's process group      ├─> replacement
        ──> task fails with WalltimeExceeded ────────────────────────────────────────┘   on the same CPUs
    replacement silent for READY_TIMEOUT, or dead before "ready" ──> counted; after
        MAX_FAILED_STARTS in a row the slot is retired; with no slot left every unfinished task fails
        (a worker that died after "ready", an OOM-killed one among them, is not counted)

A dead worker's slot is disabled in the Scheduler (``disable``) until its replacement says it is
ready (``enable``), whether it died idle, running a task or starting, so no task is sent to a core
without a worker and no message order can book a core twice. Every task ends exactly once: with a
result, its exception, ``WorkerDied``, ``MemoryExceeded``, ``WalltimeExceeded``, ``ExecutorShutdown`` or, if
the dispatch thread itself breaks, ``ExecutorFailed`` naming what broke (``scalpel_executor.runtime.errors``).

Memory (``enforce_memory``, where a memory cgroup is usable: :mod:`scalpel_executor.host.cgroups`):
at start the pool makes ``scalpel-<pid>-<pool id>`` in its process's memory cgroup and logs which mechanism
enforces declared memory; each worker gets ``worker-<slot>-<pid>`` under it, moved in as soon as it
is started, and removed (once empty) when it is replaced and at shutdown. The worker limits its own
cgroup around each task that declares memory (it knows when the task begins and ends); the pool
only reads, after a death, whether the OOM killer ended the worker at such a limit.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import selectors
import signal
import subprocess
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import NamedTuple

from scalpel_executor.core.batching import Batcher
from scalpel_executor.core.scheduler import CHECKED_AT_DISPATCH, Scheduler, Task
from scalpel_executor.core.widths import widest
from scalpel_executor.core.domains import Topology
from scalpel_executor.host.accelerators import device_domains, device_env
from scalpel_executor.host.cgroups import (CGROUP_ENV, TASK_MARGIN, MemoryCgroup, find_memory_cgroup, pool_name,
                                           worker_name)
from scalpel_executor.host.sysfs import allowed_cpus
from scalpel_executor.runtime.contract import Job, OnComplete, Outcome
from scalpel_executor.runtime.errors import ExecutorFailed, ExecutorShutdown, MemoryExceeded
from scalpel_executor.runtime.node.fit import never_fits
from scalpel_executor.runtime.options import PoolOptions, memory_budget
from scalpel_executor.runtime.node.processes import kill_group, slot_cpus, start_worker, worker_environment
from scalpel_executor.runtime.wire.worker_messages import Measured, Ready, WorkerResult, Run, Warm, decode, encode
from scalpel_executor.runtime.threads import name_this_thread

logger = logging.getLogger(__name__)

NO_WORKERS_LEFT = "no worker could be started on any core (see the log); no new tasks are accepted"
LOCAL_BLOCK_ID = "0"  # local mode's one block, as HTEX's first LocalProvider block (PARSL_WORKER_BLOCK_ID)
RESPAWNS_KEPT = 1024  # the latest respawn times remembered (respawn_seconds)
READY_TIMEOUT = 60.0  # seconds a new worker may take to import and report ready


def start_timeout(workers: int) -> float:
    """Seconds ``workers`` workers started at once may take to report warm: :data:`READY_TIMEOUT`,
    stretched by the workers per CPU this process may use where more start than there are CPUs (an
    emulated node: each worker imports Parsl, about 2 s of CPU here as in HTEX's workers, and 64 of
    them on 2 CPUs took more than 60 s).

    >>> start_timeout(1) == READY_TIMEOUT
    True
    """
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return READY_TIMEOUT * max(1.0, workers / cpus)
MAX_FAILED_STARTS = 3  # replacements in a row that die before "ready" before a slot is retired
CGROUP_REMOVAL_WAIT = 5.0  # seconds shutdown waits for killed workers' last processes to leave their cgroups
OOM_KILLED = ("the kernel's OOM killer ended its worker (pid {pid}) at the limit; the worker was replaced")


def new_pool_id() -> str:
    """A node manager's id, as HTEX's worker pool makes its ``uid``: the last 12 hex digits of a uuid4."""
    return uuid.uuid4().hex[-12:]


def _placement(task: Task, cores_per_domain: Sequence[int] = ()) -> dict:
    """How the scheduler placed a started task, for its outcome's stats (and so the run report):
    why it started there, the footprint its start was decided on (the scheduler may learn another
    while it runs, from its own measurement), the seconds a core waited for a measurement
    before it, and the CPUs and accelerators of a task that held several or any. A malleable task
    also says its width and why, and, given ``cores_per_domain``, its widest width on its domain
    (what a chain waiting for it counts it at: the driver's ``_chain_seconds``)."""
    job: Job = task.payload
    placed = {"admission": job.admission, "scheduled_footprint": task.footprint if job.admitted_footprint is None
              else job.admitted_footprint}
    if job.measure_wait:
        placed["measure_wait"] = round(job.measure_wait, 6)
    if task.cores > 1 or job.devices:  # a one-core task's CPU is its WorkerResult's cpu
        placed["cpus"], placed["devices"] = list(job.cpus), list(job.devices)
    if task.width_reason is not None:  # a malleable task: the width it was given and why (core.widths)
        placed["width"], placed["width_reason"] = task.cores, task.width_reason
        if job.domain is not None and 0 <= job.domain < len(cores_per_domain):
            placed["widest"] = widest(task.cores, task.max_cores, cores_per_domain[job.domain])
        if task.width_reading is not None:  # the serial fraction its run read: the profile store keeps it
            placed["serial_reading"] = round(task.width_reading, 6)
    return placed


class _Lengthen(NamedTuple):
    """A longer chain behind a task submitted earlier (:meth:`WorkerPool.lengthen`), in the inbox after it."""

    task_id: int
    tail: float
    wide_tail: float


@dataclass(eq=False)
class _Worker:
    slot: int
    cpus: tuple[int, ...]
    process: subprocess.Popen
    connection: Connection
    task: Task | None = None  # the task it runs; its payload is a Job
    spawned: float = field(default_factory=time.monotonic)
    ready: bool = False  # said "ready": takes tasks
    warm: bool = False  # said "warm": has imported what tasks need (start() waits for it)
    replaces_since: float | None = None  # monotonic time its predecessor was found dead
    cgroup: MemoryCgroup | None = None  # its memory cgroup (enforce_memory, where one is usable)
    oom_kills: int = 0  # its cgroup's OOM kills before the task it runs began (_memory_exceeded)


def _oom_kills(cgroup: MemoryCgroup) -> int:
    """The cgroup's OOM kill count so far (0 where it cannot be read: any later kill then counts)."""
    try:
        return cgroup.oom_kills()
    except (OSError, ValueError):
        return 0


class WorkerPool:
    """Runs task buffers on pinned workers in the order a :class:`Scheduler` decides.

    Tasks are :class:`~scalpel_executor.core.tasks.Task` objects whose ``payload`` is a :class:`Job`;
    every field a policy reads (footprint, runtime, priority, intensity) travels as the caller set it.

    Parameters
    ----------
    topology : Topology
    options : PoolOptions
        Policy, pinning, batching, worker environment, seed, walltime grace, contention model
        (checked when they were built).
    on_complete : callable(Task, Outcome)
        Called once per task, in completion order, on the completion thread, with no lock held.
    on_state : callable(), optional
        Called (on the dispatch thread) after ``respawns``, ``respawn_seconds`` or ``retired_slots``
        change: a node manager reports them to its driver at once.
    pool_id, block_id : str
        HTEX's ``PARSL_WORKER_POOL_ID`` and ``PARSL_WORKER_BLOCK_ID``, set in each worker's
        environment (over ``worker_env``, as HTEX's worker sets them): the node manager's id
        (:func:`new_pool_id`, made here when not given) and its block (:data:`LOCAL_BLOCK_ID` in local mode).
    on_start : callable(list of task ids), optional
        Called (on the dispatch thread) with the tasks of each dispatch pass before any of them is
        sent to its worker: a node manager reports them (``Began``), so that if it is lost its
        driver knows which tasks never ran. One call per pass, not per task.
    inline : bool
        Call ``on_complete`` on the thread that has the outcome (the dispatch thread, mostly), with no
        completion thread between: for a callback that only queues a message (a node manager's),
        where the hand-off cost a thread wake per task. False (the in-process executor's): Parsl's
        callbacks run on their own thread and never hold up a dispatch.
    pass_scope : callable() -> context manager, optional
        Entered by the dispatch thread around each pass (the workers' messages it read, the arrivals,
        the dispatch), after its wait: a node manager holds its outbox there, so that a pass's
        Results go with its Began, or together, as one frame.
    """

    def __init__(self, topology: Topology, options: PoolOptions, on_complete: OnComplete, *,
                 on_state: Callable[[], None] | None = None, on_start: Callable[[list[int]], None] | None = None,
                 pool_id: str | None = None, block_id: str = LOCAL_BLOCK_ID, inline: bool = False,
                 pass_scope: Callable[[], AbstractContextManager] = nullcontext):
        self.options = options
        self._inline = inline
        self._pass_scope = pass_scope
        self.walltime_grace = options.walltime_grace  # seconds past a task's walltime before its worker is killed
        self.topology = topology
        self._on_complete = on_complete
        self.memory_budget = memory_budget(options)
        self._scheduler = Scheduler([d.cpus for d in topology.domains], options.policy, seed=options.seed,
                                    llc=topology.llc_size, model=options.contention_model,
                                    crowding=options.model_measured,
                                    memory=self.memory_budget, gpus=len(options.accelerators),
                                    device_domains=device_domains(options.accelerators,
                                                                  [d.cpus for d in topology.domains]))
        self._slot_cpus = slot_cpus(topology, options.pin, sorted(allowed_cpus()))
        self._batcher: Batcher[Task] = Batcher(options.batching, len(self._slot_cpus),
                                               runtime_of=lambda task: task.runtime,
                                               hold_while_busy=options.policy not in CHECKED_AT_DISPATCH)
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._woken = False  # a wake byte is in the pipe, unread: a submit need not write another
        self._workers: dict[int, _Worker] = {}  # slot -> worker; owned by the dispatch thread after start
        # Slots whose worker may have a deadline (not ready yet, or running a task with a walltime):
        # _enforce_deadlines reads these, not every worker, and drops those that have none.
        self._timed: set[int] = set()
        # The dispatch thread's wait: every live worker's socket (its data the worker) and the wake pipe.
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._dispatch_idle = False  # the latest dispatch saw no task waiting, and none arrived since
        self._spawned: list[subprocess.Popen] = []  # every process ever started, for shutdown
        self._spawn_lock = threading.Lock()
        self._stopping = threading.Event()
        self._accepting = threading.Lock()
        self._thread: threading.Thread | None = None
        self._completions: queue.SimpleQueue = queue.SimpleQueue()
        self._completer: threading.Thread | None = None
        self.respawns = 0
        self.respawn_seconds: deque[float] = deque(maxlen=RESPAWNS_KEPT)  # death noticed -> replacement ready
        self.retired_slots: set[int] = set()  # slots whose replacements kept dying before "ready"
        self._on_state = on_state or (lambda: None)
        self._on_start = on_start
        self.pool_id = pool_id or new_pool_id()
        self._ids_env = {"PARSL_WORKER_POOL_ID": self.pool_id, "PARSL_WORKER_BLOCK_ID": block_id}
        self._failed_starts: dict[int, int] = {}  # slot -> replacements in a row that died unready
        self._learned: dict[str, float] = {}  # profile key -> latest footprint measured in this run
        self._no_workers_left = False
        self._failure: str | None = None  # why the dispatch thread itself failed, if it did
        self.memory_cgroup: MemoryCgroup | None = None  # scalpel-<pid>-<pool id>: its workers' cgroups (enforce_memory)
        self._cgroups_left: list[MemoryCgroup] = []  # dead workers' cgroups still holding a process

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Start one worker per slot and wait until each reports ready.

        A worker that dies before it is ready is replaced, as later in the run; a slot whose
        starts fail MAX_FAILED_STARTS times in a row, or a worker silent past :func:`start_timeout`, fails
        ``start`` with the reason, leaving no process behind. Under ``enforce_memory`` it says
        once, in the log, what enforces declared memory (:meth:`_open_memory_cgroup`).
        """
        if self.options.enforce_memory:
            self._open_memory_cgroup()
        for slot in range(len(self._slot_cpus)):
            self._spawn(slot)
        timeout = start_timeout(len(self._slot_cpus))
        deadline = time.monotonic() + timeout
        # Wait for "warm" too: once start() returns, no core's first task waits for imports.
        while starting := {w.connection: w for w in self._workers.values() if not w.warm}:
            for connection in wait(list(starting), max(0.0, deadline - time.monotonic())):
                worker = starting[connection]
                try:
                    message = decode(connection.recv_bytes())
                except (EOFError, OSError, ValueError):
                    message = None
                if isinstance(message, Ready):
                    worker.ready = True
                    continue
                if isinstance(message, Warm):
                    worker.warm = True
                    continue
                code = worker.process.wait()
                if self._stopping.is_set():  # shut down while starting: its kill ended this worker, no failure
                    logger.debug("worker pid %d ended (code %s) by a shutdown during start", worker.process.pid, code)
                    return
                failures = self._failed_starts[worker.slot] = self._failed_starts.get(worker.slot, 0) + 1
                logger.warning("worker pid %d on CPUs %s exited (code %s) before it was ready", worker.process.pid,
                               worker.cpus, code)
                if failures >= MAX_FAILED_STARTS:
                    self._abort_start(f"the worker for CPUs {worker.cpus} failed to start {failures} times in a row "
                                      f"(last exit code {code}); its error output is above")
                with self._spawn_lock:
                    self._spawned.remove(worker.process)
                self._close_connection(worker)
                self._spawn(worker.slot)
            if time.monotonic() >= deadline and any(not w.warm for w in self._workers.values()):
                late = next(w for w in self._workers.values() if not w.warm)
                self._abort_start(f"the worker for CPUs {late.cpus} did not start within {timeout:.0f} s "
                                  f"(exit code {late.process.poll()}); its error output is above")
        self._failed_starts.clear()
        if not self._inline:
            self._completer = threading.Thread(target=self._completion_loop, name="scalpel-complete", daemon=True)
            self._completer.start()
        self._thread = threading.Thread(target=self._loop, name="scalpel-dispatch", daemon=True)
        self._thread.start()
        # Parsl's DFK only warns at interpreter exit (Ctrl-C, an uncaught exception): shut down here,
        # so running tasks end as ExecutorShutdown and every worker is reaped before the process goes.
        atexit.register(self.shutdown)

    def _open_memory_cgroup(self) -> None:
        """Make this pool's memory cgroup (``scalpel-<pid>-<pool id>``) in the process's own, if one is usable
        (:func:`~scalpel_executor.host.cgroups.find_memory_cgroup`), and log which mechanism
        enforces declared memory: the cgroup's version, else RLIMIT_AS and why."""
        found, reasons = find_memory_cgroup()
        if found is not None:
            found.remove_stale_pools()
            made = MemoryCgroup(os.path.join(found.path, pool_name(os.getpid(), self.pool_id)), found.version)
            try:
                found.child(os.path.basename(made.path)).delegate()
                self.memory_cgroup = made
            except OSError as error:
                reasons.append(f"{found.version}: cannot make a cgroup for the workers in {found.path} "
                               f"({error.strerror})")
                made.remove()
        if self.memory_cgroup is not None:
            logger.info("enforce_memory: declared memory is enforced with %s in %s (resident memory: a task past its "
                        "declaration is OOM-killed with its worker)%s", self.memory_cgroup.version,
                        self.memory_cgroup.path, "".join(f"; not {reason}" for reason in reasons[:-1]))
        else:
            logger.info("enforce_memory: declared memory is enforced with RLIMIT_AS (address space, not resident "
                        "memory), no memory cgroup being usable: %s", "; ".join(reasons))

    def _abort_start(self, reason: str) -> None:
        self._stopping.set()
        self._kill_all()
        self._close_wake_pipe()
        raise RuntimeError(reason)

    def submit(self, task: Task) -> None:
        """Queue a task whose payload is a :class:`Job` (thread-safe, never blocks).

        Raises ExecutorShutdown after shutdown, ExecutorFailed after the dispatch thread broke. A
        task asking for more cores, memory or accelerators than the node has fails at once with
        ResourcesUnavailable naming the figures and the fix
        (:func:`~scalpel_executor.runtime.node.fit.never_fits`).
        """
        with self._accepting:  # the wake pipe closes under this lock, so the write cannot miss it
            if self._stopping.is_set():
                if self._failure is not None:
                    raise ExecutorFailed(self._failure)
                raise ExecutorShutdown(NO_WORKERS_LEFT if self._no_workers_left
                                       else "the executor is shut down; no new tasks are accepted")
            if (refusal := never_fits(task, self._scheduler.capacity)) is not None:
                self._complete(task, Outcome(False, error=refusal))
                return
            self._inbox.put(task)
            self._wake()

    def lengthen(self, task_id: int, tail: float, wide_tail: float) -> None:
        """The chain behind task ``task_id``, submitted earlier, is longer than it was told
        (:meth:`~scalpel_executor.core.scheduler.Scheduler.lengthen`; thread-safe, never blocks, and
        ignored once the task has started or the pool stopped)."""
        with self._accepting:
            if not self._stopping.is_set():
                self._inbox.put(_Lengthen(task_id, tail, wide_tail))
                self._wake()

    def shutdown(self, timeout: float = 10.0) -> None:
        """Fail unfinished tasks with ExecutorShutdown and end every worker. Idempotent.

        Leaves nothing behind: every worker process group is killed and reaped, both threads
        are joined and every descriptor (worker sockets, the wake pipe) is closed.
        """
        with self._accepting:  # after this, no submit can slip a task past the final drain
            self._stopping.set()
            self._wake()
        atexit.unregister(self.shutdown)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self._kill_all()
        if self._completer is not None:
            self._completions.put(None)  # after every outcome the dispatch thread delivered
            if self._completer is not threading.current_thread():
                self._completer.join(timeout)
        if self._thread is None or not self._thread.is_alive():
            self._close_wake_pipe()  # a dispatch thread that outlived the join may still wait on it

    def _close_wake_pipe(self) -> None:
        with self._accepting:
            self._selector.close()
            for fd in (self._wake_r, self._wake_w):
                if fd >= 0:
                    os.close(fd)
            self._wake_r = self._wake_w = -1

    @property
    def worker_pids(self) -> list[int]:
        return [w.process.pid for w in list(self._workers.values())]

    @property
    def slot_cpus_map(self) -> list[tuple[int, ...]]:
        return list(self._slot_cpus)

    # -- workers ----------------------------------------------------------------------------

    def _spawn(self, slot: int) -> _Worker | None:
        cpus = self._slot_cpus[slot]
        with self._spawn_lock:
            if self._stopping.is_set():
                return None
            extra = {**self.options.worker_env, **self._ids_env}
            if self.memory_cgroup is not None:
                extra[CGROUP_ENV] = self.memory_cgroup.to_env()
            env = worker_environment(cpus, extra, rank=slot, count=len(self._slot_cpus))
            process, connection = start_worker(cpus, env)
            self._spawned.append(process)
        worker = _Worker(slot, cpus, process, connection, cgroup=self._worker_cgroup(slot, process.pid))
        self._workers[slot] = worker
        self._timed.add(slot)  # until it is ready
        self._selector.register(connection, selectors.EVENT_READ, worker)
        logger.debug("started worker pid %d for slot %d on CPUs %s", process.pid, slot, cpus)
        return worker

    def _close_connection(self, worker: _Worker) -> None:
        """Close a dead worker's socket, out of the dispatch thread's selector first."""
        try:
            self._selector.unregister(worker.connection)
        except (KeyError, ValueError, OSError):  # not registered, or the selector is closed (shutdown)
            pass
        worker.connection.close()

    def _worker_cgroup(self, slot: int, pid: int) -> MemoryCgroup | None:
        """A new worker's memory cgroup, the worker moved into it at once: what it allocates from
        now on is charged there. None (its tasks run under RLIMIT_AS, as the worker finds) where
        that fails."""
        if self.memory_cgroup is None:
            return None
        self._remove_cgroups_left()
        try:
            cgroup = self.memory_cgroup.child(worker_name(slot, pid))
            cgroup.add(pid)
            return cgroup
        except OSError as error:
            logger.warning("could not move worker pid %d into a memory cgroup in %s (%s); its tasks' memory is "
                           "enforced with RLIMIT_AS", pid, self.memory_cgroup.path, error)
            return None

    def _remove_cgroups_left(self) -> None:
        self._cgroups_left = [cgroup for cgroup in self._cgroups_left if not cgroup.remove()]

    def _remove_memory_cgroups(self) -> None:
        """Remove the pool's memory cgroups once every worker is reaped (their killed children may
        take a moment to leave)."""
        if self.memory_cgroup is None:
            return
        deadline = time.monotonic() + CGROUP_REMOVAL_WAIT
        while not self.memory_cgroup.remove():
            if time.monotonic() >= deadline:
                logger.warning("could not remove the memory cgroup %s: processes remain in it", self.memory_cgroup.path)
                return
            time.sleep(0.05)

    def _memory_exceeded(self, worker: _Worker, task: Task, code: int) -> MemoryExceeded | None:
        """The task's MemoryExceeded if the kernel's OOM killer ended its worker at the task's limit."""
        cgroup, job = worker.cgroup, task.payload
        if cgroup is None or code != -signal.SIGKILL or not (self.options.enforce_memory and job.memory_limit):
            return None
        try:  # the worker lifts its limit after each task: one still set is the dying task's
            limit = cgroup.limit()
            if limit is None or cgroup.oom_kills() <= worker.oom_kills:  # no OOM kill during this task
                return None
        except (OSError, ValueError):
            return None
        return MemoryExceeded.of(task.id, job.memory_limit, limit, limit - int(job.memory_limit) - TASK_MARGIN,
                                 cgroup.version, OOM_KILLED.format(pid=worker.process.pid))

    def _kill_all(self) -> None:
        with self._spawn_lock:
            processes = list(self._spawned)
        for process in processes:
            if process.returncode is None:  # not reaped, so its pid still names its group
                kill_group(process)
        for process in processes:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                logger.error("worker pid %d did not exit after SIGKILL", process.pid)
        for worker in self._workers.values():
            self._close_connection(worker)
        self._remove_memory_cgroups()

    # -- the dispatch thread ----------------------------------------------------------------

    def _wake(self) -> None:
        # Called under _accepting, after the task is in the inbox. The loop reads the pipe, then clears
        # _woken, then takes the inbox: a task put while _woken was still set is taken by that pass.
        if self._wake_w < 0 or self._woken:
            return  # closed at shutdown, or a wake-up waits unread
        self._woken = True
        try:
            os.write(self._wake_w, b"x")
        except (BlockingIOError, OSError):
            pass  # the pipe is full of wake-ups already

    def _loop(self) -> None:
        name_this_thread("dispatch")
        try:
            while not self._stopping.is_set():
                timeout = self._timeout()  # may kill and replace workers: before the wait
                ready = self._selector.select(timeout)
                with self._pass_scope():
                    for key, _ in ready:
                        worker = key.data
                        if worker is None:  # read, then clear: a byte read with the flag left set would
                            os.read(self._wake_r, 4096)  # strand the next submit, which sees it and writes none
                            self._woken = False
                        elif worker.connection.closed is False and self._workers.get(worker.slot) is worker:
                            self._handle_message(worker)  # unless an earlier message of this pass lost it
                    self._take_arrivals()
                    self._dispatch()
        except BaseException as error:  # a bug here must not leave futures pending forever
            logger.exception("dispatch thread failed; failing every unfinished task")
            with self._accepting:
                self._failure = (f"the executor's dispatch thread failed with {error!r} (a bug: please "
                                 f"report it with the log); no new tasks are accepted")
                self._stopping.set()
        finally:
            self._fail_unfinished(self._batcher.held)

    def _timeout(self) -> float | None:
        """Seconds until the next deadline of any kind; None: only a message or a submit can wake us."""
        deadlines = [at for at in (self._batcher.wake_at(self._scheduler.waiting, len(self._scheduler.running)),
                                   self._enforce_deadlines(), self._scheduler.wake_at) if at is not None]
        return max(0.0, min(deadlines) - time.monotonic()) if deadlines else None

    def _take_arrivals(self) -> None:
        """Move submitted tasks into the batcher, and a due batch into the Scheduler."""
        arrived, longer = [], []
        while True:
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                break
            (longer if isinstance(item, _Lengthen) else arrived).append(item)
        now = time.monotonic()
        if arrived:
            self._batcher.hold(arrived, now)
        for change in longer:  # after its task, which arrived before it: held still, or the scheduler's
            held = next((task for task in self._batcher.held if task.id == change.task_id), None)
            if held is None:
                self._scheduler.lengthen(change.task_id, change.tail, change.wide_tail)
            elif change.tail > held.tail:
                held.tail, held.wide_tail = change.tail, change.wide_tail
        batch = self._batcher.release(now, self._scheduler.waiting, len(self._scheduler.running))
        if batch:
            self._dispatch_idle = False
            for task in batch:  # a key measured earlier in this run: its footprint, not the prior
                if not task.footprint_known and task.key in self._learned:
                    task.footprint, task.footprint_known = self._learned[task.key], True
            self._scheduler.add(batch)

    def _learn(self, task: Task, footprint: float | None) -> None:
        """What a task of ``task.key`` measured, while it runs (Measured: the probe's first window,
        which also sees the task's start-up, so it reads high) or at its end: every task of the key
        whose footprint is the prior takes the latest reading, now and on arrival, for this run. An
        unmeasured end still lifts the prior (the key has run: nothing more to wait for)."""
        if task.key is None or footprint is None and task.key in self._learned:
            return
        value = float(footprint) if isinstance(footprint, (int, float)) and footprint >= 0 else task.footprint
        self._learned[task.key] = value
        self._scheduler.learn(task.key, value)

    def _dispatch(self) -> None:
        waiting = self._scheduler.waiting
        if not waiting and self._dispatch_idle:
            return  # the latest dispatch saw none waiting and none came since: it would change nothing
        self._dispatch_idle = not waiting
        assignments = self._scheduler.dispatch(time.monotonic())
        if assignments and self._on_start is not None:
            self._on_start([assignment.task.id for assignment in assignments])
        for assignment in assignments:
            worker = self._workers[assignment.slot.index]
            task = assignment.task
            job: Job = task.payload
            job.slot, job.domain = assignment.slot.index, assignment.slot.domain
            job.cpu, job.started = worker.cpus[0], time.monotonic()
            job.admission, job.measure_wait = assignment.reason, assignment.waited
            job.admitted_footprint = assignment.task.footprint  # later learning may change the task's own
            job.cpus = self._slot_cpus[assignment.slot.index] if not assignment.slots else \
                tuple(sorted({cpu for slot in assignment.booked for cpu in self._slot_cpus[slot.index]}))
            env: tuple[tuple[str, str], ...] = ()
            if self.options.accelerators:  # a task without accelerators sees none, so it takes none
                job.devices = tuple(self.options.accelerators[i] for i in assignment.devices)
                env = device_env(job.devices)
            worker.task = task
            if job.walltime is not None:
                self._timed.add(worker.slot)
            cpus = job.cpus if len(assignment.booked) > 1 else ()
            if worker.cgroup is not None and self.options.enforce_memory and job.memory_limit:
                worker.oom_kills = _oom_kills(worker.cgroup)
            try:
                worker.connection.send_bytes(encode(Run(task.id, job.buffer, job.measure, cpus, env,
                                                        int(job.memory_limit) if self.options.enforce_memory else 0)))
            except OSError:
                self._worker_lost(worker)

    def _handle_message(self, worker: _Worker) -> None:
        try:
            data = worker.connection.recv_bytes()
        except (EOFError, OSError):
            self._worker_lost(worker)
            return
        try:
            message = decode(data)
        except Exception as error:  # noqa: BLE001 - garbage on the socket: the worker is not to be trusted
            message = error
        if not isinstance(message, (Ready, Warm, Measured, WorkerResult)):
            logger.error("worker pid %d sent %r, which is no answer a worker gives; replacing it",
                         worker.process.pid, message)
            kill_group(worker.process)
            self._worker_lost(worker)
            return
        if isinstance(message, Warm):  # done importing what tasks need; a replacement took tasks before
            worker.warm = True
            return
        if isinstance(message, Ready):  # a replacement: its slot was disabled until now
            worker.ready = True
            self._failed_starts.pop(worker.slot, None)
            if worker.replaces_since is not None:
                self.respawn_seconds.append(time.monotonic() - worker.replaces_since)
            self._scheduler.enable(worker.slot)
            self._on_state()
            return
        if isinstance(message, Measured):  # a running task's first reading; its WorkerResult follows
            if worker.task is not None and worker.task.id == message.task_id:
                self._learn(worker.task, message.footprint)
            return
        task_id, ok, payload, stats = message
        task, worker.task = worker.task, None
        if task is None or task.id != task_id:
            logger.error("worker pid %d answered for task %s while running %s; replacing it",
                         worker.process.pid, task_id, task.id if task else "nothing")
            worker.task = task
            self._worker_lost(worker)
            return
        self._scheduler.release(worker.slot, time.monotonic())  # the clock times a malleable task's width
        self._learn(task, stats.get("footprint") if isinstance(stats, dict) else None)
        if isinstance(stats, dict):
            stats.update(_placement(task, self._scheduler.cores_per_domain))
        self._complete(task, Outcome(ok, payload, None, stats))

    def _enforce_deadlines(self) -> float | None:
        """Kill workers past a task's walltime + grace or silent past READY_TIMEOUT.

        Returns the monotonic time of the next such deadline, or None if nothing is timed.
        """
        now, next_at = time.monotonic(), None
        for slot in list(self._timed):
            worker = self._workers.get(slot)
            task = worker.task if worker is not None else None
            job: Job | None = task.payload if task is not None else None
            if job is not None and job.walltime is not None and job.started is not None:
                at = job.started + job.walltime + self.walltime_grace
            elif worker is not None and not worker.ready:
                at = worker.spawned + READY_TIMEOUT
            else:
                self._timed.discard(slot)  # no deadline now; a spawn or a timed task adds it again
                continue
            if now < at:
                next_at = at if next_at is None else min(next_at, at)
                continue
            error = None
            if task is not None:
                from scalpel_executor.runtime.lost import WalltimeExceeded  # Parsl with it: only once a task fails so (runtime.errors)
                error = WalltimeExceeded(
                    f"task {task.id} exceeded its walltime of {job.walltime:g} s on core "
                    f"{','.join(map(str, worker.cpus))} and was still running {self.walltime_grace:g} s "
                    f"later (blocked outside Python bytecode, where Parsl's walltime cannot reach it); "
                    f"its worker (pid {worker.process.pid}) was killed and replaced",
                    task_id=task.id, walltime=job.walltime)
            logger.warning("killing worker pid %d on CPUs %s: %s", worker.process.pid, worker.cpus,
                           error or f"not ready after {READY_TIMEOUT:.0f} s")
            kill_group(worker.process)
            self._worker_lost(worker, error)
        return next_at

    def _worker_lost(self, worker: _Worker, error: BaseException | None = None) -> None:
        """Fail the worker's task (with ``error``, else WorkerDied) and start its replacement."""
        from scalpel_executor.runtime.lost import WorkerDied  # Parsl with it: only once a task fails so (runtime.errors)

        noticed = time.monotonic()
        try:  # a worker whose socket closed may still be on its way out: let it say why
            code = worker.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            kill_group(worker.process)
            code = worker.process.wait()
        # A bash_app child or monitoring fork left behind goes with its worker (a process group
        # keeps its id, which no new process can take, while any member lives).
        kill_group(worker.process)
        try:
            cause = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        except ValueError:
            cause = f"signal {-code}"
        self._close_connection(worker)
        del self._workers[worker.slot]
        # Whether it died idle, busy or before "ready", its core takes no task until a replacement
        # says it is ready; the task the scheduler had there is the one failed below.
        self._scheduler.disable(worker.slot)
        with self._spawn_lock:  # reaped: shutdown has nothing left to kill here
            self._spawned.remove(worker.process)
        task = worker.task
        logger.warning("worker pid %d on CPUs %s died (%s)%s", worker.process.pid, worker.cpus, cause,
                       f" while running task {task.id}" if task else "")
        if task is not None and error is None:
            error = self._memory_exceeded(worker, task, code)
        if worker.cgroup is not None:
            self._cgroups_left.append(worker.cgroup)
            self._remove_cgroups_left()
        if task is not None:
            cpus = task.payload.cpus or worker.cpus  # every core a task of several held
            self._complete(task, Outcome(False, error=error or WorkerDied(
                f"task {task.id} was lost: its worker (pid {worker.process.pid}) on core{'s' if len(cpus) > 1 else ''} "
                f"{','.join(map(str, cpus))} died from {cause}",
                task_id=task.id, pid=worker.process.pid, cpus=cpus, cause=cause), stats=_placement(task)))
        if self._stopping.is_set():
            return
        if not worker.ready:
            failures = self._failed_starts[worker.slot] = self._failed_starts.get(worker.slot, 0) + 1
            if failures >= MAX_FAILED_STARTS:
                self._retire(worker)
                return
        replacement = self._spawn(worker.slot)  # the slot stays busy in the Scheduler until it is ready
        if replacement is not None:
            replacement.replaces_since = worker.replaces_since if not worker.ready else noticed
            self.respawns += 1
            self._on_state()

    def _retire(self, worker: _Worker) -> None:
        """Give up on a slot whose replacements keep dying; with no slot left, stop the node."""
        self.retired_slots.add(worker.slot)
        self._on_state()
        logger.error("no longer starting workers on CPUs %s: %d replacements in a row died before reporting "
                     "ready (exit code %s); check the workers' error output above",
                     worker.cpus, MAX_FAILED_STARTS, worker.process.returncode)
        if not self._workers:
            logger.error("no worker is left on any core; failing every unfinished task")
            self._no_workers_left = True
            with self._accepting:  # as in shutdown(): no submit slips a task past the final drain
                self._stopping.set()

    def _complete(self, task: Task, outcome: Outcome) -> None:
        if self._inline:
            self._deliver(task, outcome)
        else:
            self._completions.put((task, outcome))

    def _deliver(self, task: Task, outcome: Outcome) -> None:
        try:
            self._on_complete(task, outcome)
        except BaseException:  # noqa: BLE001 - not even SystemExit from a callback may stop the others
            logger.exception("completion callback failed for task %s", task.id)

    def _completion_loop(self) -> None:
        name_this_thread("complete")
        # Completing a Future runs Parsl's callbacks (state updates, logging, launching dependent
        # tasks); on their own thread they do not hold up the next dispatch.
        while (item := self._completions.get()) is not None:
            self._deliver(*item)

    def _fail_unfinished(self, arrived: list[Task]) -> None:
        unfinished = list(arrived) + self._scheduler.drain()
        while True:
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                break
            if not isinstance(item, _Lengthen):
                unfinished.append(item)
        running = [w.task for w in self._workers.values() if w.task is not None]
        self._kill_all()
        for task in running:
            self._complete(task, Outcome(False, error=ExecutorFailed(f"task {task.id} was lost: {self._failure}")
                                         if self._failure else ExecutorShutdown(
                f"task {task.id} was running on core {task.payload.cpu} when the executor shut down"),
                stats=_placement(task)))
        for task in unfinished:
            if self._failure is not None:
                error: BaseException = ExecutorFailed(f"task {task.id} did not run: {self._failure}")
            elif self._no_workers_left:
                from scalpel_executor.runtime.lost import WorkerDied  # Parsl with it: only once a task fails so (runtime.errors)
                error = WorkerDied(
                    f"task {task.id} cannot run: no worker could be started on any core "
                    f"(slots {sorted(self.retired_slots)} retired); see the log for the workers' errors",
                    task_id=task.id, cause="no worker left")
            else:
                error = ExecutorShutdown(f"task {task.id} had not started when the executor shut down")
            self._complete(task, Outcome(False, error=error))
