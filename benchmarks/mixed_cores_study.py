"""Mixed core counts: ``scalpel`` against largest-area-first on the simulated machines.

::

    python benchmarks/mixed_cores_study.py                 # 4 machines x 3 sizes x 10 seeds
    python benchmarks/mixed_cores_study.py --seeds 3       # fewer instances
    python benchmarks/mixed_cores_study.py --estimate-noise 0.3   # the schedulers' run times off
    python benchmarks/mixed_cores_study.py --arrivals dag         # tasks released as parents end

Each instance is a batch of 2, 4 or 8 tasks per core of the machine. A task's core count is 1, 2
or 4 (probabilities 0.6, 0.25, 0.15; at most the widest domain), its solo time on those cores
2·exp(N(0, 0.8)) seconds, its footprint one of 0.5, 2, 6, 12, 20, 28, 40 MiB (Table II's range).
Every batch runs on each machine of ``scalpel_executor.core.machines`` under ``longest_first``
(largest area first: run time × cores) and ``scalpel``, both with the scheduler's resource rule
(a k-core task books k cores of one domain; what does not fit is reserved, later tasks backfill
only where they cannot delay it: ``core.resources``). With ``--estimate-noise s`` both schedulers
are told run times off by exp(N(0, s)) per task, and that spread (``Task.runtime_spread``, as a profile
store would tell them); the simulator keeps the true times.

``--arrivals`` says how the batch reaches the scheduler: ``batch`` (default) all at once on an idle
machine; ``waves`` in :data:`PIECES` equal pieces, piece w arriving at w/PIECES of the batch's
area lower bound (work / cores), so later pieces join while earlier ones run; ``dag`` in
:data:`PIECES` levels, each task of a level after the first the child of one task of the level
before (drawn with the seed), released when its parent ends (``SimTask.parents``). With ``waves``
and ``dag`` the scheduler plans again around running tasks as tasks arrive.

Printed: per machine, longest_first makespan / scalpel makespan (> 1: scalpel ends first):
geometric mean, minimum, maximum; the wall time of scalpel's plan of the batch (on this machine's
CPU) as a share of longest_first's simulated makespan, median over the instances; and the goals: scalpel never more than 1% below
largest-area-first on any instance, above it on the geometric mean.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path

from scalpel_executor.core.machines import MACHINES
from scalpel_executor.core.planning import PlanContext, scalpel_order
from scalpel_executor.core.simulate import SimTask, simulate
from scalpel_executor.core.tasks import Task
from scalpel_executor.experiments.simulated_policies import with_estimates
from scalpel_executor.experiments.tables import format_table

MiB = 2**20
WIDTHS, WIDTH_WEIGHTS = (1, 2, 4), (0.6, 0.25, 0.15)
FOOTPRINTS_MIB = (0.5, 2, 6, 12, 20, 28, 40)
TASKS_PER_CORE = (2, 4, 8)
GOAL_WORST = 0.99
ARRIVALS = ("batch", "waves", "dag")
PIECES = 4  # waves, or levels of the DAG


def batch(seed: int, n: int, widest: int) -> list[SimTask]:
    rng = random.Random(seed)
    return [SimTask(f"t{i}", 2.0 * rng.lognormvariate(0, 0.8), footprint=rng.choice(FOOTPRINTS_MIB) * MiB,
                    cores=min(rng.choices(WIDTHS, WIDTH_WEIGHTS)[0], widest)) for i in range(n)]


def arrive(tasks: list[SimTask], arrivals: str, cores: int, rng: random.Random) -> list[SimTask]:
    """``tasks`` released as ``arrivals`` says (module docstring); ``batch``: unchanged."""
    if arrivals == "batch":
        return tasks
    piece = math.ceil(len(tasks) / PIECES)
    if arrivals == "waves":
        area = sum(t.solo_time * t.cores for t in tasks) / cores
        return [dataclasses.replace(t, arrival=(i // piece) * area / PIECES) for i, t in enumerate(tasks)]
    return [dataclasses.replace(t, parents=(rng.randrange((i // piece - 1) * piece, i // piece * piece),))
            if i >= piece else t for i, t in enumerate(tasks)]


def plan_seconds(tasks: list[SimTask], cores_per_domain: list[int], llc: float, model) -> float:
    """Wall seconds the default policy takes to plan ``tasks`` as the scheduler sees them."""
    seen = [Task(i, t.footprint, t.solo_time if t.runtime_estimate is None else t.runtime_estimate,
                 runtime_spread=t.runtime_spread, cores=t.cores) for i, t in enumerate(tasks)]
    for i, task in enumerate(seen):
        task.seq = i
    started = time.perf_counter()
    scalpel_order(seen, PlanContext(cores_per_domain, llc=llc, model=model))
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10, help="instances per machine and size (default 10)")
    parser.add_argument("--estimate-noise", type=float, default=0.0,
                        help="run-time estimates off by exp(N(0, s)) per task (default 0: exact)")
    parser.add_argument("--arrivals", choices=ARRIVALS, default="batch",
                        help="how the tasks arrive: all at once, in waves, or as a DAG's levels (default batch)")
    parser.add_argument("--out", help="also write every instance as JSON here")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be at least 1, got {args.seeds}")
    if not 0 <= args.estimate_noise < math.inf:
        parser.error(f"--estimate-noise must be a number >= 0 (a log-normal sigma such as 0.3), got {args.estimate_noise}")
    started, rows, table = time.perf_counter(), [], []
    for name, machine in MACHINES.items():
        topology = machine.topology()
        domains = [list(d.cpus) for d in topology.domains]
        cores, widest = sum(map(len, domains)), max(map(len, domains))
        ratios, plan_shares = [], []
        for per_core in TASKS_PER_CORE:
            for seed in range(args.seeds):
                tasks = with_estimates(batch(seed * 1000 + per_core, per_core * cores, widest), args.estimate_noise,
                                       random.Random(seed * 1000 + per_core + 1))
                tasks = arrive(tasks, args.arrivals, cores, random.Random(seed * 1000 + per_core + 2))
                makespan = {policy: simulate(tasks, domains, float(topology.llc_size), policy,
                                             model=machine.model).makespan for policy in ("longest_first", "scalpel")}
                ratios.append(makespan["longest_first"] / makespan["scalpel"])
                plan_shares.append(plan_seconds(tasks, list(map(len, domains)), float(topology.llc_size),
                                                machine.model) / makespan["longest_first"])
                rows.append({"machine": name, "tasks": len(tasks), "seed": seed, "makespans": makespan})
        gmean = math.exp(statistics.fmean(map(math.log, ratios)))
        table.append([name, len(ratios), f"{gmean:.4f}", f"{min(ratios):.4f}", f"{max(ratios):.4f}",
                      f"{100 * statistics.median(plan_shares):.2f}%"])
        print(f"  {name}: {len(ratios)} instances ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    print("\n".join(format_table(["machine", "instances", "gmean", "min", "max", "plan / makespan"], table,
                                 right=range(1, 6), markdown=True)))
    worst = min(float(row[3]) for row in table)
    print(f"\nGoals: never more than 1% below largest-area-first: {'met' if worst >= GOAL_WORST else 'MISSED'} "
          f"(worst {worst:.4f}); above it on the geometric mean: "
          + ", ".join(f"{row[0]} {'met' if float(row[2]) > 1 else 'not met'}" for row in table))
    if args.out:
        Path(args.out).write_text(json.dumps({"command": " ".join(["python", *sys.argv]), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
