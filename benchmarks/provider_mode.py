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
another (round-trip median), in ``scalpel_executor.experiments.interleaved``. Prints
per-executor medians; ``--json`` writes every sample.
``--options`` passes ScalpelExecutor options (JSON).

    python benchmarks/provider_mode.py --rounds 5 --tasks 3000 --pings 200
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from scalpel_executor.experiments.interleaved import Contender, medians, run_rounds, write_samples

BLOCKS = {"init_blocks": 2, "min_blocks": 2, "max_blocks": 2}  # LocalProvider's, for both executors
CONFIG = {"strategy_period": 0.5}


def contenders(options: dict) -> dict[str, Contender]:
    """The two executors on two blocks each; ``options``: ScalpelExecutor's (``--options``)."""
    return {
        "scalpel-provider": Contender("scalpel", options, provider=BLOCKS, launch_suffix=" --cpus {block_id}",
                                      config=CONFIG, managers=2),
        "htex": Contender("htex", {"max_workers_per_node": 1}, provider=BLOCKS, config=CONFIG),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=3000, help="no-op tasks per throughput sample")
    parser.add_argument("--pings", type=int, default=200, help="sequential lone tasks per latency sample")
    parser.add_argument("--options", default="{}",
                        help='ScalpelExecutor options as JSON, e.g. \'{"prefetch_capacity": 4, "batching": {"window": 0}}\' '
                             '(batching: the fields of a Batching)')
    parser.add_argument("--json", help="write all samples to this file")
    args = parser.parse_args()

    def report(round_: int, which: str, sample: dict) -> None:
        print(f"round {round_ + 1}/{args.rounds} {which:16s} {sample['throughput']:8.0f} tasks/s  "
              f"round trip {sample['round_trip_median'] * 1e3:6.2f} ms", flush=True)

    samples = run_rounds(contenders(json.loads(args.options)), args.rounds, args.tasks, args.pings,
                         prefix="scalpel-provider-bench-", on_sample=report)
    print(f"\n{'executor':16s} {'tasks/s':>20s} {'round trip ms':>14s}   (medians of {args.rounds} rounds, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f})")
    med = medians(samples, ("throughput", "round_trip_median"))
    for which, m in med.items():
        rates = [s["throughput"] for s in samples[which]]
        print(f"{which:16s} {m['throughput']:7.0f} ({min(rates):.0f}-{max(rates):.0f}) {m['round_trip_median'] * 1e3:14.2f}")
    print(f"throughput scalpel-provider/htex: {med['scalpel-provider']['throughput'] / med['htex']['throughput']:.2f}x")
    write_samples(args.json, args, samples, med)
    return 0


if __name__ == "__main__":
    sys.exit(main())
