"""``scalpel demo``: a contention-heavy kernel batch under Parsl's HTEX, Scalpel's mechanics and its policy.

::

    topology (sysfs) ─ LLC size (--llc overrides) ─> contention_mix: large kernels (~60% of the LLC,
                                                     fit alone, not together) then small ones,
                                                     each distinct case timed here so all last alike
    estimate: the time the demo will take, from the plan, said before anything runs
    solo pass, once: each distinct case (one per profile key) alone on one pinned core, through a
           ScalpelExecutor with the demo's own profile store: solo times (slowdowns, the solo-time
           bound) and the footprints the probe measured, stored under each task's profile key;
           a case this machine ran alone before is not run again: its kept solo time is used and
           what it taught the store is recorded into the demo's store again (solo_times)
    for repeat in 1..R:                                   (interleaved; the order rotates per repeat)
           for executor in (HTEX block, Scalpel with fifo, Scalpel per policy ...):
           parsl.load(config) ─ warm-up (one task per worker) ─ submit the whole batch at once
           ─ progress bar as futures finish ─ makespan ─ dfk.cleanup()
       Scalpel is told the LLC size the batch was sized for, and reads the footprints from the
       store (the run report says "store")
    split: ratios of median makespans, each with a paired bootstrap interval over the repeats
           mechanics  HTEX / scalpel:fifo       the executor without a policy (pinned workers,
                                                its dispatch, no reordering)
           policy     scalpel:fifo / scalpel:P  what the policy adds on the same mechanics
           total      HTEX / scalpel:P          = mechanics x policy
    verdict: one sentence (bench.verdict): each ratio inside or outside noise (its interval holds 1
           or not), the machine (cores, LLC domains and size, VM), and which runs other work
           disturbed: around each batch the harness samples the host's CPU time less the
           executor's processes' (harness.OtherWork), busy above host_model.BUSY_OTHERS per core
    table: per executor, the makespan of every repeat and their median, mean slowdown vs solo,
           and the median over the solo-time bound (an estimate: measured solo times can be beaten)
       <out>/scalpel-demo.png  Gantt chart per executor: which task ran on which core when, coloured
                               by footprint, with each domain's summed running footprint against the LLC
       <out>/scalpel-demo.json everything above, per task

Each task reports its own start, end and CPU (``/proc/self/stat``), so every executor is measured
the same way. HTEX gets one worker per core with ``cpu_affinity="block"`` and the same
single-threaded BLAS as Scalpel's workers (:mod:`~scalpel_executor.experiments.harness`).
The solo pass runs once: its times only scale the slowdowns and the bound, which no ratio of the
split depends on, and a second pass per repeat would cost as much as another executor's run. It
runs distinct cases, not tasks (4 to 5 of 64 on 16 cores), and only those this machine has not
run alone before (``--fresh-solo`` runs them all again): on 16 cores the pass over every task took
193 s of a 6 to 7 minute demo, and grew with the cores.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TextIO

from scalpel_executor.core.simulate import lower_bound
from scalpel_executor.core.domains import Topology
from scalpel_executor.core.units import format_size
from scalpel_executor.experiments.apps import one_blas_thread
from scalpel_executor.experiments.bench.stats import bootstrap_ratio
from scalpel_executor.experiments.charts import gantt
from scalpel_executor.experiments.bench.verdict import demo_verdict, machine_words, running_in_vm
from scalpel_executor.experiments.harness import OtherWork, Progress, fresh_store, run_kernels, solo_pass, start_peer
from scalpel_executor.experiments.plans import DemoPlan
from scalpel_executor.experiments.mix_sizing import machine_fingerprint, machine_llc, steps_timed_here
from scalpel_executor.experiments.solo_times import SoloTimes, kept_step_seconds, plan_solo, run_solo, step_rates
from scalpel_executor.experiments.tables import format_table
from scalpel_executor.host.sysfs import detect_topology
from scalpel_executor.learning.store import default_path
from scalpel_executor.workloads.kernels import contention_mix

#: The demo's name for Parsl's HTEX, and the harness peer it is (one pinned worker per core).
HTEX = "htex"
_PEER = {HTEX: "htex-block"}
#: Scalpel with the fifo policy: its mechanics (pinned workers, node manager, batching, dispatch)
#: running tasks in submission order, so it differs from HTEX by mechanics alone and from the
#: other policies by their order alone.
MECHANICS = "scalpel:fifo"
#: Seconds a whole batch may take before the run counts as hung.
BATCH_TIMEOUT = 3600.0
BOUND_NAME = "solo-time bound, an estimate: measured solo times can be beaten"


@dataclass
class RunResult:
    executor: str
    repeat: int
    makespan: float
    tasks: list[dict] = field(default_factory=list)
    report_sources: dict | None = None
    wall: float | None = None  # seconds from the executor's start to its shutdown, batch included
    #: CPU seconds per second per core that processes outside the executor used during the batch
    #: (harness.OtherWork); None where unmeasured
    other_work_per_core: float | None = None


def run_batch(name: str, cases, run_dir: str, cores: int, store: str, topology, repeat: int, label: str,
              stream: TextIO) -> RunResult:
    """Start one executor, warm it up, run the batch with a progress bar, stop it."""
    began = time.monotonic()
    submitter = start_peer(_PEER.get(name, name), cores, topology, run_dir, store)
    try:
        other = OtherWork(submitter, cores)
        with Progress(label, len(cases), stream) as progress:
            other.start()
            makespan, rows = run_kernels(submitter, cases, timeout=BATCH_TIMEOUT, progress=progress)
            others = other.stop()
        sources = None
        if hasattr(submitter.executor, "run_report"):  # Scalpel says where each estimate came from
            kernel_rows = [t for t in submitter.executor.run_report()["tasks"]
                           if ".timed_kernel(" in (t["profile_key"] or "")]
            sources = {"footprint": dict(Counter(t["footprint_source"] for t in kernel_rows)),
                       "runtime": dict(Counter(t["runtime_source"] for t in kernel_rows))}
    finally:
        submitter.close()
    return RunResult(name, repeat, makespan, rows, sources, time.monotonic() - began, others)


def executor_names(plan: DemoPlan) -> list[str]:
    """The executors a plan runs, in the order of the split: HTEX, Scalpel's mechanics, the policies."""
    scalpel = [f"scalpel:{p}" for p in plan.policies]
    return ([HTEX] if plan.include_htex else []) + sorted(scalpel, key=lambda name: name != MECHANICS)


def split(results: Sequence[RunResult], *, resamples: int = 10_000, seed: int = 0) -> list[dict]:
    """The demo's ratios of median makespans, each with a paired bootstrap 95% interval over the
    repeats both executors finished (above 1: the second executor was faster).

    ``mechanics`` is HTEX / ``scalpel:fifo``; for every other Scalpel policy P, ``policy`` is
    ``scalpel:fifo`` / P and ``total`` is HTEX / P. Ratios of medians multiply, so mechanics x
    policy = total exactly; each interval resamples the same repeats (one ``seed``), so the three
    are drawn from the same resamples. A comparison whose executor did not run is left out. Pure.

    >>> runs = [RunResult(name, 0, seconds) for name, seconds in
    ...         (("htex", 3.0), ("scalpel:fifo", 2.0), ("scalpel:scalpel", 1.6))]
    >>> [(row["share"], round(row["ratio"], 3)) for row in split(runs)]
    [('mechanics', 1.5), ('policy', 1.25), ('total', 1.875)]
    """
    makespans: dict[str, dict[int, float]] = {}
    for result in results:
        makespans.setdefault(result.executor, {})[result.repeat] = result.makespan
    policies = [name for name in makespans if name.startswith("scalpel:") and name != MECHANICS]
    pairs = [("mechanics", HTEX, MECHANICS)]
    for name in policies:
        pairs += [("policy", MECHANICS, name), ("total", HTEX, name)]
    rows = []
    for share, reference, other in pairs:
        repeats = sorted(makespans.get(reference, {}).keys() & makespans.get(other, {}).keys())
        if not repeats:
            continue
        first = [makespans[reference][r] for r in repeats]
        second = [makespans[other][r] for r in repeats]
        ratio, low, high = bootstrap_ratio(first, second, resamples=resamples, seed=seed)
        rows.append({"share": share, "reference": reference, "executor": other, "ratio": ratio,
                     "ci_low": low, "ci_high": high, "paired_runs": len(repeats),
                     "per_repeat": [a / b for a, b in zip(first, second)]})
    return rows


def summarise(results: Sequence[RunResult], solo: dict[str, float], cores: int, order: Sequence[str]) -> dict:
    """Per executor (in ``order``): every repeat's makespan, their median, the mean slowdown against
    solo times and the median over the solo-time bound; and the bound, with how many runs ended
    below it (it is only an estimate: a task can run faster than it did alone)."""
    bound = lower_bound([solo[row["case"]] for row in results[0].tasks], cores)
    rows = []
    for name in order:
        runs = sorted((r for r in results if r.executor == name), key=lambda r: r.repeat)
        if not runs:
            continue
        median = statistics.median(r.makespan for r in runs)
        slowdowns = [row["seconds"] / solo[row["case"]] for r in runs for row in r.tasks if solo.get(row["case"])]
        rows.append({
            "executor": name, "runs": len(runs), "median_makespan": median,
            "makespans": [r.makespan for r in runs],
            "mean_slowdown_vs_solo": statistics.fmean(slowdowns) if slowdowns else None,
            "makespan_over_bound": median / bound if bound else None,
        })
    return {"executors": rows,
            "bound": {"name": BOUND_NAME, "seconds": bound, "runs": len(results),
                      "runs_below": sum(r.makespan < bound for r in results)}}


#: Seconds one executor's run costs beside its batch (Parsl's start, a warm-up task per worker, the
#: shutdown), and the makespan over the solo-time bound allowed for contention and dispatch: on a
#: 16-core node the demo's nine runs of 64 tasks (a bound of 12.6 s) took about 21 s each.
EXECUTOR_SECONDS, CONTENTION_ALLOWANCE = 5.0, 1.3
#: The solo pass's fixed cost (its executor's start and stop) and each case's beside its kernel
#: (allocation, the kernel's check, the round trip).
SOLO_SECONDS, SOLO_CASE_SECONDS = 5.0, 0.5


def expected_seconds(solo_kernel_seconds: float, solo_cases: int, task_seconds: Sequence[float], cores: int,
                     runs: int) -> float:
    """The demo's wall time from its plan: the solo pass (``solo_cases`` cases to run alone whose
    kernels take ``solo_kernel_seconds``; none: no pass) and ``runs`` executor runs of the batch
    (tasks lasting ``task_seconds`` alone on ``cores`` cores). Pure.

    >>> round(expected_seconds(15.0, 5, [3.16] * 64, 16, 9))  # the default demo on 16 cores
    215
    >>> round(expected_seconds(0.0, 0, [3.16] * 64, 16, 9))  # again, every solo time kept
    193
    """
    solo = SOLO_SECONDS + solo_cases * SOLO_CASE_SECONDS + solo_kernel_seconds if solo_cases else 0.0
    return solo + runs * (lower_bound(task_seconds, cores) * CONTENTION_ALLOWANCE + EXECUTOR_SECONDS)


def say_duration(seconds: float) -> str:
    """``seconds`` as a person reads an estimate: "about 40 seconds", "about 3 minutes".

    >>> say_duration(44), say_duration(170), say_duration(3700)
    ('about 40 seconds', 'about 3 minutes', 'about 62 minutes')
    """
    if seconds < 90:
        return f"about {max(10, round(seconds, -1)):.0f} seconds"
    return f"about {round(seconds / 60)} minutes"


def run_demo(plan: DemoPlan, *, llc_override, out: Path, stream: TextIO = sys.stderr,
             printer: Callable[[str], None] = print, solo_store: str | Path | None = None,
             fresh_solo: bool = False) -> dict:
    """The whole demo (see the module docstring); returns the JSON record.

    ``solo_store``: the file whose tables keep this machine's solo times (default: the profile
    store's, :func:`~scalpel_executor.learning.store.default_path`); ``fresh_solo``: run every
    distinct case alone again, and time the steps again, instead of reusing what is kept."""
    began = time.monotonic()
    detected = detect_topology()
    cores = len(detected.cpus)
    llc, llc_note = machine_llc(detected, llc_override)
    machine = machine_fingerprint(detected)
    kept = SoloTimes(solo_store if solo_store is not None else default_path())
    # Scalpel plans with the LLC the batch is sized for; inside a VM sysfs may report the host's
    # whole package, and a policy told 480 MiB sees no contention to avoid.
    topology = Topology.from_cpu_lists([d.cpus for d in detected.domains], llc_size=llc)
    tasks = plan.tasks if plan.tasks is not None else plan.tasks_per_core * cores
    mix = contention_mix(llc, cores, tasks, scale=plan.scale, seed=plan.seed)
    cases, planned = steps_timed_here(mix, kept_step_seconds(kept, machine, fresh_solo)(mix))
    sized = time.monotonic() - began
    store = fresh_store(out)
    run_dir = str(out / "runinfo")
    one_blas_thread()
    printer(f"machine: {cores} cores in {len(topology.domains)} LLC domain(s); LLC {format_size(llc)} per domain "
            f"({llc_note}); Scalpel plans with it")
    printer(f"batch: {len(cases)} kernel tasks, {sum(c.footprint_bytes > llc / cores for c in cases)} large "
            f"(fit the LLC alone, not together) submitted first, then the small ones")
    names = executor_names(plan)
    if MECHANICS not in names:
        printer(f"note: without the fifo policy the table cannot split mechanics from policy; "
                f"add fifo to --policies (e.g. --policies {','.join(plan.policies)},fifo)")
    solo_plan = plan_solo(cases, kept, machine, fresh=fresh_solo)
    planned_by_case = dict(zip(cases, planned))
    rates = step_rates(solo_plan.known.values())
    task_seconds = [rates[(c.kernel, c.size)] * c.steps if (c.kernel, c.size) in rates else planned_by_case[c]
                    for c in cases]
    estimate = expected_seconds(solo_plan.expected_seconds(planned_by_case), len(solo_plan.todo), task_seconds,
                                cores, plan.repeats * len(names))
    load = os.getloadavg()[0]
    busy = f", longer while other work loads it ({load:.1f} on {cores} cores now)" if load > cores / 2 else ""
    printer(f"this will take {say_duration(estimate)} on an idle machine{busy}: solo times for "
            f"{len(solo_plan.known)} of {len(solo_plan.cases)} distinct cases already measured on this machine"
            f"{' (--fresh-solo: measured again)' if fresh_solo else ''}, then {plan.repeats} repeat(s) of "
            f"{len(names)} executors")
    solo = run_solo(solo_plan, kept, store, lambda todo: solo_pass(
        todo, run_dir, store, topology.cpus[0], stream, f"solo, 1 core ({len(todo)} cases)"))
    kept.close()
    solo_seconds = {c.name: solo.seconds_of(c) for c in cases}
    results = []
    for repeat in range(plan.repeats):
        turn = repeat % len(names)  # rotated, so no executor always runs first or after the same one
        for name in names[turn:] + names[:turn]:
            label = f"[{repeat + 1}/{plan.repeats}] {name}"
            results.append(run_batch(name, cases, run_dir, cores, store, topology, repeat, label, stream))
    record = {
        "plan": asdict(plan),
        "machine": {"cores": cores, "domains": [list(d.cpus) for d in topology.domains], "llc": llc,
                    "llc_note": llc_note, "fingerprint": machine},
        "batch": [{"case": c.name, "kernel": c.kernel, "size": c.size, "steps": c.steps, "footprint": c.footprint_bytes,
                   "solo_seconds": solo_seconds[c.name]} for c in cases],
        "solo_passes": 1,
        "solo": solo.to_dict(),
        "summary": summarise(results, solo_seconds, cores, names),
        "split": split(results, resamples=plan.resamples, seed=plan.seed),
        "runs": [asdict(r) for r in results],
    }
    record["machine"]["in_vm"] = running_in_vm()
    record["machine"]["words"] = machine_words(cores, len(topology.domains), llc, record["machine"]["in_vm"])
    record["verdict"] = demo_verdict(record["split"], record["machine"]["words"], record["runs"])
    by_name = sorted(results, key=lambda r: (names.index(r.executor), r.repeat))
    png = gantt(by_name, llc, [list(d.cpus) for d in topology.domains], out / "scalpel-demo.png")
    json_path = out / "scalpel-demo.json"
    record["seconds"] = {"estimated": estimate, "took": time.monotonic() - began, "sizing": sized,
                         "solo": solo.seconds, "runs": sum(r.wall for r in results)}
    json_path.write_text(json.dumps(record, indent=1))
    record["files"] = {"png": str(png), "json": str(json_path)}
    return record


def _interval(row: dict) -> str:
    if row["paired_runs"] < 2:
        return "- (one run: no interval)"
    return f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}]"


def print_summary(record: dict, printer: Callable[[str], None] = print) -> None:
    """The demo's two tables (executors; the mechanics / policy / total split), the bound, and
    where the chart and record are."""
    summary, bound = record["summary"], record["summary"]["bound"]
    printer("")
    cells = [[row["executor"], row["runs"], " ".join(f"{m:.2f}" for m in row["makespans"]),
              f"{row['median_makespan']:.2f} s",
              "-" if row["mean_slowdown_vs_solo"] is None else f"{row['mean_slowdown_vs_solo']:.3f}x",
              "-" if row["makespan_over_bound"] is None else f"{row['makespan_over_bound']:.3f}x"]
             for row in summary["executors"]]
    for line in format_table(["executor", "runs", "makespan per repeat (s)", "median", "slowdown vs solo",
                              "median / solo-time bound"], cells, right=[1, 3, 4, 5]):
        printer(line)
    if record["split"]:
        printer("")
        cells = [[row["share"], f"{row['reference']} / {row['executor']}", f"{row['ratio']:.3f}x", _interval(row),
                  " ".join(f"{r:.2f}" for r in row["per_repeat"])] for row in record["split"]]
        for line in format_table(["share", "ratio of median makespans", "", "95% interval", "per repeat"],
                                 cells, right=[2]):
            printer(line)
        printer("above 1: the second executor was faster; mechanics x policy = total; intervals: paired "
                "bootstrap over the interleaved repeats (coarse with few repeats); an interval that contains "
                "1 is inside noise")
    if record.get("verdict"):
        printer("")
        printer(record["verdict"])
        printer("")
    printer(f"{bound['name']} ({bound['runs_below']} of {bound['runs']} runs ended below it): "
            f"{bound['seconds']:.2f} s, the longest solo task or the total solo work / cores")
    sources = [r["report_sources"] for r in record["runs"] if r.get("report_sources")]
    if sources:
        printer(f"Scalpel's estimates in its last run came from: footprint {sources[-1]['footprint']}, run time "
                f"{sources[-1]['runtime']} (store: learned by the solo pass and the runs before)")
    printer(f"Gantt chart: {record['files']['png']}\nrecord:      {record['files']['json']}")
    if "seconds" in record:
        solo = record["solo"]
        printer(f"took {record['seconds']['took']:.0f} s (estimated {record['seconds']['estimated']:.0f} s); solo "
                f"pass {solo['seconds']:.0f} s: {solo['measured']} case(s) run alone, {solo['reused']} kept from "
                f"earlier runs on this machine")
    if any(row["runs"] < 3 for row in summary["executors"]):
        printer("note: fewer than 3 runs per executor; single timings on a shared machine vary by +-30%")
    if not all(math.isfinite(row["median_makespan"]) for row in summary["executors"]):
        printer("warning: a makespan is not finite")
