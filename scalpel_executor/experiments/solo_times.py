"""Solo times kept per machine: each distinct case of a batch run alone once, then reused.

::

    distinct_cases(batch)      one case per profile key: the kernel, its size and its steps
                               within the key's ±9% bucket (4 to 5 of the demo's 64 tasks
                               on 16 cores); the one with the median steps stands for the rest
    plan_solo(batch, kept, machine, fresh)
                               which of them this machine ran alone before (SoloTimes), and
                               which the solo pass must run (all of them with fresh)
    run_solo(plan, kept, ...)  harness.solo_pass on those, one at a time on one pinned core, the
                               profile store learning their footprints; each measured case kept
                               with what the store learned from it; each reused case's learning
                               recorded into the (fresh) store again, so Scalpel plans with the
                               same footprints whether a case ran now or on an earlier day
    Solo.seconds(case)         a task's solo time: its steps times the median seconds per step
                               of its kernel and size over the cases kept

The times are kept in the profile store's file (``$SCALPEL_PROFILE_STORE``, else the default
path) beside the profiles, in tables of their own (:class:`SoloTimes`), keyed by the machine's
fingerprint (:func:`~scalpel_executor.experiments.mix_sizing.machine_fingerprint`: CPU model,
cores, LLC) and the case; the demo and the benchmark profile into stores of their own, which
these tables never touch. Beside them, the seconds per step that sizing timed
(:func:`~scalpel_executor.experiments.mix_sizing.step_seconds_here`), so a machine sizes the same
batch every time and its cases keep their keys.

Solo means alone: the pass never runs two cases at once, since two on one LLC would time a
co-run. It is short because it runs distinct cases, not tasks: a kernel's step takes the same
time whatever the number of steps (``run_kernel`` times the steps alone), so one case per
profile key is enough, and every task's solo time is scaled from its kernel and size.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from scalpel_executor.experiments.apps import timed_kernel
from scalpel_executor.experiments.mix_sizing import step_seconds_here
from scalpel_executor.learning.keys import app_name, profile_keys
from scalpel_executor.learning.store import Observation, ProfileStore
from scalpel_executor.learning.tables import SideTables
from scalpel_executor.workloads.kernels import KernelCase

_COLUMNS = ("kernel", "size", "key", "shape", "steps", "seconds", "wall", "footprint", "peak_rss",
            "llc_miss_rate", "measured")


@dataclass(frozen=True)
class SoloCase:
    """One distinct case of a batch: the case that runs alone, and its profile keys."""

    case: KernelCase  # the representative: the median steps of the tasks sharing its key
    shape: str  # its profile (shape) key
    exact: str  # its exact key (the shape key itself unless a steps count below 16 is in it)

    @property
    def ident(self) -> tuple[str, int, str]:
        return self.case.kernel, self.case.size, self.exact


@dataclass(frozen=True)
class SoloRow:
    """What one case's solo run measured on a machine, and what the profile store learned from it."""

    kernel: str
    size: int
    key: str  # the exact profile key
    shape: str
    steps: int
    seconds: float  # the kernel's own run time (``run_kernel``'s ``seconds``), alone on one core
    wall: float | None  # the task's run time as the executor measured it (the store's run time)
    footprint: float | None  # bytes, as the probe measured it (None: not measured)
    peak_rss: float | None
    llc_miss_rate: float | None
    measured: float  # Unix time

    @property
    def ident(self) -> tuple[str, int, str]:
        return self.kernel, self.size, self.key

    def observation(self) -> Observation:
        """What the solo run taught the profile store, as its executor recorded it (an unsplit
        shape key: the shape key, with the exact key beside it when they differ)."""
        return Observation(self.shape, app_name(timed_kernel), self.wall, self.footprint, self.peak_rss,
                           self.llc_miss_rate, self.shape, self.key)


class SoloTimes(SideTables):
    """Solo times and sizing step times per machine, in the profile store's file (see the module docstring)."""

    SCHEMA = """
    CREATE TABLE IF NOT EXISTS solo_times (machine TEXT NOT NULL, kernel TEXT NOT NULL, size INTEGER NOT NULL,
        key TEXT NOT NULL, shape TEXT NOT NULL, steps INTEGER NOT NULL, seconds REAL NOT NULL,
        wall REAL, footprint REAL, peak_rss REAL, llc_miss_rate REAL, measured REAL NOT NULL,
        PRIMARY KEY (machine, kernel, size, key));
    CREATE TABLE IF NOT EXISTS solo_step_times (machine TEXT NOT NULL, kernel TEXT NOT NULL, size INTEGER NOT NULL,
        seconds_per_step REAL NOT NULL, measured REAL NOT NULL, PRIMARY KEY (machine, kernel, size))
    """
    WHAT = "solo times"

    def rows(self, machine: str) -> dict[tuple[str, int, str], SoloRow]:
        """Every case kept for ``machine``, by (kernel, size, exact key)."""
        found = self._run(lambda c: c.execute(f"SELECT {', '.join(_COLUMNS)} FROM solo_times WHERE machine = ?",
                                              (machine,)).fetchall())
        return {row.ident: row for row in (SoloRow(*values) for values in found)}

    def save(self, machine: str, rows: Iterable[SoloRow]) -> None:
        values = [(machine, *(getattr(row, name) for name in _COLUMNS)) for row in rows]
        slots = ", ".join("?" * (1 + len(_COLUMNS)))
        self._run(lambda c: c.executemany(
            f"INSERT OR REPLACE INTO solo_times (machine, {', '.join(_COLUMNS)}) VALUES ({slots})", values))

    def step_times(self, machine: str) -> dict[tuple[str, int], float]:
        """Seconds per step of each (kernel, size) that sizing timed on ``machine``."""
        found = self._run(lambda c: c.execute(
            "SELECT kernel, size, seconds_per_step FROM solo_step_times WHERE machine = ?", (machine,)).fetchall())
        return {(kernel, size): seconds for kernel, size, seconds in found}

    def save_step_times(self, machine: str, per_step: Mapping[tuple[str, int], float]) -> None:
        now = time.time()
        self._run(lambda c: c.executemany(
            "INSERT OR REPLACE INTO solo_step_times VALUES (?, ?, ?, ?, ?)",
            [(machine, kernel, size, seconds, now) for (kernel, size), seconds in per_step.items()]))


def kept_step_seconds(kept: SoloTimes, machine: str, fresh: bool = False) -> Callable:
    """A ``step_seconds_here`` that reads ``machine``'s kept step times (none with ``fresh``) and keeps
    the ones it had to time: sizing's probes run once per machine."""
    def timed(cases: Sequence[KernelCase]) -> dict[tuple[str, int], float]:
        known = {} if fresh else kept.step_times(machine)
        per_step = step_seconds_here(cases, known)
        new = {key: seconds for key, seconds in per_step.items() if key not in known}
        if new:
            kept.save_step_times(machine, new)
        return per_step

    return timed


def distinct_cases(cases: Sequence[KernelCase]) -> list[SoloCase]:
    """One :class:`SoloCase` per (kernel, size, exact profile key) of ``cases``, in first-seen order;
    each the case with the median steps (the lower one of an even count) of the tasks it stands for.

    >>> batch = [KernelCase("spmv", 4096, steps) for steps in (100, 104, 106, 300)]
    >>> [solo.case.steps for solo in distinct_cases(batch)]
    [104, 300]
    """
    groups: dict[tuple[str, int, str], list[KernelCase]] = {}
    keys: dict[tuple[str, int, str], str] = {}
    for case in cases:
        found = profile_keys(timed_kernel, (case.kernel, case.size, case.steps))
        ident = (case.kernel, case.size, found.exact)
        groups.setdefault(ident, []).append(case)
        keys[ident] = found.shape
    out = []
    for ident, members in groups.items():
        ordered = sorted(members, key=lambda case: case.steps)
        out.append(SoloCase(ordered[(len(ordered) - 1) // 2], keys[ident], ident[2]))
    return out


@dataclass(frozen=True)
class SoloPlan:
    """The distinct cases of a batch, and which of them this machine ran alone before."""

    machine: str
    cases: tuple[SoloCase, ...]
    known: Mapping[tuple[str, int, str], SoloRow]  # the kept rows of these cases (none with fresh)

    @property
    def todo(self) -> list[SoloCase]:
        """The cases the solo pass runs: those not kept for this machine."""
        return [solo for solo in self.cases if solo.ident not in self.known]

    def expected_seconds(self, planned: Mapping[KernelCase, float]) -> float:
        """Seconds the pass's kernels should run: kept step times where known, else ``planned``."""
        rates = step_rates(self.known.values())
        return sum(rates[(s.case.kernel, s.case.size)] * s.case.steps if (s.case.kernel, s.case.size) in rates
                   else planned.get(s.case, s.case.estimated_seconds()) for s in self.todo)


def plan_solo(cases: Sequence[KernelCase], kept: SoloTimes, machine: str, *, fresh: bool = False) -> SoloPlan:
    """Which distinct cases of ``cases`` the solo pass must run on ``machine``: every one with
    ``fresh``, else those not kept for it."""
    distinct = tuple(distinct_cases(cases))
    rows = {} if fresh else kept.rows(machine)
    return SoloPlan(machine, distinct, {s.ident: rows[s.ident] for s in distinct if s.ident in rows})


def step_rates(rows: Iterable[SoloRow]) -> dict[tuple[str, int], float]:
    """Median seconds per step of each (kernel, size) over ``rows``."""
    by_case: dict[tuple[str, int], list[float]] = {}
    for row in rows:
        by_case.setdefault((row.kernel, row.size), []).append(row.seconds / row.steps)
    return {key: statistics.median(values) for key, values in by_case.items()}


@dataclass
class Solo:
    """The outcome of a solo pass: every distinct case's row, and how many were run now."""

    machine: str
    rows: list[SoloRow]
    measured: int  # cases run alone by this pass
    reused: int  # cases kept from an earlier run on this machine
    seconds: float  # wall time of the pass
    rates: dict[tuple[str, int], float] = field(init=False)

    def __post_init__(self) -> None:
        self.rates = step_rates(self.rows)

    def seconds_of(self, case: KernelCase) -> float:
        """A task's solo time: its steps times its kernel and size's median seconds per step."""
        return self.rates[(case.kernel, case.size)] * case.steps

    def to_dict(self) -> dict:
        return {"machine": self.machine, "cases": len(self.rows), "measured": self.measured, "reused": self.reused,
                "seconds": self.seconds}


def run_solo(plan: SoloPlan, kept: SoloTimes, store: str, measure: Callable[[list[KernelCase]], dict[str, float]]
             ) -> Solo:
    """Run ``plan.todo`` through ``measure`` (the harness's solo pass, ``cases -> {name: seconds}``,
    which teaches ``store`` their profiles), keep each with what ``store`` learned from it, and
    record every reused case's learning into ``store``. See the module docstring."""
    started = time.monotonic()
    todo = plan.todo
    rows = dict(plan.known)
    if todo:
        seconds = measure([solo.case for solo in todo])
        with ProfileStore(store) as profiles:
            learned = [_row(solo, seconds[solo.case.name], profiles) for solo in todo]
        kept.save(plan.machine, learned)
        rows.update((row.ident, row) for row in learned)
    if plan.known:
        with ProfileStore(store) as profiles:
            profiles.record(row.observation() for row in plan.known.values())
    return Solo(plan.machine, [rows[s.ident] for s in plan.cases], len(todo), len(plan.known),
                time.monotonic() - started)


def _row(solo: SoloCase, seconds: float, profiles: ProfileStore) -> SoloRow:
    profile = profiles.get(solo.exact) or profiles.get(solo.shape)
    learned = (profile.runtime, profile.footprint, profile.peak_rss, profile.llc_miss_rate) \
        if profile is not None else (None, None, None, None)
    case = solo.case
    return SoloRow(case.kernel, case.size, solo.exact, solo.shape, case.steps, seconds, *learned, time.time())
