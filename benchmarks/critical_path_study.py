"""Workflows end sooner when the critical path starts first: ``scalpel`` told each task's tail, in simulation.

::

    python benchmarks/critical_path_study.py --jobs 2                 # 7 shapes x 4 machines x 2 errors x 3 seeds
    python benchmarks/critical_path_study.py --jobs 2 --first-seed 10  # a check on seeds never looked at before
    python benchmarks/critical_path_study.py --quick                   # 1 seed

Each WfChef recipe (``scalpel_executor.experiments.workflows``) runs on each machine of
``scalpel_executor.core.machines`` with tasks released as their DAG allows, through local mode's
batch rule (``Batching()``), as ``benchmarks/workflow_study.py`` runs them. Policies:

* ``longest_first``: the baseline every ratio divides;
* ``scalpel``: the default policy told no tails (what it does where it sees no graph and has learned none);
* ``learned``: ``scalpel`` told, per task type, the mean tail its tasks had in *two other instances*
  of the same recipe (seeds ``seed + 1000`` and ``seed + 2000``, their solo times: what two earlier
  runs of the workflow leave in the profile store); never the instance being scored;
* ``graph``: ``scalpel`` told each task's tail on the run-time estimates it has (the whole DAG seen,
  as a Parsl run with the executor's memoizer sees the pending tasks);
* ``oracle``: ``scalpel`` told each task's exact tail (solo times): the exact-rank oracle.

Two estimate conditions, as the workflow study: exact, and each estimate off by exp(N(0, 0.3)).
Printed per condition: the geometric mean and the minimum over instances of longest_first's
makespan over each policy's, per shape, and the mean ratio of each policy's makespan to the DAG
lower bound (max(critical path of solo times, total work / cores)). Goals: ``learned`` geomean
>= 1.03 and no instance below 0.99 in both conditions; ``graph`` within 1% of ``oracle``'s geomean.
Written: one JSON record (``--out``, default ``docs/data/critical-path-study.json``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

from scalpel_executor.core.batching import Batching
from scalpel_executor.core.machines import MACHINES
from scalpel_executor.core.simulate import SimTask, graph_tails, simulate
from scalpel_executor.experiments.records import write_and_report
from scalpel_executor.experiments.simulated_policies import gmean
from scalpel_executor.experiments.tables import format_table
from scalpel_executor.experiments.workflow_studies import (NOISES, add_study_options, chosen, instance_tasks,
                                                            run_instances)
from scalpel_executor.experiments.workflows import SHAPES, task_type, workflow

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = ("longest_first", "scalpel", "learned", "graph", "oracle")
EARLIER_RUNS = (1000, 2000)  # the instances whose tails are "learned": seed + each
GOAL_GMEAN, GOAL_WORST, GOAL_GRAPH = 1.03, 0.99, 0.01


def learned_tails(shape: str, seed: int) -> dict[str, float]:
    """Per task type, the mean tail of its tasks in earlier instances of ``shape`` (their solo times)."""
    by_type: dict[str, list[float]] = {}
    for offset in EARLIER_RUNS:
        earlier = workflow(shape, seed=seed + offset)
        for task, tail in zip(earlier, graph_tails(earlier, estimates=False)):
            by_type.setdefault(task_type(task), []).append(tail)
    return {kind: statistics.fmean(tails) for kind, tails in by_type.items()}


def variants(tasks: list[SimTask], table: dict[str, float]) -> dict[str, list[SimTask]]:
    told = {"learned": [table.get(task_type(t), 0.0) for t in tasks],
            "graph": graph_tails(tasks, estimates=True), "oracle": graph_tails(tasks, estimates=False)}
    return {"longest_first": tasks, "scalpel": tasks,
            **{name: [dataclasses.replace(t, tail=tail) for t, tail in zip(tasks, tails)]
               for name, tails in told.items()}}


def run_instance(shape: str, seed: int, noise: float, machines: tuple[str, ...]) -> list[dict]:
    tasks = instance_tasks(shape, seed, noise)
    told = variants(tasks, learned_tails(shape, seed))
    rows = []
    for name in machines:
        machine = MACHINES[name]
        topology = machine.topology()
        domains = [list(d.cpus) for d in topology.domains]
        makespans, bound = {}, 0.0
        for variant in VARIANTS:
            policy = "longest_first" if variant == "longest_first" else "scalpel"
            result = simulate(told[variant], domains, float(topology.llc_size), policy, model=machine.model,
                              batching=Batching())
            makespans[variant], bound = result.makespan, result.lower_bound
        rows.append({"shape": shape, "machine": name, "seed": seed, "noise": noise, "tasks": len(tasks),
                     "dag_lower_bound": bound, "makespans": makespans})
    return rows


def summarise(rows: list[dict]) -> dict:
    out = {}
    for noise in sorted({r["noise"] for r in rows}):
        of = [r for r in rows if r["noise"] == noise]

        def ratios(variant: str, shape: str | None = None) -> list[float]:
            return [r["makespans"]["longest_first"] / r["makespans"][variant] for r in of
                    if shape is None or r["shape"] == shape]

        shapes = list(dict.fromkeys(r["shape"] for r in of))
        out[str(noise)] = {
            "gmean": {v: gmean(ratios(v)) for v in VARIANTS},
            "worst": {v: min(ratios(v)) for v in VARIANTS},
            "per_shape": {s: {v: gmean(ratios(v, s)) for v in VARIANTS} for s in shapes},
            "over_dag_bound": {v: gmean([r["makespans"][v] / r["dag_lower_bound"] for r in of]) for v in VARIANTS},
        }
        summary = out[str(noise)]
        summary["goals"] = {
            "learned_gmean": summary["gmean"]["learned"] >= GOAL_GMEAN,
            "learned_worst": summary["worst"]["learned"] >= GOAL_WORST,
            "graph_near_oracle": summary["gmean"]["graph"] >= summary["gmean"]["oracle"] * (1 - GOAL_GRAPH),
        }
    return out


def print_report(record: dict) -> None:
    for noise, summary in record["summary"].items():
        label = "exact estimates" if float(noise) == 0 else f"estimates off by exp(N(0, {float(noise):g}))"
        print(f"\n**{label}**: longest_first makespan / policy makespan, geometric mean per shape over "
              f"{len(record['machines'])} machines x {record['seeds']} seeds (seeds {record['first_seed']}-"
              f"{record['first_seed'] + record['seeds'] - 1})\n")
        rows = [[shape, *(f"{summary['per_shape'][shape][v]:.4f}" for v in VARIANTS[1:])]
                for shape in summary["per_shape"]]
        rows.append(["**all: geomean (worst)**", *(f"{summary['gmean'][v]:.4f} ({summary['worst'][v]:.3f})"
                                                  for v in VARIANTS[1:])])
        rows.append(["makespan / DAG lower bound", *(f"{summary['over_dag_bound'][v]:.3f}" for v in VARIANTS[1:])])
        print("\n".join(format_table(["shape", *VARIANTS[1:]], rows, right=range(1, len(VARIANTS)))))
        lf_bound = summary["over_dag_bound"]["longest_first"]
        goals = summary["goals"]
        print(f"\nlongest_first / DAG lower bound: {lf_bound:.3f}. Goals: learned geomean >= {GOAL_GMEAN}: "
              f"{'met' if goals['learned_gmean'] else 'MISSED'}; no learned instance below {GOAL_WORST}: "
              f"{'met' if goals['learned_worst'] else 'MISSED'}; graph within {GOAL_GRAPH:.0%} of oracle: "
              f"{'met' if goals['graph_near_oracle'] else 'MISSED'}")
    print(f"\n{len(record['rows'])} instances x {len(VARIANTS)} policies in {record['seconds']:.0f} s.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_study_options(parser, shapes=SHAPES, out=ROOT / "docs" / "data" / "critical-path-study.json")
    parser.add_argument("--first-seed", type=int, default=0, help="the first instance's seed (default 0)")
    args = parser.parse_args(argv)
    if args.report:
        print_report(json.loads(Path(args.report).read_text()))
        return 0
    shapes, machines, seeds = chosen(parser, args)
    units = [(shape, args.first_seed + k, noise) for noise in NOISES for shape in shapes for k in range(seeds)]
    started = time.perf_counter()
    rows = run_instances(run_instance, units, (machines,), args.jobs)
    rows.sort(key=lambda r: (r["noise"], shapes.index(r["shape"]), machines.index(r["machine"]), r["seed"]))
    record = {"format": "scalpel-critical-path-study/1", "command": " ".join(["python", *sys.argv]),
              "shapes": shapes, "machines": list(machines), "seeds": seeds, "first_seed": args.first_seed,
              "noises": list(NOISES), "variants": list(VARIANTS), "earlier_runs": list(EARLIER_RUNS),
              "batching": "Batching() (local mode's defaults)", "seconds": time.perf_counter() - started,
              "rows": rows}
    record["summary"] = summarise(rows)
    write_and_report(record, args.out, print_report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
