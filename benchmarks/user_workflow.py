"""A scientist's own DAG workflow under ScalpelExecutor and under HTEX: makespan, and the mechanism.

The workflow (:mod:`scalpel_executor.workloads.lookups`), written as a user would::

    lookups  = [lookup(seed, MiB, rounds) for seed in range(8)]      large: random gathers over a table
    spectra  = [spectrum(2**15, seed, r) for seed in range(16)]      small FFTs
    refined  = [refine(lookup_result, ...) for each lookup]          follow-ups fed by the lookups' dicts
    products = [product(n, seed, r) for seed in range(4)]            matrix products (3 n^2 doubles)
    lines    = [bash summary_line(refined[i], outputs=[File]) ...]   two shell steps
    reduce_summaries(inputs=[line.outputs[0] ...])                   the reduce

Each repetition:

1. **The pair, measured here**: one lookup alone on CPU 0, then two at once on CPUs 0 and 1, in
   plain pinned processes: how much two large tasks slow each other on this host this minute.
2. Three runs, HTEX first in even repetitions and last in odd ones (interleaved): HTEX (one pinned
   worker per core, single-threaded BLAS); Scalpel's default on an **empty** profile store (the
   "first run"); Scalpel again on the store that first run wrote (the "learned" run). Each loads
   its executor, warms every worker, runs the workflow and reads every task's own start and end.

The stores are this script's own, in a temporary folder, one emptied per repetition, so every
repetition has a first run. Per run it reports the makespan (first task start to last task end)
and the **large co-run seconds**: the summed time during which two large tasks (lookups,
products) ran at once, from the tasks' timestamps, beside its **floor** on 2 cores (the least any
schedule of the same task durations could have without idling a core while work waits:
:func:`corun_floor_seconds`); for Scalpel, why each task started where it did (the run report's
admission reasons, and each task's row).

    python benchmarks/user_workflow.py --repeats 5 --out docs/data/user-workflow
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from scalpel_executor.core.domains import Topology
from scalpel_executor.core.units import format_size
from scalpel_executor.experiments.bench.stats import bootstrap_ratio
from scalpel_executor.experiments.harness import fresh_store, start_peer
from scalpel_executor.experiments.mix_sizing import machine_llc
from scalpel_executor.host.sysfs import detect_topology
from scalpel_executor.workloads import lookups as apps

HTEX, SCALPEL = "htex-block", "scalpel:scalpel"
RUNS = ((HTEX, "htex"), (SCALPEL, "first"), (SCALPEL, "learned"))  # (peer, what the run is)
LARGE = ("lookup", "product")
ROW_FIELDS = ("task_id", "profile_key", "admission", "measured_footprint", "scheduled_footprint", "footprint_source",
              "estimated_runtime", "runtime_spread")


def _pinned(cpu: int, seed: int, mib: int, rounds: int, results) -> None:
    os.sched_setaffinity(0, {cpu})
    start = time.perf_counter()
    apps.lookup(seed, mib, rounds)
    results.put(time.perf_counter() - start)


def lookup_times(cpus: list[int], mib: int, rounds: int) -> list[float]:
    """Wall seconds of one lookup per CPU in ``cpus``, all started together in pinned processes."""
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    workers = [context.Process(target=_pinned, args=(cpu, 100 + i, mib, rounds, results)) for i, cpu in enumerate(cpus)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return [results.get() for _ in workers]


def rounds_for(mib: int, seconds: float) -> int:
    """Gather rounds that make a lookup last about ``seconds`` alone here."""
    probe = 4
    took = min(lookup_times([0], mib, probe)[0] for _ in range(2))
    setup = lookup_times([0], mib, 1)[0] - (took / probe)  # allocation and the table's random fill
    per_round = max(1e-4, (took - setup) / (probe - 1))
    return max(2, round((seconds - setup) / per_round))


def run_workflow(submitter, out: Path, args, rounds: int) -> tuple[list[dict], float]:
    from parsl.data_provider.files import File

    lookup, spectrum, refine, product, reduce_summaries = (
        submitter.app(f) for f in (apps.lookup, apps.spectrum, apps.refine, apps.product, apps.reduce_summaries))
    summary_line = submitter.bash_app(apps.summary_line)
    started = time.time()
    looked = [lookup(seed, args.lookup_mib, rounds) for seed in range(8)]
    spectra = [spectrum(1 << 15, seed, 2500) for seed in range(16)]  # about 0.5 s each here
    refined = [refine(result, 1 << 17, 400) for result in looked]  # about 0.3 s
    products = [product(args.product_n, seed, 8) for seed in range(4)]  # about 0.7 s, 33 MiB
    lines = [summary_line(refined[i], outputs=[File(str(out / f"line-{i}.txt"))]) for i in range(2)]
    reduced = reduce_summaries(inputs=[line.outputs[0] for line in lines])
    results = [f.result(timeout=1800) for f in looked + spectra + refined + products + [reduced]]
    for line in lines:
        line.result(timeout=60)
    return results, started


def large_corun_seconds(results: list[dict]) -> float:
    """Summed time during which two large tasks ran at once (pairwise overlaps of their spans)."""
    large = [r for r in results if r["name"].split("-")[0] in LARGE]
    return sum(max(0.0, min(a["t1"], b["t1"]) - max(a["t0"], b["t0"])) for a, b in itertools.combinations(large, 2))


def corun_floor_seconds(results: list[dict], cores: int) -> float | None:
    """The least large co-run any schedule of these tasks (their own durations in this run) could
    have on 2 cores without idling a core while work waits: the large seconds that small ones
    cannot accompany run in pairs, max(0, (L - S) / 2). Dependencies ignored, so a lower bound;
    None on more cores (pairwise overlaps of P > 2 tasks bound differently)."""
    if cores != 2:
        return None
    large = sum(r["t1"] - r["t0"] for r in results if r["name"].split("-")[0] in LARGE)
    small = sum(r["t1"] - r["t0"] for r in results if r["name"].split("-")[0] not in LARGE)
    return max(0.0, (large - small) / 2)


def one_run(peer: str, kind: str, repeat: int, out: Path, cores: int, topology: Topology, store: str, args,
            rounds: int) -> dict:
    """One run of the workflow under ``peer``: its makespan, large co-run seconds, tasks and (Scalpel) report."""
    submitter = start_peer(peer, cores, topology, str(out / "runinfo"), store)
    try:
        results, _ = run_workflow(submitter, out, args, rounds)
        report = submitter.executor.run_report() if peer.startswith("scalpel") else None
    finally:
        submitter.close()
    makespan = max(r["t1"] for r in results) - min(r["t0"] for r in results)
    row = {"peer": peer, "kind": kind, "repeat": repeat, "makespan": makespan,
           "large_corun_seconds": large_corun_seconds(results),
           "corun_floor_seconds": corun_floor_seconds(results, cores), "tasks": results}
    if report is not None:
        row["admission"] = report["admission"]
        row["sources"] = report["sources"]
        row["profile_keys"] = len({t["profile_key"] for t in report["tasks"]})
        row["report_tasks"] = [{name: t.get(name) for name in ROW_FIELDS} for t in report["tasks"]]
        row["contention_model"] = report.get("contention_model")
    floor = row["corun_floor_seconds"]
    print(f"  {kind:8s} makespan {makespan:6.2f} s, large tasks together {row['large_corun_seconds']:5.2f} s"
          + (f" (floor {floor:4.2f} s)" if floor is not None else "")
          + (f", admission {row['admission']}, footprints {row['sources']['footprint']}" if report else ""),
          flush=True)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--llc", help="LLC per domain the executor plans with (default: sysfs, or 56 MiB in a VM)")
    parser.add_argument("--lookup-mib", type=int, default=40, help="each lookup's table, MiB")
    parser.add_argument("--lookup-seconds", type=float, default=1.5, help="a lookup's run time alone")
    parser.add_argument("--rounds", type=int, help="gather rounds per lookup (default: timed for --lookup-seconds)")
    parser.add_argument("--product-n", type=int, default=1200, help="matrix order of the products")
    parser.add_argument("--out", default=None, help="write the record (JSON) into this folder")
    args = parser.parse_args()
    detected = detect_topology()
    llc, llc_note = machine_llc(detected, args.llc)
    cores = len(detected.domains[0].cpus)
    if len(detected.domains) != 1 or cores < 2:
        print("this script is for one LLC domain of at least 2 cores", file=sys.stderr)
        return 2
    topology = Topology.from_cpu_lists([detected.domains[0].cpus], llc_size=llc)
    rounds = args.rounds or rounds_for(args.lookup_mib, args.lookup_seconds)
    print(f"{cores} cores, LLC {format_size(llc)} ({llc_note}); lookups of {args.lookup_mib} MiB, {rounds} rounds",
          flush=True)
    runs, pairs = [], []
    with tempfile.TemporaryDirectory(prefix="scalpel-user-workflow-") as folder:
        base = Path(folder)
        for repeat in range(args.repeats):
            alone = lookup_times([0], args.lookup_mib, rounds)[0]
            together = statistics.median(lookup_times([0, 1], args.lookup_mib, rounds))
            pairs.append({"repeat": repeat, "alone": alone, "together": together, "slowdown": together / alone})
            print(f"repeat {repeat + 1}: a lookup alone {alone:.2f} s, two together {together:.2f} s "
                  f"({together / alone:.2f}x)", flush=True)
            store = fresh_store(base / f"store-{repeat}")  # the first run's is empty; the learned run reads it
            order = RUNS if repeat % 2 == 0 else RUNS[1:] + RUNS[:1]
            for peer, kind in order:
                out = base / f"{kind}-{repeat}"
                out.mkdir()
                runs.append(one_run(peer, kind, repeat, out, cores, topology, store, args, rounds))
    by = {kind: [r for r in runs if r["kind"] == kind] for _, kind in RUNS}
    htex = [r["makespan"] for r in by["htex"]]
    corun = {kind: statistics.median(r["large_corun_seconds"] for r in rows) for kind, rows in by.items()}
    summary = {
        "cores": cores, "llc": llc, "llc_note": llc_note, "lookup_mib": args.lookup_mib, "rounds": rounds,
        "repeats": args.repeats,
        "pair_slowdown_median": statistics.median(p["slowdown"] for p in pairs),
        "large_corun_seconds": corun,
        "large_corun_vs_htex": {kind: corun[kind] / corun["htex"] if corun["htex"] else None
                                for kind in ("first", "learned")},
        "corun_floor_seconds": {kind: statistics.median(r["corun_floor_seconds"] for r in rows)
                                if cores == 2 else None for kind, rows in by.items()},
    }
    for kind in ("first", "learned"):
        ratio, low, high = bootstrap_ratio(htex, [r["makespan"] for r in by[kind]])
        summary[f"htex_over_scalpel_{kind}"] = {"ratio": ratio, "low": low, "high": high}
    print(json.dumps(summary, indent=1))
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        with open(Path(args.out) / "user-workflow.json", "w") as stream:
            json.dump({"args": vars(args), "summary": summary, "pairs": pairs, "runs": runs}, stream, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
