"""No-op task throughput and lone-task round trip: ScalpelExecutor against Parsl's HTEX.

Each executor runs in its own child process (one DataFlowKernel per process), and the executors
alternate A B A B ... for ``--rounds`` rounds so that the machine's drift hits both alike
(``scalpel_executor.experiments.interleaved``). Prints per-executor medians and the ratio of
medians; ``--json`` writes every sample.

    python benchmarks/throughput.py --rounds 5 --tasks 3000 --pings 200
"""

from __future__ import annotations

import argparse
import sys

from scalpel_executor.experiments.interleaved import Contender, medians, run_rounds, write_samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=3000, help="no-op tasks per throughput sample")
    parser.add_argument("--pings", type=int, default=200, help="sequential lone tasks per latency sample")
    parser.add_argument("--batch-window", type=float, default=0.005)
    parser.add_argument("--json", help="write all samples to this file")
    args = parser.parse_args()
    contenders = {
        "htex": Contender("htex", {"max_workers_per_node": 2, "cpu_affinity": "block"},
                          provider={"init_blocks": 1, "max_blocks": 1}),
        "scalpel": Contender("scalpel", {"batch_window": args.batch_window}),
    }

    def report(round_: int, which: str, sample: dict) -> None:
        print(f"round {round_ + 1}/{args.rounds} {which:8s} {sample['throughput']:8.0f} tasks/s  "
              f"round trip {sample['round_trip_median'] * 1e3:6.2f} ms", flush=True)

    samples = run_rounds(contenders, args.rounds, args.tasks, args.pings, prefix="scalpel-throughput-bench-",
                         on_sample=report)
    med = medians(samples, ("throughput", "round_trip_median"))
    print()
    print(f"{'executor':10s} {'tasks/s (median)':>18s} {'round trip ms (median)':>24s}")
    for which, m in med.items():
        print(f"{which:10s} {m['throughput']:18.0f} {m['round_trip_median'] * 1e3:24.2f}")
    print(f"\nthroughput ratio scalpel/htex: {med['scalpel']['throughput'] / med['htex']['throughput']:.2f}x "
          f"(batch_window {args.batch_window * 1e3:.1f} ms)")
    write_samples(args.json, args, samples, med)
    return 0


if __name__ == "__main__":
    sys.exit(main())
