"""No-op task throughput and lone-task round trip at node widths: ScalpelExecutor, HTEX and Parsl's thread pool.

For each width in ``--workers`` (default: every core of this machine), interleaved rounds of

- ``htex``: Parsl's HighThroughputExecutor, ``max_workers_per_node=N``, ``cpu_affinity="block"``
  up to the CPU count (else none), one ``LocalProvider`` block;
- ``scalpel``: ``ScalpelExecutor()`` (the node manager, and the driver's threads on one CPU while
  they are busy: the defaults); more workers than cores
  emulate a wider node, ``topology="1xN"`` laid over the real CPUs round-robin; fewer take the
  first N cores;
- ``threads``: Parsl's ``ThreadPoolExecutor(max_threads=N)``: no process boundary at all, the
  DataFlowKernel's own ceiling on this machine,
- with ``--pin-driver``, ``scalpel-pin``: ``ScalpelExecutor(pin_driver="auto")``, its driver's
  threads on one CPU for the whole run, and ``scalpel-unpinned``: ``pin_driver=None``, never,

each sample a fresh interpreter with one DataFlowKernel, warmed up until every worker ran a task
(``scalpel_executor.experiments.interleaved``). A sample times ``--tasks`` no-op tasks submitted at
once (throughput) and ``--pings`` lone tasks one after another (round trip, median and 90th
percentile), and the CPU per task, in the throughput phase, of the driver process, the node manager
(ScalpelExecutor's, HTEX's ``process_worker_pool``), HTEX's interchange and the workers, and of
each thread of the driver and the manager. Per width it prints medians with their ranges, the ratios
Scalpel/HTEX and Scalpel/ThreadPool, and the busiest threads; ``--json`` writes every sample.

``--stages`` adds, per width, one ScalpelExecutor sample that keeps every task's time stamps
(``time.monotonic()``, one clock for every process of a host) and prints where a task's time goes:
the app call to ``executor.submit`` (Parsl), to the manager sending it to its worker, the hand-off
and the result's way back (together: the worker keeps no stamps of its own, only its run's wall
time), the run, and the driver's receipt to the AppFuture being done; for tasks submitted at once
and for lone ones, with the tasks in flight sampled every 5 ms.

A width above this machine's CPUs runs that many worker processes per executor on its CPUs
(128 workers: about 128 Python processes of 60-80 MiB each, one executor at a time).

    python benchmarks/throughput.py --rounds 3
    python benchmarks/throughput.py --workers 2 16 64 --rounds 3 --stages --json throughput.json
    python benchmarks/throughput.py --workers 2 16 --rounds 3 --pin-driver
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

from scalpel_executor.experiments.interleaved import (
    machine_cores,
    machine_facts,
    run_rounds,
    stage_lines,
    stage_summary,
    width_contenders,
    width_lines,
    width_summary,
)


def scalpel_options(args: argparse.Namespace) -> dict:
    """ScalpelExecutor's options the command line gave."""
    return {} if args.batch_window is None else {"batching": {"window": args.batch_window}}


def stage_breakdown(workers: int, args: argparse.Namespace) -> dict:
    """One more ScalpelExecutor sample with every task's stamps: its stages printed, and returned as
    ``stages`` (medians and 90th percentiles per phase) and ``stage_sample`` (the sample)."""
    contender = width_contenders(workers, stages=True, scalpel_options=scalpel_options(args))["scalpel"]
    staged = run_rounds({"scalpel": contender}, 1, args.tasks, args.pings, prefix="scalpel-throughput-stages-",
                        keep_going=True)["scalpel"][0]
    if "error" in staged:
        print(f"\nthe stage sample failed: {staged['error'].strip().splitlines()[-1]}")
        return {"stage_sample": staged}
    stages = {phase: stage_summary(stamps) for phase, stamps in staged.pop("stages").items()}
    queue = [inflight for _, inflight in staged["queue"]]
    print(f"\nwhere a task's time goes, {workers} workers (one ScalpelExecutor sample: {args.tasks} tasks at "
          f"once = burst, {args.pings} lone tasks = lone; {staged['throughput']:.0f} tasks/s)")
    for line in stage_lines(stages, markdown=args.markdown):
        print(line)
    if queue:
        print(f"tasks in flight during the burst (every 5 ms, {len(queue)} samples): median "
              f"{statistics.median(queue):.0f}, max {max(queue)}")
    return {"stages": stages, "stage_sample": staged}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[2:]))
    parser.add_argument("--workers", type=int, nargs="+", default=[len(machine_cores())],
                        help="widths to measure, workers per executor (default: this machine's %(default)s cores; "
                             "more than its CPUs emulates a wider node)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per width (default %(default)s)")
    parser.add_argument("--tasks", type=int, default=3000, help="no-op tasks per throughput sample")
    parser.add_argument("--pings", type=int, default=200, help="sequential lone tasks per latency sample")
    parser.add_argument("--batch-window", type=float, help="ScalpelExecutor's batch window in seconds (default: "
                        "the executor's own)")
    parser.add_argument("--stages", action="store_true", help="per width, one more ScalpelExecutor sample: "
                        "where a task's time goes")
    parser.add_argument("--pin-driver", action="store_true", help="also run ScalpelExecutor(pin_driver='auto') "
                        "as scalpel-pin (the driver's threads on one CPU for the whole run) and pin_driver=None as "
                        "scalpel-unpinned (never)")
    parser.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    parser.add_argument("--json", help="write every sample and the summaries to this file")
    args = parser.parse_args()
    if any(width < 1 for width in args.workers):
        parser.error(f"--workers takes positive widths, got {args.workers}")

    machine = machine_facts()
    print(f"machine: {machine['cpu_model']}, {machine['cpus']} CPUs, {machine['cores']} cores; "
          f"Python {machine['python']}, Parsl {machine['parsl']}; load average {machine['load_average'][0]:.1f}")
    record = {"args": vars(args), "machine": machine, "widths": {}}
    for workers in args.workers:
        def report(round_: int, which: str, sample: dict, workers=workers) -> None:
            if "error" in sample:
                print(f"{workers:4d} workers round {round_ + 1}/{args.rounds} {which:8s} FAILED: "
                      f"{sample['error'].strip().splitlines()[-1]}", flush=True)
                return
            manager = sample.get("manager_cpu_per_task_us")
            print(f"{workers:4d} workers round {round_ + 1}/{args.rounds} {which:8s} {sample['throughput']:7.0f} tasks/s"
                  f"  round trip {sample['round_trip_median'] * 1e3:6.2f} ms (p90 "
                  f"{sample['round_trip_p90'] * 1e3:6.2f})  driver {sample['driver_cpu_per_task_us']:5.0f} us/task"
                  + (f"  manager {manager:5.0f} us/task" if manager is not None else ""), flush=True)

        samples = run_rounds(width_contenders(workers, scalpel_options=scalpel_options(args),
                                              pin_driver=args.pin_driver), args.rounds,
                             args.tasks, args.pings,
                             prefix="scalpel-throughput-bench-", on_sample=report, keep_going=True)
        summary = width_summary(samples)
        entry = {"samples": samples, "summary": summary, "load_average": list(os.getloadavg())}
        print()
        for line in width_lines(workers, summary, markdown=args.markdown):
            print(line)
        if args.stages:
            entry.update(stage_breakdown(workers, args))
        print()
        record["widths"][str(workers)] = entry
        if args.json:  # after every width: a long run interrupted keeps what it measured
            with open(args.json, "w") as handle:
                json.dump(record, handle, indent=1)
    if args.json:
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
