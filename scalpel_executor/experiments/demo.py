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
single-threaded BLAS as Scalpel's workers (:mod:`~scalpel_executor.experiments.harness`).
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TextIO

from scalpel_executor.core.simulate import lower_bound
from scalpel_executor.core.units import format_size
from scalpel_executor.experiments.apps import one_blas_thread
from scalpel_executor.experiments.charts import gantt
from scalpel_executor.experiments.harness import Progress, fresh_store, run_kernels, solo_pass, start_peer
from scalpel_executor.experiments.plans import DemoPlan
from scalpel_executor.experiments.sizing import machine_llc, steps_timed_here
from scalpel_executor.experiments.tables import format_table
from scalpel_executor.host.topology import detect_topology
from scalpel_executor.workloads.kernels import contention_mix

#: The demo's name for Parsl's HTEX, and the harness peer it is (one pinned worker per core).
HTEX = "htex"
_PEER = {HTEX: "htex-block"}
#: Seconds a whole batch may take before the run counts as hung.
BATCH_TIMEOUT = 3600.0


@dataclass
class RunResult:
    executor: str
    repeat: int
    makespan: float
    tasks: list[dict] = field(default_factory=list)
    report_sources: dict | None = None


def run_batch(name: str, cases, run_dir: str, cores: int, store: str, topology, repeat: int, label: str,
              stream: TextIO) -> RunResult:
    """Start one executor, warm it up, run the batch with a progress bar, stop it."""
    submitter = start_peer(_PEER.get(name, name), cores, topology, run_dir, store)
    try:
        with Progress(label, len(cases), stream) as progress:
            makespan, rows = run_kernels(submitter, cases, timeout=BATCH_TIMEOUT, progress=progress)
        sources = None
        if hasattr(submitter.executor, "run_report"):  # Scalpel says where each estimate came from
            kernel_rows = [t for t in submitter.executor.run_report()["tasks"]
                           if ".timed_kernel(" in (t["profile_key"] or "")]
            sources = {"footprint": dict(Counter(t["footprint_source"] for t in kernel_rows)),
                       "runtime": dict(Counter(t["runtime_source"] for t in kernel_rows))}
    finally:
        submitter.close()
    return RunResult(name, repeat, makespan, rows, sources)


def summarise(results: list[RunResult], solo: dict[str, float], cores: int) -> list[dict]:
    """One row per executor: median makespan, ratio to HTEX, mean slowdown vs solo, lower bound."""
    by_executor: dict[str, list[RunResult]] = {}
    for result in results:
        by_executor.setdefault(result.executor, []).append(result)
    bound = lower_bound([solo[row["case"]] for row in results[0].tasks], cores)
    htex = statistics.median(r.makespan for r in by_executor[HTEX]) if HTEX in by_executor else None
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


def run_demo(plan: DemoPlan, *, llc_override, out: Path, stream: TextIO = sys.stderr,
             printer: Callable[[str], None] = print) -> dict:
    """The whole demo (see the module docstring); returns the JSON record."""
    topology = detect_topology()
    cores = len(topology.cpus)
    llc, llc_note = machine_llc(topology, llc_override)
    tasks = plan.tasks if plan.tasks is not None else plan.tasks_per_core * cores
    cases, _ = steps_timed_here(contention_mix(llc, cores, tasks, scale=plan.scale, seed=plan.seed))
    store = fresh_store(out)
    run_dir = str(out / "runinfo")
    one_blas_thread()
    printer(f"machine: {cores} cores in {len(topology.domains)} LLC domain(s); LLC {format_size(llc)} per domain ({llc_note})")
    printer(f"batch: {len(cases)} kernel tasks, {sum(c.footprint_bytes > llc / cores for c in cases)} large "
            f"(fit the LLC alone, not together) submitted first, then the small ones")
    names = [f"scalpel:{p}" for p in plan.policies] + ([HTEX] if plan.include_htex else [])
    results = []
    solo_runs: dict[str, list[float]] = {}
    for repeat in range(plan.repeats):
        # solo times are measured in every repeat too, so a noisy moment does not skew all slowdowns
        label = f"[{repeat + 1}/{plan.repeats}] solo, 1 core"
        for case_name, seconds in solo_pass(cases, run_dir, store, topology.cpus[0], stream, label).items():
            solo_runs.setdefault(case_name, []).append(seconds)
        for name in names:
            label = f"[{repeat + 1}/{plan.repeats}] {name}"
            results.append(run_batch(name, cases, run_dir, cores, store, topology, repeat, label, stream))
    solo = {case_name: statistics.median(times) for case_name, times in solo_runs.items()}
    record = {
        "machine": {"cores": cores, "domains": [d.cpus for d in topology.domains], "llc": llc, "llc_note": llc_note},
        "batch": [{"case": c.name, "kernel": c.kernel, "size": c.size, "steps": c.steps, "footprint": c.footprint_bytes,
                   "solo_seconds": solo[c.name]} for c in cases],
        "summary": summarise(results, solo, cores),
        "runs": [asdict(r) for r in results],
    }
    png = gantt(results, llc, [list(d.cpus) for d in topology.domains], out / "scalpel-demo.png")
    json_path = out / "scalpel-demo.json"
    json_path.write_text(json.dumps(record, indent=1))
    record["files"] = {"png": str(png), "json": str(json_path)}
    return record


def print_summary(record: dict, printer: Callable[[str], None] = print) -> None:
    """The comparison table of a demo record, and where its chart and record are."""
    rows = record["summary"]
    printer("")
    cells = [[row["executor"], row["runs"], f"{row['median_makespan']:.2f} s",
              "-" if row["speedup_vs_htex"] is None else f"{row['speedup_vs_htex']:.3f}x",
              "-" if row["mean_slowdown_vs_solo"] is None else f"{row['mean_slowdown_vs_solo']:.3f}x",
              f"{row['makespan_over_bound']:.3f}x"] for row in rows]
    for line in format_table(["executor", "runs", "median makespan", "vs HTEX", "slowdown vs solo", "/ lower bound"],
                             cells, right=[1, 2, 3, 4, 5]):
        printer(line)
    printer(f"lower bound (longest solo task, or total solo work / cores): {rows[0]['lower_bound']:.2f} s")
    sources = [r["report_sources"] for r in record["runs"] if r.get("report_sources")]
    if sources:
        printer(f"Scalpel's footprint estimates came from: {sources[-1]['footprint']} (the solo pass measured them)")
    printer(f"Gantt chart: {record['files']['png']}\nrecord:      {record['files']['json']}")
    if any(row["runs"] < 3 for row in rows):
        printer("note: fewer than 3 runs per executor; single timings on a shared machine vary by +-30%")
    if not math.isfinite(rows[0]["median_makespan"]):
        printer("warning: a makespan is not finite")
