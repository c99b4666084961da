"""The measurement probe: a task's working set, memory peaks and run time, from its real run.

Scalpel groups tasks by memory footprint. Without hardware counters (virtual machines, locked-down
``perf_event_paranoid``) the footprint comes from the kernel's page-referenced bits: writing ``1`` to
``/proc/PID/clear_refs`` clears them, and after a window of run time ``/proc/PID/smaps`` reports,
per mapping, how many bytes were touched since (``Referenced:``). That is the task's working set
over the window, sampled while the task runs, with no pre-run.

Moving parts (one probe and one sampler process per worker; the sampler lives as long as the probe)::

    worker (Probe)                                   sampler: python -I -S probe.py --sampler
    ──────────────                                   (child of the worker: same CPUs, same
                                                      process group, exits at EOF)
    Probe() ── spawn, socket pair (SOCK_SEQPACKET) ──>  <── "ready"
    start() ── ("start", generation) ──────────────>  select(socket, 20 ms): the task settles
    fn(*args, **kwargs) runs                          clear_refs(worker + descendants)   window 0 opens
                                                      select(socket, window_k): 80 ms, then 0.96 s,
                                                        then 1 s each
                                                      read smaps of worker + descendants,
                                                      clear_refs                         window k+1 opens
                                         <──────────  ("window", generation, length, referenced
                                                        data, RSS, USS, processes, CPU it cost)
    stop() ── ("end", generation) ─────────────────>  stops waiting; a sample in flight is sent late
       └─ drains the windows already sent (never waits) and drops stale ones by generation
       └─> ProbeReport: footprint = time-weighted 75th percentile of the windows

``start`` and ``stop`` cost a send and a non-blocking drain; a task that ends before its first
window closes (100 ms) reports ``footprint=None`` with the reason, and so does the window in
flight when a task ends: it is never waited for. LLC counters (where a ``cpu`` PMU exists) are
opened in the worker with ``inherit`` and read by ``start``/``stop`` themselves.

Decisions, each from measurements on a 2-core VM (parsl and numpy imported, about 450 mappings):

* **A process, not a thread.** A sampling thread inside the worker touches its own interpreter's
  heap between ``clear_refs`` and the ``smaps`` walk: 0.2 to 0.7 MiB per window, varying from run
  to run, so a 1 MiB working set read 1.13 in one run and 1.75 in the next even with an idle
  baseline subtracted. Read from another process, the same task reads 1.027 MiB in every
  window. The sampler also never takes the task's GIL, and as the worker's child it inherits its
  pinning, so its cost lands on the worker's own core.
* **What counts.** The interpreter's, numpy's and libc's code pages are referenced in every window
  (about 1.3 MiB), which would swamp a 1 MiB working set; ``smaps_rollup`` cannot separate them.
  Per-mapping ``smaps`` can: every mapping with execute permission, and every mapping of a file
  that is mapped executable anywhere (a program or shared library, its data sections too), is
  left out, as are ``[vdso]``/``[vvar]`` and read-only file mappings (locale archives: their
  page-cache pages read as referenced whenever any process on the machine reads them). Anonymous
  memory, the heap, stacks, shared memory and writable file mappings count. The clear-only-anonymous
  mode (``clear_refs`` ``2``) with ``smaps_rollup`` was cheaper but left a 3 MiB offset (the
  libraries' written data pages, never cleared), so it is not used.
* **Window schedule.** A steady kernel reads the same from 5 ms to 200 ms windows; short windows
  only undercount tasks that sweep their data slower than the window. But a window is dear: for a
  worker of ~100 MiB RSS and ~450 mappings, reading ``smaps`` costs 4 to 6 ms of CPU, parsing it
  2 ms, ``clear_refs`` 2 ms (both walk every page table entry), the descendant scan 1 ms, all on
  the worker's own core. So the first window waits 20 ms for the task's start-up (unpacking
  arguments, allocating and filling its data: 1.4 to 12.7 MiB more than the steady 8 and 24 MiB
  in a window that included it), runs 80 ms, and the next 0.96 s: a 1 s task pays for one clear
  and one window, a long task for one window a second. Measured with ``benchmarks/probe_cost.py``
  on a loaded 2-core VM, the sampler spent 22 to 48 ms of CPU per 1 to 1.4 s task (2.5 to 3.4 %)
  and the task's median wall time grew 4 to 6 % (the A/A control read -1.8 %): above a 2 % budget,
  because each window walks every page of the worker (~100 MiB of interpreter and libraries), not
  just the task's. Measuring only some tasks of each kind is the remaining lever.
* **Estimator.** The time-weighted 75th percentile over windows: weighting by length lets a long
  steady window outvote a short one still holding start-up, and keeps a phase that fills a
  quarter of the run visible. The maximum would report a one-off initialisation (a 64 MiB array
  filled once, then 8 MiB reused: max 29 MiB, this estimator 8.3 MiB); it is reported too, as
  ``footprint_max``.
* **Descendants.** A ``bash_app``'s processes are found by their parent pid in ``/proc/*/stat``
  (``/proc/PID/task/TID/children`` is often compiled out), reading only processes newer than the
  sampler (a full scan cost 3 ms for 190 processes). Their referenced bytes add to the worker's.

Under memory pressure, page reclaim also clears referenced bits, so footprints can read low.
Everything a probe returns is numbers and strings; every failure becomes a ``None`` and a reason,
never an exception in the task.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import logging
import os
import platform
import re
import resource
import select
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import asdict, dataclass

logger = logging.getLogger("scalpel_executor.host.probe")

SETTLE = 0.020  # seconds from a task's start to its first window: unpacking arguments, allocating
FIRST_WINDOW = 0.080  # seconds: the first window; tasks of SETTLE + FIRST_WINDOW get a footprint
WINDOW_GROWTH = 12.0  # each window is this much longer than the one before ...
MAX_WINDOW = 1.0  # ... up to this many seconds
PERCENTILE = 0.75  # time-weighted percentile of the window footprints that is reported
SAMPLER_START_TIMEOUT = 10.0  # seconds the sampler may take to start and say it is ready

REFERENCED_PAGES = "referenced-pages"
_PSEUDO_MAPPINGS = (b"[vdso]", b"[vvar]", b"[vvar_vclock]", b"[vsyscall]", b"[uprobes]")


# -- capability detection ----------------------------------------------------------------------


@dataclass(frozen=True)
class Capabilities:
    """What the kernel offers this probe, found once per worker.

    ``referenced_pages`` is None when footprints can be measured, else the reason they cannot;
    ``memory`` likewise for RSS/USS; ``llc_counters`` is None when LLC references and misses can
    be counted, else why not.
    """

    referenced_pages: str | None
    memory: str | None
    llc_counters: str | None


def detect_capabilities(pid: int | None = None, proc_root: str = "/proc",
                        event_source_root: str = "/sys/bus/event_source/devices") -> Capabilities:
    """Find which measurements the kernel offers for process ``pid``.

    Parameters
    ----------
    pid : int, optional
        The process to measure; default this one.
    proc_root : str
        Where procfs is mounted; tests pass a fake tree to simulate missing features.
    event_source_root : str
        The sysfs folder of perf event sources; hardware counters need a ``cpu`` source there.

    Returns
    -------
    Capabilities
        Each field None when available, else a reason such as
        ``"no /proc/42/clear_refs (kernel without CONFIG_PROC_PAGE_MONITOR?)"``.

    Notes
    -----
    Only looks at files: nothing is cleared or counted. O(1).
    """
    pid = os.getpid() if pid is None else pid
    base = os.path.join(proc_root, str(pid))
    referenced = None
    clear_refs = os.path.join(base, "clear_refs")
    smaps = os.path.join(base, "smaps")
    if not os.path.exists(clear_refs):
        referenced = f"no {clear_refs} (kernel without CONFIG_PROC_PAGE_MONITOR?)"
    elif not os.access(clear_refs, os.W_OK):
        referenced = f"{clear_refs} is not writable by uid {os.getuid()}"
    memory = _smaps_problem(smaps)
    referenced = referenced or memory
    return Capabilities(referenced, memory, _llc_counter_problem(event_source_root))


def _smaps_problem(path: str) -> str | None:
    try:
        with open(path, "rb") as file:
            head = file.read(4096)
    except OSError as error:
        return f"cannot read {path}: {error.strerror or error}"
    if b"\nRss:" not in head:
        return f"{path} has no Rss: fields (not a smaps file?)"
    if b"\nReferenced:" not in head:
        return f"{path} has no Referenced: fields"
    return None


def _llc_counter_problem(event_source_root: str) -> str | None:
    if not os.path.isdir(os.path.join(event_source_root, "cpu")):
        return f"no hardware performance counters (no 'cpu' event source in {event_source_root})"
    if _PERF_EVENT_OPEN.get(platform.machine()) is None:
        return f"perf_event_open syscall number unknown for {platform.machine()}"
    return None


# -- reading smaps -----------------------------------------------------------------------------


_HEADER = re.compile(rb"\n([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \d+ *([^\n]*)")
_REFERENCED = re.compile(rb"\nReferenced: +(\d+) kB")
_RSS = re.compile(rb"\nRss: +(\d+) kB")
_PRIVATE = re.compile(rb"\nPrivate_\w+: +(\d+) kB")  # Private_Clean, Private_Dirty, Private_Hugetlb


@dataclass(frozen=True)
class MemorySample:
    """Totals over one or more processes' mappings, in bytes."""

    referenced_data: int  # referenced bytes outside program and library images
    rss: int
    uss: int

    def __add__(self, other: MemorySample) -> MemorySample:
        return MemorySample(self.referenced_data + other.referenced_data, self.rss + other.rss, self.uss + other.uss)


def smaps_totals(text: bytes) -> MemorySample:
    """Total the text of a ``/proc/PID/smaps`` file: referenced data bytes, RSS and USS.

    Parameters
    ----------
    text : bytes
        The whole file.

    Returns
    -------
    MemorySample
        ``referenced_data`` sums ``Referenced:`` over anonymous memory (including ``[heap]``,
        ``[stack]``) and writable file mappings, except: mappings with execute permission, every
        mapping of a file that is mapped with execute permission anywhere (programs and shared
        libraries, their data sections included), kernel pseudo-mappings (``[vdso]``, ``[vvar]``,
        ...). ``rss`` sums ``Rss:`` and ``uss`` sums ``Private_*:`` over every
        mapping.

    Raises
    ------
    ValueError
        If the mapping headers and ``Referenced:`` fields do not pair up (not an smaps file).

    Example
    -------
    >>> text = (b"7f0000001000-7f0000002000 r-xp 00000000 fe:00 7   /usr/lib/libm.so.6\\n"
    ...         b"Rss: 4 kB\\nPrivate_Clean: 0 kB\\nReferenced: 4 kB\\nVmFlags: rd ex\\n"
    ...         b"7f0000002000-7f0000003000 rw-p 00001000 fe:00 7   /usr/lib/libm.so.6\\n"
    ...         b"Rss: 4 kB\\nPrivate_Dirty: 4 kB\\nReferenced: 4 kB\\nVmFlags: rd wr\\n"
    ...         b"7f0000004000-7f0000005000 r--p 00000000 fe:00 9   /usr/lib/locale/C.utf8/LC_CTYPE\\n"
    ...         b"Rss: 4 kB\\nPrivate_Clean: 0 kB\\nReferenced: 4 kB\\nVmFlags: rd\\n"
    ...         b"7f0000010000-7f0000020000 rw-p 00000000 00:00 0 \\n"
    ...         b"Rss: 64 kB\\nPrivate_Dirty: 64 kB\\nReferenced: 8 kB\\nVmFlags: rd wr\\n")
    >>> smaps_totals(text)
    MemorySample(referenced_data=8192, rss=77824, uss=69632)

    Notes
    -----
    O(len(text)), in four regular-expression scans that each start from a literal (about 1 ms
    for 430 mappings; building an object per mapping took twice as long).
    """
    text = b"\n" + text
    headers = _HEADER.findall(text)
    referenced = _REFERENCED.findall(text)
    if len(headers) != len(referenced):
        raise ValueError(f"smaps text with {len(headers)} mapping headers but {len(referenced)} Referenced: "
                         f"fields: {text[1:80]!r}")
    images = {path for _, _, perms, path in headers if path and perms[2:3] == b"x"}
    data = 0
    for (_, _, perms, path), kilobytes in zip(headers, referenced):
        if perms[2:3] == b"x" or path in images or path in _PSEUDO_MAPPINGS:
            continue
        if perms[1:2] != b"w" and path[:1] not in (b"", b"["):
            continue  # a read-only file: page-cache pages whose referenced flag any reader sets
        data += int(kilobytes)
    rss = sum(map(int, _RSS.findall(text)))
    uss = sum(map(int, _PRIVATE.findall(text)))
    return MemorySample(data * 1024, rss * 1024, uss * 1024)


def descendants(pid: int, proc_root: str = "/proc", skip: AbstractSet[int] = frozenset()) -> list[int]:
    """Every live descendant of ``pid`` (children, their children, ...), from ``PROC/*/stat``.

    Parameters
    ----------
    pid : int
    proc_root : str
    skip : set of int
        Processes known not to descend from ``pid`` (older than it); their stat files are not read.

    Returns
    -------
    list of int
        Breadth-first order; processes that vanish while being read are skipped.

    Notes
    -----
    Reads the stat file of every process not skipped: O(processes on the machine), about 1 ms per
    100 read.
    """
    parents: dict[int, list[int]] = {}
    try:
        entries = os.listdir(proc_root)
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit() or int(entry) in skip:
            continue
        try:
            with open(os.path.join(proc_root, entry, "stat"), "rb") as file:
                stat = file.read()
            ppid = int(stat[stat.rfind(b")") + 2:].split(None, 2)[1])
        except (OSError, ValueError, IndexError):
            continue
        parents.setdefault(ppid, []).append(int(entry))
    found, frontier = [], [pid]
    while frontier:
        children = [child for parent in frontier for child in parents.get(parent, ())]
        found.extend(children)
        frontier = children
    return found


# -- hardware counters -------------------------------------------------------------------------

_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241, "ppc64le": 319, "s390x": 331, "riscv64": 241}
_PERF_TYPE_HARDWARE = 0
_PERF_COUNT_HW_CACHE_REFERENCES = 2
_PERF_COUNT_HW_CACHE_MISSES = 3
_PERF_FLAG_FD_CLOEXEC = 1 << 3
_ATTR_DISABLED, _ATTR_INHERIT, _ATTR_EXCLUDE_KERNEL, _ATTR_EXCLUDE_HV = 1 << 0, 1 << 1, 1 << 5, 1 << 6
_PERF_ATTR_SIZE = 64  # PERF_ATTR_SIZE_VER0: every kernel with perf events accepts it
_PERF_EVENT_IOC_ENABLE = 0x2400


class LLCCounters:
    """LLC references and misses of this process and the children it starts (``inherit``).

    Open with :meth:`open`, which returns None (and logs why at debug level) wherever the kernel
    offers no hardware counters; :meth:`read` returns ``(references, misses)`` since opening.
    """

    def __init__(self, fds: tuple[int, int]):
        self._fds = fds

    @classmethod
    def open(cls, event_source_root: str = "/sys/bus/event_source/devices") -> LLCCounters | None:
        problem = _llc_counter_problem(event_source_root)
        if problem:
            logger.debug("LLC counters unavailable: %s", problem)
            return None
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fds = []
            for config in (_PERF_COUNT_HW_CACHE_REFERENCES, _PERF_COUNT_HW_CACHE_MISSES):
                attr = ctypes.create_string_buffer(struct.pack(
                    "=IIQQQQQ", _PERF_TYPE_HARDWARE, _PERF_ATTR_SIZE, config, 0, 0, 0,
                    _ATTR_DISABLED | _ATTR_INHERIT | _ATTR_EXCLUDE_KERNEL | _ATTR_EXCLUDE_HV,
                ).ljust(_PERF_ATTR_SIZE, b"\0"))
                fd = libc.syscall(_PERF_EVENT_OPEN[platform.machine()], attr, ctypes.c_int(0), ctypes.c_int(-1),
                                  ctypes.c_int(-1), ctypes.c_ulong(_PERF_FLAG_FD_CLOEXEC))
                if fd < 0:
                    code = ctypes.get_errno()
                    for opened in fds:
                        os.close(opened)
                    logger.debug("perf_event_open failed: %s", os.strerror(code) or errno.errorcode.get(code))
                    return None
                fds.append(fd)
            import fcntl

            for fd in fds:
                fcntl.ioctl(fd, _PERF_EVENT_IOC_ENABLE, 0)
            return cls((fds[0], fds[1]))
        except (OSError, AttributeError, ValueError) as error:
            logger.debug("LLC counters unavailable: %s", error)
            return None

    def read(self) -> tuple[int, int]:
        references, misses = (struct.unpack("=Q", os.read(fd, 8))[0] for fd in self._fds)
        return references, misses

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)


# -- windows and the estimator -----------------------------------------------------------------


def window_schedule(first: float = FIRST_WINDOW, growth: float = WINDOW_GROWTH,
                    cap: float = MAX_WINDOW) -> Iterator[float]:
    """Yield window lengths in seconds: ``first``, then ``growth`` times longer each, at most ``cap``.

    Example
    -------
    >>> from itertools import islice
    >>> [round(w, 3) for w in islice(window_schedule(0.08, 12.0, 1.0), 4)]
    [0.08, 0.96, 1.0, 1.0]
    """
    length = first
    while True:
        yield min(length, cap)
        length *= growth


def weighted_percentile(values: Sequence[float], weights: Sequence[float], q: float = PERCENTILE) -> float:
    """The smallest value whose share of the total weight at or below it is at least ``q``.

    Parameters
    ----------
    values, weights : sequences of float of the same length, weights positive
    q : float in (0, 1]

    Returns
    -------
    float

    Example
    -------
    >>> weighted_percentile([72.0, 8.0, 8.0], [0.02, 0.16, 1.0], 0.75)
    8.0
    >>> weighted_percentile([4.0, 24.0], [0.5, 0.5], 0.75)
    24.0

    Notes
    -----
    O(n log n).
    """
    if not values or len(values) != len(weights):
        raise ValueError(f"need as many weights as values (at least one), got {len(values)} values "
                         f"and {len(weights)} weights")
    if not 0 < q <= 1:
        raise ValueError(f"the percentile must be in (0, 1], got {q!r}")
    pairs = sorted(zip(values, weights))
    threshold = q * sum(weights) * (1 - 1e-12)
    running = 0.0
    for value, weight in pairs:
        running += weight
        if running >= threshold:
            return value
    return pairs[-1][0]


@dataclass(frozen=True)
class Window:
    """One sampling window: its length in seconds and what was measured when it closed."""

    generation: int  # the task (numbered by the probe's start calls) it belongs to
    length: float
    memory: MemorySample
    processes: int  # the worker plus the descendants measured
    cost: float  # CPU seconds the sampler spent reading and clearing for this window


@dataclass
class ProbeReport:
    """What the probe measured over one task. Numbers and strings only (see :meth:`to_dict`)."""

    footprint: float | None  # bytes: time-weighted 75th percentile of the windows' referenced data
    footprint_source: str  # "referenced-pages" or "unavailable: <reason>"
    windows: int  # sampling windows completed during the task
    footprint_max: float | None = None  # bytes: the largest window
    peak_rss: int | None = None  # bytes, worker plus descendants, highest at a window's close
    peak_uss: int | None = None
    wall: float = 0.0  # seconds
    cpu: float = 0.0  # seconds of CPU: this process and its reaped children
    probe_cpu: float = 0.0  # seconds of CPU the sampler spent on this task's windows
    llc_references: int | None = None
    llc_misses: int | None = None
    processes: int = 1  # most processes measured in one window (worker plus descendants)

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(windows: Sequence[Window], wall: float, percentile: float = PERCENTILE,
              first_close: float = SETTLE + FIRST_WINDOW) -> ProbeReport:
    """Turn one task's windows into its report (footprint, peaks, sampling cost).

    Parameters
    ----------
    windows : sequence of Window
        The task's completed windows, in order.
    wall : float
        The task's wall time in seconds (for the reason when there is no window).
    percentile : float
    first_close : float
        Seconds from the task's start to the first window's close, named in the reason when the
        task ended before it.

    Returns
    -------
    ProbeReport
        ``footprint`` is the time-weighted ``percentile`` of the windows' referenced data;
        ``footprint_max`` the largest window.
        ``wall``, ``cpu`` and the LLC fields are left for the caller.

    Example
    -------
    >>> start_up, steady = MemorySample(30 << 20, 90 << 20, 80 << 20), MemorySample(8 << 20, 90 << 20, 80 << 20)
    >>> windows = [Window(1, 0.08, start_up, 1, 0.004), Window(1, 0.96, steady, 1, 0.004)]
    >>> report = summarize(windows, wall=0.5)
    >>> report.footprint / 2**20, report.footprint_max / 2**20, report.peak_rss / 2**20
    (8.0, 30.0, 90.0)

    Notes
    -----
    O(n log n) in the windows.
    """
    report = ProbeReport(None, "", len(windows), wall=wall, probe_cpu=sum(w.cost for w in windows))
    if not windows:
        report.footprint_source = (f"unavailable: the task ended after {wall * 1e3:.1f} ms, before its "
                                   f"first window closed at {first_close * 1e3:.0f} ms")
        return report
    data = [w.memory.referenced_data for w in windows]
    report.footprint = float(weighted_percentile(data, [w.length for w in windows], percentile))
    report.footprint_max = float(max(data))
    report.footprint_source = REFERENCED_PAGES
    report.peak_rss = max(w.memory.rss for w in windows)
    report.peak_uss = max(w.memory.uss for w in windows)
    report.processes = max(w.processes for w in windows)
    return report


# -- the wire between probe and sampler --------------------------------------------------------
# One SOCK_SEQPACKET message per record, so neither side needs framing.

_START, _END, _READY, _WINDOW, _FAILED = b"S", b"E", b"R", b"W", b"F"
_GENERATION = struct.Struct("=Q")
_WINDOW_RECORD = struct.Struct("=QdqqqId")  # generation, length, referenced, rss, uss, processes, cost


def _encode_window(window: Window) -> bytes:
    memory = window.memory
    return _WINDOW + _WINDOW_RECORD.pack(window.generation, window.length, memory.referenced_data, memory.rss,
                                         memory.uss, window.processes, window.cost)


def _decode_window(message: bytes) -> Window:
    generation, length, referenced, rss, uss, processes, cost = _WINDOW_RECORD.unpack(message[1:])
    return Window(generation, length, MemorySample(referenced, rss, uss), processes, cost)


# -- the sampler process -----------------------------------------------------------------------


class Sampler:
    """Measures process ``pid`` and its descendants window by window; runs in its own process.

    Parameters
    ----------
    pid : int
    proc_root : str
    schedule : (first, growth, cap)
        The window schedule (see :func:`window_schedule`).
    settle : float
        Seconds between a task's start and its first window.
    """

    def __init__(self, pid: int, proc_root: str = "/proc",
                 schedule: tuple[float, float, float] = (FIRST_WINDOW, WINDOW_GROWTH, MAX_WINDOW),
                 settle: float = SETTLE):
        self.pid = pid
        self.proc_root = proc_root
        self.schedule = schedule
        self.settle = settle
        # Processes that already run when the sampler starts (before any task) descend from no task,
        # so each window reads only the stat files of newer ones: 190 processes cost 3 ms a scan on
        # a busy core, the few new ones almost nothing. A pid leaves this set when its process is
        # gone, so a descendant can reuse it (pid numbers wrap around at pid_max, 32768 here).
        self.older = frozenset(self._pids()) - {pid, *descendants(pid, proc_root)}

    def serve(self, connection: socket.socket) -> None:
        """Answer start/end messages on ``connection`` until it closes (see the module docstring)."""
        connection.send(_READY)
        message = connection.recv(64)
        while message:
            if message[:1] == _START:
                generation = _GENERATION.unpack(message[1:])[0]
                try:
                    for window in self.windows(generation, connection):
                        connection.send(_encode_window(window))
                except OSError as error:
                    if isinstance(error, (BrokenPipeError, ConnectionResetError)):
                        return
                    reason = f"sampling failed: {type(error).__name__}: {error}"
                    connection.send(_FAILED + _GENERATION.pack(generation) + reason.encode()[:4000])
            message = connection.recv(64)

    def windows(self, generation: int, connection: socket.socket | None = None) -> Iterator[Window]:
        """Settle, then clear, wait, read, repeat: yield one Window per window of the schedule.

        Stops when ``connection`` becomes readable (the next message ends this task) and leaves
        that message unread. Raises OSError when the measured process cannot be read or cleared.
        """
        if self._wait(connection, self.settle):
            return
        cost = time.process_time()
        targets = self.targets()
        opened = self.clear(targets)
        cost = time.process_time() - cost
        for length in window_schedule(*self.schedule):
            if self._wait(connection, length):
                return
            started = time.process_time()
            targets = self.targets()
            memory, measured = self.read(targets)
            closed = time.monotonic()
            opened_next = self.clear(targets)
            yield Window(generation, closed - opened, memory, measured, cost + time.process_time() - started)
            opened, cost = opened_next, 0.0

    @staticmethod
    def _wait(connection: socket.socket | None, seconds: float) -> bool:
        """Wait ``seconds``; True as soon as ``connection`` has a message (the task ended)."""
        if connection is None:
            time.sleep(seconds)
            return False
        return bool(select.select([connection], [], [], seconds)[0])

    def targets(self) -> list[int]:
        """The measured process and its live descendants, this sampler left out."""
        own = os.getpid()
        self.older &= frozenset(self._pids())
        return [self.pid, *(p for p in descendants(self.pid, self.proc_root, self.older) if p != own)]

    def _pids(self) -> list[int]:
        try:
            return [int(entry) for entry in os.listdir(self.proc_root) if entry.isdigit()]
        except OSError:
            return []

    def clear(self, pids: Sequence[int]) -> float:
        """Clear the referenced bits of ``pids``; returns the monotonic time the window opened."""
        for pid in pids:
            try:
                fd = os.open(os.path.join(self.proc_root, str(pid), "clear_refs"), os.O_WRONLY)
                try:
                    os.write(fd, b"1")
                finally:
                    os.close(fd)
            except OSError:
                if pid == self.pid:
                    raise
                # a descendant that exited, or one this user may not touch (setuid): not measured
        return time.monotonic()

    def read(self, pids: Sequence[int]) -> tuple[MemorySample, int]:
        """Totals of the ``smaps`` of every pid that could be read, and how many that was."""
        memory, measured = MemorySample(0, 0, 0), 0
        for pid in pids:
            try:
                with open(os.path.join(self.proc_root, str(pid), "smaps"), "rb") as file:
                    text = file.read()
            except OSError:
                if pid == self.pid:
                    raise
                continue  # a descendant that exited between the scan and the read
            memory, measured = memory + smaps_totals(text), measured + 1
        return memory, measured


# -- the probe (the worker's side) -------------------------------------------------------------


class Probe:
    """Measures each task the calling process runs; see the module docstring.

    Parameters
    ----------
    pid : int, optional
        The process to measure, with its descendants; default this one.
    proc_root : str
        Where procfs is mounted (tests pass a fake tree).
    event_source_root : str
        Where perf event sources are listed in sysfs.
    schedule : (first, growth, cap), optional
        The window schedule in seconds (see :func:`window_schedule`).
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
                [sys.executable, "-I", "-S", os.path.abspath(__file__), "--sampler", str(theirs.fileno()),
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
        self._started = (time.perf_counter(), _cpu_now(), self._read_counters())
        try:
            if self._connection is not None:
                self._drain()  # windows of earlier tasks that arrived late
                self._send(_START + _GENERATION.pack(self._generation))
        except Exception:  # measuring must never break the task
            logger.exception("probe failed to start")

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
                windows, failure = self._drain()
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


def _sampler_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="probe.py --sampler", description="The probe's sampler process.")
    parser.add_argument("--sampler", type=int, required=True, help="file descriptor of the sampler's socket")
    parser.add_argument("--pid", type=int, required=True, help="the process to measure, with its descendants")
    parser.add_argument("--proc-root", default="/proc")
    parser.add_argument("--schedule", default=f"{FIRST_WINDOW},{WINDOW_GROWTH},{MAX_WINDOW}",
                        help="first,growth,cap of the window schedule in seconds")
    parser.add_argument("--settle", type=float, default=SETTLE, help="seconds from a task's start to its first window")
    args = parser.parse_args(argv)
    first, growth, cap = (float(x) for x in args.schedule.split(","))
    connection = socket.socket(fileno=args.sampler)
    try:
        Sampler(args.pid, args.proc_root, (first, growth, cap), args.settle).serve(connection)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the worker is gone
    return 0


if __name__ == "__main__":
    sys.exit(_sampler_main())
