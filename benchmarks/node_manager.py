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
manager process's. Prints per-executor medians; ``--json``
writes every sample.

    python benchmarks/node_manager.py --rounds 5 --tasks 3000 --pings 200
    python benchmarks/node_manager.py --rounds 5 --workers 8
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

EXECUTORS = ("scalpel-manager", "scalpel-inprocess", "htex")

CHILD = textwrap.dedent(
    """
    import json, os, sys, time
    import parsl
    import psutil
    from parsl import python_app
    from parsl.config import Config

    which, tasks, pings, run_dir, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
    cpus = len(os.sched_getaffinity(0))
    if which == "htex":
        from parsl.executors import HighThroughputExecutor
        from parsl.providers import LocalProvider
        executor = HighThroughputExecutor(label="htex", max_workers_per_node=workers,
                                          cpu_affinity="block" if workers <= cpus else "none",
                                          provider=LocalProvider(init_blocks=1, max_blocks=1))
    else:
        from scalpel_executor import ScalpelExecutor
        executor = ScalpelExecutor(label="scalpel", node_manager=which == "scalpel-manager",
                                   topology=None if workers == cpus else f"1x{workers}")

    @python_app
    def noop():
        return 0

    if __name__ == "__main__":
        with parsl.load(Config(executors=[executor], run_dir=run_dir, strategy="none")):
            for _ in range(50):
                noop().result()  # warm up: workers started, imports done
            manager = psutil.Process(executor.pool.pid) if which == "scalpel-manager" else None
            manager_cpu = sum(manager.cpu_times()[:2]) if manager else 0.0
            cpu, start = os.times(), time.perf_counter()
            futures = [noop() for _ in range(tasks)]
            for f in futures:
                f.result()
            elapsed, after = time.perf_counter() - start, os.times()
            manager_cpu = sum(manager.cpu_times()[:2]) - manager_cpu if manager else None
            trips = []
            for _ in range(pings):
                t = time.perf_counter()
                noop().result()
                trips.append(time.perf_counter() - t)
        trips.sort()
        print(json.dumps({"throughput": tasks / elapsed, "round_trip_median": trips[len(trips) // 2],
                          "round_trip_p90": trips[int(len(trips) * 0.9)],
                          "driver_cpu_per_task_us": (after.user + after.system - cpu.user - cpu.system) / tasks * 1e6,
                          "manager_cpu_per_task_us": None if manager_cpu is None else manager_cpu / tasks * 1e6}))
    """
)


def run_sample(which: str, tasks: int, pings: int, folder: str, workers: int) -> dict:
    env = dict(os.environ, SCALPEL_PROFILE_STORE=os.path.join(folder, "profiles.sqlite"))
    run = subprocess.run([sys.executable, "-c", CHILD, which, str(tasks), str(pings), os.path.join(folder, "runinfo"),
                          str(workers)],
                         capture_output=True, text=True, timeout=900, env=env)
    if run.returncode != 0:
        raise RuntimeError(f"{which} failed with exit code {run.returncode}:\n{run.stderr[-3000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


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
    samples: dict[str, list[dict]] = {which: [] for which in args.only}
    with tempfile.TemporaryDirectory(prefix="scalpel-node-manager-bench-") as folder:
        for round_ in range(args.rounds):
            for which in samples:
                sample = run_sample(which, args.tasks, args.pings, folder, args.workers)
                samples[which].append(sample)
                print(f"round {round_ + 1}/{args.rounds} {which:16s} {sample['throughput']:8.0f} tasks/s  round trip "
                      f"{sample['round_trip_median'] * 1e3:6.2f} ms (p90 {sample['round_trip_p90'] * 1e3:6.2f})  driver CPU "
                      f"{sample['driver_cpu_per_task_us']:6.0f} us/task"
                      + (f"  manager CPU {sample['manager_cpu_per_task_us']:5.0f} us/task"
                         if sample["manager_cpu_per_task_us"] is not None else ""), flush=True)
    keys = ("throughput", "round_trip_median", "round_trip_p90", "driver_cpu_per_task_us")
    med = {w: {k: statistics.median(s[k] for s in v) for k in keys} for w, v in samples.items()}
    for which, v in samples.items():
        if v[0]["manager_cpu_per_task_us"] is not None:
            med[which]["manager_cpu_per_task_us"] = statistics.median(s["manager_cpu_per_task_us"] for s in v)
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
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"args": vars(args), "samples": samples, "medians": med}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
