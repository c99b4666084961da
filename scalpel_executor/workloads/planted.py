"""Planted contention: tasks that slow each other by a pair matrix written in advance, so the learning
loop can be watched live on any machine, a noisy 2-core VM included.

::

    Board.create(run folder / "board",            a small file: the CPU -> LLC domain map, the
                 domains, matrix)                   planted matrix (JSON), then one slot per
        │                                           running task (pid, CPU, kind)
        │  every task, in whatever worker process:
        │    claim a slot (its pid, its CPU, its kind) ─ under an exclusive flock, a few µs
        │    each step: read the kinds on its domain now ─ shared flock, one 1.6 KiB pread
        │               sleep ``step`` seconds, counting step / factor of its work as done,
        │               factor = Π over partners of matrix[own kind][partner's kind]
        │    release its slot (finally: an exception frees it too)
        v
    Board.close(): the file removed

**Why sleeping, not computing.** A task's work is seconds of wall time stretched by its planted
factor, not cycles: on a host whose two vCPUs slow each other 0.6-2.2x from minute to minute
(docs/results/interference.md, "Live: a streaming mix") a computing task's time measures the host as
much as its partners, and the loop could not be seen. A sleeping task's time is its planted
slowdown to within a step's timer slack, whatever else the host runs. The executor never knows:
it sees tasks of small footprints whose run times depend on who runs beside them, and learns that
from their co-runs as it would from real ones.

**Safe when tasks die.** A slot names its task's process; a reader counts a slot whose process is
gone as free (``os.kill(pid, 0)``), and a task claiming a slot first clears any its own process
left (a task killed inside a worker that lives on). A process id reused by a new process before
anyone reads the slot would count as a stale partner until the board is closed: rare, and no
executor state depends on it.

**Where a task runs.** A task's CPU is its process's affinity (the executor pins each worker to
one CPU; unpinned, the lowest CPU it may run on), its domain that CPU's in the board's map.

The oracle of the planted world is :func:`oracle_terms`: the per-key terms
(:class:`~scalpel_executor.core.interference.Terms`) that reproduce the matrix's pairs as closely as
the model's form allows, told to the executor as any learned terms are.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import struct
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.interference import Terms
from scalpel_executor.core.interference_fit import KeyedCoRun, fit_interference
from scalpel_executor.workloads.lookups import _stamp

__all__ = ["Board", "PLANTED", "RETUNED", "PlantedMatrix", "gather", "oracle_terms", "planted", "stretch"]

_MAGIC = b"SCPB0001"
_HEADER = struct.Struct("<8sIII")  # magic, slots, CPUs in the domain map, bytes of the matrix (JSON)
_SLOT = struct.Struct("<ii16s")  # pid (0: free), CPU, kind (ASCII, NUL-padded)
#: Slots on a board: running tasks at once on a machine the board serves (a 64-core node fits).
SLOTS = 64
#: Seconds between two reads of the board: a partner that comes or goes is seen within one step.
STEP = 0.02
KIND_BYTES = 16


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


class Board:
    """The shared board of which task kinds run on which LLC domain right now (module docstring).

    Parameters
    ----------
    path : path-like
        The board's file, made by :meth:`create`.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._fd = os.open(self.path, os.O_RDWR)
        head = os.pread(self._fd, _HEADER.size, 0)
        if len(head) < _HEADER.size or head[:len(_MAGIC)] != _MAGIC:
            os.close(self._fd)
            raise ValueError(f"{self.path} is not a planted-contention board (it starts {head[:8]!r}, not "
                             f"{_MAGIC!r}); make one with Board.create(path, domains, matrix)")
        _, self.slots, cpus, size = _HEADER.unpack(head)
        self._domain_of = struct.unpack(f"<{cpus}h", os.pread(self._fd, 2 * cpus, _HEADER.size))
        self.matrix = PlantedMatrix(json.loads(os.pread(self._fd, size, _HEADER.size + 2 * cpus)))
        self._slots_at = _HEADER.size + 2 * cpus + size

    @classmethod
    def create(cls, path: str | os.PathLike, domains: Sequence[Iterable[int]], matrix: "PlantedMatrix",
               slots: int = SLOTS) -> "Board":
        """A new board at ``path`` (replacing any file there) for the LLC ``domains`` (lists of
        CPUs, e.g. ``[[0, 1]]``) and the planted ``matrix`` its tasks stretch by, with ``slots``
        free slots. The creator closes it with ``remove=True`` (or uses it in a ``with``)."""
        domains = [sorted(set(cpus)) for cpus in domains]
        if not domains or not all(domains) or any(c < 0 for cpus in domains for c in cpus):
            raise ValueError(f"domains must be non-empty lists of CPU numbers >= 0, such as [[0, 1]], got {domains!r}")
        cpus = max(c for d in domains for c in d) + 1
        table = [-1] * cpus
        for index, members in enumerate(domains):
            for cpu in members:
                table[cpu] = index
        path = Path(path)
        temporary = path.with_name(path.name + ".new")
        text = json.dumps(matrix.to_dict(), sort_keys=True).encode()
        temporary.write_bytes(_HEADER.pack(_MAGIC, slots, cpus, len(text)) + struct.pack(f"<{cpus}h", *table)
                              + text + bytes(_SLOT.size * slots))
        os.replace(temporary, path)  # a task never opens a half-written board
        return cls(path)

    def domain(self, cpu: int) -> int:
        """The LLC domain of ``cpu`` in the board's map (-1: a CPU it does not list)."""
        return self._domain_of[cpu] if 0 <= cpu < len(self._domain_of) else -1

    def _read(self) -> list[tuple[int, int, str]]:
        raw = os.pread(self._fd, _SLOT.size * self.slots, self._slots_at)
        return [(pid, cpu, kind.rstrip(b"\0").decode("ascii")) for pid, cpu, kind in _SLOT.iter_unpack(raw)]

    def claim(self, kind: str, cpu: int, pid: int | None = None) -> int:
        """Publish that a task of ``kind`` runs on ``cpu`` in process ``pid`` (default: this one);
        returns its slot. A slot of a dead process, or an earlier one of this process, is reused.

        Raises
        ------
        ValueError
            ``kind`` is not ASCII of at most :data:`KIND_BYTES` bytes.
        RuntimeError
            Every slot holds a live task.
        """
        pid = os.getpid() if pid is None else pid
        name = kind.encode("ascii") if kind.isascii() else b""
        if not name or len(name) > KIND_BYTES:
            raise ValueError(f"a task kind must be 1 to {KIND_BYTES} ASCII characters, such as 'stream', got {kind!r}")
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            rows = self._read()
            for index, (holder, _, _) in enumerate(rows):
                if holder == pid:
                    self._write(index, 0, 0, b"")
                    rows[index] = (0, 0, "")
            free = next((i for i, (holder, _, _) in enumerate(rows) if holder == 0 or not _alive(holder)), None)
            if free is None:
                raise RuntimeError(f"the board {self.path} has no free slot: {self.slots} tasks run at once; "
                                   f"make it with more (Board.create(..., slots=))")
            self._write(free, pid, cpu, name)
            return free
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _write(self, index: int, pid: int, cpu: int, name: bytes) -> None:
        os.pwrite(self._fd, _SLOT.pack(pid, cpu, name), self._slots_at + index * _SLOT.size)

    def release(self, slot: int) -> None:
        """Free ``slot`` (its task ended)."""
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            self._write(slot, 0, 0, b"")
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def running(self) -> list[tuple[int, int, str]]:
        """(pid, CPU, kind) of every live task on the board."""
        fcntl.flock(self._fd, fcntl.LOCK_SH)
        try:
            rows = self._read()
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        return [row for row in rows if row[0] != 0 and _alive(row[0])]

    def partners(self, slot: int) -> list[str]:
        """The kinds of the other live tasks on the domain of the task in ``slot``."""
        fcntl.flock(self._fd, fcntl.LOCK_SH)
        try:
            rows = self._read()
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        own_pid, own_cpu, _ = rows[slot]
        domain = self.domain(own_cpu)
        return [kind for i, (pid, cpu, kind) in enumerate(rows)
                if i != slot and pid != 0 and self.domain(cpu) == domain and _alive(pid)]

    def close(self, *, remove: bool = False) -> None:
        """Close the file; ``remove``: delete it too (the creator, when the run is over)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if remove:
            self.path.unlink(missing_ok=True)

    def __enter__(self) -> "Board":
        return self

    def __exit__(self, *_) -> None:
        self.close(remove=True)


class PlantedMatrix:
    """What each kind suffers beside each other kind: ``factors[victim][partner]`` ≥ 1, the
    victim's slowdown while that partner runs on its domain; beside several, the product (log
    slowdowns add, as the model's pressures do). A pair not written is 1.0.

    >>> m = PlantedMatrix({"stream": {"stream": 2.0, "compute": 1.1}})
    >>> m.factor("stream", ["stream", "compute"]), m.factor("compute", ["stream"]), m.factor("stream", [])
    (2.2, 1.0, 1.0)
    """

    def __init__(self, factors: Mapping[str, Mapping[str, float]]):
        for victim, row in factors.items():
            for partner, factor in row.items():
                if not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor >= 1):
                    raise ValueError(f"a planted slowdown must be a finite number >= 1, got {factor!r} for "
                                     f"{victim!r} beside {partner!r}")
        self.factors = {victim: dict(row) for victim, row in factors.items()}

    @property
    def kinds(self) -> list[str]:
        return sorted({*self.factors, *(p for row in self.factors.values() for p in row)})

    def factor(self, kind: str, partners: Iterable[str]) -> float:
        row = self.factors.get(kind, {})
        return float(math.prod(row.get(partner, 1.0) for partner in partners))

    def to_dict(self) -> dict:
        return {victim: dict(row) for victim, row in self.factors.items()}


#: The first planted world: a stream that hurts everyone and its own kind most (2.2x), a
#: cache-friendly kind that suffers beside a stream (1.8x) and inflicts little, and a compute kind
#: in between; asymmetric (a sensitive task beside a stream suffers 1.8x, the stream 1.05x).
PLANTED = PlantedMatrix({
    "stream": {"stream": 2.2, "compute": 1.1, "sensitive": 1.05},
    "sensitive": {"stream": 1.8, "compute": 1.05},
    "compute": {"stream": 1.3},
})
#: The second, written after the loop was tuned on the first: no kind hurts its own; a shuffle
#: hurts a lookup (2.0x) and a solver (1.4x), a solver hurts a lookup (1.5x), and the lookup
#: inflicts nothing.
RETUNED = PlantedMatrix({
    "lookup": {"shuffle": 2.0, "solver": 1.5},
    "solver": {"shuffle": 1.4},
    "shuffle": {"shuffle": 1.1, "solver": 1.05},
})


def stretch(seconds: float, factor_now: Callable[[], float], *, sleep: Callable[[float], None] = time.sleep,
            clock: Callable[[], float] = time.monotonic, step: float = STEP) -> float:
    """Do ``seconds`` of work alone as steps of at most ``step`` wall seconds, each counting its
    measured length over ``factor_now()`` (read at its start) as work done; returns the wall time.

    >>> now = [0.0]
    >>> def tick(dt): now[0] += dt
    >>> stretch(1.0, lambda: 2.0 if now[0] < 1.0 else 1.0, sleep=tick, clock=lambda: now[0], step=0.25)
    1.5
    """
    start, left = clock(), seconds
    while left > 1e-9:
        factor = factor_now()
        before = clock()
        sleep(min(step, left * factor))
        left -= (clock() - before) / factor
    return clock() - start


def planted(board: str, kind: str, seconds: float, parsl_resource_specification=None) -> dict:
    """A task of ``kind`` doing ``seconds`` of work alone, stretched step by step (:func:`stretch`)
    by the board's planted matrix for the kinds beside it on the ``board`` (a path), where it
    publishes its own kind while it runs. Its profile key is ``planted(str,<kind>,~<seconds>)``.

    Returns its stamp (``name`` ``"<kind>-<start>"``, ``t0``, ``t1``, ``cpu``) with ``slowdown``:
    its wall time over ``seconds``."""
    t0 = time.time()
    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else {0}
    with _Opened(board) as shared:
        slot = shared.claim(kind, min(affinity))
        try:
            wall = stretch(seconds, lambda: shared.matrix.factor(kind, shared.partners(slot)))
        finally:
            shared.release(slot)
    return _stamp(f"{kind}-{t0:.6f}", t0, kind=kind, slowdown=wall / seconds if seconds > 0 else 1.0)


class _Opened:
    def __init__(self, path: str):
        self.board = Board(path)

    def __enter__(self) -> Board:
        return self.board

    def __exit__(self, *_) -> None:
        self.board.close()


def gather(*results: dict, parsl_resource_specification=None) -> dict:
    """The workflow's reduce: how many tasks of each kind ended."""
    t0 = time.time()
    kinds: dict[str, int] = {}
    for result in results:
        kinds[result["kind"]] = kinds.get(result["kind"], 0) + 1
    return {**_stamp("gather", t0), "kind": "gather", "kinds": kinds}


def oracle_terms(matrix: PlantedMatrix, llc: float, model: ContentionModel = ContentionModel(),
                 footprints: Mapping[str, float] | None = None) -> dict[str, Terms]:
    """The per-kind :class:`~scalpel_executor.core.interference.Terms` nearest the matrix's pairs
    (every ordered pair once, each kind's solo time known): residuals of the footprint ``model``
    the run plans with, at the ``footprints`` it plans with (per kind; a kind not given, or none
    given: 512 KiB, about what the probe reads of a planted task), fitted with next to no shrinkage,
    bandwidth intensities included. What a run told the planted matrix is told, through the same
    ``Task.interference`` as learned terms. The footprints matter where ``model`` predicts
    contention from them: a host's fit on planted co-runs (ρ 0.06 on a 32 MiB LLC) does, and
    residuals of 512 KiB tasks told tasks of 1.3-1.5 MiB planned streams beside sensitive tasks."""
    kinds = matrix.kinds
    size = {kind: (footprints or {}).get(kind, 1 << 19) for kind in kinds}
    coruns = [KeyedCoRun(a, size[a], ((1.0, ((b, size[b]),)),), matrix.factor(a, [b]), at=float(i))
              for i, (a, b) in enumerate((a, b) for a in kinds for b in kinds)]
    fitted = fit_interference(coruns, model, llc, noise=1e-3, bandwidth=True)
    return {kind: fitted.terms(kind) for kind in kinds}
