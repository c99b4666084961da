"""No-op throughput and lone-task round trip: ScalpelExecutor with its node manager, in-process, and HTEX.

Three executors, each in its own child process (one DataFlowKernel per process), interleaved
A B C A B C ... for ``--rounds`` rounds so the machine's drift hits all alike:

- ``scalpel-manager``: ``ScalpelExecutor()``, the default: the pool in a node manager process;
- ``scalpel-inprocess``: ``ScalpelExecutor(node_manager=False)``, the pool in the driver's process;
- ``htex``: Parsl's HighThroughputExecutor, ``--workers`` workers (``cpu_affinity="block"`` when
  there are no more workers than CPUs, else none), one ``LocalProvider`` block.

``--workers`` (default: this machine's CPUs) above the CPU count oversubscribes: ScalpelExecutor
then schedules for one LLC domain of that many cores (``topology="1xN"``), laid over the real CPUs
round-robin, and HTEX runs that many unpinned workers.

Each sample warms up with 50 tasks, then times ``--tasks`` no-op tasks submitted at once
(throughput) and ``--pings`` lone tasks one after another (round-trip median). It also records the
CPU seconds the driving process spent during the throughput phase (its own threads: Parsl's DFK
and, in-process, the pool's dispatch and completion threads) and, with the node manager, the
manager process's (``scalpel_executor.experiments.interleaved``). Prints per-executor medians;
``--json`` writes every sample.

    python benchmarks/node_manager.py --rounds 5 --tasks 3000 --pings 200
    python benchmarks/node_manager.py --rounds 5 --workers 8
"""

from __future__ import annotations

import argparse
import os
import sys

from scalpel_executor.experiments.interleaved import Contender, medians, run_rounds, write_samples

EXECUTORS = ("scalpel-manager", "scalpel-inprocess", "htex")


def contender(which: str, workers: int) -> Contender:
    """``which`` of EXECUTORS with ``workers`` workers (above this machine's CPUs: oversubscribed)."""
    cpus = len(os.sched_getaffinity(0))
    if which == "htex":
        return Contender("htex", {"max_workers_per_node": workers, "cpu_affinity": "block" if workers <= cpus else "none"},
                         provider={"init_blocks": 1, "max_blocks": 1}, measure_cpu=True)
    return Contender("scalpel", {"node_manager": which == "scalpel-manager",
                                 "topology": None if workers == cpus else f"1x{workers}"},
                     measure_cpu=True, manager_cpu=which == "scalpel-manager")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=3000, help="no-op tasks per throughput sample")
    parser.add_argument("--pings", type=int, default=200, help="sequential lone tasks per latency sample")
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)),
                        help="workers per executor (default: this machine's CPUs; more oversubscribes)")
    parser.add_argument("--only", nargs="+", choices=EXECUTORS, default=list(EXECUTORS))
    parser.add_argument("--json", help="write all samples to this file")
    args = parser.parse_args()

    def report(round_: int, which: str, sample: dict) -> None:
        print(f"round {round_ + 1}/{args.rounds} {which:16s} {sample['throughput']:8.0f} tasks/s  round trip "
              f"{sample['round_trip_median'] * 1e3:6.2f} ms (p90 {sample['round_trip_p90'] * 1e3:6.2f})  driver CPU "
              f"{sample['driver_cpu_per_task_us']:6.0f} us/task"
              + (f"  manager CPU {sample['manager_cpu_per_task_us']:5.0f} us/task"
                 if sample["manager_cpu_per_task_us"] is not None else ""), flush=True)

    samples = run_rounds({which: contender(which, args.workers) for which in args.only}, args.rounds, args.tasks,
                         args.pings, prefix="scalpel-node-manager-bench-", on_sample=report)
    med = medians(samples, ("throughput", "round_trip_median", "round_trip_p90", "driver_cpu_per_task_us",
                            "manager_cpu_per_task_us"))
    print(f"\n{'executor':16s} {'tasks/s':>9s} {'round trip ms':>14s} {'p90 ms':>7s} {'driver CPU us/task':>19s} "
          f"{'manager CPU us/task':>20s}   (medians of "
          f"{args.rounds} rounds, {args.workers} workers, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f})")
    for which, m in med.items():
        manager = m.get("manager_cpu_per_task_us")
        print(f"{which:16s} {m['throughput']:9.0f} {m['round_trip_median'] * 1e3:14.2f} {m['round_trip_p90'] * 1e3:7.2f} "
              f"{m['driver_cpu_per_task_us']:19.0f} {'-' if manager is None else f'{manager:.0f}':>20s}")
    if "htex" in med:
        for which in med.keys() - {"htex"}:
            print(f"throughput {which}/htex: {med[which]['throughput'] / med['htex']['throughput']:.2f}x; round trip "
                  f"{med[which]['round_trip_median'] / med['htex']['round_trip_median']:.2f}x at the median, "
                  f"{med[which]['round_trip_p90'] / med['htex']['round_trip_p90']:.2f}x at the 90th percentile")
    write_samples(args.json, args, samples, med)
    return 0


if __name__ == "__main__":
    sys.exit(main())
