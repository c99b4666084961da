"""What the two workflow studies share (``benchmarks/workflow_study.py``,
``benchmarks/critical_path_study.py``): their instances, their command line, and the loop that
simulates the instances in several processes.

An instance is a (shape, seed, estimate error): WfChef recipe ``shape`` drawn with ``seed``
(:func:`~scalpel_executor.experiments.workflows.workflow`), each task's estimate off by the error as
the policy study draws it (:func:`~scalpel_executor.experiments.simulated_policies.with_estimates`),
so both studies score the same instances.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from scalpel_executor.core.machines import MACHINES
from scalpel_executor.core.simulate import SimTask
from scalpel_executor.experiments.simulated_policies import with_estimates
from scalpel_executor.experiments.workflows import SHAPES, workflow

#: The estimate conditions: exact, and each task's estimate off by exp(N(0, 0.3)).
NOISES = (0.0, 0.3)
SEEDS, QUICK_SEEDS = 3, 1


def instance_tasks(shape: str, seed: int, noise: float) -> list[SimTask]:
    """The tasks of instance (``shape``, ``seed``) with estimate error ``noise`` (one draw per task,
    seeded by the instance: the simulator keeps the true run times)."""
    tasks = workflow(shape, seed=seed)
    if noise:
        tasks = with_estimates(tasks, noise, random.Random(f"{shape}/{seed}/{noise}"))
    return tasks


def add_study_options(parser: argparse.ArgumentParser, *, shapes: Sequence[str], out: Path) -> None:
    """A workflow study's options: ``--shapes`` (default ``shapes``), ``--machines``, ``--seeds``,
    ``--quick``, ``--jobs``, ``--out`` (default ``out``) and ``--report``; :func:`chosen` reads them."""
    parser.add_argument("--shapes", default=",".join(shapes), help=f"of {', '.join(SHAPES)}")
    parser.add_argument("--machines", default=",".join(MACHINES), help=f"of {', '.join(MACHINES)}")
    parser.add_argument("--seeds", type=int, help=f"instances per shape (default {SEEDS}; --quick: {QUICK_SEEDS})")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_SEEDS} seed, for a check that it runs")
    parser.add_argument("--jobs", type=int, default=1,
                        help=f"processes simulating at once (default 1; this machine has {os.cpu_count()} cores)")
    parser.add_argument("--out", default=str(out))
    parser.add_argument("--report", help="print the tables of a record written before, run nothing")


def chosen(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[list[str], tuple[str, ...], int]:
    """The shapes, machines and seeds per shape that ``args`` name (:func:`add_study_options`);
    ``parser.error`` naming an unknown shape or machine, or a count of seeds or jobs below 1."""
    shapes, machines = args.shapes.split(","), tuple(args.machines.split(","))
    unknown = [s for s in shapes if s not in SHAPES] + [m for m in machines if m not in MACHINES]
    if unknown:
        parser.error(f"unknown shape or machine {unknown[0]!r}; shapes: {', '.join(SHAPES)}; "
                     f"machines: {', '.join(MACHINES)}")
    seeds = args.seeds if args.seeds is not None else QUICK_SEEDS if args.quick else SEEDS
    if seeds < 1 or args.jobs < 1:
        parser.error(f"--seeds and --jobs must be at least 1, got {seeds} and {args.jobs}")
    return shapes, machines, seeds


def run_instances(run_instance, units: Sequence[tuple], extra: tuple, jobs: int) -> list[dict]:
    """``run_instance(shape, seed, noise, *extra)`` for every ``(shape, seed, noise)`` unit in
    ``jobs`` processes, each unit's rows gathered, a progress line per unit on stderr."""
    started = time.perf_counter()
    rows: list[dict] = []
    with concurrent.futures.ProcessPoolExecutor(jobs) as pool:
        futures = {pool.submit(run_instance, *unit, *extra): unit for unit in units}
        for done, future in enumerate(concurrent.futures.as_completed(futures), 1):
            rows += future.result()
            shape, seed, noise = futures[future]
            print(f"  [{done}/{len(units)}] {shape} seed {seed} noise {noise:g} "
                  f"({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
    return rows
