"""Workflows shaped like real ones: ``scalpel`` against longest-first on WfCommons DAGs, in simulation.

::

    python benchmarks/workflow_study.py                  # 4 shapes x 4 machines x 2 estimate errors x 3 seeds
    python benchmarks/workflow_study.py --quick          # 1 seed
    python benchmarks/workflow_study.py --jobs 2         # two processes
    python benchmarks/workflow_study.py --shapes montage,cycles --machines paper,xeon16 --seeds 8 --out study.json

Each WfChef recipe (``scalpel_executor.experiments.workflows``: its trace's DAG at the recipe's
typical size, run times drawn per seed, footprints per task type from the module's stated table)
runs on each named machine (``scalpel_executor.core.machines``: ``paper``, ``wide``, ``epyc``
with the package's default model, ``xeon16`` with its fitted one) under ``longest_first``,
``scalpel-paper`` and ``scalpel``. Tasks arrive as their DAG releases them: a task joins the
scheduler when its last parent ends, through the live pool's batch rule (``Batching()``, local
mode's defaults), so every release is planned again with what waits. Two estimate conditions:
exact run times, and each task's estimate off by exp(N(0, 0.3)) (one draw per task, as
the policy study's ``with_estimates`` does,
``scalpel_executor.experiments.simulated_policies``), the schedulers told that spread; the
simulator keeps the true times.

Printed, per estimate condition: for every shape and machine the ratio ``longest_first`` makespan
over ``scalpel`` makespan (> 1: scalpel ends first), median and minimum over the seeds, the same
for ``scalpel-paper``, and the geometric mean over every instance, with the default policy's goals: scalpel
never more than 1% below ``longest_first`` on any shape and machine (minimum ratio >= 0.99), and
above it on the geometric mean. Written: one JSON record (``--out``, default
``docs/data/workflow-study.json``) with every instance's makespans and plan-and-simulate seconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from scalpel_executor.core.batching import Batching
from scalpel_executor.core.machines import MACHINES
from scalpel_executor.core.simulate import simulate
from scalpel_executor.experiments.records import write_and_report
from scalpel_executor.experiments.simulated_policies import gmean
from scalpel_executor.experiments.tables import format_table
from scalpel_executor.experiments.workflow_studies import (NOISES, add_study_options, chosen, instance_tasks,
                                                            run_instances)
from scalpel_executor.experiments.workflows import SHAPES, STUDY_SHAPES

ROOT = Path(__file__).resolve().parent.parent
POLICIES = ("longest_first", "scalpel-paper", "scalpel")
GOAL_WORST = 0.99  # scalpel may end at most 1% later than longest_first on any shape and machine


def run_instance(shape: str, seed: int, noise: float, machines: tuple[str, ...]) -> list[dict]:
    """One seeded instance of ``shape`` with its estimate error, under every policy on every machine."""
    tasks = instance_tasks(shape, seed, noise)
    rows = []
    for name in machines:
        machine = MACHINES[name]
        topology = machine.topology()
        domains = [list(d.cpus) for d in topology.domains]
        makespans, seconds = {}, {}
        for policy in POLICIES:
            began = time.perf_counter()
            result = simulate(tasks, domains, float(topology.llc_size), policy, model=machine.model,
                              batching=Batching())
            seconds[policy] = time.perf_counter() - began
            makespans[policy] = result.makespan
        rows.append({"shape": shape, "machine": name, "seed": seed, "noise": noise, "tasks": len(tasks),
                     "lower_bound": result.lower_bound, "makespans": makespans, "seconds": seconds})
    return rows


def summarise(rows: list[dict]) -> dict:
    """Per estimate condition: per (shape, machine) the longest_first/scalpel and
    longest_first/scalpel-paper ratios (median, minimum over seeds); the geometric means; the goals."""
    out = {}
    for noise in sorted({r["noise"] for r in rows}):
        of = [r for r in rows if r["noise"] == noise]
        cells = {}
        for shape in dict.fromkeys(r["shape"] for r in of):
            for machine in dict.fromkeys(r["machine"] for r in of):
                here = [r for r in of if r["shape"] == shape and r["machine"] == machine]
                if not here:
                    continue
                ratio = {p: [r["makespans"]["longest_first"] / r["makespans"][p] for r in here]
                         for p in ("scalpel", "scalpel-paper")}
                cells[f"{shape}/{machine}"] = {
                    "shape": shape, "machine": machine, "instances": len(here),
                    **{f"{p}_median": statistics.median(v) for p, v in ratio.items()},
                    **{f"{p}_min": min(v) for p, v in ratio.items()},
                    "lf_over_lower_bound": gmean([r["makespans"]["longest_first"] / r["lower_bound"] for r in here]),
                    "scalpel_seconds": statistics.fmean(r["seconds"]["scalpel"] for r in here),
                }
        gmeans = {p: gmean([r["makespans"]["longest_first"] / r["makespans"][p] for r in of])
                  for p in ("scalpel", "scalpel-paper")}
        worst = min(cells.values(), key=lambda c: c["scalpel_min"])
        out[str(noise)] = {
            "cells": cells, "gmean": gmeans, "worst": {"cell": f"{worst['shape']}/{worst['machine']}",
                                                      "ratio": worst["scalpel_min"]},
            "goals": {"never_1pct_below": all(c["scalpel_min"] >= GOAL_WORST for c in cells.values()),
                      "above_on_gmean": gmeans["scalpel"] > 1.0},
            "cells_median_below_goal": sorted(k for k, c in cells.items() if c["scalpel_median"] < GOAL_WORST),
        }
    return out


def print_report(record: dict, markdown: bool = True) -> None:
    machines = record["machines"]
    for noise, summary in record["summary"].items():
        label = "exact estimates" if float(noise) == 0 else f"estimates off by exp(N(0, {float(noise):g}))"
        print(f"\n**{label}**: longest_first makespan / scalpel makespan, median (min) over {record['seeds']} "
              f"seeds; in brackets, the same for scalpel-paper (median)\n")
        rows = []
        for shape in record["shapes"]:
            row = [f"{shape} ({_tasks(record, shape)} tasks)"]
            for machine in machines:
                cell = summary["cells"].get(f"{shape}/{machine}")
                row.append("-" if cell is None else f"{cell['scalpel_median']:.4f} ({cell['scalpel_min']:.4f}) "
                                                    f"[{cell['scalpel-paper_median']:.3f}]")
            rows.append(row)
        print("\n".join(format_table(["shape", *machines], rows, right=range(1, len(machines) + 1),
                                     markdown=markdown)))
        goals = summary["goals"]
        print(f"\ngeometric mean over every instance: scalpel {summary['gmean']['scalpel']:.4f}, scalpel-paper "
              f"{summary['gmean']['scalpel-paper']:.4f}; worst instance {summary['worst']['ratio']:.4f} "
              f"({summary['worst']['cell']}). Goals: never more than 1% below longest_first: "
              f"{'met' if goals['never_1pct_below'] else 'MISSED'}; above it on the geometric mean: "
              f"{'met' if goals['above_on_gmean'] else 'MISSED'}"
              + (f"; medians below 0.99: {', '.join(summary['cells_median_below_goal'])}"
                 if summary["cells_median_below_goal"] else ""))
    print(f"\n{len(record['rows'])} simulations of three policies each in {record['seconds']:.0f} s "
          f"({record['jobs']} process{'es' if record['jobs'] > 1 else ''}).")


def _tasks(record: dict, shape: str) -> str:
    counts = sorted({r["tasks"] for r in record["rows"] if r["shape"] == shape})
    return str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_study_options(parser, shapes=STUDY_SHAPES, out=ROOT / "docs" / "data" / "workflow-study.json")
    args = parser.parse_args(argv)
    if args.report:
        print_report(json.loads(Path(args.report).read_text()))
        return 0
    shapes, machines, seeds = chosen(parser, args)
    units = [(shape, seed, noise) for noise in NOISES for shape in shapes for seed in range(seeds)]
    started = time.perf_counter()
    rows = run_instances(run_instance, units, (machines,), args.jobs)
    rows.sort(key=lambda r: (r["noise"], shapes.index(r["shape"]), machines.index(r["machine"]), r["seed"]))
    record = {"format": "scalpel-workflow-study/1", "command": " ".join(["python", *sys.argv]),
              "shapes": shapes, "machines": list(machines), "seeds": seeds, "noises": list(NOISES),
              "policies": list(POLICIES), "batching": "Batching() (local mode's defaults)",
              "footprints": {s: dict(SHAPES[s].footprints) for s in shapes},
              "sizes": {s: {"typical": SHAPES[s].typical, "trace": SHAPES[s].trace} for s in shapes},
              "jobs": args.jobs, "seconds": time.perf_counter() - started, "rows": rows}
    record["summary"] = summarise(rows)
    write_and_report(record, args.out, print_report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
