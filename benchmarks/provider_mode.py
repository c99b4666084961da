"""No-op throughput and lone-task round trip: ScalpelExecutor in provider mode and HTEX on LocalProvider blocks.

Two executors, each in its own child process (one DataFlowKernel per process), interleaved
A B A B ... for ``--rounds`` rounds so the machine's drift hits both alike:

- ``scalpel-provider``: ``ScalpelExecutor(provider=LocalProvider(init_blocks=2, max_blocks=2))``
  with ``--cpus {block_id}``: two node managers over CurveZMQ, one pinned worker each;
- ``htex``: Parsl's HighThroughputExecutor on ``LocalProvider(init_blocks=2, max_blocks=2)``,
  one worker per block (``max_workers_per_node=1``, no affinity: HTEX's "block" affinity would put
  both blocks' workers on CPU 0).

Each sample waits until both blocks' managers are connected, warms up with 50 tasks, then times
``--tasks`` no-op tasks submitted at once (throughput) and ``--pings`` lone tasks one after
another (round-trip median). Prints per-executor medians; ``--json`` writes every sample.
``--options`` passes ScalpelExecutor options (JSON).

    python benchmarks/provider_mode.py --rounds 5 --tasks 3000 --pings 200
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

EXECUTORS = ("scalpel-provider", "htex")

CHILD = textwrap.dedent(
    """
    import json, os, sys, time
    import parsl
    from parsl import python_app
    from parsl.config import Config
    from parsl.providers import LocalProvider

    which, tasks, pings, run_dir = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    provider = LocalProvider(init_blocks=2, min_blocks=2, max_blocks=2)
    if which == "htex":
        from parsl.executors import HighThroughputExecutor
        executor = HighThroughputExecutor(label="htex", max_workers_per_node=1, provider=provider)
    else:
        from scalpel_executor import ScalpelExecutor
        from scalpel_executor.runtime.executor import DEFAULT_LAUNCH_CMD
        executor = ScalpelExecutor(label="scalpel", provider=provider,
                                   launch_cmd=DEFAULT_LAUNCH_CMD + " --cpus {block_id}", **json.loads(sys.argv[5]))

    @python_app
    def noop():
        return 0

    if __name__ == "__main__":
        with parsl.load(Config(executors=[executor], run_dir=run_dir, strategy_period=0.5)):
            deadline = time.monotonic() + 120
            while len(executor.connected_managers()) < 2:
                if time.monotonic() > deadline:
                    sys.exit("the two blocks' managers did not connect within 120 s")
                time.sleep(0.1)
            for _ in range(50):
                noop().result()  # warm up: workers started, imports done
            start = time.perf_counter()
            futures = [noop() for _ in range(tasks)]
            for f in futures:
                f.result()
            elapsed = time.perf_counter() - start
            trips = []
            for _ in range(pings):
                t = time.perf_counter()
                noop().result()
                trips.append(time.perf_counter() - t)
        print(json.dumps({"throughput": tasks / elapsed, "round_trip_median": sorted(trips)[len(trips) // 2]}))
    """
)


def run_sample(which: str, tasks: int, pings: int, folder: str, options: str) -> dict:
    env = dict(os.environ, SCALPEL_PROFILE_STORE=os.path.join(folder, "profiles.sqlite"))
    run = subprocess.run([sys.executable, "-c", CHILD, which, str(tasks), str(pings), os.path.join(folder, "runinfo"),
                          options],
                         capture_output=True, text=True, timeout=900, env=env)
    if run.returncode != 0:
        raise RuntimeError(f"{which} failed with exit code {run.returncode}:\n{run.stderr[-3000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=3000, help="no-op tasks per throughput sample")
    parser.add_argument("--pings", type=int, default=200, help="sequential lone tasks per latency sample")
    parser.add_argument("--options", default="{}",
                        help='ScalpelExecutor options as JSON, e.g. \'{"prefetch_capacity": 4, "batch_window": 0}\'')
    parser.add_argument("--json", help="write all samples to this file")
    args = parser.parse_args()
    samples: dict[str, list[dict]] = {which: [] for which in EXECUTORS}
    with tempfile.TemporaryDirectory(prefix="scalpel-provider-bench-") as folder:
        for round_ in range(args.rounds):
            for which in samples:
                sample = run_sample(which, args.tasks, args.pings, folder, args.options)
                samples[which].append(sample)
                print(f"round {round_ + 1}/{args.rounds} {which:16s} {sample['throughput']:8.0f} tasks/s  "
                      f"round trip {sample['round_trip_median'] * 1e3:6.2f} ms", flush=True)
    print(f"\n{'executor':16s} {'tasks/s':>20s} {'round trip ms':>14s}   (medians of {args.rounds} rounds, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f})")
    medians = {}
    for which, values in samples.items():
        rates = [s["throughput"] for s in values]
        medians[which] = {"throughput": statistics.median(rates),
                          "round_trip_median": statistics.median(s["round_trip_median"] for s in values)}
        print(f"{which:16s} {medians[which]['throughput']:7.0f} ({min(rates):.0f}-{max(rates):.0f}) "
              f"{medians[which]['round_trip_median'] * 1e3:14.2f}")
    print(f"throughput scalpel-provider/htex: "
          f"{medians['scalpel-provider']['throughput'] / medians['htex']['throughput']:.2f}x")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"args": vars(args), "samples": samples, "medians": medians}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
