"""``scalpel demo``: a contention-heavy kernel batch under Scalpel and under Parsl's HTEX, compared.

::

    topology (sysfs) ─ LLC size (--llc overrides) ─> contention_mix: large kernels (~60% of the LLC,
                                                     fit alone, not together) then small ones,
                                                     each distinct case timed here so all last alike
    for repeat in 1..R:                                                          (interleaved)
    1.     solo pass: every case alone on one pinned core, through a ScalpelExecutor with the
           demo's own profile store: solo times (median over repeats: slowdowns, lower bound) and
           the footprints the probe measured, stored under each task's profile key
    2.     for executor in (Scalpel per policy ..., HTEX block):
           parsl.load(config) ─ warm-up (one task per worker) ─ submit the whole batch at once
           ─ progress bar as futures finish ─ makespan ─ dfk.cleanup()
       Scalpel's runs read the footprints from the store (the run report says "store")
    3. table: median makespan, ratio to HTEX, mean slowdown vs solo, lower bound
       <out>/scalpel-demo.png  Gantt chart per executor: which task ran on which core when, coloured
                               by footprint, with each domain's summed running footprint against the LLC
       <out>/scalpel-demo.json everything above, per task

Each task reports its own start, end and CPU (``/proc/self/stat``), so every executor is measured
the same way. HTEX gets one worker per core with ``cpu_affinity="block"`` and the same
single-threaded BLAS as Scalpel's workers.
"""

from __future__ import annotations

import json
import logging
import math
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from scalpel_executor.core.topology import Topology
from scalpel_executor.host.topology import detect_topology
from scalpel_executor.core.units import format_size, parse_size

logger = logging.getLogger(__name__)

#: Inside a VM whose sysfs reports a huge (host-wide) LLC, the mixes are sized for this instead.
#: On the development VM (2 vCPUs, sysfs: 480 MiB) pairs of random-gather kernels showed no co-run
#: slowdown at 16 MiB each and 1.25x at 32 MiB each (benchmarks/corun.py, docs/benchmarks.md):
#: the cache the two cores really share behaves like one of about 56 MiB.
VM_LLC_ASSUMED = 56 * 2**20
VM_LLC_SUSPICIOUS = 64 * 2**20
THREAD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def timed_kernel(kernel: str, size: int, steps: int, seed: int = 0, parsl_resource_specification=None) -> dict:
    """Run one kernel case and report when and where it ran (the demo's app body)."""
    import os
    import time

    from scalpel_executor.workloads.kernels import run_kernel

    started = time.time()
    result = run_kernel(kernel, size, steps, seed=seed)
    finished = time.time()
    try:
        with open("/proc/self/stat") as stream:
            cpu = int(stream.read().rsplit(")", 1)[1].split()[36])  # field 39: CPU last run on
    except (OSError, ValueError, IndexError):
        cpu = -1
    affinity = sorted(os.sched_getaffinity(0))
    return {**result, "started": started, "finished": finished, "cpu": affinity[0] if len(affinity) == 1 else cpu,
            "pid": os.getpid()}


def warm_up(parsl_resource_specification=None) -> int:
    """Import what the kernels need, so no measured task pays for it."""
    import os

    import numpy  # noqa: F401

    import scalpel_executor.workloads.kernels  # noqa: F401

    return os.getpid()


def machine_llc(topology: Topology, override: str | int | None) -> tuple[int, str]:
    """The LLC size per domain to size the mix for, and a note saying where it came from."""
    if override is not None:
        return parse_size(override, what="--llc"), "given with --llc"
    detected = int(topology.domains[0].llc_size or 0)
    in_vm = False
    try:
        with open("/proc/cpuinfo") as stream:
            in_vm = any(line.startswith("flags") and " hypervisor" in line for line in stream)
    except OSError:
        pass
    if detected == 0:
        return VM_LLC_ASSUMED, f"sysfs gives no LLC size; assuming {format_size(VM_LLC_ASSUMED)} (override with --llc)"
    if in_vm and detected > VM_LLC_SUSPICIOUS:
        return VM_LLC_ASSUMED, (
            f"sysfs reports {format_size(detected)} inside a virtual machine, which is usually the host's whole "
            f"package; assuming {format_size(VM_LLC_ASSUMED)} (override with --llc)"
        )
    return detected, "from sysfs"


@dataclass
class RunResult:
    executor: str
    repeat: int
    makespan: float
    tasks: list[dict] = field(default_factory=list)
    report_sources: dict | None = None


def _progress(label: str, done: int, total: int, started: float, stream) -> None:
    if done < total and not (hasattr(stream, "isatty") and stream.isatty()):
        return  # a log file gets the finished line only
    width = 24
    filled = int(width * done / max(total, 1))
    stream.write(f"\r  {label:<22} {'█' * filled}{'░' * (width - filled)} {done:>3}/{total} tasks {time.monotonic() - started:6.1f} s")
    if done == total:
        stream.write("\n")
    stream.flush()


def _config(name: str, run_dir: str, cores: int, store: str, topology: Topology):
    from parsl.config import Config

    if name == "htex":
        from parsl.executors import HighThroughputExecutor
        from parsl.providers import LocalProvider

        exports = " ".join(f"export {k}={v};" for k, v in THREAD_ENV.items())
        executor = HighThroughputExecutor(
            label="htex", cpu_affinity="block", max_workers_per_node=cores,
            provider=LocalProvider(init_blocks=1, min_blocks=1, max_blocks=1, worker_init=exports),
        )
    else:
        from scalpel_executor.runtime.executor import ScalpelExecutor

        policy = name.split(":", 1)[1]
        executor = ScalpelExecutor(label=name.replace(":", "-"), policy=policy, profiles=store, topology=topology)
    return Config(executors=[executor], run_dir=run_dir, strategy="none", initialize_logging=True)


def run_batch(name: str, cases, run_dir: str, cores: int, store: str, topology: Topology, repeat: int,
              label: str, stream) -> RunResult:
    """Load one executor, warm it up, run the batch, clean up; the makespan spans submit to last result."""
    import parsl
    from parsl import python_app

    config = _config(name, run_dir, cores, store, topology)
    executor_label = config.executors[0].label
    dfk = parsl.load(config)
    try:
        warm = python_app(warm_up, executors=[executor_label])
        pids: set[int] = set()
        for _ in range(20):  # until every worker has imported numpy (HTEX may route to one worker)
            pids |= {f.result() for f in [warm() for _ in range(cores * 2)]}
            if len(pids) >= cores:
                break
        app = python_app(timed_kernel, executors=[executor_label])
        done = 0
        started = time.monotonic()
        wall_zero = time.time()
        futures = [app(case.kernel, case.size, case.steps) for case in cases]
        for future in futures:
            future.result()
            now_done = sum(f.done() for f in futures)
            if now_done != done:
                done = now_done
                _progress(label, done, len(futures), started, stream)
        makespan = time.monotonic() - started
        rows = []
        for case, future in zip(cases, futures):
            row = future.result()
            rows.append({"case": case.name, "kernel": case.kernel, "footprint": case.footprint_bytes,
                         "cpu": row["cpu"], "start": row["started"] - wall_zero, "end": row["finished"] - wall_zero,
                         "seconds": row["seconds"]})
        sources = None
        executor = dfk.executors[executor_label]
        if hasattr(executor, "run_report"):
            kernel_rows = [t for t in executor.run_report()["tasks"] if ".timed_kernel(" in (t["profile_key"] or "")]
            sources = {"footprint": dict(Counter(t["footprint_source"] for t in kernel_rows)),
                       "runtime": dict(Counter(t["runtime_source"] for t in kernel_rows))}
    finally:
        dfk.cleanup()
        parsl.clear()
    return RunResult(name, repeat, makespan, rows, sources)


def solo_pass(cases, run_dir: str, store: str, cpu: int, stream, repeat: int = 0, repeats: int = 1) -> dict[str, float]:
    """Every distinct case alone on one core, through Scalpel with the probe: solo seconds per case."""
    import parsl
    from parsl import python_app
    from parsl.config import Config

    from scalpel_executor.runtime.executor import ScalpelExecutor

    executor = ScalpelExecutor(label="solo", profiles=store, topology=[[cpu]], batch_window=0.0)
    dfk = parsl.load(Config(executors=[executor], run_dir=run_dir, strategy="none"))
    solo: dict[str, float] = {}
    try:
        python_app(warm_up, executors=["solo"])().result()
        app = python_app(timed_kernel, executors=["solo"])
        distinct = list(dict.fromkeys(cases))
        started = time.monotonic()
        for index, case in enumerate(distinct):
            solo[case.name] = app(case.kernel, case.size, case.steps).result()["seconds"]
            _progress(f"[{repeat + 1}/{repeats}] solo, 1 core", index + 1, len(distinct), started, stream)
    finally:
        dfk.cleanup()
        parsl.clear()
    return solo


def summarise(results: list[RunResult], solo: dict[str, float], cores: int) -> list[dict]:
    """One row per executor: median makespan, ratio to HTEX, mean slowdown vs solo."""
    by_executor: dict[str, list[RunResult]] = {}
    for result in results:
        by_executor.setdefault(result.executor, []).append(result)
    total = sum(solo[row["case"]] for row in results[0].tasks)
    bound = max(max(solo.values()), total / cores)
    htex = statistics.median(r.makespan for r in by_executor["htex"]) if "htex" in by_executor else None
    rows = []
    for name, runs in by_executor.items():
        median = statistics.median(r.makespan for r in runs)
        slowdowns = [row["seconds"] / solo[row["case"]] for r in runs for row in r.tasks if solo.get(row["case"])]
        rows.append({
            "executor": name, "runs": len(runs), "median_makespan": median,
            "makespans": [r.makespan for r in runs],
            "speedup_vs_htex": htex / median if htex else None,
            "mean_slowdown_vs_solo": statistics.fmean(slowdowns) if slowdowns else None,
            "lower_bound": bound, "makespan_over_bound": median / bound,
        })
    return rows


def gantt(results: list[RunResult], llc: int, domains: list[list[int]], path: Path) -> Path:
    """Draw the median run of each executor: tasks per core over time, and summed footprint per domain."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import cm, colors

    chosen: dict[str, RunResult] = {}
    for name in dict.fromkeys(r.executor for r in results):
        runs = sorted((r for r in results if r.executor == name), key=lambda r: r.makespan)
        chosen[name] = runs[len(runs) // 2]
    cpus = sorted({cpu for d in domains for cpu in d} | {row["cpu"] for r in chosen.values() for row in r.tasks})
    footprints = [row["footprint"] for r in chosen.values() for row in r.tasks]
    norm = colors.LogNorm(vmin=max(min(footprints), 1), vmax=max(max(footprints), 2))
    cmap = matplotlib.colormaps["viridis"]
    horizon = max(row["end"] for r in chosen.values() for row in r.tasks) * 1.02
    figure, axes = plt.subplots(2 * len(chosen), 1, figsize=(11, 2.4 * len(chosen) * 2), layout="constrained",
                                gridspec_kw={"height_ratios": [max(len(cpus), 1), 1.4] * len(chosen)},
                                squeeze=False)
    for index, (name, run) in enumerate(chosen.items()):
        lanes, load = axes[2 * index][0], axes[2 * index + 1][0]
        for row in run.tasks:
            lane = cpus.index(row["cpu"]) if row["cpu"] in cpus else len(cpus)
            lanes.barh(lane, row["end"] - row["start"], left=row["start"], height=0.8,
                       color=cmap(norm(max(row["footprint"], 1))), edgecolor="black", linewidth=0.5)
            if row["end"] - row["start"] > horizon / 25:
                lanes.text(row["start"] + (row["end"] - row["start"]) / 2, lane, format_size(row["footprint"]),
                           ha="center", va="center", fontsize=7, color="white" if norm(row["footprint"]) < 0.6 else "black")
        lanes.set_yticks(range(len(cpus)), [f"CPU {c}" for c in cpus])
        lanes.set_xlim(0, horizon)
        lanes.invert_yaxis()
        lanes.set_title(f"{name}: makespan {run.makespan:.1f} s (median run)", loc="left", fontsize=10)
        for domain_index, domain in enumerate(domains):
            events = sorted({0.0, horizon} | {row[k] for row in run.tasks for k in ("start", "end")})
            level = [sum(row["footprint"] for row in run.tasks if row["cpu"] in domain and row["start"] <= t < row["end"])
                     for t in events]
            load.step(events, [v / 2**20 for v in level], where="post", label=f"domain {domain_index} running footprint")
        load.axhline(llc / 2**20, color="red", linestyle="--", linewidth=1, label=f"LLC {format_size(llc)}")
        load.set_xlim(0, horizon)
        load.set_ylabel("MiB", fontsize=8)
        load.legend(fontsize=7, loc="upper right")
        load.set_xlabel("seconds since the batch was submitted", fontsize=8)
    figure.colorbar(cm.ScalarMappable(norm=norm, cmap=cmap), ax=[row[0] for row in axes], label="task footprint (bytes)",
                    fraction=0.025, pad=0.01)
    figure.suptitle("Which task ran on which core when (colour: footprint); below each: the domain's summed "
                    "running footprint against its LLC", fontsize=10)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def run_demo(*, tasks: int | None, scale: str, repeats: int, policies: Sequence[str], include_htex: bool,
             llc_override, out: Path, seed: int, stream=sys.stderr, printer: Callable[[str], None] = print) -> dict:
    """The whole demo (see the module docstring); returns the JSON record."""
    from scalpel_executor.workloads.kernels import contention_mix, limit_blas_threads

    topology = detect_topology()
    cores = len(topology.cpus)
    llc, llc_note = machine_llc(topology, llc_override)
    tasks = tasks if tasks is not None else 4 * cores
    cases = contention_mix(llc, cores, tasks, scale=scale, seed=seed)
    from scalpel_executor.experiments.bench import calibrated_alike
    from scalpel_executor.workloads.kernels import calibrate

    cases, _ = calibrated_alike(cases, calibrate)  # time each distinct case here: large and small last alike
    out.mkdir(parents=True, exist_ok=True)
    store = str(out / "profiles.sqlite")
    for suffix in ("", "-wal", "-shm"):
        Path(store + suffix).unlink(missing_ok=True)
    run_dir = str(out / "runinfo")
    os.environ.update(THREAD_ENV)
    limit_blas_threads(1)
    printer(f"machine: {cores} cores in {len(topology.domains)} LLC domain(s); LLC {format_size(llc)} per domain ({llc_note})")
    printer(f"batch: {len(cases)} kernel tasks, {sum(c.footprint_bytes > llc / cores for c in cases)} large "
            f"(fit the LLC alone, not together) submitted first, then the small ones")
    names = [f"scalpel:{p}" for p in policies] + (["htex"] if include_htex else [])
    results = []
    solo_runs: dict[str, list[float]] = {}
    for repeat in range(repeats):
        # solo times are measured in every repeat too, so a noisy moment does not skew all slowdowns
        for case_name, seconds in solo_pass(cases, run_dir, store, topology.cpus[0], stream, repeat, repeats).items():
            solo_runs.setdefault(case_name, []).append(seconds)
        for name in names:
            label = f"[{repeat + 1}/{repeats}] {name}"
            results.append(run_batch(name, cases, run_dir, cores, store, topology, repeat, label, stream))
    solo = {case_name: statistics.median(times) for case_name, times in solo_runs.items()}
    rows = summarise(results, solo, cores)
    record = {
        "machine": {"cores": cores, "domains": [d.cpus for d in topology.domains], "llc": llc, "llc_note": llc_note},
        "batch": [{"case": c.name, "kernel": c.kernel, "size": c.size, "steps": c.steps, "footprint": c.footprint_bytes,
                   "solo_seconds": solo[c.name]} for c in cases],
        "summary": rows,
        "runs": [asdict(r) for r in results],
    }
    png = gantt(results, llc, [list(d.cpus) for d in topology.domains], out / "scalpel-demo.png")
    json_path = out / "scalpel-demo.json"
    json_path.write_text(json.dumps(record, indent=1))
    record["files"] = {"png": str(png), "json": str(json_path)}
    return record


def print_summary(record: dict, printer: Callable[[str], None] = print) -> None:
    rows = record["summary"]
    printer("")
    printer(f"{'executor':<18} {'runs':>4} {'median makespan':>16} {'vs HTEX':>8} {'slowdown vs solo':>17} {'/ lower bound':>14}")
    for row in rows:
        ratio = "-" if row["speedup_vs_htex"] is None else f"{row['speedup_vs_htex']:.3f}x"
        slowdown = "-" if row["mean_slowdown_vs_solo"] is None else f"{row['mean_slowdown_vs_solo']:.3f}x"
        printer(f"{row['executor']:<18} {row['runs']:>4} {row['median_makespan']:>14.2f} s {ratio:>8} {slowdown:>17} "
                f"{row['makespan_over_bound']:>13.3f}x")
    printer(f"lower bound (longest solo task, or total solo work / cores): {rows[0]['lower_bound']:.2f} s")
    sources = [r["report_sources"] for r in record["runs"] if r.get("report_sources")]
    if sources:
        printer(f"Scalpel's footprint estimates came from: {sources[-1]['footprint']} (the solo pass measured them)")
    printer(f"Gantt chart: {record['files']['png']}\nrecord:      {record['files']['json']}")
    if any(row["runs"] < 3 for row in rows):
        printer("note: fewer than 3 runs per executor; single timings on a shared machine vary by +-30%")
    if not math.isfinite(rows[0]["median_makespan"]):
        printer("warning: a makespan is not finite")
