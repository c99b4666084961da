"""The scheduler's CPU per start on a malleable batch, with and without the admission check's
rollout limit while malleable tasks wait (``scheduler.MALLEABLE_ROLLOUT_LIMIT``).

One instance of ``benchmarks/width_study.py`` (a workload drawn with a seed, on a study machine),
every task malleable, its rule told each key's true serial fraction as ``--known`` readings (so
the keys are sure and their tasks are planned at their thriftiest widths, most of a batch waiting
wide), simulated once per limit; the figure is the simulation's CPU time (``time.process_time``,
which is nearly all the scheduler's) over the tasks started, and the plans the admission check
rolled out (how many, and the longest)::

    python benchmarks/width_scheduling_cost.py                                  # batch-6 on epyc, seed 100
    python benchmarks/width_scheduling_cost.py --workload soykb --machine xeon16 --seed 400

The makespans are printed beside, so what the limit costs the schedule shows too.
"""

from __future__ import annotations

import argparse
import time

from scalpel_executor.core import scheduler as scheduling
from scalpel_executor.core.batching import Batching
from scalpel_executor.core.machines import MACHINES
from scalpel_executor.core.simulate import simulate
from scalpel_executor.core.widths import Widths
from scalpel_executor.experiments import width_study
from scalpel_executor.experiments.tables import format_table


def measure(workload: str, machine: str, seed: int, known: int, limit: int) -> dict:
    """One simulation with ``MALLEABLE_ROLLOUT_LIMIT`` set to ``limit``: CPU per start, rollouts, makespan."""
    spec = MACHINES[machine]
    topology = spec.topology()
    domains = [list(d.cpus) for d in topology.domains]
    llc = float(topology.llc_size)
    tasks = width_study.workload_tasks(workload, seed, topology.total_cores, len(domains[0]))
    rule = Widths()
    for key, serial in {task.key: task.serial_fraction for task in tasks}.items():
        rule.model.seed(key, serial, known)
    lengths: list[int] = []

    class Counted(scheduling.MulticoreEvaluator):
        def run(self, order, *args, **kwargs):
            lengths.append(len(order))
            return super().run(order, *args, **kwargs)

    saved = scheduling.MALLEABLE_ROLLOUT_LIMIT, scheduling.MulticoreEvaluator
    scheduling.MALLEABLE_ROLLOUT_LIMIT, scheduling.MulticoreEvaluator = limit, Counted
    try:
        started = time.process_time()
        result = simulate(tasks, domains, llc, model=spec.model, batching=None if workload.startswith("batch-")
                          else Batching(),
                          scheduler=scheduling.Scheduler(domains, "scalpel", llc=llc, model=spec.model,
                                                         width_rule=rule))
        cpu = time.process_time() - started
    finally:
        scheduling.MALLEABLE_ROLLOUT_LIMIT, scheduling.MulticoreEvaluator = saved
    return {"limit": limit, "tasks": len(result.records), "ms_per_start": 1000 * cpu / max(1, len(result.records)),
            "rollouts": len(lengths), "longest": max(lengths, default=0), "makespan": result.makespan}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--workload", default="batch-6", choices=width_study.WORKLOADS,
                        help="a width-study workload (default: %(default)s)")
    parser.add_argument("--machine", default="epyc", choices=list(MACHINES), help="(default: %(default)s)")
    parser.add_argument("--seed", type=int, default=100, help="(default: %(default)s)")
    parser.add_argument("--known", type=int, default=50, help="readings of each key's true serial fraction "
                                                               "the rule is told (default: %(default)s)")
    parser.add_argument("--limits", type=int, nargs="+",
                        default=[scheduling.MALLEABLE_ROLLOUT_LIMIT, scheduling.ROLLOUT_LIMIT],
                        help="MALLEABLE_ROLLOUT_LIMIT values to compare (default: the limit, and ROLLOUT_LIMIT: none)")
    args = parser.parse_args(argv)
    if args.known < 0 or any(limit < 0 for limit in args.limits):
        parser.error(f"--known and --limits must be 0 or more, got {args.known} and {args.limits}")
    rows = [measure(args.workload, args.machine, args.seed, args.known, limit) for limit in args.limits]
    print(f"{args.workload} on {args.machine}, seed {args.seed}, told the speed-ups as {args.known} readings:\n")
    print("\n".join(format_table(["rollout limit", "tasks", "CPU ms per start", "rollouts", "longest", "makespan s"],
                                 [[r["limit"], r["tasks"], f"{r['ms_per_start']:.1f}", r["rollouts"], r["longest"],
                                   f"{r['makespan']:.1f}"] for r in rows], right=range(0, 6), markdown=True)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
