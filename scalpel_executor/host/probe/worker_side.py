"""The worker's side of the probe: :class:`Probe` starts the sampler, brackets each task, reports it.

One per worker. ``Probe()`` checks the capabilities, opens the LLC counters and starts the
sampler process (:mod:`~scalpel_executor.host.probe.sampler`, by its file path, over a socket
pair); ``start()`` and ``stop()`` around each task send one message each, drain the window
records that have arrived without waiting, and pass them to the estimator
(:func:`~scalpel_executor.host.probe.estimator.summarize`). Nothing here raises into the task.
"""

from __future__ import annotations

import logging
import os
import resource
import socket
import subprocess
import sys
import threading
import time

from scalpel_executor.host.probe import sampler
from scalpel_executor.host.probe.capabilities import detect_capabilities
from scalpel_executor.host.probe.counters import LLCCounters
from scalpel_executor.host.probe.estimator import PERCENTILE, ProbeReport, summarize
from scalpel_executor.host.probe.sampler import (
    _END,
    _FAILED,
    _GENERATION,
    _READY,
    _START,
    _WINDOW,
    FIRST_WINDOW,
    MAX_WINDOW,
    SETTLE,
    WINDOW_GROWTH,
    Window,
    _decode_window,
)

# One logger for the whole probe, named as the package, so one setting covers it.
logger = logging.getLogger("scalpel_executor.host.probe")

SAMPLER_START_TIMEOUT = 10.0  # seconds the sampler may take to start and say it is ready


class Probe:
    """Measures each task the calling process runs; see the package docstring for the exchange.

    Parameters
    ----------
    pid : int, optional
        The process to measure, with its descendants; default this one.
    proc_root : str
        Where procfs is mounted (tests pass a fake tree).
    event_source_root : str
        Where perf event sources are listed in sysfs.
    schedule : (first, growth, cap), optional
        The window schedule in seconds (see :func:`~scalpel_executor.host.probe.sampler.window_schedule`).
    settle : float
        Seconds from a task's start to its first window.
    percentile : float
        Which time-weighted percentile of the window footprints to report.

    Call ``start()`` before a task and ``stop()`` after it, ``close()`` at the end (or use it as
    a context manager). None of them raises: what cannot be measured is None in the report, with
    the reason in ``footprint_source``.

    Example
    -------
    >>> import time
    >>> with Probe(schedule=(0.01, 2.0, 0.05), settle=0.0) as probe:
    ...     probe.start()
    ...     data = bytearray(8 << 20)
    ...     end = time.monotonic() + 0.3
    ...     while time.monotonic() < end:
    ...         data[::4096] = bytes(len(data) // 4096)  # one byte in every page, over and over
    ...     report = probe.stop()
    >>> probe.capabilities.referenced_pages is not None or 7 << 20 < report.footprint < 10 << 20
    True
    """

    def __init__(self, pid: int | None = None, proc_root: str = "/proc",
                 event_source_root: str = "/sys/bus/event_source/devices",
                 schedule: tuple[float, float, float] = (FIRST_WINDOW, WINDOW_GROWTH, MAX_WINDOW),
                 settle: float = SETTLE, percentile: float = PERCENTILE):
        first, growth, cap = schedule
        if not (first > 0 and growth >= 1 and cap >= first):
            raise ValueError(f"the window schedule must be (first > 0, growth >= 1, cap >= first) seconds, "
                             f"got {schedule!r}")
        if not settle >= 0:
            raise ValueError(f"settle must be a non-negative number of seconds, got {settle!r}")
        self.settle = float(settle)
        if not 0 < percentile <= 1:
            raise ValueError(f"percentile must be in (0, 1], got {percentile!r}")
        self.pid = os.getpid() if pid is None else pid
        self.proc_root = proc_root
        self.schedule = (float(first), float(growth), float(cap))
        self.percentile = percentile
        self.capabilities = detect_capabilities(self.pid, proc_root, event_source_root)
        self._counters = LLCCounters.open(event_source_root) if self.capabilities.llc_counters is None else None
        self._generation = 0
        self._lock = threading.Lock()  # peek() from the worker's early-report thread vs start()/stop()
        self._peeked: list[Window] = []  # the current task's windows drained by peek()
        self._started: tuple[float, float, tuple[int, int] | None] | None = None
        self._problem = self.capabilities.referenced_pages
        self._sampler: subprocess.Popen | None = None
        self._connection: socket.socket | None = None
        if self._problem is None:
            self._problem = self._spawn_sampler()
        if self._problem:
            logger.info("footprints unavailable: %s", self._problem)

    @property
    def sampler_pid(self) -> int | None:
        """The sampler process's pid, or None when none runs."""
        return self._sampler.pid if self._sampler is not None else None

    def _spawn_sampler(self) -> str | None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        first, growth, cap = self.schedule
        try:
            self._sampler = subprocess.Popen(
                # -I -S: the sampler needs only the standard library, and the package's __init__
                # would import numpy; the script path keeps it from importing the package at all.
                [sys.executable, "-I", "-S", os.path.abspath(sampler.__file__), "--sampler", str(theirs.fileno()),
                 "--pid", str(self.pid), "--proc-root", self.proc_root, "--schedule", f"{first},{growth},{cap}",
                 "--settle", str(self.settle)],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
            )
        except OSError as error:
            ours.close()
            return f"the sampler process could not start: {error}"
        finally:
            theirs.close()
        ours.settimeout(SAMPLER_START_TIMEOUT)
        try:
            ready = ours.recv(16)
        except OSError:
            ready = b""
        if ready != _READY:
            self._end_sampler(ours)
            return f"the sampler process did not start within {SAMPLER_START_TIMEOUT:.0f} s"
        ours.setblocking(False)
        self._connection = ours
        return None

    # -- the task's side ------------------------------------------------------------------------

    def start(self) -> None:
        """Begin measuring a task: a counter read where counters exist, one message to the sampler."""
        self._generation += 1
        self._peeked = []
        self._started = (time.perf_counter(), _cpu_now(), self._read_counters())
        try:
            if self._connection is not None:
                self._drain()  # windows of earlier tasks that arrived late
                self._send(_START + _GENERATION.pack(self._generation))
        except Exception:  # measuring must never break the task
            logger.exception("probe failed to start")

    def peek(self) -> float | None:
        """The running task's footprint from the windows closed so far (None before the first);
        callable from another thread while the task runs. Never waits."""
        with self._lock:
            started = self._started
            if started is None or self._connection is None:
                return None
            windows, _ = self._drain()
            self._peeked += windows
            if not self._peeked:
                return None
            return summarize(self._peeked, time.perf_counter() - started[0], self.percentile).footprint

    def stop(self) -> ProbeReport:
        """End the task's measurement and report it; never waits for a window in flight."""
        wall_end, cpu_end = time.perf_counter(), _cpu_now()
        try:
            llc_end = self._read_counters()
            if self._started is None:
                return ProbeReport(None, "unavailable: stop() without start()", 0)
            wall_start, cpu_start, llc_start = self._started
            self._started = None
            windows, failure = [], None
            if self._connection is not None:
                self._send(_END + _GENERATION.pack(self._generation))
                with self._lock:
                    windows, failure = self._drain()
                    windows, self._peeked = self._peeked + windows, []
            report = summarize(windows, wall_end - wall_start, self.percentile, self.settle + self.schedule[0])
            report.cpu = cpu_end - cpu_start
            if llc_start is not None and llc_end is not None:
                report.llc_references = llc_end[0] - llc_start[0]
                report.llc_misses = llc_end[1] - llc_start[1]
            problem = self._problem or failure
            if problem:
                report.footprint, report.footprint_max = None, None
                report.footprint_source = f"unavailable: {problem}"
            return report
        except Exception as error:  # measuring must never break the task
            logger.exception("probe failed to stop")
            return ProbeReport(None, f"unavailable: probe error {type(error).__name__}: {error}", 0)

    def close(self) -> None:
        """End the sampler and release the counters. Idempotent."""
        if self._connection is not None:
            connection, self._connection = self._connection, None
            self._end_sampler(connection)
        if self._counters is not None:
            self._counters.close()
            self._counters = None

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _end_sampler(self, connection: socket.socket) -> None:
        connection.close()  # the sampler exits at end of file
        if self._sampler is not None:
            try:
                self._sampler.wait(2)
            except subprocess.TimeoutExpired:
                self._sampler.kill()
                self._sampler.wait()

    def _send(self, message: bytes) -> None:
        try:
            self._connection.send(message)
        except OSError as error:  # the sampler died (killed, out of memory): later tasks go unmeasured
            code = self._sampler.poll() if self._sampler is not None else None
            self._problem = f"the sampler process is gone (exit code {code}): {error}"
            logger.warning("footprints unavailable from now on: %s", self._problem)
            self._connection.close()
            self._connection = None

    def _drain(self) -> tuple[list[Window], str | None]:
        """The current task's windows (and failure) that have arrived; stale ones are dropped."""
        windows, failure = [], None
        while self._connection is not None:
            try:
                message = self._connection.recv(8192)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as error:
                self._problem = f"the sampler connection failed: {error}"
                break
            if not message:
                self._problem = f"the sampler process exited (code {self._sampler.poll()})"
                self._connection.close()
                self._connection = None
                break
            kind = message[:1]
            if kind == _WINDOW:
                window = _decode_window(message)
                if window.generation == self._generation:
                    windows.append(window)
            elif kind == _FAILED and _GENERATION.unpack(message[1:1 + _GENERATION.size])[0] == self._generation:
                failure = message[1 + _GENERATION.size:].decode(errors="replace")
        return windows, failure

    def _read_counters(self) -> tuple[int, int] | None:
        if self._counters is None:
            return None
        try:
            return self._counters.read()
        except OSError:
            return None


def _cpu_now() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime
