"""Does the per-key interference model predict a public co-run matrix better than footprint-only?

The matrix is the Fair-CO2 artifact's (https://github.com/S4AI-CornellTech/fair-co2,
``colocation/ref-results``): 15 workloads (pgbench at 10, 50 and 100 clients, x265, llama.cpp,
faiss, Spark and 8 PBBS kernels), each run alone and beside each other one (itself included) on
a 2-socket Xeon Gold 6240R, each in a container with a 48-CPU quota of the 96 logical CPUs
(not pinned, so both share both sockets' L3 and memory). This script reads a local copy of that
folder and never downloads anything; get one with

    git clone --filter=blob:none --sparse https://github.com/S4AI-CornellTech/fair-co2
    git -C fair-co2 sparse-checkout set colocation/ref-results
    python benchmarks/interference_external.py --source fair-co2/colocation/ref-results \\
        --commit "$(git -C fair-co2 rev-parse HEAD)" --out docs/data/interference-external.json

or score again from the record it wrote (the 15x15 slowdowns and occupancies are kept there)::

    python benchmarks/interference_external.py --record docs/data/interference-external.json \
        --out docs/data/interference-external.json

**The slowdowns, as the artifact computes them** (``colocation_matrix.gen_colocation_matrix``):
a workload's ``runtime`` in ``<folder>/workload_data.csv`` (time per unit of work: a PBBS round's
geometric mean, pgbench's seconds per 10⁶ transactions, faiss's mean query, ...), in the folder
``A_B`` or ``B_A`` of the pair (the first row naming it: in ``A_A`` the artifact reads the first
copy), over its runtime in its solo folder ``A``. One number per ordered pair: 225 cells.

**The footprint proxy.** The artifact has no footprints. Of its counters (``pcm_processed.csv``),
the only size is Intel RDT's L3 occupancy (``Socket 0/1 L3 Cache Occupancy``, KiB): its mean over
the solo run's interval (``workload_data.csv``'s start to end, as the artifact cuts its power),
summed over the two sockets, is each workload's footprint, on an LLC of the two sockets' L3
(2 x 35.75 MiB). Memory bandwidth is a rate, not a size, and the footprint model has no place for
it. The footprint model's ρ and σ are fitted (``fit_contention``, log error) to the training cells.
Because the occupancy is near the whole L3 for every workload (and when idle), footprint-only is
close to one constant slowdown; the constant itself (mean training log slowdown) is printed beside it.

**Hold-out splits**, each cell predicted only by models that never saw it:

1. leave-one-pair-out: each unordered pair (120, the 15 self-pairs included) held out, both directions;
2. 3x3 blocks: for a triple of the 15 workloads the 9 cells among them held out, their pairs
   with the other 12 kept;
3. new workloads: for a triple, every cell in which one of them runs (81) held out; the models
   are fitted on the other 12's 144 cells (per-key knows the side of a held-out cell that is not new).

Splits 2 and 3 use the same ``--triples`` triples, drawn (seeded) from the 455.

Per split: the median absolute error of log slowdown of footprint-only, the constant and per-key
(``fit_interference`` around the fold's footprint fit); for 2 and 3 the median over triples of
each triple's median, and the pooled median over every held-out prediction. Whether the truth
departs from the footprint proxy is told by a two-way analysis of variance of the log slowdowns:
row (sensitivity) and column (pressure) effects against the residual.

Each fold refits ρ and σ (about 2 s each): 200 folds took 4.5 minutes on 2 busy cores
(``--jobs 2``); every triple (``--triples 0``, 1030 folds) takes about 20.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import itertools
import json
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np
from tabulate import tabulate

from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.contention_fit import CoRun, fit_contention
from scalpel_executor.core.interference_fit import (
    InterferenceModel,
    KeyedCoRun,
    fit_interference,
)
from scalpel_executor.core.units import format_size, parse_size
from scalpel_executor.experiments.records import write_record

#: Two Xeon Gold 6240R sockets of 35.75 MiB L3 each (the artifact's README: its test system).
DEFAULT_LLC = "71.5MiB"
OCCUPANCY_COLUMNS = ("Socket 0 L3 Cache Occupancy", "Socket 1 L3 Cache Occupancy")
BANDWIDTH_COLUMNS = ("Memory Read Bandwidth (System) (GB/s)", "Memory Write Bandwidth (System) (GB/s)")
HELD_OUT_WORKLOADS = 3
#: The goal reported against: per-key's error at most this fraction of footprint-only's where the
#: truth departs from footprint, else at most footprint-only's plus this much log slowdown.
DEPARTS_RATIO, NO_DEPARTURE_SLACK = 0.5, 0.02

Cell = tuple[str, str]  # (task, beside)


# -- reading the artifact's folder (the only I/O) -------------------------------------------------

def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _runtime(folder: Path, workload: str) -> float:
    """The first ``runtime`` of ``workload`` in the folder's workload_data.csv (as the artifact reads it)."""
    rows = _rows(folder / "workload_data.csv")
    for row in rows:
        if row["workload"] == workload:
            return float(row["runtime"])
    raise ValueError(f"{folder / 'workload_data.csv'} has no row for workload {workload!r}; its rows name "
                     f"{sorted({r['workload'] for r in rows})}")


def _pair_folder(source: Path, a: str, b: str) -> Path:
    for name in (f"{a}_{b}", f"{b}_{a}"):
        if (source / name / "workload_data.csv").exists():
            return source / name
    raise FileNotFoundError(f"no folder {a}_{b} or {b}_{a} with a workload_data.csv under {source}: the matrix "
                            f"needs every pair; is --source the artifact's colocation/ref-results?")


def workloads_in(source: Path) -> list[str]:
    """The solo folders: names without '_' that hold a workload_data.csv (no workload's name has one)."""
    names = sorted(p.parent.name for p in source.glob("*/workload_data.csv") if "_" not in p.parent.name)
    if len(names) <= HELD_OUT_WORKLOADS:
        raise ValueError(f"{source} holds {len(names)} solo folders ({names}); the hold-out needs more than "
                         f"{HELD_OUT_WORKLOADS}: pass the artifact's colocation/ref-results as --source")
    return names


def slowdown_matrix(source: Path, workloads: Sequence[str]) -> dict[Cell, float]:
    """Each workload's runtime beside each other one over its solo runtime."""
    solo = {w: _runtime(source / w, w) for w in workloads}
    return {(a, b): _runtime(_pair_folder(source, a, b), a) / solo[a] for a in workloads for b in workloads}


def _timestamp(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.strip())


def solo_counters(folder: Path) -> dict[str, float]:
    """Mean L3 occupancy (bytes, both sockets) and memory traffic (PCM's read plus write columns, as
    written) over the solo run's interval, and how many samples that is."""
    runs = _rows(folder / "workload_data.csv")
    start, end = max(_timestamp(r["start"]) for r in runs), min(_timestamp(r["end"]) for r in runs)
    occupancy, traffic = [], []
    for row in _rows(folder / "pcm_processed.csv"):
        if start <= _timestamp(row["Datetime"]) <= end:
            occupancy.append(sum(float(row[c]) for c in OCCUPANCY_COLUMNS) * 1024)
            traffic.append(sum(float(row[c]) for c in BANDWIDTH_COLUMNS))
    if not occupancy:
        raise ValueError(f"{folder / 'pcm_processed.csv'} has no sample between the run's start {start} "
                         f"and end {end}")
    return {"l3_occupancy_bytes": statistics.fmean(occupancy), "memory_traffic": statistics.fmean(traffic),
            "samples": len(occupancy)}


# -- the evaluation (pure) ------------------------------------------------------------------------

def keyed_coruns(matrix: Mapping[Cell, float], footprints: Mapping[str, float]) -> dict[Cell, KeyedCoRun]:
    """One single-segment co-run per cell, ``at`` its position."""
    return {(a, b): KeyedCoRun(a, footprints[a], ((1.0, ((b, footprints[b]),)),), slowdown, at=float(i))
            for i, ((a, b), slowdown) in enumerate(matrix.items())}


def held_out_triples(workloads: Sequence[str], count: int, seed: int) -> list[tuple[str, ...]]:
    """``count`` of the triples of workloads drawn without replacement (seeded), every one for 0."""
    every = list(itertools.combinations(workloads, HELD_OUT_WORKLOADS))
    return every if count <= 0 or count >= len(every) else sorted(random.Random(seed).sample(every, count))


def leave_one_pair_out(workloads: Sequence[str]) -> list[set[Cell]]:
    return [{(a, b), (b, a)} for a, b in itertools.combinations_with_replacement(workloads, 2)]


def blocks(triples: Sequence[tuple[str, ...]]) -> list[set[Cell]]:
    return [set(itertools.product(held, held)) for held in triples]


def new_workloads(workloads: Sequence[str], triples: Sequence[tuple[str, ...]]) -> list[set[Cell]]:
    return [{(a, b) for a in workloads for b in workloads if a in held or b in held} for held in triples]


def footprint_fit(coruns: Sequence[KeyedCoRun], llc: float) -> ContentionModel:
    """The footprint model's ρ and σ fitted to ``coruns`` (log error), keys set aside."""
    model, _ = fit_contention([CoRun(c.footprint, tuple((seconds, tuple(f for _, f in beside))
                                                        for seconds, beside in c.segments), c.slowdown)
                               for c in coruns], llc)
    return model


def fitted_predictors(train: Sequence[KeyedCoRun], llc: float) -> dict[str, Callable[[KeyedCoRun], float]]:
    """Footprint-only (ρ, σ fitted), the constant, and per-key around that footprint fit, without and
    with bandwidth intensities."""
    footprint = footprint_fit(train, llc)
    constant = math.exp(statistics.fmean(math.log(c.slowdown) for c in train))
    return {"footprint": InterferenceModel(footprint, llc).predicted, "constant": lambda c: constant,
            "per_key": fit_interference(train, footprint, llc).predicted,
            "per_key_bandwidth": fit_interference(train, footprint, llc, bandwidth=True).predicted}


def fold_errors(coruns: Mapping[Cell, KeyedCoRun], fold: set[Cell], llc: float) -> dict[str, dict[Cell, float]]:
    """Each model, fitted on the cells outside ``fold``: its |log predicted − log observed| on each cell in it."""
    predictors = fitted_predictors([c for cell, c in coruns.items() if cell not in fold], llc)
    return {name: {cell: abs(math.log(predict(coruns[cell]) / coruns[cell].slowdown)) for cell in fold}
            for name, predict in predictors.items()}


def summary(errors: list[dict]) -> dict[str, dict[str, float]]:
    """Per model: the pooled median over every held-out prediction, and the median over folds of each
    fold's median."""
    return {name: {"pooled": statistics.median(e for fold in errors for e in fold[name].values()),
                   "per_fold": statistics.median(statistics.median(fold[name].values()) for fold in errors)}
            for name in errors[0]}


def two_way(matrix: Mapping[Cell, float], workloads: Sequence[str], *, permutations: int = 2000,
            seed: int = 0) -> dict:
    """Row (sensitivity) and column (pressure) effects of log slowdown against the additive model's
    residual: the analysis of variance without replication, with permutation p-values (cells
    shuffled over the matrix, seeded), and the additive fit's in-sample median |residual|."""
    y = np.log([[matrix[(a, b)] for b in workloads] for a in workloads])

    def squares(m: np.ndarray) -> tuple[float, float, float]:
        rows, cols, grand = m.mean(axis=1, keepdims=True), m.mean(axis=0, keepdims=True), m.mean()
        n = len(m)
        return (n * float(((rows - grand) ** 2).sum()), n * float(((cols - grand) ** 2).sum()),
                float(((m - rows - cols + grand) ** 2).sum()))

    row, col, residual = squares(y)
    n = len(workloads)
    rng = np.random.default_rng(seed)
    shuffled = [squares(rng.permutation(y.ravel()).reshape(y.shape)) for _ in range(permutations)]
    f_row = row / (n - 1) / (residual / (n - 1) ** 2)
    f_col = col / (n - 1) / (residual / (n - 1) ** 2)
    additive = y - (y - y.mean(axis=1, keepdims=True) - y.mean(axis=0, keepdims=True) + y.mean())
    return {"total_ss": float(((y - y.mean()) ** 2).sum()), "row_ss": row, "column_ss": col, "residual_ss": residual,
            "row_f": f_row, "column_f": f_col, "df": [n - 1, n - 1, (n - 1) ** 2],
            "row_p": (1 + sum(r / res >= row / residual for r, _, res in shuffled)) / (permutations + 1),
            "column_p": (1 + sum(c / res >= col / residual for _, c, res in shuffled)) / (permutations + 1),
            "permutations": permutations, "residual_sd": math.sqrt(residual / (n - 1) ** 2),
            "additive_in_sample_median_error": float(np.median(np.abs(y - additive))),
            "spread_sd": float(y.std())}


def _ranks(values: Sequence[float]) -> np.ndarray:
    return np.argsort(np.argsort(values)).astype(float)


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    return float(np.corrcoef(_ranks(x), _ranks(y))[0, 1])


def verdict(departs: bool, scores: Mapping[str, Mapping[str, float]]) -> tuple[bool, str]:
    """Whether per-key meets the goal on a split's pooled errors, and the goal it was held to."""
    footprint, per_key = scores["footprint"]["pooled"], scores["per_key"]["pooled"]
    if departs:
        return per_key <= DEPARTS_RATIO * footprint, f"<= {DEPARTS_RATIO:g} x footprint-only ({DEPARTS_RATIO * footprint:.3f})"
    return per_key <= footprint + NO_DEPARTURE_SLACK, f"<= footprint-only + {NO_DEPARTURE_SLACK} ({footprint + NO_DEPARTURE_SLACK:.3f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    given = parser.add_mutually_exclusive_group(required=True)
    given.add_argument("--source", type=Path,
                       help="a local copy of fair-co2's colocation/ref-results (the module docstring says how to get one)")
    given.add_argument("--record", type=Path,
                       help="score again from a record this script wrote (--out): its matrix, occupancies and LLC, "
                            "no copy of the source needed")
    parser.add_argument("--commit", default="unknown", help="the fair-co2 commit the copy is of, for the record")
    parser.add_argument("--llc", default=DEFAULT_LLC, help="the L3 the occupancies are relative to (both sockets)")
    parser.add_argument("--triples", type=int, default=40,
                        help="how many triples of workloads the two 3-workload splits hold out (0: all 455)")
    parser.add_argument("--seed", type=int, default=0, help="draws the triples and the permutations")
    parser.add_argument("--jobs", type=int, default=2, help="processes fitting the folds")
    parser.add_argument("--out", help="write the matrix, the proxy and every split's figures to this JSON file")
    args = parser.parse_args()

    started = time.perf_counter()
    if args.record is not None:
        kept = json.loads(args.record.read_text())
        llc, workloads, counters = float(kept["llc_bytes"]), kept["workloads"], kept["solo_counters"]
        values = kept["slowdown_matrix"]["values"]
        matrix = {(a, b): values[i][j] for i, a in enumerate(workloads) for j, b in enumerate(workloads)}
        args.commit, args.source = kept["source"]["commit"], args.record
    else:
        llc = float(parse_size(args.llc, what="--llc"))
        workloads = workloads_in(args.source)
        matrix = slowdown_matrix(args.source, workloads)
        counters = {w: solo_counters(args.source / w) for w in workloads}
    footprints = {w: counters[w]["l3_occupancy_bytes"] for w in workloads}
    coruns = keyed_coruns(matrix, footprints)
    anova = two_way(matrix, workloads, seed=args.seed)
    departs = anova["row_p"] < 0.05 or anova["column_p"] < 0.05

    print(f"{len(workloads)} workloads, {len(matrix)} cells from {args.source} (commit {args.commit}); "
          f"slowdown {min(matrix.values()):.2f}-{max(matrix.values()):.2f}x, median "
          f"{statistics.median(matrix.values()):.2f}x")
    print(tabulate([[w, format_size(round(footprints[w])), f"{footprints[w] / llc:.3f}", counters[w]["memory_traffic"],
                     math.exp(statistics.fmean(math.log(matrix[(w, b)]) for b in workloads)),
                     math.exp(statistics.fmean(math.log(matrix[(a, w)]) for a in workloads))] for w in workloads],
                   headers=["workload", "L3 occupancy alone", "of the LLC", "memory traffic alone",
                            "suffers (geo. mean)", "inflicts (geo. mean)"], floatfmt=".2f"))
    print(f"\nlog slowdown, two-way without replication: rows (sensitivity) F = {anova['row_f']:.1f}, "
          f"p = {anova['row_p']:.4f}; columns (pressure) F = {anova['column_f']:.1f}, p = {anova['column_p']:.4f} "
          f"(df {anova['df']}, {anova['permutations']} permutations); residual sd {anova['residual_sd']:.3f}; the additive model's "
          f"in-sample median |error| {anova['additive_in_sample_median_error']:.3f}. "
          f"The truth {'departs' if departs else 'does not depart'} from the footprint proxy.")

    triples = held_out_triples(workloads, args.triples, args.seed)
    splits = {"leave-one-pair-out": leave_one_pair_out(workloads), "3x3 blocks": blocks(triples),
              "3 new workloads": new_workloads(workloads, triples)}
    results, rows = {}, []
    with ProcessPoolExecutor(args.jobs) as pool:
        for split, folds in splits.items():
            scores = summary(list(pool.map(partial(fold_errors, coruns, llc=llc), folds)))
            met, goal = verdict(departs, scores)
            results[split] = {**scores, "goal": goal, "met": met}
            rows.append([split, len(folds), scores["footprint"]["pooled"], scores["constant"]["pooled"],
                         scores["per_key"]["pooled"], scores["per_key_bandwidth"]["pooled"],
                         scores["footprint"]["per_fold"], scores["per_key"]["per_fold"],
                         f"{goal}: {'met' if met else 'not met'}"])
    print("\nheld-out median |log slowdown error|")
    print(tabulate(rows, headers=["split", "folds", "footprint-only", "constant", "per-key", "with bandwidth",
                                  "footprint (per fold)", "per-key (per fold)", "goal"], floatfmt=".3f"))

    footprint_all = footprint_fit(list(coruns.values()), llc)
    every = fit_interference(list(coruns.values()), footprint_all, llc)
    traffic = [counters[w]["memory_traffic"] for w in workloads]
    pressure_vs_traffic = spearman([every.pressure[w] for w in workloads], traffic)
    sensitivity_vs_traffic = spearman([every.sensitivity[w] for w in workloads], traffic)
    print(f"\nfitted on all cells: footprint ρ {footprint_all.capacity_fraction:.3f}, σ {footprint_all.sensitivity:.3f}; "
          f"per-key noise {every.noise:.2f} (assumed: no repeats); Spearman of each workload's pressure with its "
          f"solo memory traffic {pressure_vs_traffic:.2f}, of its sensitivity {sensitivity_vs_traffic:.2f}")
    seconds = time.perf_counter() - started
    print(f"took {seconds:.0f} s")
    if args.out:
        document = {
            "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
            "source": {"repository": "https://github.com/S4AI-CornellTech/fair-co2", "path": "colocation/ref-results",
                       "commit": args.commit,
                       "slowdown": "runtime in the pair's folder over runtime in the solo folder, both from "
                                   "workload_data.csv (the first row naming the workload), as colocation_matrix.py"},
            "llc_bytes": llc, "workloads": workloads,
            "slowdown_matrix": {"rows": "task", "columns": "beside",
                                "values": [[matrix[(a, b)] for b in workloads] for a in workloads]},
            "solo_counters": counters, "two_way": anova, "truth_departs_from_footprint": departs,
            "held_out": results, "held_out_triples": triples,
            "fitted_on_all": {"footprint": {"capacity_fraction": footprint_all.capacity_fraction,
                                            "sensitivity": footprint_all.sensitivity},
                              "sensitivity": dict(every.sensitivity), "pressure": dict(every.pressure),
                              "noise": every.noise, "pressure_vs_memory_traffic_spearman": pressure_vs_traffic,
                              "sensitivity_vs_memory_traffic_spearman": sensitivity_vs_traffic},
            "seconds": seconds}
        print(f"wrote {write_record(document, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
