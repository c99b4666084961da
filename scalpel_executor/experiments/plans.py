"""What the demo and the benchmark run when nothing is said, and their short versions.

Each default is said here once: ``scalpel demo`` and ``scalpel bench`` read these plans for their
help text and for what a left-out option means, and the experiments take a plan whole. Light on
purpose (no Parsl, no numpy), so that ``scalpel --help`` can read it.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, fields, replace

from scalpel_executor.core.scheduler import POLICIES

#: Workload mixes of the benchmark (built by ``experiments.bench.mixes``).
MIXES = ("contention", "suite-2x", "suite-4x", "suite-8x", "light", "workflow", "mixed-cores", "noop-throughput",
         "noop-latency", "montage")
#: Scalpel policies the benchmark runs; ``random`` is left to the simulator.
SCALPEL_POLICIES = ("scalpel", "scalpel-paper", "longest_first", "grouping+fifo", "fifo", "di")
#: Executors the benchmark compares: Parsl's, a process pool, Scalpel per policy, and the oracle order.
PEERS = ("htex-block", "htex-none", "threads", "processpool", *(f"scalpel:{p}" for p in SCALPEL_POLICIES), "oracle",
         "scalpel-inprocess")
#: Peers run only when named: ``scalpel-inprocess`` is the default policy with the pool in the
#: driver's process (``node_manager=False``), to compare with the node manager in one run.
ON_REQUEST = ("scalpel-inprocess",)
#: The peer every ratio is taken against.
REFERENCE = "htex-block"
#: Run-time ranges of kernel cases (seconds alone on a core), as ``workloads.kernels.SCALES`` names them.
SCALES = ("quick", "bench", "full")


def _check_counts(plan, least: dict[str, int]) -> None:
    for name, minimum in least.items():
        value = getattr(plan, name)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
            raise ValueError(f"{name.replace('_', '-')} must be a whole number >= {minimum}, got {value!r}")
    if plan.scale not in SCALES:
        raise ValueError(f"scale must be one of {', '.join(SCALES)}, got {plan.scale!r}")


@dataclass(frozen=True)
class DemoPlan:
    """One ``scalpel demo`` run: the batch, how often, under which executors."""

    tasks: int | None  # kernel tasks in the batch; None: tasks_per_core per core
    repeats: int  # runs per executor, interleaved
    policies: tuple[str, ...]  # Scalpel policies to run
    scale: str  # run-time range of the kernel cases
    tasks_per_core: int = 4
    include_htex: bool = True
    resamples: int = 10_000  # bootstrap resamples per interval of the mechanics / policy / total split
    seed: int = 0

    def __post_init__(self) -> None:
        _check_counts(self, {"repeats": 1, "tasks_per_core": 1, "resamples": 1,
                             **({"tasks": 2} if self.tasks is not None else {})})
        unknown = [p for p in self.policies if p not in POLICIES]
        if unknown or not self.policies:
            raise ValueError((f"unknown policy {unknown[0]!r}" if unknown else "no Scalpel policy to run")
                             + f"; choose from {', '.join(POLICIES)}")


@dataclass(frozen=True)
class BenchPlan:
    """One ``scalpel bench`` run: which mixes under which peers, how often, how large."""

    mixes: tuple[str, ...]
    peers: tuple[str, ...]
    repeats: int  # repetitions, peers interleaved in each
    scale: str  # run-time range of the kernel cases
    noop_tasks: int  # tasks of noop-throughput
    latency_tasks: int  # round trips of noop-latency
    montage_tiles: int = 16
    resamples: int = 10_000  # bootstrap resamples per confidence interval
    seed: int = 0

    def __post_init__(self) -> None:
        _check_counts(self, {"repeats": 1, "noop_tasks": 1, "latency_tasks": 1, "montage_tiles": 2, "resamples": 1})
        for what, names, known in (("mix", self.mixes, MIXES), ("peer", self.peers, PEERS)):
            unknown = [name for name in names if name not in known]
            if unknown or not names:
                raise ValueError((f"unknown {what} {unknown[0]!r}" if unknown else f"no {what} to run")
                                 + f"; choose from {', '.join(known)}")


#: ``fifo`` is Scalpel's mechanics without a policy: the demo's split measures the default policy
#: against it, and it against HTEX. Three repeats even when quick: one gives no interval at all.
DEMO = DemoPlan(tasks=None, repeats=3, policies=("scalpel", "fifo"), scale="full")
DEMO_QUICK = replace(DEMO, tasks=4, scale="quick")

BENCH = BenchPlan(mixes=tuple(m for m in MIXES if m != "montage"),
                  peers=tuple(p for p in PEERS if p not in ON_REQUEST), repeats=5, scale="bench",
                  noop_tasks=2000, latency_tasks=200)
#: A one-minute check that the harness works; its figures mean nothing.
BENCH_SMOKE = replace(BENCH, mixes=("contention", "suite-2x", "light", "workflow", "noop-throughput", "noop-latency"),
                      peers=("htex-block", "threads", "processpool", "scalpel:scalpel", "oracle"), repeats=2,
                      scale="quick", noop_tasks=50, latency_tasks=20, resamples=200)


def with_given(plan, **given):
    """``plan`` with the options a person gave (those not None) in place of its own values."""
    names = {f.name for f in fields(plan)}
    return replace(plan, **{name: value for name, value in given.items() if value is not None and name in names})
