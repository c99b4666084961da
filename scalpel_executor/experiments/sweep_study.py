"""Parameter sweeps of malleable tasks in simulation: what a key's family lends a key of its own
(``benchmarks/sweep_study.py``).

::

    python benchmarks/sweep_study.py --seeds 0,1                    # the seeds the rule was tuned on
    python benchmarks/sweep_study.py --seeds 100,101,102 --jobs 2   # seeds never looked at while tuning
    python benchmarks/sweep_study.py --report docs/data/sweep-study.json

A parameter sweep calls one app with a value per task (``relax(grid, alpha)`` for 48 values of
``alpha``): its profile keys take the value's bucket, so every task is a key of its own, and a key
learns its speed-up alone. The instances are those of :mod:`~scalpel_executor.experiments.width_study`
(the batches of malleable kernels by default: what a sweep of a few apps looks like; WfChef
workflows by ``--workloads``), each task made a *swept* key of its own, on a first run and on a
learned one (the rule of an earlier run of other values of the same keys' apps, drawn with seed +
``LEARN_SEED``). Contenders, all under the default policy ``scalpel`` and the default width rule:

* ``shared``: one key per kernel, as the user declaring the swept argument size-free gets
  (``@app_hints(size_free=("alpha",))``): the width study's own ``scalpel`` rows, the best case;
* ``alone``: every task its own key, no family (each key learns alone: a learned run of new values
  knows nothing);
* ``family``: every task its own key, its kernel its family (:meth:`~scalpel_executor.core.widths.SpeedupModel.join`):
  what the executor does, each key borrowing its app's speed-up until it reads its own;
* every task fixed at one core, at two and at the domain, and the best of those per instance.

Printed, per run: each contender's makespan over ``family``'s (> 1: ``family`` ends first),
geometric means per workload and over all, and the instances more than 2% behind the
hindsight-best fixed width.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from scalpel_executor.core.machines import MACHINES
from scalpel_executor.core.simulate import SimTask
from scalpel_executor.core.widths import Widths
from scalpel_executor.experiments.records import write_and_report
from scalpel_executor.experiments.simulated_policies import gmean
from scalpel_executor.experiments.tables import format_table
from scalpel_executor.experiments.width_study import (BATCH_PER_CORE, FIXED, GOAL_HINDSIGHT, WORKLOADS, _instance,
                                                      fixed_width, instances_of)
from scalpel_executor.experiments.workflow_studies import run_instances

KEYING = ("shared", "alone", "family")
RUNS = ("first", "learned")
CONTENDERS = (*FIXED, *(f"{keying}/{run}" for keying in KEYING for run in RUNS))
DEFAULT_WORKLOADS = tuple(f"batch-{f:g}" for f in BATCH_PER_CORE)


def swept(tasks: Sequence[SimTask], keying: str, draw: str) -> list[SimTask]:
    """``tasks`` as a sweep keys them: ``shared`` as they are (a key per kernel), ``alone`` and
    ``family`` each task a key of its own (its kernel's name and ``draw`` and its index, as a
    swept value's bucket would), ``family`` with its kernel as the key's family."""
    if keying not in KEYING:
        raise ValueError(f"unknown keying {keying!r}; choose from {', '.join(KEYING)}")
    if keying == "shared":
        return list(tasks)
    return [dataclasses.replace(t, key=f"{t.key}(~{draw}{i})", family=t.key if keying == "family" else None)
            for i, t in enumerate(tasks)]


def run_instance(workload: str, seed: int, machines: Sequence[str]) -> list[dict]:
    """Every contender on ``workload`` drawn with ``seed``, on each machine."""
    rows = []
    for name in machines:
        simulated, tasks, earlier, domain = _instance(workload, seed, name)
        makespans = {f"fixed-{label}": simulated(fixed_width(tasks, width)).makespan
                     for label, width in (("1", 1), ("2", min(2, domain)), ("domain", domain))}
        for keying in KEYING:
            makespans[f"{keying}/first"] = simulated(swept(tasks, keying, "a"), Widths("scalpel")).makespan
            learned = Widths("scalpel")
            simulated(swept(earlier, keying, "b"), learned)
            makespans[f"{keying}/learned"] = simulated(swept(tasks, keying, "a"), learned).makespan
        rows.append({"workload": workload, "machine": name, "seed": seed, "tasks": len(tasks), "makespans": makespans})
    return rows


def summarise(rows: list[dict]) -> dict:
    """Per run: each contender over ``family`` (geometric means per workload and over all) and the
    instances more than 2% behind the hindsight-best fixed width, per keying."""
    out = {}
    for run in RUNS:
        rule = f"family/{run}"
        others = [*FIXED, *(f"{keying}/{run}" for keying in KEYING if keying != "family")]
        per_workload = {workload: {other: gmean(r["makespans"][other] / r["makespans"][rule] for r in rows
                                                if r["workload"] == workload) for other in others}
                        for workload in dict.fromkeys(r["workload"] for r in rows)}
        behind = {keying: sum(min(r["makespans"][f] for f in FIXED) / r["makespans"][f"{keying}/{run}"] < GOAL_HINDSIGHT
                              for r in rows) for keying in KEYING}
        out[run] = {"all": {other: gmean(r["makespans"][other] / r["makespans"][rule] for r in rows) for other in others},
                    "workloads": per_workload, "behind_hindsight": behind, "instances": len(rows)}
    return out


def print_report(record: dict, markdown: bool = True) -> None:
    for run, summary in record["summary"].items():
        others = list(summary["all"])
        print(f"\n**A sweep, {run} run** (seeds {', '.join(map(str, record['seeds']))}; {summary['instances']} "
              f"instances): each contender's makespan / every task its own key with its family's (> 1: the "
              f"family ends first), geometric mean over the machines and seeds\n")
        rows = [[workload, *(f"{cell[o]:.3f}" for o in others)] for workload, cell in summary["workloads"].items()]
        rows.append(["**all**", *(f"**{summary['all'][o]:.3f}**" for o in others)])
        print("\n".join(format_table(["workload", *others], rows, right=range(1, len(others) + 1), markdown=markdown)))
        print(f"\nInstances more than 2% behind the hindsight-best fixed width, of {summary['instances']}: "
              + ", ".join(f"{keying} {count}" for keying, count in summary["behind_hindsight"].items()))
    print(f"\n{len(record['rows'])} instances in {record['seconds']:.0f} s ({record['jobs']} process"
          f"{'es' if record['jobs'] > 1 else ''}).")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))  # the first paragraph
    parser.add_argument("--seeds", default="0,1", help="comma-separated seeds (default 0,1: the tuning seeds)")
    parser.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS),
                        help=f"of {', '.join(WORKLOADS)} (default the batches)")
    parser.add_argument("--machines", default=",".join(MACHINES), help=f"of {', '.join(MACHINES)}")
    parser.add_argument("--jobs", type=int, default=1, help="processes simulating at once (default 1)")
    parser.add_argument("--out", default="sweep-study.json", help="the JSON record (default sweep-study.json)")
    parser.add_argument("--report", help="print the tables of a record written before, run nothing")
    args = parser.parse_args(argv)
    if args.report:
        print_report(json.loads(Path(args.report).read_text()))
        return 0
    seeds, workloads, machines = instances_of(parser, args)
    started = time.perf_counter()
    rows = run_instances(_unit, [(workload, seed, 0.0) for workload in workloads for seed in seeds], (machines,),
                         args.jobs)
    rows.sort(key=lambda r: (workloads.index(r["workload"]), machines.index(r["machine"]), r["seed"]))
    record = {"format": "scalpel-sweep-study/1", "command": " ".join(["python", *sys.argv]), "seeds": seeds,
              "workloads": workloads, "machines": list(machines), "contenders": list(CONTENDERS), "jobs": args.jobs,
              "seconds": time.perf_counter() - started, "rows": rows}
    record["summary"] = summarise(rows)
    write_and_report(record, args.out, print_report)
    return 0


def _unit(workload: str, seed: int, _noise: float, machines: Sequence[str]) -> list[dict]:
    """:func:`run_instance` as :func:`~scalpel_executor.experiments.workflow_studies.run_instances` calls it."""
    return run_instance(workload, seed, machines)
