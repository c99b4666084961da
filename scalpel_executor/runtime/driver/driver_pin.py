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

:class:`DriverPin` pins the thread that starts the executor (under ``parsl.load()``, the user's
main thread) at ``start()``; the threads it and its pinned threads start later inherit the CPU:
Parsl's launch thread, the executor's reader and sender. ``shutdown()`` gives each of them back
the CPUs it had (a thread started meanwhile: those the process had). Threads that already ran are
left alone (a numerical library's own threads, say). While it holds, the process's CPUs are still
what :func:`~scalpel_executor.host.sysfs.allowed_cpus` and topology detection answer, and the node
manager is started with them (``--cpus``), so its workers are laid out as without the pin.

What it costs the user: code that runs in those threads shares the one CPU with Parsl, and so do
threads and processes they start while it holds (a thread pool made in the main thread after
``parsl.load()``, a process another executor's provider starts from the DataFlowKernel's threads).
So it is off unless asked for. ``"auto"`` takes the last CPU of the process that no worker is on
(one ``max_workers_per_node`` leaves out, a core's second hardware thread), else the last.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from scalpel_executor.core.cpulist import format_cpu_list
from scalpel_executor.host.sysfs import (allowed_cpus, keep_process_cpus, set_thread_cpus, thread_affinity_available,
                                         thread_cpus)

__all__ = ["AUTO", "DriverPin", "resolve_pin_driver"]

logger = logging.getLogger(__name__)

AUTO = "auto"  # pin_driver's value for the last CPU of the process that no worker is on
_holding = 0  # DriverPins pinned and not released: the process's CPUs are kept while any holds
_holding_lock = threading.Lock()


def resolve_pin_driver(value: int | str | None, workers: Iterable[int] = ()) -> int | None:
    """The CPU ``pin_driver=`` names: None (off), ``"auto"`` or a CPU number of this process.
    ``"auto"`` is the last CPU of the process that none of ``workers`` (the workers' CPUs) is on:
    one ``max_workers_per_node`` left out, or a core's second hardware thread; where every CPU has a
    worker, the last. TypeError or ValueError naming the value otherwise, or where the platform
    cannot pin a thread."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"pin_driver must be a CPU number, {AUTO!r} or None, got {type(value).__name__} {value!r}")
    if isinstance(value, str) and value != AUTO:
        raise ValueError(f"pin_driver must be a CPU number, {AUTO!r} or None, got {value!r}")
    if not thread_affinity_available():
        raise ValueError(f"pin_driver={value!r} needs per-thread CPU affinity (Linux's sched_setaffinity), which "
                         f"this platform lacks; leave pin_driver out")
    cpus = allowed_cpus()
    if value == AUTO:
        return max(cpus - set(workers) or cpus)
    if value not in cpus:
        raise ValueError(f"pin_driver={value!r} is not a CPU this process may use ({format_cpu_list(sorted(cpus))})")
    return value


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
        global _holding
        with _holding_lock:
            if not _holding:
                keep_process_cpus(self._process)
            _holding += 1
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
        for thread in threading.enumerate():
            tid = thread.native_id
            if tid is None or tid in self._before and tid not in self._pinned:
                continue
            try:
                if thread_cpus(tid) == {self.cpu}:
                    set_thread_cpus(tid, self._pinned.get(tid, self._process))
            except OSError:  # it ended meanwhile
                pass
        self._pinned.clear()
        global _holding
        with _holding_lock:
            _holding -= 1
            if not _holding:
                keep_process_cpus(None)
