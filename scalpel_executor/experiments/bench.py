"""``scalpel bench``: workload mixes under Parsl's executors and every ScalpelExecutor policy.

::

    mixes (build_mixes)                      peers (PEERS)
      contention   large+small kernels,        htex-block, htex-none   Parsl HighThroughputExecutor
                   large ones first            threads                 Parsl ThreadPoolExecutor
      suite-2x/4x/8x  the kernel suite         processpool             concurrent.futures
      light        small kernels only          scalpel:<policy>        ScalpelExecutor, per policy
      noop-throughput, noop-latency, montage   oracle                  contention mix in the order an
                                                                       exhaustive search in the contention
                                                                       model finds best (Scalpel's pinned
                                                                       workers, fifo)
    for repeat in 1..R:
        solo pass: every distinct kernel case alone on one pinned core (lower bounds, and the
                   footprints Scalpel's profile store learns)
        for peer in PEERS rotated by repeat (A B C, B C A, ...):      interleaved
            start the peer ─ warm up every worker ─ for mix: submit all, wait for all ─ stop
    summarise: per (mix, peer) median makespan, ratio to htex-block with a paired bootstrap 95%
               confidence interval, ratio to the lower bound, share of the HTEX-to-oracle gap
    write: <out>/bench.json (everything), <out>/pyperf/<peer>.json (pyperf suites: one benchmark
           per mix, one run per repeat, so ``python -m pyperf compare_to`` works), <out>/bench.png

Every peer runs the same app bodies (:func:`scalpel_executor.experiments.demo.timed_kernel`, :func:`noop`) with
one BLAS thread, and every makespan spans first submit to last result, after the warm-up.
pyperf's ``Runner`` is not used to drive the runs: it times one benchmark at a time in its own
worker processes, which would put minutes of machine drift between the executors compared.
Instead each repetition becomes a ``pyperf.Run`` and pyperf's statistics and format carry them.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import statistics
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from scalpel_executor.experiments.demo import (
    THREAD_ENV,
    machine_llc,
    solo_pass,
    timed_kernel,
    warm_up,
)
from scalpel_executor.core.scheduler import POLICIES
from scalpel_executor.core.simulate import lower_bound
from scalpel_executor.core.topology import Topology
from scalpel_executor.host.topology import detect_topology
from scalpel_executor.core.units import format_size

logger = logging.getLogger(__name__)

REFERENCE = "htex-block"
SCALPEL_POLICIES = ("scalpel", "longer_first", "grouping+fifo", "fifo", "di")
PEERS = ("htex-block", "htex-none", "threads", "processpool", *(f"scalpel:{p}" for p in SCALPEL_POLICIES), "oracle")
MIXES = ("contention", "suite-2x", "suite-4x", "suite-8x", "light", "noop-throughput", "noop-latency", "montage")


def noop(parsl_resource_specification=None) -> int:
    """The no-op task: what an executor costs per task when the task costs nothing."""
    return 0


@dataclass(frozen=True)
class Mix:
    """One workload of the benchmark."""

    name: str
    kind: str  # "kernels", "throughput", "latency" or "montage"
    cases: tuple = ()  # KernelCase, in submission order
    oracle: tuple | None = None  # the same cases in the best order this machine allows
    count: int = 0  # no-op tasks, or Montage tiles
    note: str = ""

    @property
    def tasks(self) -> int:
        return len(self.cases) if self.kind == "kernels" else self.count


def oracle_order(cases: Sequence, seconds: Sequence[float], cores: int, llc: float, model=None,
                 max_candidates: int = 50_000) -> tuple:
    """The submission order under which first-come-first-served finishes ``cases`` soonest on one
    domain of ``cores`` cores, by exhaustive search in the contention model.

    Candidates: every order while there are at most ``max_candidates`` (8 cases: 40,320);
    otherwise every placement of the large cases (footprint above a core's share of ``llc``)
    among the small ones, each class longest first or shortest first; beyond ``max_candidates``
    placements, one large case then ``cores - 1`` small ones, repeated. Each candidate is
    simulated with the ``fifo`` policy (the scheduler the live executor runs) and the shortest
    simulated makespan wins. Pure; O(candidates x simulation): about 8 s for 8 cases.
    """
    from itertools import combinations, permutations

    from scalpel_executor.core.simulate import SimTask, simulate

    n = len(cases)
    large = [i for i in range(n) if cases[i].footprint_bytes > llc / cores]
    small = [i for i in range(n) if i not in large]
    domains = [list(range(cores))]

    def makespan(order: Sequence[int]) -> float:
        tasks = [SimTask(str(i), seconds[i], cases[i].footprint_bytes) for i in order]
        return simulate(tasks, domains, llc, "fifo", model=model).makespan

    def merged(slots: Sequence[int], big: list[int], little: list[int]) -> list[int]:
        big, little, chosen = list(big), list(little), set(slots)
        return [big.pop(0) if k in chosen else little.pop(0) for k in range(n)]

    if math.factorial(n) <= max_candidates:  # small mixes: every order
        best = min(permutations(range(n)), key=makespan)
        return tuple(cases[i] for i in best)
    if math.comb(n, len(large)) > max_candidates:
        order, rest = [], list(small)
        for i in large:
            order.append(i)
            order.extend(rest[:cores - 1])
            rest = rest[cores - 1:]
        return tuple(cases[i] for i in order + rest)
    best, best_time = None, math.inf
    for descending in (True, False):
        big = sorted(large, key=lambda i: seconds[i], reverse=descending)
        little = sorted(small, key=lambda i: seconds[i], reverse=descending)
        for slots in combinations(range(n), len(large)):
            order = merged(slots, big, little)
            time_taken = makespan(order)
            if time_taken < best_time - 1e-12:
                best, best_time = order, time_taken
    return tuple(cases[i] for i in best)


def build_mixes(names: Sequence[str], llc: int, cores: int, *, scale: str = "bench", seed: int = 0,
                noop_tasks: int = 2000, latency_tasks: int = 200, montage_tiles: int = 16,
                calibrate_cases: bool = True, model=None) -> list[Mix]:
    """The mixes called ``names`` for a machine of ``cores`` cores sharing ``llc`` bytes.

    ``calibrate_cases`` times each distinct contention case here (``calibrate``) so large and
    small ones really last alike; the rate table alone can be off by the machine's speed.
    ``model`` (a ``ContentionModel``) is what the contention mix's oracle order is searched with."""
    from scalpel_executor.workloads.kernels import calibrate, contention_mix, suite

    unknown = [n for n in names if n not in MIXES]
    if unknown:
        raise ValueError(f"unknown mix {unknown[0]!r}; choose from {', '.join(MIXES)}")
    rng = random.Random(seed)
    mixes = []
    for name in names:
        if name == "contention":
            cases = contention_mix(llc, cores, 4 * cores, scale=scale, seed=seed)
            if calibrate_cases:
                cases, seconds = calibrated_alike(cases, calibrate)
            else:
                seconds = [c.estimated_seconds() for c in cases]
            large = [c for c in cases if c.footprint_bytes > llc / cores]
            small = [c for c in cases if c.footprint_bytes <= llc / cores]
            mixes.append(Mix(name, "kernels", tuple(cases), oracle_order(cases, seconds, cores, llc, model),
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
    return mixes


def calibrated_alike(cases: list, calibrate: Callable) -> tuple[list, list[float]]:
    """Each distinct (kernel, size) timed here; every case keeps its planned run time, so its
    jitter survives and large and small last alike. Returns the cases and their expected seconds."""
    from scalpel_executor.workloads.kernels import KernelCase

    planned = {c: c.estimated_seconds() for c in cases}
    target = statistics.median(planned.values())
    per_step: dict[tuple, float] = {}
    out = []
    for case in cases:
        key = (case.kernel, case.size)
        if key not in per_step:  # median of three probes of up to 1 s: one short probe was seen 30% off
            probe = min(target, 1.0)
            per_step[key] = statistics.median(target / calibrate(case, target, probe_seconds=probe).steps
                                              for _ in range(3))
        out.append(KernelCase(case.kernel, case.size, max(1, round(planned[case] / per_step[key]))))
    return out, [c.steps * per_step[(c.kernel, c.size)] for c in out]


# --------------------------------------------------------------------------------------------
# Running one peer through every mix.


@dataclass
class MixRun:
    peer: str
    mix: str
    repeat: int
    makespan: float | None
    tasks: list[dict] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    error: str | None = None


class _PoolSubmitter:
    """``concurrent.futures.ProcessPoolExecutor`` with the submit interface the mixes use."""

    def __init__(self, cores: int) -> None:
        import concurrent.futures
        import multiprocessing

        self.pool = concurrent.futures.ProcessPoolExecutor(
            max_workers=cores, mp_context=multiprocessing.get_context("forkserver"), initializer=_pool_init)

    def app(self, function: Callable) -> Callable:
        return lambda *args: self.pool.submit(function, *args)

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def _pool_init() -> None:
    os.environ.update(THREAD_ENV)
    from scalpel_executor.workloads.kernels import limit_blas_threads

    limit_blas_threads(1)


class _ParslSubmitter:
    """A loaded Parsl DFK with one executor; ``app`` wraps a function as a python_app on it."""

    def __init__(self, peer: str, cores: int, topology: Topology, run_dir: str, store: str) -> None:
        import parsl
        from parsl.config import Config

        self.label = peer.replace(":", "-").replace("+", "-")
        executor = _parsl_executor(peer, self.label, cores, topology, store)
        self.dfk = parsl.load(Config(executors=[executor], run_dir=run_dir, strategy="none", initialize_logging=True))

    def app(self, function: Callable) -> Callable:
        from parsl import python_app

        return python_app(function, executors=[self.label])

    def close(self) -> None:
        import parsl

        try:
            self.dfk.cleanup()
        finally:
            parsl.clear()


def _parsl_executor(peer: str, label: str, cores: int, topology: Topology, store: str):
    if peer.startswith("htex-"):
        from parsl.executors import HighThroughputExecutor
        from parsl.providers import LocalProvider

        exports = " ".join(f"export {k}={v};" for k, v in THREAD_ENV.items())
        return HighThroughputExecutor(
            label=label, cpu_affinity=peer.split("-", 1)[1], max_workers_per_node=cores,
            provider=LocalProvider(init_blocks=1, min_blocks=1, max_blocks=1, worker_init=exports))
    if peer == "threads":
        from parsl.executors import ThreadPoolExecutor

        return ThreadPoolExecutor(label=label, max_threads=cores)
    from scalpel_executor.runtime.executor import ScalpelExecutor

    policy = "fifo" if peer == "oracle" else peer.split(":", 1)[1]
    return ScalpelExecutor(label=label, policy=policy, profiles=store, topology=topology)


def start_peer(peer: str, cores: int, topology: Topology, run_dir: str, store: str):
    if peer not in PEERS:
        raise ValueError(f"unknown peer {peer!r}; choose from {', '.join(PEERS)}")
    submitter = _PoolSubmitter(cores) if peer == "processpool" else _ParslSubmitter(peer, cores, topology, run_dir, store)
    try:
        warm = submitter.app(warm_up)
        pids: set[int] = set()
        for _ in range(20):  # until every worker has imported numpy (a pool may route to one worker)
            pids |= {f.result(timeout=300) for f in [warm() for _ in range(cores * 2)]}
            if len(pids) >= cores:
                break
    except BaseException:
        submitter.close()
        raise
    return submitter


def runs_mix(peer: str, mix: Mix) -> bool:
    """Whether ``peer`` takes part in ``mix``: the oracle only where a mix has a best order, and
    the Montage DAG only under Parsl (it chains apps through futures)."""
    if peer == "oracle":
        return mix.oracle is not None
    if mix.kind == "montage":
        return peer != "processpool"
    return True


def run_mix(submitter, peer: str, mix: Mix, repeat: int, out: Path, timeout: float) -> MixRun:
    """Run one mix on a started peer; a failure is recorded, not raised, so the other runs survive."""
    run = MixRun(peer, mix.name, repeat, None)
    try:
        if mix.kind == "kernels":
            cases = mix.oracle if peer == "oracle" else mix.cases
            app = submitter.app(timed_kernel)
            started, wall_zero = time.monotonic(), time.time()
            futures = [app(c.kernel, c.size, c.steps) for c in cases]
            rows = [f.result(timeout=timeout) for f in futures]
            run.makespan = time.monotonic() - started
            run.tasks = [{"case": c.name, "kernel": c.kernel, "footprint": c.footprint_bytes, "cpu": r["cpu"],
                          "start": r["started"] - wall_zero, "end": r["finished"] - wall_zero, "seconds": r["seconds"]}
                         for c, r in zip(cases, rows)]
        elif mix.kind == "throughput":
            app = submitter.app(noop)
            started = time.monotonic()
            futures = [app() for _ in range(mix.count)]
            for future in futures:
                future.result(timeout=timeout)
            run.makespan = time.monotonic() - started
        elif mix.kind == "latency":
            app = submitter.app(noop)
            started = time.monotonic()
            for _ in range(mix.count):
                sent = time.perf_counter()
                app().result(timeout=timeout)
                run.latencies.append(time.perf_counter() - sent)
            run.makespan = time.monotonic() - started
        elif mix.kind == "montage":
            from scalpel_executor.workloads.montage import SkyPlan, mosaic_pipeline

            started = time.monotonic()
            mosaic_pipeline(SkyPlan(mix.count, seed=repeat), out / "montage" / peer.replace(":", "-")).wait(timeout)
            run.makespan = time.monotonic() - started
    except Exception as error:  # noqa: BLE001 - recorded with its type, reported in the summary
        run.error = f"{type(error).__name__}: {error}"
        run.makespan = None
        logger.warning("%s on %s, repeat %d failed: %s", mix.name, peer, repeat + 1, run.error)
    return run


# --------------------------------------------------------------------------------------------
# Statistics (pure).


def bootstrap_ratio(reference: Sequence[float], other: Sequence[float], *, resamples: int = 10_000,
                    seed: int = 0, confidence: float = 0.95) -> tuple[float, float, float]:
    """median(reference) / median(other) and a percentile bootstrap interval, resampling the
    repetitions in pairs (both were measured in the same repetition, next to each other).

    ``reference`` and ``other`` are makespans per repetition, same length; > 1 means ``other``
    is faster. Returns (ratio, low, high).

    >>> bootstrap_ratio([2.0, 2.0, 2.0], [1.0, 1.0, 1.0])
    (2.0, 2.0, 2.0)
    """
    if len(reference) != len(other) or not reference:
        raise ValueError(f"need paired, non-empty samples; got {len(reference)} and {len(other)}")
    point = statistics.median(reference) / statistics.median(other)
    rng = random.Random(seed)
    n = len(reference)
    draws = []
    for _ in range(resamples):
        picks = [rng.randrange(n) for _ in range(n)]
        draws.append(statistics.median(reference[i] for i in picks) / statistics.median(other[i] for i in picks))
    draws.sort()
    tail = (1 - confidence) / 2
    return point, draws[int(tail * (resamples - 1))], draws[math.ceil((1 - tail) * (resamples - 1))]


def summarise(runs: Sequence[MixRun], mixes: Sequence[Mix], solo: dict[str, list[float]], cores: int,
              reference: str = REFERENCE, resamples: int = 10_000) -> list[dict]:
    """One row per (mix, peer): see the module docstring. Pure."""
    solo_median = {name: statistics.median(times) for name, times in solo.items() if times}
    rows = []
    for mix in mixes:
        by_peer: dict[str, dict[int, MixRun]] = {}
        for run in runs:
            if run.mix == mix.name:
                by_peer.setdefault(run.peer, {})[run.repeat] = run
        bound = None
        if mix.kind == "kernels" and all(c.name in solo_median for c in mix.cases):
            bound = lower_bound([solo_median[c.name] for c in mix.cases], cores)
        ref_runs = by_peer.get(reference, {})
        for peer, per_repeat in by_peer.items():
            good = {r: run for r, run in per_repeat.items() if run.makespan is not None}
            errors = [run.error for run in per_repeat.values() if run.error]
            row = {"mix": mix.name, "peer": peer, "runs": len(good), "failed": len(errors),
                   "errors": sorted(set(errors))[:3], "makespans": [good[r].makespan for r in sorted(good)]}
            if good:
                row["median"] = statistics.median(row["makespans"])
                if mix.kind == "latency":
                    latencies = [x for run in good.values() for x in run.latencies]
                    row["median_latency_ms"] = 1e3 * statistics.median(latencies)
                    row["p99_latency_ms"] = 1e3 * sorted(latencies)[min(len(latencies) - 1, int(0.99 * len(latencies)))]
                if mix.kind == "throughput":
                    row["tasks_per_second"] = mix.count / row["median"]
                if bound:
                    row["lower_bound"] = bound
                    row["over_lower_bound"] = row["median"] / bound
                slowdowns = [t["seconds"] / solo_median[t["case"]] for run in good.values() for t in run.tasks
                             if solo_median.get(t["case"])]
                if slowdowns:
                    row["mean_slowdown_vs_solo"] = statistics.fmean(slowdowns)
                paired = sorted(r for r in good if r in ref_runs and ref_runs[r].makespan is not None)
                if paired:
                    ratio, low, high = bootstrap_ratio([ref_runs[r].makespan for r in paired],
                                                       [good[r].makespan for r in paired], resamples=resamples,
                                                       seed=zlib.crc32(f"{mix.name}/{peer}".encode()))
                    row.update(vs_reference=ratio, ci_low=low, ci_high=high, paired_runs=len(paired))
            rows.append(row)
    _gap_captured(rows, reference)
    return rows


def _gap_captured(rows: list[dict], reference: str) -> None:
    """Where a mix has an oracle: the share of the reference-to-oracle gap each peer closes."""
    for mix in {row["mix"] for row in rows}:
        of_mix = {row["peer"]: row for row in rows if row["mix"] == mix and "median" in row}
        if "oracle" not in of_mix or reference not in of_mix:
            continue
        gap = of_mix[reference]["median"] - of_mix["oracle"]["median"]
        for row in of_mix.values():
            row["oracle_gap_s"] = gap
            row["gap_captured"] = (of_mix[reference]["median"] - row["median"]) / gap if gap > 0 else None


# --------------------------------------------------------------------------------------------
# Output.


def write_pyperf(runs: Sequence[MixRun], directory: Path, metadata: dict) -> dict[str, Path]:
    """One pyperf suite per peer (``<peer>.json``): a benchmark per mix, a run per repetition whose
    values are the makespan (or, for noop-latency, every round trip)."""
    import pyperf

    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for peer in dict.fromkeys(run.peer for run in runs):
        benchmarks = []
        for mix in dict.fromkeys(run.mix for run in runs if run.peer == peer):
            good = [r for r in runs if r.peer == peer and r.mix == mix and r.makespan is not None]
            if not good:
                continue
            pyperf_runs = [
                pyperf.Run(r.latencies if r.latencies else [r.makespan], collect_metadata=False,
                           metadata={"name": mix, "unit": "second", "loops": 1, "peer": peer, "repeat": r.repeat + 1,
                                     **{k: v for k, v in metadata.items() if isinstance(v, (str, int, float))}})
                for r in good]
            benchmarks.append(pyperf.Benchmark(pyperf_runs))
        if benchmarks:
            path = directory / f"{peer.replace(':', '-').replace('+', '-')}.json"
            path.unlink(missing_ok=True)
            pyperf.BenchmarkSuite(benchmarks).dump(str(path), replace=True)
            paths[peer] = path
    return paths


def plot(rows: Sequence[dict], path: Path, reference: str = REFERENCE) -> Path:
    """Ratio to the reference (with its 95% interval) per mix and peer, > 1 is faster: work mixes
    on a linear axis, the no-op mixes (where the spread is tenfold) on a log axis beside them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mixes = list(dict.fromkeys(row["mix"] for row in rows))
    panels = [[m for m in mixes if not m.startswith("noop")], [m for m in mixes if m.startswith("noop")]]
    panels = [panel for panel in panels if panel]
    peers = [p for p in PEERS if any(row["peer"] == p for row in rows)]
    figure, axes = plt.subplots(1, len(panels), figsize=(4 + 1.5 * len(mixes), 5), layout="constrained",
                                squeeze=False, gridspec_kw={"width_ratios": [len(p) for p in panels]})
    width = 0.8 / max(len(peers), 1)
    cmap = matplotlib.colormaps["tab10"]
    for axis, panel in zip(axes[0], panels):
        for k, peer in enumerate(peers):
            xs, ys, lows, highs = [], [], [], []
            for i, mix in enumerate(panel):
                row = next((r for r in rows if r["mix"] == mix and r["peer"] == peer and "vs_reference" in r), None)
                if row:
                    xs.append(i - 0.4 + width * (k + 0.5))
                    ys.append(row["vs_reference"])
                    lows.append(max(row["vs_reference"] - row["ci_low"], 0.0))
                    highs.append(max(row["ci_high"] - row["vs_reference"], 0.0))
            axis.bar(xs, ys, width, yerr=[lows, highs], capsize=2, label=peer, color=cmap(k % 10),
                     edgecolor="black", linewidth=0.4)
        axis.axhline(1.0, color="black", linewidth=0.8)
        axis.set_xticks(range(len(panel)), panel, rotation=20)
        if panel[0].startswith("noop"):
            axis.set_yscale("log")
            axis.set_title("per-task overhead (log scale)", fontsize=10)
        else:
            values = [r["ci_low"] for r in rows if r["mix"] in panel and "ci_low" in r] + \
                     [r["ci_high"] for r in rows if r["mix"] in panel and "ci_high" in r]
            axis.set_ylim(max(0.0, min(values) - 0.05), max(values) + 0.05)
            axis.set_title(f"work mixes: makespan ratio to {reference}", fontsize=10)
            axis.set_ylabel(f"median makespan of {reference} / peer's (> 1: faster)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, fontsize=8, ncol=min(len(peers), 6), loc="outside lower center")
    figure.suptitle("bars: paired bootstrap 95% interval over repetitions", fontsize=9)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def format_table(rows: Sequence[dict], reference: str = REFERENCE) -> list[str]:
    lines = [(f"{'mix':<16} {'peer':<22} {'runs':>4} {'median s':>9} {'vs ' + reference:>14} {'95% CI':>15} "
              f"{'/bound':>7} {'gap':>6}  note")]
    for row in rows:
        if "median" not in row:
            lines.append(f"{row['mix']:<16} {row['peer']:<22} {0:>4}  failed: {'; '.join(row['errors'])}")
            continue
        ratio = f"{row['vs_reference']:.3f}x" if "vs_reference" in row else "-"
        ci = f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}]" if "ci_low" in row else "-"
        bound = f"{row['over_lower_bound']:.3f}" if "over_lower_bound" in row else "-"
        gap = f"{100 * row['gap_captured']:.0f}%" if row.get("gap_captured") is not None else "-"
        note = []
        if "tasks_per_second" in row:
            note.append(f"{row['tasks_per_second']:.0f} tasks/s")
        if "median_latency_ms" in row:
            note.append(f"{row['median_latency_ms']:.2f} ms median, {row['p99_latency_ms']:.2f} ms p99")
        if row["failed"]:
            note.append(f"{row['failed']} failed")
        lines.append(f"{row['mix']:<16} {row['peer']:<22} {row['runs']:>4} {row['median']:>9.3f} {ratio:>14} {ci:>15} "
                     f"{bound:>7} {gap:>6}  {', '.join(note)}")
    return lines


def markdown_table(rows: Sequence[dict], reference: str = REFERENCE) -> list[str]:
    """The summary as a Markdown table (for reports)."""
    lines = [f"| mix | peer | runs | median makespan | vs {reference} | 95% CI | / lower bound | gap closed | note |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        if "median" not in row:
            lines.append(f"| {row['mix']} | {row['peer']} | 0 | failed: {'; '.join(row['errors'])} | | | | | |")
            continue
        note = []
        if "tasks_per_second" in row:
            note.append(f"{row['tasks_per_second']:.0f} tasks/s")
        if "median_latency_ms" in row:
            note.append(f"{row['median_latency_ms']:.2f} ms median, {row['p99_latency_ms']:.2f} ms p99")
        if "mean_slowdown_vs_solo" in row:
            note.append(f"mean slowdown vs solo {row['mean_slowdown_vs_solo']:.3f}")
        cells = [
            row["mix"], f"`{row['peer']}`", str(row["runs"]), f"{row['median']:.3f} s",
            f"{row['vs_reference']:.3f}x" if "vs_reference" in row else "-",
            f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}]" if "ci_low" in row else "-",
            f"{row['over_lower_bound']:.3f}" if "over_lower_bound" in row else "-",
            f"{100 * row['gap_captured']:.0f}%" if row.get("gap_captured") is not None else "-",
            ", ".join(note),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


# --------------------------------------------------------------------------------------------
# The whole benchmark.


def run_bench(*, mixes: Sequence[str], peers: Sequence[str], repeats: int, llc_override=None, out: Path,
              scale: str = "bench", seed: int = 0, noop_tasks: int = 2000, latency_tasks: int = 200,
              montage_tiles: int = 16, timeout: float = 1800.0, resamples: int = 10_000, model=None,
              stream=sys.stderr, printer: Callable[[str], None] = print) -> dict:
    """Run the benchmark (see the module docstring); returns the JSON record, also written to
    ``<out>/bench.json`` after every repetition, so an interrupted run keeps what it measured."""
    from scalpel_executor.workloads.kernels import limit_blas_threads

    for peer in peers:
        if peer not in PEERS:
            raise ValueError(f"unknown peer {peer!r} in --peers; choose from {', '.join(PEERS)}")
    for name, value, least in (("repeats", repeats, 1), ("noop_tasks", noop_tasks, 1),
                               ("latency_tasks", latency_tasks, 1), ("montage_tiles", montage_tiles, 2)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name.replace('_', '-')} must be a whole number >= {least}, got {value!r}")
    if "montage" in mixes:
        from scalpel_executor.workloads.montage import require_montage

        require_montage()
    topology = detect_topology()
    cores = len(topology.cpus)
    llc, llc_note = machine_llc(topology, llc_override)
    os.environ.update(THREAD_ENV)
    limit_blas_threads(1)
    out.mkdir(parents=True, exist_ok=True)
    store = str(out / "profiles.sqlite")
    for suffix in ("", "-wal", "-shm"):
        Path(store + suffix).unlink(missing_ok=True)
    run_dir = str(out / "runinfo")
    printer(f"machine: {cores} cores in {len(topology.domains)} LLC domain(s), LLC {format_size(llc)} ({llc_note})")
    built = build_mixes(list(mixes), llc, cores, scale=scale, seed=seed, noop_tasks=noop_tasks,
                        latency_tasks=latency_tasks, montage_tiles=montage_tiles, model=model)
    for mix in built:
        printer(f"mix {mix.name:<16} {mix.tasks:>5} {'tiles' if mix.kind == 'montage' else 'tasks'}  {mix.note}")
    kernel_cases = list(dict.fromkeys(c for mix in built if mix.kind == "kernels" for c in mix.cases))
    solo: dict[str, list[float]] = {}
    runs: list[MixRun] = []
    record: dict = {}
    started = time.monotonic()
    for repeat in range(repeats):
        if kernel_cases:
            for name, seconds in solo_pass(kernel_cases, run_dir, store, topology.cpus[0], stream, repeat,
                                           repeats).items():
                solo.setdefault(name, []).append(seconds)
        order = list(peers[repeat % len(peers):]) + list(peers[:repeat % len(peers)])
        for peer in order:
            todo = [mix for mix in built if runs_mix(peer, mix)]
            if not todo:
                continue
            try:
                submitter = start_peer(peer, cores, topology, run_dir, store)
            except Exception as error:  # noqa: BLE001 - a peer that cannot start is reported, the rest run
                message = f"{type(error).__name__}: {error}"
                logger.warning("%s did not start: %s", peer, message)
                runs.extend(MixRun(peer, mix.name, repeat, None, error=f"did not start: {message}") for mix in todo)
                continue
            try:
                for mix in todo:
                    run = run_mix(submitter, peer, mix, repeat, out, timeout)
                    runs.append(run)
                    shown = "failed" if run.makespan is None else f"{run.makespan:8.3f} s"
                    stream.write(f"  [{repeat + 1}/{repeats}] {peer:<22} {mix.name:<16} {shown}   "
                                 f"({time.monotonic() - started:6.0f} s elapsed)\n")
                    stream.flush()
            finally:
                submitter.close()
        record = _record(built, runs, solo, cores, llc, llc_note, topology, repeats, seed, scale, resamples)
        (out / "bench.json").write_text(json.dumps(record, indent=1))
    record["files"] = {"json": str(out / "bench.json")}
    pyperf_paths = write_pyperf(runs, out / "pyperf", {"machine_cores": cores, "llc_bytes": llc})
    record["files"]["pyperf"] = {peer: str(p) for peer, p in pyperf_paths.items()}
    if any("vs_reference" in row for row in record["summary"]):
        record["files"]["png"] = str(plot(record["summary"], out / "bench.png"))
    (out / "bench.json").write_text(json.dumps(record, indent=1))
    return record


def _record(built, runs, solo, cores, llc, llc_note, topology, repeats, seed, scale, resamples) -> dict:
    return {
        "format": "scalpel-bench/1",
        "machine": {"cores": cores, "domains": [d.cpus for d in topology.domains], "llc": llc, "llc_note": llc_note,
                    "load_average": os.getloadavg()},
        "config": {"repeats": repeats, "seed": seed, "scale": scale, "reference": REFERENCE},
        "mixes": [{"name": m.name, "kind": m.kind, "tasks": m.tasks, "note": m.note,
                   "cases": [{"case": c.name, "kernel": c.kernel, "size": c.size, "steps": c.steps,
                              "footprint": c.footprint_bytes} for c in m.cases],
                   "oracle": [c.name for c in m.oracle] if m.oracle else None} for m in built],
        "solo": solo,
        "summary": summarise(runs, built, solo, cores, resamples=resamples),
        "runs": [vars(r) for r in runs],
    }


def parse_list(text: str | None, choices: Sequence[str], what: str, default: Sequence[str]) -> list[str]:
    """A comma-separated subset of ``choices``; ``scalpel:*`` stands for every Scalpel policy."""
    if not text:
        return list(default)
    picked = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if part == "scalpel:*":
            picked.extend(f"scalpel:{p}" for p in SCALPEL_POLICIES)
        elif part not in choices:
            if what == "--peers" and part.startswith("scalpel:") and part[8:] in POLICIES:
                raise ValueError(f"policy {part[8:]!r} is not benchmarked; benchmarked policies: "
                                 f"{', '.join(SCALPEL_POLICIES)}")
            raise ValueError(f"unknown {what} entry {part!r}; choose from {', '.join(choices)}")
        else:
            picked.append(part)
    if not picked:
        raise ValueError(f"{what} names nothing; choose from {', '.join(choices)}")
    return list(dict.fromkeys(picked))
