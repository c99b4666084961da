"""Solo run times and pairwise co-run slowdowns of kernel cases on two cores sharing an LLC.

    python benchmarks/corun.py --llc 32MiB --seconds 0.4 --repeats 5 --out corun.json

Data flow::

    --cases (kernel:footprint) ─> size_for_footprint ─> calibrate (parent pinned to the first CPU)
        └─> cases lasting about --seconds alone
    per repeat, in a seeded shuffled order (solos and pairs interleaved, so drift hits all alike):
        solo  : one child pinned to CPU A
        pair  : two children pinned to CPU A and CPU B
        each child: allocate + one warm-up step ─> barrier ─> time its own steps ─> keep stepping
                    until every child of the measurement has finished its own (so a measured run
                    is co-run from start to end) ─> send its time
    slowdown[i][j] = median over repeats of (CPU time of i next to j) / (CPU time of i alone, same
    repeat). CPU time, not wall time: on a machine that other work shares, a pair of tasks also
    waits for a core more often than one task does, and that is not cache contention.
    ─> table on stdout, JSON with every sample, and the contention model's slowdowns beside them,
       after every repeat; --max-minutes stops starting repeats once the budget is spent

Children come from a forkserver that has imported the kernels, so a measurement pays no import
(the protocol: ``scalpel_executor.experiments.coruns``, which interference_holdout.py measures with too).
The machine may be shared: the figures are medians of interleaved repeats, and say nothing about
one run. The model columns are ``scalpel_executor.core.simulate.ContentionModel`` with its defaults.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import statistics
import sys
import time

from scalpel_executor.core.simulate import ContentionModel
from scalpel_executor.core.units import format_size, parse_size
from scalpel_executor.experiments.coruns import measure_together, pinned_to, process_context
from scalpel_executor.experiments.records import write_record
from scalpel_executor.workloads.kernels import (
    KERNELS,
    KernelCase,
    scale_to_seconds,
    size_for_footprint,
)

DEFAULT_CASES = "spmv:1MiB,spmv:12MiB,spmv:20MiB,spmv:28MiB,jacobi-2d:20MiB,jacobi-2d:48MiB"


def parse_cases(text: str, llc: int) -> list[tuple[str, int]]:
    """``"spmv:12MiB,gemm:0.6llc"`` -> [(kernel, size)], sizes from footprints."""
    cases = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        kernel, _, footprint = item.partition(":")
        if kernel not in KERNELS or not footprint:
            raise SystemExit(f"--cases: expected kernel:footprint such as spmv:12MiB with a kernel from "
                             f"{', '.join(KERNELS)}, got {item!r}")
        target = float(footprint[:-3]) * llc if footprint.endswith("llc") else parse_size(footprint, what="--cases footprint")
        cases.append((kernel, size_for_footprint(kernel, target)))
    return cases


def report(args, llc: int, cpus: list[int], cases: list[KernelCase], labels: list[str], solo, solo_wall,
           ratios, pair_samples, repeats_done: int) -> None:
    """Print the median matrix beside the model's and, with ``--out``, write every sample."""
    model = ContentionModel()
    slowdown = [[statistics.median(ratios[(i, j)]) for j in range(len(cases))] for i in range(len(cases))]
    modelled = [[model.slowdowns([a.footprint_bytes, b.footprint_bytes], [model.sensitivity] * 2, llc)[0]
                 for b in cases] for a in cases]
    solo_median = [statistics.median(samples) for samples in solo]
    width = max(len(label) for label in labels)
    print(f"\nmedian over {repeats_done} interleaved repeats; CPUs {cpus}; row = the task measured, "
          f"column = its co-runner; CPU-time slowdown [model rho={model.capacity_fraction}, "
          f"sigma={model.sensitivity}, LLC {format_size(llc)}]")
    print(f"{'':{width}s}  solo CPU s  " + "  ".join(f"{label:>{max(len(label), 11)}s}" for label in labels))
    for i, label in enumerate(labels):
        cells = "  ".join(f"{f'{slowdown[i][j]:.2f} [{modelled[i][j]:.2f}]':>{max(len(labels[j]), 11)}s}"
                          for j in range(len(cases)))
        print(f"{label:{width}s}  {solo_median[i]:10.3f}  {cells}", flush=True)
    if args.out:
        document = {
            "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
            "cpus": cpus,
            "llc_bytes": llc,
            "repeats": repeats_done,
            "cases": [{"label": label, "kernel": case.kernel, "size": case.size, "steps": case.steps,
                       "footprint_bytes": case.footprint_bytes, "solo_cpu_seconds_median": median,
                       "solo_cpu_seconds": samples, "solo_wall_seconds": walls}
                      for label, case, median, samples, walls in zip(labels, cases, solo_median, solo, solo_wall)],
            "slowdown": slowdown,
            "slowdown_samples": [[ratios[(i, j)] for j in range(len(cases))] for i in range(len(cases))],
            "model": {"capacity_fraction": model.capacity_fraction, "sensitivity": model.sensitivity,
                      "slowdown": modelled},
            "pair_samples": pair_samples,
        }
        print(f"wrote {write_record(document, args.out)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llc", default="32MiB", help="LLC size for the model and for footprints like 0.6llc")
    parser.add_argument("--cases", default=DEFAULT_CASES, help="comma-separated kernel:footprint")
    parser.add_argument("--seconds", type=float, default=0.4, help="solo run time each case is calibrated to")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-minutes", type=float, default=10.0,
                        help="start no new repeat after this long (a shared machine can be slow)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="write solo times, slowdown matrix and samples to this JSON file "
                                      "(rewritten after every repeat)")
    args = parser.parse_args()
    llc = parse_size(args.llc, what="--llc")
    available = sorted(os.sched_getaffinity(0))
    if len(available) < 2:
        print(f"need two CPUs to co-run on, this process may use {available}", file=sys.stderr)
        return 1
    cpus = available[:2]

    context = process_context()
    with pinned_to(cpus[0]):
        cases = [scale_to_seconds(KernelCase(kernel, size), args.seconds, seed=args.seed)
                 for kernel, size in parse_cases(args.cases, llc)]
    labels = [f"{case.kernel}@{format_size(case.footprint_bytes)}" for case in cases]
    for label, case in zip(labels, cases):
        print(f"case {label:24s} size {case.size:8d} steps {case.steps:6d}", flush=True)

    pairs = list(itertools.combinations_with_replacement(range(len(cases)), 2))
    solo: list[list[float]] = [[] for _ in cases]
    solo_wall: list[list[float]] = [[] for _ in cases]
    ratios: dict[tuple[int, int], list[float]] = {(i, j): [] for i in range(len(cases)) for j in range(len(cases))}
    pair_samples: list[dict] = []
    shuffle = random.Random(args.seed)
    started = time.perf_counter()
    for repeat in range(args.repeats):
        if repeat and time.perf_counter() - started > 60 * args.max_minutes:
            print(f"stopping after {repeat} repeats: --max-minutes {args.max_minutes:g} is spent", flush=True)
            break
        plan = [("solo", (i,)) for i in range(len(cases))] + [("pair", pair) for pair in pairs]
        shuffle.shuffle(plan)
        times: dict[tuple, list[tuple[float, float]]] = {}
        for kind, members in plan:
            times[(kind, members)] = measure_together(
                context, [(cases[i].kernel, cases[i].size, cases[i].steps) for i in members], cpus, args.seed)
        for i in range(len(cases)):
            cpu_seconds, wall_seconds = times[("solo", (i,))][0]
            solo[i].append(cpu_seconds)
            solo_wall[i].append(wall_seconds)
        for i, j in pairs:
            (with_i, wall_i), (with_j, wall_j) = times[("pair", (i, j))]
            ratios[(i, j)].append(with_i / solo[i][-1])
            ratios[(j, i)].append(with_j / solo[j][-1])
            pair_samples.append({"repeat": repeat, "cases": [i, j], "cpu_seconds": [with_i, with_j],
                                 "wall_seconds": [wall_i, wall_j]})
        print(f"repeat {repeat + 1}/{args.repeats} done after {time.perf_counter() - started:.0f} s", flush=True)
        report(args, llc, cpus, cases, labels, solo, solo_wall, ratios, pair_samples, repeat + 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
