"""The learning loop live under planted contention: does the executor learn, from its own runs, the
pairs that hurt, and keep them apart?

The workflow (:mod:`scalpel_executor.experiments.planted_loop`), written as a scientist lists it::

    streams   = [planted(board, "stream", s) for _ in range(6)]       hurts everyone, its own kind most
    sensitive = [planted(board, "sensitive", s) for _ in range(4)]    suffers beside a stream
    computed  = [planted(board, "compute", s) for _ in range(6)]
    gather(*streams, *sensitive, *computed)                           the reduce

Every task sleeps through ``s`` seconds of work stretched, step by step, by a planted pair matrix
for the kinds on its LLC domain now (:mod:`scalpel_executor.workloads.planted`): the contention is
planted, the executor never knows, and the host's own noise does not enter. Each repetition:

1. the learning runs on an emptied store: a first run and ``--train`` more, each after the
   detached refit of the one before (``refit_choice``: what it stored);
2. the learned run on that store, and the oracle's run on a copy of it told the planted matrix
   as per-key terms (the same run times known, only the terms differ), in alternating order. Printed (and with ``--out`` written): per run the makespan, the hurting
co-run seconds (summed overlaps of tasks whose planted pair slows one of them 1.5x or more, from
the tasks' own stamps), what it planned with and what its refit chose; then the medians, the
learned run's share of the first run's hurting co-run seconds and the gap to the oracle it
closed, with 95% bootstrap intervals over repetitions, and the host's load.

    python benchmarks/planted_loop.py --repeats 4 --out docs/data/planted
    python benchmarks/planted_loop.py --workflow retuned --repeats 4 --out docs/data/planted
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from scalpel_executor.core.domains import Topology
from scalpel_executor.experiments.live_workflows import live_machine
from scalpel_executor.experiments.planted_loop import WORKFLOWS, repetition, scratch, summarise
from scalpel_executor.experiments.records import write_record


def run_lines(rep: dict) -> list[str]:
    def line(label: str, row: dict) -> str:
        choice = row.get("refit_choice") or {}
        return (f"  {label:8s} makespan {row['makespan']:6.2f} s, hurting pairs together "
                f"{row['hurting_corun_seconds']:5.2f} s, planned with {row.get('planned_with')} "
                f"({row.get('told_tasks')} tasks told); refit: {choice.get('reason')}")

    return [line(f"run {r['run']}", r) for r in rep["runs"]] + [line("oracle", rep["oracle"])]


def main() -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--workflow", choices=sorted(WORKFLOWS), default="planted")
    parser.add_argument("--seconds", type=float, default=1.0, help="each task's work alone, seconds")
    parser.add_argument("--train", type=int, default=2, help="runs between the first and the learned one")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--llc", help="LLC per domain the executor plans with (default: sysfs, or 56 MiB in a VM)")
    parser.add_argument("--out", help="write the record (JSON) into this folder")
    args = parser.parse_args()
    topology, llc_note = live_machine(parser, args.llc)
    topology = Topology.from_cpu_lists([topology.cpus[:2]], llc_size=topology.llc_size)  # the 2-core loop
    workflow = WORKFLOWS[args.workflow]
    print(f"{args.workflow}: {', '.join(f'{n} {k}' for k, n in workflow.kinds)} and a reduce, {args.seconds:g} s "
          f"each alone; planted matrix {json.dumps(workflow.matrix.to_dict())}; hurting pairs "
          f"{', '.join(sorted('+'.join(sorted(p) * (3 - len(p))) for p in workflow.hurting()))}; "
          f"CPUs {list(topology.cpus)}, LLC {topology.llc_size >> 20} MiB ({llc_note})", flush=True)
    repetitions = []
    with scratch() as folder:
        for number in range(args.repeats):
            rep = repetition(workflow, args.seconds, topology, args.train, Path(folder) / f"repeat-{number}", number)
            repetitions.append(rep)
            print(f"repeat {number + 1} (load {rep['load'][0]:.1f} -> {rep['load'][1]:.1f}):", flush=True)
            print("\n".join(run_lines(rep)), flush=True)
    summary = summarise(repetitions)
    print(json.dumps(summary, indent=1))
    if args.out:
        write_record({"args": vars(args), "matrix": workflow.matrix.to_dict(), "summary": summary,
                      "repetitions": repetitions}, Path(args.out) / f"planted-loop-{args.workflow}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
