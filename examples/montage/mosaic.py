"""Build a Montage mosaic of synthetic sky tiles with Parsl, under a ScalpelExecutor or a baseline.

    python examples/montage/mosaic.py --tiles 16 --out /tmp/mosaic --executor scalpel --show-dag

Moving parts: this script picks a Parsl configuration (``--executor``), loads it, and hands a
:class:`~scalpel_executor.workloads.montage.SkyPlan` to
:func:`~scalpel_executor.workloads.montage.mosaic_pipeline`, which submits every Montage step as a
Parsl app. Completions report back through a progress callback (printed per stage); at the end,
:func:`~scalpel_executor.workloads.montage.check_background` reads the outputs back and says whether
the injected per-tile background offsets were removed. Logs go to ``OUT/mosaic.log`` and Parsl's
run directory ``OUT/runinfo``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import threading
import time
from pathlib import Path

from scalpel_executor.workloads.montage import (
    MontageStepFailed,
    MontageUnavailable,
    SkyPlan,
    check_background,
    check_tile_count,
    dag_summary,
    draw_dag,
    grid_shape,
    mosaic_pipeline,
    require_montage,
)

EXECUTORS = ("scalpel", "htex", "threads")


def tile_count(text: str) -> int:
    """argparse type for ``--tiles``: a whole number the library accepts (``check_tile_count``: >= 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes a whole number of tiles such as 16, got {text!r}") from None
    try:
        return check_tile_count(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        description="Mosaic synthetic, overlapping sky tiles with the Montage toolkit (MontagePy), each "
                    "step a Parsl app: mImgtbl, mMakeHdr, mProject per tile, mOverlaps, mDiffFit per "
                    "overlapping pair, mBgModel, mBackground per tile, mAdd, mViewer. Each tile gets a "
                    "known background offset; the summary says how much of it the pipeline removed.",
        epilog="Example: python examples/montage/mosaic.py --tiles 64 --executor htex --show-dag "
               "--dag-png dag.png. Exit status: 0 offsets removed, 1 check failed or a step failed, "
               "2 bad arguments or MontagePy/astropy missing.")
    parser.add_argument("--tiles", type=tile_count, default=16, metavar="N",
                        help="number of tiles, 2 or more, laid out as the squarest grid (default 16: 4 x 4; "
                             "400 tiles take about ten minutes)")
    parser.add_argument("--out", type=Path, default=Path("montage-out"), metavar="DIR",
                        help="output directory: tiles, Montage tables, mosaic.fits, mosaic.png, logs "
                             "(default ./montage-out; FITS files a previous run left in its stage "
                             "directories are removed)")
    parser.add_argument("--executor", choices=EXECUTORS, default="scalpel",
                        help="scalpel: ScalpelExecutor (cache-aware co-scheduling); htex: Parsl "
                             "HighThroughputExecutor, one worker per core, cpu_affinity=block; threads: "
                             "Parsl ThreadPoolExecutor (default scalpel)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic sky (default 0)")
    parser.add_argument("--tile-pixels", type=int, default=256, metavar="PX",
                        help="width and height of a tile in pixels (default 256)")
    parser.add_argument("--projector", choices=("mProject", "mProjectPP"), default="mProject",
                        help="reprojection: mProject (general, default) or mProjectPP (TAN-to-TAN fast "
                             "path, about 15x faster here)")
    parser.add_argument("--show-dag", action="store_true",
                        help="print the task graph: tasks per stage, edges, critical path")
    parser.add_argument("--dag-png", type=Path, metavar="PATH", help="also draw the task graph into PATH")
    parser.add_argument("--json", action="store_true",
                        help="print the summary as one JSON object (progress goes to stderr)")
    return parser.parse_args(argv)


def parsl_config(executor: str, run_dir: Path):
    """The Parsl configuration ``--executor`` names, with its run directory under ``--out``."""
    from parsl.config import Config

    cores = len(os.sched_getaffinity(0))
    if executor == "scalpel":
        from scalpel_executor import scalpel_config

        return scalpel_config(run_dir=str(run_dir))
    if executor == "htex":
        from parsl.executors import HighThroughputExecutor
        from parsl.providers import LocalProvider

        htex = HighThroughputExecutor(label="htex", cpu_affinity="block", max_workers_per_node=cores,
                                      provider=LocalProvider(init_blocks=1, max_blocks=1))
        return Config(executors=[htex], run_dir=str(run_dir), strategy="none")
    if executor == "threads":
        from parsl.executors import ThreadPoolExecutor

        return Config(executors=[ThreadPoolExecutor(label="threads", max_threads=cores)], run_dir=str(run_dir))
    raise ValueError(f"executor must be one of {EXECUTORS}, got {executor!r}")


class ProgressPrinter:
    """Prints ``[elapsed] stage done/total`` about every tenth of a stage and when it completes."""

    def __init__(self, stream, started: float):
        self.stream = stream
        self.started = started
        self.lock = threading.Lock()

    def __call__(self, stage: str, done: int, total: int) -> None:
        step = max(1, math.ceil(total / 10))
        if done == total or done % step == 0:
            with self.lock:
                print(f"[{time.monotonic() - self.started:7.1f}s] {stage:<11} {done:>4}/{total}",
                      file=self.stream, flush=True)


def print_dag(summary, stream) -> None:
    """The DAG summary for a person."""
    print(f"task graph: {summary.nodes} tasks, {summary.edges} edges (data dependencies)", file=stream)
    for stage, count in summary.nodes_per_stage.items():
        print(f"  {stage:<11} {count:>5}", file=stream)
    print(f"  critical path: {summary.critical_path_tasks} tasks: " + " -> ".join(summary.critical_path),
          file=stream)


def main(argv: list[str] | None = None) -> int:
    """Run the pipeline; return the exit status."""
    args = parse_args(argv)
    try:
        require_montage()
        plan = SkyPlan(n_tiles=args.tiles, seed=args.seed, tile_pixels=args.tile_pixels)
    except MontageUnavailable as error:
        print(f"MontageUnavailable: {error}", file=sys.stderr)
        return 2
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    import parsl

    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    log = logging.getLogger("scalpel_executor")
    log.setLevel(logging.INFO)
    log.addHandler(logging.FileHandler(out / "mosaic.log"))
    talk = sys.stderr if args.json else sys.stdout
    rows, cols = grid_shape(args.tiles)
    print(f"Montage mosaic: {args.tiles} tiles ({rows} x {cols} grid, {args.tile_pixels} px), seed {args.seed}, "
          f"executor {args.executor} ({len(os.sched_getaffinity(0))} cores), output {out}", file=talk, flush=True)

    started = time.monotonic()
    with parsl.load(parsl_config(args.executor, out / "runinfo")):
        loaded = time.monotonic()
        try:
            run = mosaic_pipeline(plan, out, progress=ProgressPrinter(talk, loaded), projector=args.projector)
            run.wait()
        except (MontageStepFailed, MontageUnavailable) as error:
            print(f"{type(error).__name__}: {error}", file=sys.stderr)
            return 1
        pipeline_seconds = time.monotonic() - loaded
    total_seconds = time.monotonic() - started

    check = check_background(out)
    summary = dag_summary(run.dag())
    if args.dag_png:
        draw_dag(run.dag(), args.dag_png)
    if args.json:
        report = {
            "tiles": args.tiles, "grid": [rows, cols], "executor": args.executor, "seed": args.seed,
            "projector": args.projector,
            "pipeline_seconds": pipeline_seconds, "total_seconds": total_seconds,
            "mosaic": str(run.paths.mosaic), "png": str(run.paths.png),
            "background": check.as_dict(),
            "dag": {"nodes_per_stage": summary.nodes_per_stage, "nodes": summary.nodes, "edges": summary.edges,
                    "critical_path_tasks": summary.critical_path_tasks},
        }
        print(json.dumps(report, indent=2))
    else:
        if args.show_dag:
            print_dag(summary, sys.stdout)
        height, width = check.mosaic_shape
        print(f"mosaic      {run.paths.mosaic}  ({width} x {height} pixels, "
              f"{100 * check.mosaic_finite_fraction:.1f}% finite)")
        print(f"png         {run.paths.png}")
        if args.dag_png:
            print(f"dag png     {args.dag_png}")
        verdict = "removed" if check.passed else f"NOT removed (more than {100 * check.tolerance:g}% left)"
        print(f"background  injected offsets span {check.injected_range:.2f}; per-tile sky span "
              f"{check.range_before:.2f} before correction, {check.range_after:.3f} after "
              f"({100 * check.residual_fraction:.2f}% left; largest offset error {check.offset_error:.3f}): {verdict}")
        print(f"time        {pipeline_seconds:.1f} s for {summary.nodes} tasks under {args.executor} "
              f"({total_seconds:.1f} s with Parsl start and shutdown)")
    return 0 if check.passed else 1


if __name__ == "__main__":
    sys.exit(main())
