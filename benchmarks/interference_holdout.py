"""Does the per-key interference model predict held-out co-runs better than the footprint model?

    python benchmarks/interference_holdout.py --out docs/data/interference-holdout.json

Two parts, each printing a table (and both written to ``--out``):

(a) synthetic: co-runs planted by ``core.interference_fit.planted_coruns`` (8 keys of 1-48 MiB on a
    32 MiB LLC, 300 co-runs each, noise exp(N(0, 0.2))), in three worlds: keys with sensitivities
    and pressures drawn from U(-0.5, 0.8) on a 4-core domain (1-3 co-runners) and on a 2-core one
    (pairs only), and the footprint model itself (all residuals 0). Split by time: fitted on the
    older 70%, scored on the newer 30%; and ``choose_interference``'s verdict on all of them.
(b) measured here: five suite kernels of different footprints and a numpy stream (``a += b`` over
    two arrays of twice the LLC each), each alone and each pair (self-pairs too) co-run on two
    pinned CPUs, interleaved in a shuffled order, --repeats times; slowdown = CPU seconds beside
    the partner over CPU seconds alone in the same repeat (CPU time, as benchmarks/corun.py: a
    pair on a shared host also waits for a core, and that is not interference). Held out one
    unordered pair at a time (leave-one-pair-out): the footprint model (default, and ρ, σ fitted
    to the other pairs) and the per-key model on the fitted one predict the left-out pair's two
    directions, scored against the median over repeats. Then ``choose_interference`` on every
    record in measurement order, as a host would decide.

Data flow of (b)::

    sysfs LLC ─> cases (kernel, size for a footprint) ─> steps for --seconds alone (parent on CPU A)
    per repeat, shuffled: solo on CPU A | pair on CPUs A and B  (forkserver children: allocate, warm,
        barrier, time own steps, keep stepping until the partner is done) ─> CPU seconds
    ─> KeyedCoRun per task per pair per repeat ─> leave-one-pair-out ─> table, JSON

The whole run takes about 4 minutes on the 2-core development VM (3 repeats).
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import random
import statistics
import sys
import time

from tabulate import tabulate

from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.contention_fit import CoRun, fit_contention
from scalpel_executor.core.interference_fit import (InterferenceModel, KeyedCoRun, choose_interference,
                                                    fit_interference, planted_coruns)
from scalpel_executor.core.units import format_size
from scalpel_executor.experiments.coruns import (STREAM, footprint_bytes, measure_together, pinned_to, process_context,
                                                 stepper)
from scalpel_executor.experiments.records import write_record
from scalpel_executor.host.sysfs import detect_topology
from scalpel_executor.workloads.kernels import KernelCase, scale_to_seconds, size_for_footprint

MiB = 2**20
#: (kernel, footprint as a fraction of the LLC); the stream's is its two arrays'.
CASES = (("spmv", 1 / 32), ("gemm", 1 / 4), ("floyd-warshall", 1 / 2), ("spmv", 5 / 8), ("jacobi-2d", 7 / 8),
         (STREAM, 4.0))
SYNTHETIC_SEEDS = range(10)
SYNTHETIC_RECORDS = 300


# -- (a) synthetic -------------------------------------------------------------------------------

def _median_log_error(model: InterferenceModel, coruns) -> float:
    return statistics.median(abs(math.log(model.predicted(c) / c.slowdown)) for c in coruns)


def synthetic() -> list[dict]:
    """Per world, the median over seeds of both models' held-out errors, and how often the
    acceptance test took the per-key model."""
    footprint, llc, rows = ContentionModel(), 32 * MiB, []
    for world, cores, low, high in (("departs, 4 cores", 4, -0.5, 0.8), ("departs, pairs", 2, -0.5, 0.8),
                                    ("footprint", 4, 0.0, 0.0)):
        errors, accepted = [], 0
        for seed in SYNTHETIC_SEEDS:
            rng = random.Random(seed)
            keys = [f"k{i}" for i in range(8)]
            footprints = {k: rng.choice([1, 4, 8, 16, 24, 48]) * MiB for k in keys}
            sensitivity = {k: rng.uniform(low, high) for k in keys}
            pressure = {k: rng.uniform(low, high) for k in keys}
            coruns = planted_coruns(footprints, sensitivity, pressure, footprint, llc, SYNTHETIC_RECORDS, seed,
                                    cores=cores)
            cut = round(0.7 * len(coruns))
            model = fit_interference(coruns[:cut], footprint, llc)
            errors.append((_median_log_error(InterferenceModel(footprint, llc), coruns[cut:]),
                           _median_log_error(model, coruns[cut:])))
            accepted += choose_interference(coruns, footprint, llc).per_key
        rows.append({"world": world, "seeds": len(SYNTHETIC_SEEDS), "records": SYNTHETIC_RECORDS,
                     "split": "time-ordered: fitted on the older 70%, scored on the newer 30%",
                     "footprint_error": statistics.median(e for e, _ in errors),
                     "per_key_error": statistics.median(e for _, e in errors),
                     "per_key_accepted": accepted})
    return rows


# -- (b) measured --------------------------------------------------------------------------------

def _steps_for(kernel: str, size: int, seconds: float) -> int:
    if kernel != STREAM:
        return scale_to_seconds(KernelCase(kernel, size), seconds).steps
    step = stepper(kernel, size, 0)
    step()
    start, count = time.perf_counter(), 0
    while time.perf_counter() - start < 0.3:
        step()
        count += 1
    return max(1, round(seconds * count / (time.perf_counter() - start)))


def measure_matrix(llc: int, cpus: list[int], seconds: float, repeats: int, seed: int):
    """The cases, and one KeyedCoRun per task per pair per repeat (``at``: measurement order)."""
    context = process_context()
    cases = []
    with pinned_to(cpus[0]):
        for kernel, fraction in CASES:
            size = round(fraction * llc / 16) if kernel == STREAM else size_for_footprint(kernel, fraction * llc)
            cases.append({"kernel": kernel, "size": size, "steps": _steps_for(kernel, size, seconds),
                          "footprint": footprint_bytes(kernel, size)})
    for case in cases:
        case["label"] = f"{case['kernel']}@{format_size(case['footprint'])}"
        print(f"case {case['label']:24s} size {case['size']:9d} steps {case['steps']:6d}", flush=True)
    pairs = list(itertools.combinations_with_replacement(range(len(cases)), 2))
    shuffle, records, at = random.Random(seed), [], 0
    for repeat in range(repeats):
        plan = [(i,) for i in range(len(cases))] + pairs
        shuffle.shuffle(plan)
        times = {}
        for members in plan:
            measured = measure_together(context, [(cases[i]["kernel"], cases[i]["size"], cases[i]["steps"])
                                                  for i in members], cpus, seed)
            times[members] = ([cpu_seconds for cpu_seconds, _ in measured], at)
            at += 1
        for i, j in pairs:
            (with_i, with_j), when = times[(i, j)]
            for me, other, cpu_seconds in ((i, j, with_i), (j, i, with_j)):
                records.append(KeyedCoRun(cases[me]["label"], cases[me]["footprint"],
                                          ((1.0, ((cases[other]["label"], cases[other]["footprint"]),)),),
                                          cpu_seconds / times[(me,)][0][0], at=when))
        print(f"repeat {repeat + 1}/{repeats} done", flush=True)
    return cases, records


def leave_one_pair_out(cases: list[dict], records: list[KeyedCoRun], llc: int) -> tuple[list[dict], dict]:
    """Per ordered pair, the median measured slowdown and each model's prediction with its pair left out."""
    default = ContentionModel()
    label = {c["label"]: i for i, c in enumerate(cases)}
    cells = []
    for i, j in itertools.combinations_with_replacement(range(len(cases)), 2):
        pair = {cases[i]["label"], cases[j]["label"]}
        train = [r for r in records if {r.key, r.segments[0][1][0][0]} != pair]
        fitted, _ = fit_contention([CoRun(r.footprint, ((1.0, (r.segments[0][1][0][1],)),), r.slowdown)
                                    for r in train], llc)
        per_key = fit_interference(train, fitted, llc)
        for me, other in {(i, j), (j, i)}:
            held = [r for r in records if label[r.key] == me and label[r.segments[0][1][0][0]] == other]
            probe = held[0]
            cells.append({"task": cases[me]["label"], "beside": cases[other]["label"],
                          "measured": statistics.median(r.slowdown for r in held),
                          "samples": [r.slowdown for r in held],
                          "footprint_default": InterferenceModel(default, llc).predicted(probe),
                          "footprint_fitted": InterferenceModel(fitted, llc).predicted(probe),
                          "per_key": per_key.predicted(probe),
                          "fold_model": {"capacity_fraction": fitted.capacity_fraction,
                                         "sensitivity": fitted.sensitivity}})
    errors = {name: statistics.median(abs(math.log(c[name] / c["measured"])) for c in cells)
              for name in ("footprint_default", "footprint_fitted", "per_key")}
    return cells, errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=0.5, help="solo run time each case is calibrated to")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--synthetic-only", action="store_true", help="skip the measured matrix")
    parser.add_argument("--out", help="write both parts, every sample included, to this JSON file")
    args = parser.parse_args()

    document = {"command": " ".join([os.path.basename(sys.executable), *sys.argv])}
    started = time.perf_counter()
    rows = synthetic()
    document["synthetic"] = rows
    print("(a) synthetic: median over seeds of the held-out median |log error| (time-ordered 70/30 split)")
    print(tabulate([[r["world"], r["footprint_error"], r["per_key_error"], f"{r['per_key_accepted']}/{r['seeds']}"]
                    for r in rows], headers=["world", "footprint-only", "per-key", "per-key accepted"],
                   floatfmt=".3f"))
    if not args.synthetic_only:
        topology = detect_topology()
        cpus = list(topology.cpus[:2])
        if topology.llc_size is None or len(cpus) < 2:
            print(f"need two CPUs and a known LLC to co-run on; sysfs gives CPUs {list(topology.cpus)}, "
                  f"LLC {topology.llc_size}", file=sys.stderr)
            return 1
        llc = topology.llc_size
        load_before = os.getloadavg()
        cases, records = measure_matrix(llc, cpus, args.seconds, args.repeats, args.seed)
        load_after = os.getloadavg()
        cells, errors = leave_one_pair_out(cases, records, llc)
        host_fit, _ = fit_contention([CoRun(r.footprint, ((1.0, (r.segments[0][1][0][1],)),), r.slowdown)
                                      for r in records], llc)
        choice = choose_interference(records, host_fit, llc)
        every = fit_interference(records, host_fit, llc)
        print(f"\n(b) measured on CPUs {cpus}, LLC {format_size(llc)} (sysfs), {args.repeats} interleaved repeats, "
              f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after; leave-one-pair-out")
        print(tabulate([[c["task"], c["beside"], c["measured"], c["footprint_default"], c["footprint_fitted"],
                         c["per_key"]] for c in cells],
                       headers=["task", "beside", "measured", "footprint (default)", "footprint (fitted)", "per-key"],
                       floatfmt=".3f"))
        print("median |log error| over the held-out cells: " + ", ".join(f"{k} {v:.3f}" for k, v in errors.items()))
        print(f"acceptance on all {len(records)} records in measurement order: {choice.reason}")
        document["measured"] = {
            "cpus": cpus, "llc_bytes": llc, "repeats": args.repeats, "seconds": args.seconds,
            "load_average_before": load_before, "load_average_after": load_after,
            "cases": cases, "cells": cells, "median_log_error": errors,
            "host_fit": {"capacity_fraction": host_fit.capacity_fraction, "sensitivity": host_fit.sensitivity},
            "acceptance": choice.to_dict(),
            "per_key_on_all_records": {"sensitivity": dict(every.sensitivity), "pressure": dict(every.pressure),
                                       "noise": every.noise},
            "records": [{"key": r.key, "beside": r.segments[0][1][0][0], "slowdown": r.slowdown, "at": r.at}
                        for r in records]}
    document["seconds"] = time.perf_counter() - started
    print(f"took {document['seconds']:.0f} s")
    if args.out:
        print(f"wrote {write_record(document, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
