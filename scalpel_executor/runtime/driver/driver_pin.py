"""The driver's Python threads on one CPU (``ScalpelExecutor(pin_driver=...)``).

Parsl's DataFlowKernel runs a task on three threads of the user's process: the one that calls the
app (the DataFlowKernel's ``submit``), its launch thread (``executor.submit``) and the executor's
reader (the result, and Parsl's completion). They take turns at one interpreter lock, and Parsl's
log file is written, and flushed, at every step of a task: each write lets go of the lock. Where the
threads may run on several CPUs, a waiting one takes the lock at once on another CPU at each of
those writes, and the writer then waits for it back: on the 2-core development VM, 15 voluntary
context switches a no-op task (HTEX's driver: 8). On one CPU a thread that lets go for a write is
back before the one it woke has run, so the hand-overs stop: 1.4–1.8 switches a task, and about 40%
less of the driver's CPU per task (docs/results/throughput.md). The interpreter lock let only one of
them run at a time anyway.

Two ways to get there:

- ``pin_driver="busy"`` (the default), :class:`BusyPin`: a thread of the executor's looks every
  :data:`WINDOW` seconds at the CPU time those threads took (the one that started the executor,
  the threads that called its ``submit``, its reader and sender) and pins them while they are busy,
  as :class:`BusyGate` says: from :data:`ENGAGE` of one CPU, for :data:`STEADY` windows in a row
  while the workers' tasks take under :data:`WORKERS_FREE` of their time (a burst of short tasks,
  where they hand the lock over the most, and one CPU is mostly a worker's to lose), until they
  fall below :data:`RELEASE` as long (the burst is over, or the tasks took long enough that the
  driver waits for them, or a worker on the same CPU takes half of it). Outside bursts they run
  where the OS puts them: a workflow whose tasks keep the workers busy is never pinned, and code
  the user's thread runs between bursts, and the threads and processes it starts then, keep the
  process's CPUs.
- ``pin_driver="auto"`` or a CPU, :class:`DriverPin`: pinned from ``start()`` to ``shutdown()``;
  the thread that starts the executor (under ``parsl.load()``, the user's main thread) and the
  threads it and its pinned threads start later (Parsl's launch thread, the executor's reader and
  sender) inherit the CPU.

Either way ``"auto"``'s CPU is the last of the process that no worker is on (one
``max_workers_per_node`` leaves out, a core's second hardware thread), else the last; threads
started while a pin holds get the process's CPUs back when it is released (a thread that set its
own is left alone), and no other thread that ran before it is touched (a numerical library's own).
While a pin holds, the process's CPUs are still what :func:`~scalpel_executor.host.sysfs.allowed_cpus`
and topology detection answer, and a node manager is started with them (``--cpus``), so its
workers are laid out as without the pin.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping

from scalpel_executor.core.cpulist import format_cpu_list
from scalpel_executor.host.sysfs import (allowed_cpus, keep_process_cpus, set_thread_cpus, thread_affinity_available,
                                         thread_cpu_seconds, thread_cpus)
from scalpel_executor.runtime.threads import name_this_thread

__all__ = ["AUTO", "BUSY", "BusyGate", "BusyPin", "DriverPin", "pin_words", "resolve_pin_driver"]

logger = logging.getLogger(__name__)

AUTO = "auto"  # pin_driver's value for the last CPU of the process that no worker is on, from start to shutdown
BUSY = "busy"  # pin_driver's default: "auto"'s CPU, while the driver's threads are busy
#: Seconds between looks at the CPU time the driver's threads took (``pin_driver="busy"``).
WINDOW = 0.1
#: The share of one CPU those threads take, over a window, from which they count as busy. Unpinned,
#: a burst of no-op tasks keeps them at 0.7–1.0 of a CPU (2 workers and 16 emulated, on the 2-core
#: development VM); workflows of short dependent tasks at 1.0 while the script submits them, then
#: mostly at 0.4–0.6 while the driver hands each finished task's successor on.
ENGAGE = 0.75
#: ... and below which, pinned, they no longer are: a burst on one CPU keeps them at 0.6–1.0 of it,
#: a workflow handing successors on at 0.4–0.6, where the hand-offs between its threads, and a
#: worker pinned to the same CPU, wait for each other: pinned throughout, such workflows ran 3–18%
#: slower.
RELEASE = 0.6
#: The share of the workers' time their tasks took, over a window, below which a pin may begin:
#: one CPU is then mostly a worker's to lose. A burst of no-ops keeps it near 0, workflows of
#: 0.2 ms tasks at 0.1–0.3; where 1–2 ms tasks kept the workers busy, the pinned threads shared
#: a busy worker's CPU and were given it back two windows later, having run slower meanwhile.
WORKERS_FREE = 0.5
#: Tasks a second that must finish, over a window, for the threads to count as busy with tasks at
#: all: below it what keeps them busy is the user's own code in the thread that started the
#: executor (a test suite, a notebook's analysis), which a pin would only confine.
MIN_RATE = 100.0
#: Windows in a row either way before the pin changes: a lone busy window (an import, a big
#: submit) pins nothing.
STEADY = 2
_holding = 0  # pins held: the process's CPUs are kept while any holds
_holding_lock = threading.Lock()


def resolve_pin_driver(value: int | str | None, workers: Iterable[int] = ()) -> int | None:
    """The CPU ``pin_driver=`` names: None (off), ``"auto"``, ``"busy"`` or a CPU number of this
    process. ``"auto"`` and ``"busy"`` take the last CPU of the process that none of ``workers`` (the
    workers' CPUs) is on: one ``max_workers_per_node`` left out, or a core's second hardware thread;
    where every CPU has a worker, the last. ``"busy"`` answers None where it cannot help: a platform
    that cannot pin a thread, a process with one CPU. TypeError or ValueError naming the value
    otherwise, or where the platform cannot pin a thread."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"pin_driver must be a CPU number, {AUTO!r}, {BUSY!r} or None, "
                        f"got {type(value).__name__} {value!r}")
    if isinstance(value, str) and value not in (AUTO, BUSY):
        raise ValueError(f"pin_driver must be a CPU number, {AUTO!r}, {BUSY!r} or None, got {value!r}")
    if not thread_affinity_available():
        if value == BUSY:
            return None
        raise ValueError(f"pin_driver={value!r} needs per-thread CPU affinity (Linux's sched_setaffinity), which "
                         f"this platform lacks; leave pin_driver out")
    cpus = allowed_cpus()
    if value == BUSY and len(cpus) < 2:
        return None  # one CPU: the threads share it already
    if value in (AUTO, BUSY):
        return max(cpus - set(workers) or cpus)
    if value not in cpus:
        raise ValueError(f"pin_driver={value!r} is not a CPU this process may use ({format_cpu_list(sorted(cpus))})")
    return value


def _hold_process_cpus(cpus: set[int]) -> None:
    global _holding
    with _holding_lock:
        if not _holding:
            keep_process_cpus(cpus)
        _holding += 1


def _let_go_of_process_cpus() -> None:
    global _holding
    with _holding_lock:
        _holding -= 1
        if not _holding:
            keep_process_cpus(None)


def _give_back(cpu: int, pinned: dict[int, set[int]], before: set[int], process: set[int]) -> None:
    """Give back their CPUs to the threads in ``pinned`` (native id -> CPUs before) and to the
    threads started since ``before`` (the native ids that ran then) that are on ``cpu`` alone still;
    a thread that set its own is left alone."""
    for thread in threading.enumerate():
        tid = thread.native_id
        if tid is None or tid in before and tid not in pinned:
            continue
        try:
            if thread_cpus(tid) == {cpu}:
                set_thread_cpus(tid, pinned.get(tid, process))
        except OSError:  # it ended meanwhile
            pass


class DriverPin:
    """Confines the calling thread, and what it starts, to ``cpu`` until :meth:`release`."""

    def __init__(self, cpu: int):
        self.cpu = cpu
        self._process: set[int] = set()  # the CPUs the process had
        self._pinned: dict[int, set[int]] = {}  # native id -> its CPUs before, of the threads pinned here
        self._before: set[int] = set()  # native ids of the threads that ran before the pin

    def pin(self) -> None:
        """Pin the calling thread; the process's CPUs stay what :func:`allowed_cpus` answers. An
        OSError (the CPU was taken from the process since) leaves everything as it was."""
        self._process = allowed_cpus()
        self._before = {thread.native_id for thread in threading.enumerate()}
        me = threading.get_native_id()
        had = thread_cpus(me)
        set_thread_cpus(me, {self.cpu})
        self._pinned[me] = had
        _hold_process_cpus(self._process)
        logger.info("the driver's threads run on CPU %d (pin_driver); the process has CPUs %s", self.cpu,
                    format_cpu_list(sorted(self._process)))

    @property
    def process_cpus(self) -> set[int]:
        """The CPUs the process had before the pin (what its node manager is confined to)."""
        return set(self._process)

    def release(self) -> None:
        """Give back their CPUs: to the thread pinned, and to the threads started since that are on
        the one CPU still (a thread that set its own is left alone). Idempotent."""
        if not self._pinned:
            return
        _give_back(self.cpu, self._pinned, self._before, self._process)
        self._pinned.clear()
        _let_go_of_process_cpus()


class BusyGate:
    """When the driver's threads go on one CPU and when they come off it, from the share of one CPU
    they took in each window and the share of the workers' time their tasks took (pure:
    :class:`BusyPin` feeds it). Pinned once ``steady`` windows in a row reach ``engage`` while the
    workers' share stays below ``workers_free``; released once ``steady`` windows in a row stay
    below ``release``; a window in which fewer than ``min_rate`` tasks a second finished counts as
    idle (each :data:`ENGAGE`, :data:`RELEASE`, :data:`WORKERS_FREE`, :data:`MIN_RATE` and
    :data:`STEADY` unless given)."""

    def __init__(self, engage: float | None = None, release: float | None = None, steady: int | None = None,
                 workers_free: float | None = None, min_rate: float | None = None):
        engage, release = ENGAGE if engage is None else engage, RELEASE if release is None else release
        steady = STEADY if steady is None else steady
        self.workers_free = WORKERS_FREE if workers_free is None else workers_free
        self.min_rate = MIN_RATE if min_rate is None else min_rate
        if not 0 <= release < engage:
            raise ValueError(f"release ({release}) must be below engage ({engage}) and not negative")
        if steady < 1:
            raise ValueError(f"steady must be at least 1 window, got {steady}")
        self.engage, self.release, self.steady = engage, release, steady
        self.pinned = False
        self._run = 0  # windows in a row that point the other way

    def step(self, busy: float, workers: float = 0.0, rate: float = math.inf) -> bool | None:
        """One window's share of a CPU (``busy``), share of the workers' time their tasks took
        (``workers``) and tasks finished a second (``rate``; below ``min_rate`` the threads count as
        idle): True to pin now, False to release now, None to leave it."""
        if rate < self.min_rate:
            busy = 0.0
        turning = busy < self.release if self.pinned else busy >= self.engage and workers < self.workers_free
        self._run = self._run + 1 if turning else 0
        if self._run < self.steady:
            return None
        self.pinned, self._run = not self.pinned, 0
        return self.pinned


class BusyPin:
    """Puts the driver's threads on ``cpu`` while they are busy (``pin_driver="busy"``).

    ``threads()`` answers the threads it watches, asked at every window: those that started the
    executor or called its ``submit`` (:meth:`watch`) and the pool's own. :meth:`start` starts a
    thread that calls :meth:`step` every ``window`` seconds; :meth:`step` may be called by hand
    (tests, with a ``clock``: native id -> CPU seconds). ``finished()`` answers the tasks finished
    so far and the seconds they ran (their wall times), from which each window's rate and the
    ``workers`` workers' share of their time come.
    :meth:`stop` gives back every CPU."""

    def __init__(self, cpu: int, threads: Callable[[], Iterable[threading.Thread]], window: float = WINDOW,
                 gate: BusyGate | None = None, clock: Callable[[int], float] = thread_cpu_seconds,
                 finished: Callable[[], tuple[int, float]] = lambda: (0, 0.0), workers: int = 1):
        self.cpu = cpu
        self._threads = threads
        self._finished = finished
        self._workers = max(1, workers)
        self._done: tuple[int, float] = (0, 0.0)  # finished() at the last look
        self._window = window
        self._gate = gate or BusyGate()
        self._clock = clock
        self._watched: set[threading.Thread] = set()
        self._process: set[int] = allowed_cpus()
        self._pinned: dict[int, set[int]] = {}  # native id -> its CPUs before, while pinned
        self._before: set[int] = set()
        self._cpu_seen: dict[int, float] = {}  # native id -> its CPU seconds at the last look
        self._seen_at: float | None = None
        self._lock = threading.Lock()  # step() and stop() one at a time
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.engaged = 0  # times pinned
        self.pinned_seconds = 0.0  # how long, all told
        self._since = 0.0

    def watch(self, thread: threading.Thread) -> None:
        """Watch ``thread`` too (the one that starts the executor, one that calls its ``submit``)."""
        self._watched.add(thread)

    def watching(self, thread: threading.Thread) -> bool:
        return thread in self._watched

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="scalpel-driver-pin", daemon=True)
        self._thread.start()

    @property
    def process_cpus(self) -> set[int]:
        """The CPUs the process had when this was made (what its node manager is confined to, pinned or not)."""
        return set(self._process)

    def _run(self) -> None:
        name_this_thread("pin")
        while not self._stop.wait(self._window):
            try:
                self.step()
            except Exception:  # noqa: BLE001 - a pin is worth less than the run: stop pinning, say why
                logger.exception("pin_driver='busy' stops: the driver's threads keep the process's CPUs")
                self.stop()
                return

    def step(self, now: float | None = None) -> None:
        """Look at the CPU time the watched threads took since the last look; pin or release."""
        now = time.monotonic() if now is None else now
        with self._lock:
            if self._stop.is_set() and self._thread is not None:
                return
            watched = set(self._watched)  # a copy: submit() may add to it meanwhile
            live = [thread for thread in {*watched, *self._threads()} if thread.native_id is not None]
            self._watched -= {thread for thread in watched if not thread.is_alive()}
            seen: dict[int, float] = {}
            for thread in live:
                try:
                    seen[thread.native_id] = self._clock(thread.native_id)
                except OSError:  # it ended
                    pass
            took = sum(seconds - self._cpu_seen.get(tid, seconds) for tid, seconds in seen.items())
            done = self._finished()
            tasks, worked = done[0] - self._done[0], done[1] - self._done[1]
            elapsed = None if self._seen_at is None else now - self._seen_at
            self._cpu_seen, self._seen_at, self._done = seen, now, done
            if elapsed is None or elapsed <= 0:
                return
            turn = self._gate.step(took / elapsed, worked / (elapsed * self._workers), tasks / elapsed)
            if turn is True:
                self._before = {thread.native_id for thread in threading.enumerate()}
                self._since = now
                self.engaged += 1
                _hold_process_cpus(self._process)
            elif turn is False:
                self._unpin(now)
                return
            if self._gate.pinned:
                self._pin(seen)  # newly watched threads too

    def _pin(self, threads: Iterable[int]) -> None:
        for tid in threads:
            if tid in self._pinned:
                continue
            try:
                had = thread_cpus(tid)
                set_thread_cpus(tid, {self.cpu})
            except OSError:  # it ended, or the CPU is no longer the process's
                continue
            self._pinned[tid] = had

    def _unpin(self, now: float) -> None:
        if self._pinned:
            _give_back(self.cpu, self._pinned, self._before, self._process)
            self._pinned.clear()
        self.pinned_seconds += now - self._since
        _let_go_of_process_cpus()

    def stop(self) -> None:
        """Stop looking, give back every CPU taken. Idempotent."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(5 * self._window + 1)
        with self._lock:
            if self._gate.pinned:
                self._gate.pinned = False
                self._unpin(time.monotonic())

    def summary(self) -> dict:
        """For the run report: the CPU, how often and how long the driver's threads were on it."""
        seconds = self.pinned_seconds + (time.monotonic() - self._since if self._gate.pinned else 0.0)
        return {"mode": BUSY, "cpu": self.cpu, "engaged": self.engaged, "seconds": round(seconds, 3)}


def pin_words(pin: Mapping | None) -> str | None:
    """The run report's closing line's clause on the driver's threads on one CPU (the report's
    ``driver_pin``: :meth:`BusyPin.summary`, or the executor's for ``pin_driver="auto"``), or None
    where they never were.

    >>> pin_words({"mode": "busy", "cpu": 1, "engaged": 2, "seconds": 3.94})
    "the driver's threads on CPU 1 for 3.9 s, in 2 bursts (pin_driver='busy')"
    >>> pin_words({"mode": "busy", "cpu": 1, "engaged": 0, "seconds": 0.0}) is None
    True
    """
    if not pin or not pin.get("engaged"):
        return None
    if pin.get("mode") != "busy":
        return f"the driver's threads on CPU {pin['cpu']} (pin_driver)"
    bursts = pin["engaged"]
    return (f"the driver's threads on CPU {pin['cpu']} for {pin['seconds']:.1f} s, in {bursts} "
            f"burst{'s' if bursts != 1 else ''} (pin_driver='busy')")
