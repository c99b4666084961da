"""No-op task throughput and lone-task round trip: ScalpelExecutor against Parsl's HTEX.

Each executor runs in its own child process (one DataFlowKernel per process), and the executors
alternate A B A B ... for ``--rounds`` rounds so that the machine's drift hits both alike. Prints
per-executor medians and the ratio of medians; ``--json`` writes every sample.

    python benchmarks/throughput.py --rounds 5 --tasks 3000 --pings 200
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

CHILD = textwrap.dedent(
    """
    import json, sys, time
    import parsl
    from parsl import python_app
    from parsl.config import Config

    which, tasks, pings, window = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    if which == "htex":
        from parsl.executors import HighThroughputExecutor
        from parsl.providers import LocalProvider
        executor = HighThroughputExecutor(label="htex", max_workers_per_node=2, cpu_affinity="block",
                                          provider=LocalProvider(init_blocks=1, max_blocks=1))
    else:
        from scalpel_executor import ScalpelExecutor
        executor = ScalpelExecutor(label="scalpel", batch_window=window)

    @python_app
    def noop():
        return 0

    if __name__ == "__main__":
        with parsl.load(Config(executors=[executor], run_dir="/tmp/scalpel-bench-runinfo", strategy="none")):
            for _ in range(50):
                noop().result()  # warm up: workers started, imports done
            start = time.perf_counter()
            futures = [noop() for _ in range(tasks)]
            for f in futures:
                f.result()
            throughput = tasks / (time.perf_counter() - start)
            trips = []
            for _ in range(pings):
                t = time.perf_counter()
                noop().result()
                trips.append(time.perf_counter() - t)
        print(json.dumps({"throughput": throughput, "round_trip_median": sorted(trips)[len(trips) // 2]}))
    """
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=3000, help="no-op tasks per throughput sample")
    parser.add_argument("--pings", type=int, default=200, help="sequential lone tasks per latency sample")
    parser.add_argument("--batch-window", type=float, default=0.005)
    parser.add_argument("--json", help="write all samples to this file")
    args = parser.parse_args()
    samples: dict[str, list[dict]] = {"htex": [], "scalpel": []}
    # The executor's profiles go to a store of this run's own, kept across rounds as a user's would
    # be, never to the user's store (SCALPEL_PROFILE_STORE: the child builds the executor).
    with tempfile.TemporaryDirectory(prefix="scalpel-throughput-bench-") as folder:
        env = dict(os.environ, SCALPEL_PROFILE_STORE=os.path.join(folder, "profiles.sqlite"))
        for round_ in range(args.rounds):
            for which in samples:
                run = subprocess.run(
                    [sys.executable, "-c", CHILD, which, str(args.tasks), str(args.pings), str(args.batch_window)],
                    capture_output=True, text=True, timeout=600, env=env,
                )
                if run.returncode != 0:
                    print(run.stderr[-3000:], file=sys.stderr)
                    return 1
                sample = json.loads(run.stdout.strip().splitlines()[-1])
                samples[which].append(sample)
                print(f"round {round_ + 1}/{args.rounds} {which:8s} {sample['throughput']:8.0f} tasks/s  "
                      f"round trip {sample['round_trip_median'] * 1e3:6.2f} ms", flush=True)
    med = {w: {k: statistics.median(s[k] for s in v) for k in ("throughput", "round_trip_median")} for w, v in samples.items()}
    print()
    print(f"{'executor':10s} {'tasks/s (median)':>18s} {'round trip ms (median)':>24s}")
    for which, m in med.items():
        print(f"{which:10s} {m['throughput']:18.0f} {m['round_trip_median'] * 1e3:24.2f}")
    print(f"\nthroughput ratio scalpel/htex: {med['scalpel']['throughput'] / med['htex']['throughput']:.2f}x "
          f"(batch_window {args.batch_window * 1e3:.1f} ms)")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"args": vars(args), "samples": samples, "medians": med}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
