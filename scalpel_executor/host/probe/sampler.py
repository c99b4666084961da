"""The sampler process and all it runs: /proc smaps totals, the descendant scan, the window schedule, the wire.

The worker's :class:`~scalpel_executor.host.probe.worker_side.Probe` starts this file as a script,
``python -I -S sampler.py --sampler FD --pid PID ...``, by its path. In isolated mode, without
site-packages, no package can be imported, so this file imports only the standard library and holds
everything the sampler needs: reading ``/proc/PID/smaps`` and clearing ``clear_refs`` of the worker
and its descendants, the window schedule, and both ends of the wire (the message kinds and the
window record). The worker imports the same definitions from here, so the two sides cannot drift
apart. Per window: clear_refs, wait, read smaps, send one ``Window`` record over the socket pair;
the worker's estimator turns a task's windows into its footprint.

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
  just the task's. Per window, against a worker with Parsl and numpy imported (437 mappings):
  reading ``smaps`` 5 to 7 ms of CPU (its text; ``smaps_rollup``'s page walk alone is 2.6 ms),
  parsing it 1.6 ms, ``clear_refs`` 1.7 ms, the descendant scan 0.4 ms; none of it can be
  dropped without losing the per-mapping split above. So the executor measures a sample of each
  profile key's tasks instead (:mod:`scalpel_executor.learning.sampling`: the first 3 of a key
  in a run, one in 20 after, the next after a drift); a task sent without ``measure`` sends the
  sampler nothing and costs it no CPU (``docs/results/costs.md``).
* **Descendants.** A ``bash_app``'s processes are found by their parent pid in ``/proc/*/stat``
  (``/proc/PID/task/TID/children`` is often compiled out), reading only processes newer than the
  sampler (a full scan cost 3 ms for 190 processes). Their referenced bytes add to the worker's.

Under memory pressure, page reclaim also clears referenced bits, so footprints can read low.
"""

from __future__ import annotations

import argparse
import os
import re
import select
import socket
import struct
import sys
import time
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

SETTLE = 0.020  # seconds from a task's start to its first window: unpacking arguments, allocating
FIRST_WINDOW = 0.080  # seconds: the first window; tasks of SETTLE + FIRST_WINDOW get a footprint
WINDOW_GROWTH = 12.0  # each window is this much longer than the one before ...
MAX_WINDOW = 1.0  # ... up to this many seconds

_PSEUDO_MAPPINGS = (b"[vdso]", b"[vvar]", b"[vvar_vclock]", b"[vsyscall]", b"[uprobes]")


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


# -- the window schedule and its records -------------------------------------------------------


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



@dataclass(frozen=True)
class Window:
    """One sampling window: its length in seconds and what was measured when it closed."""

    generation: int  # the task (numbered by the probe's start calls) it belongs to
    length: float
    memory: MemorySample
    processes: int  # the worker plus the descendants measured
    cost: float  # CPU seconds the sampler spent reading and clearing for this window



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
        """Answer start/end messages on ``connection`` until it closes (drawn in the package docstring)."""
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


def _sampler_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sampler.py --sampler", description="The probe's sampler process.")
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
