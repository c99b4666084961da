"""The benchmark's workload mixes, sized for the machine at hand (names in ``plans.MIXES``)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from scalpel_executor.core.units import format_size
from scalpel_executor.experiments.bench.oracle import oracle_search
from scalpel_executor.experiments.plans import MIXES, BenchPlan
from scalpel_executor.experiments.mix_sizing import step_seconds_here, steps_timed_here
from scalpel_executor.workloads.kernels import contention_mix, suite


@dataclass(frozen=True)
class Mix:
    """One workload of the benchmark."""

    name: str
    kind: str  # "kernels", "throughput", "latency", "montage" or "workflow"
    cases: tuple = ()  # KernelCase, in submission order (workflow: member by member, WORKFLOW_STEPS each)
    oracle: tuple | None = None  # the same cases in the best order the search found in the model
    oracle_method: str = ""  # how: "branch and bound (proven optimal)" or "local search (best found)"
    count: int = 0  # no-op tasks, Montage tiles, or workflow members
    widths: tuple = ()  # cores each case asks for (its ``cores`` hint, to Scalpel peers); (): one each
    note: str = ""

    @property
    def tasks(self) -> int:
        if self.kind == "workflow":  # its kernel steps, a bash step per member, one reduce
            return len(self.cases) + self.count + 1
        return len(self.cases) if self.kind == "kernels" else self.count

    @property
    def members(self) -> list[tuple]:
        """A workflow's cases, one tuple of WORKFLOW_STEPS steps per member."""
        return [self.cases[i:i + WORKFLOW_STEPS] for i in range(0, len(self.cases), WORKFLOW_STEPS)]


#: Kernel steps of each member of the workflow mix: prepare (small), simulate (large), analyse (small).
WORKFLOW_STEPS = 3


def workflow_members(llc: int, cores: int, scale: str, seed: int) -> list[tuple]:
    """The workflow mix's members, 2 per core: each a small kernel, a large one (more than a core's
    share of the LLC, so members that overlap in their middle step contend), then a small one,
    drawn from the kernel suite. Pure."""
    pool = suite(llc, cores, scale, seed=seed + 2)
    small = [c for c in pool if c.footprint_bytes <= llc / cores / 8]
    large = [c for c in pool if c.footprint_bytes > llc / cores]
    rng = random.Random(seed)
    return [(rng.choice(small), rng.choice(large), rng.choice(small)) for _ in range(2 * cores)]


#: Kernels whose work is BLAS calls (numpy's matmul), so a task given k cores runs k threads.
BLAS_KERNELS = ("gemm", "2mm", "3mm")


def mixed_core_cases(llc: int, cores: int, scale: str, seed: int) -> tuple[tuple, tuple]:
    """The mixed-cores mix: ``cores`` BLAS kernels asking for ``min(2, cores)`` cores each and
    ``2 * cores`` one-core kernels of the suite, interleaved wide first; the cases and each one's
    cores. Pure."""
    pool = suite(llc, cores, scale, seed=seed + 3)
    blas = [c for c in pool if c.kernel in BLAS_KERNELS]
    other = [c for c in pool if c.kernel not in BLAS_KERNELS]
    rng = random.Random(seed)
    wide = [rng.choice(blas) for _ in range(cores)]
    narrow = [rng.choice(other) for _ in range(2 * cores)]
    cases, widths = [], []
    for i in range(len(narrow)):
        if i < len(wide):
            cases.append(wide[i])
            widths.append(min(2, cores))
        cases.append(narrow[i])
        widths.append(1)
    return tuple(cases), tuple(widths)


def build_mixes(plan: BenchPlan, llc: int, cores: int, *, time_here: bool = True, model=None,
                step_seconds: Callable = step_seconds_here) -> list[Mix]:
    """The mixes ``plan`` names for a machine of ``cores`` cores sharing ``llc`` bytes.

    ``time_here`` sizes the contention cases' steps by their seconds per step on this machine,
    which ``step_seconds`` gives (:func:`~scalpel_executor.experiments.mix_sizing.step_seconds_here`
    times them; the benchmark reads them kept when this machine timed them before), so large and
    small ones really last alike. ``model`` (a ``ContentionModel``) is what the contention mix's
    oracle order is searched with."""
    unknown = [n for n in plan.mixes if n not in MIXES]
    if unknown:
        raise ValueError(f"unknown mix {unknown[0]!r}; choose from {', '.join(MIXES)}")
    scale, seed = plan.scale, plan.seed
    noop_tasks, latency_tasks, montage_tiles = plan.noop_tasks, plan.latency_tasks, plan.montage_tiles
    rng = random.Random(seed)
    mixes = []
    for name in plan.mixes:
        if name == "contention":
            cases = contention_mix(llc, cores, 4 * cores, scale=scale, seed=seed)
            if time_here:
                cases, seconds = steps_timed_here(cases, step_seconds(cases))
            else:
                seconds = [c.estimated_seconds() for c in cases]
            large = [c for c in cases if c.footprint_bytes > llc / cores]
            small = [c for c in cases if c.footprint_bytes <= llc / cores]
            oracle = oracle_search(cases, seconds, cores, llc, model)
            mixes.append(Mix(name, "kernels", tuple(cases), oracle.cases, oracle_method=oracle.search.method,
                             note=f"{len(large)} large ({format_size(large[0].footprint_bytes) if large else '-'}) "
                                  f"then {len(small)} small ({format_size(small[0].footprint_bytes) if small else '-'})"))
        elif name.startswith("suite-"):
            factor = int(name.split("-")[1].rstrip("x"))
            pool = suite(llc, cores, scale, seed=seed)
            picked = sorted(rng.sample(range(len(pool)), min(factor * cores, len(pool))))
            mixes.append(Mix(name, "kernels", tuple(pool[i] for i in picked),
                             note=f"{factor} x {cores} cases of the kernel suite, in suite order"))
        elif name == "light":
            pool = [c for c in suite(llc, cores, scale, seed=seed + 1) if c.footprint_bytes <= llc / cores / 8]
            mixes.append(Mix(name, "kernels", tuple(rng.sample(pool, min(4 * cores, len(pool)))),
                             note="small kernels only: nothing to separate"))
        elif name == "noop-throughput":
            mixes.append(Mix(name, "throughput", count=noop_tasks, note=f"{noop_tasks} no-op tasks at once"))
        elif name == "noop-latency":
            mixes.append(Mix(name, "latency", count=latency_tasks,
                             note=f"{latency_tasks} no-op tasks, each submitted when the last returned"))
        elif name == "montage":
            mixes.append(Mix(name, "montage", count=montage_tiles, note=f"Montage mosaic of {montage_tiles} tiles"))
        elif name == "mixed-cores":
            cases, widths = mixed_core_cases(llc, cores, scale, seed)
            wide = sum(width > 1 for width in widths)
            mixes.append(Mix(name, "kernels", cases, widths=widths,
                             note=f"{wide} BLAS kernels asking for {max(widths)} cores, {len(cases) - wide} one-core "
                                  f"kernels, interleaved"))
        elif name == "workflow":
            members = workflow_members(llc, cores, scale, seed)
            mixes.append(Mix(name, "workflow", tuple(c for member in members for c in member), count=len(members),
                             note=f"a DAG of {len(members)} members (small, large, small kernel; a bash step), "
                                  f"one reduce"))
    return mixes


@dataclass
class MixRun:
    """One run of a mix on a peer: its makespan, or the error that ended it."""

    peer: str
    mix: str
    repeat: int
    makespan: float | None
    tasks: list[dict] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    error: str | None = None
    #: CPU seconds per second per core that processes outside the peer used during the run
    #: (harness.OtherWork); None where unmeasured
    other_work_per_core: float | None = None
