"""Cost of the pure core: grouping (Algorithm 1) and simulation at scale.

    python benchmarks/core.py --tasks 100000 --sim-tasks 1000000 --repeats 5

Prints the median of ``--repeats`` timings of ``group_tasks`` for random footprints on a few
machine shapes, and one simulation of ``--sim-tasks`` tasks on 64 LLC domains of 8 cores.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from scalpel_executor import SimTask, group_tasks, simulate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--sim-tasks", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    footprints = [rng.uniform(0, 32 * 2**20) for _ in range(args.tasks)]
    for processors, cores in ((2, 4), (1, 2), (8, 8), (64, 8), (2, 1)):
        timings = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            groups = group_tasks(footprints, processors, cores)
            timings.append(time.perf_counter() - start)
        print(f"group_tasks: {args.tasks} tasks on {processors}x{cores}: median {statistics.median(timings) * 1e3:.0f} ms "
              f"over {args.repeats} runs ({len(groups)} groups)", flush=True)
    if args.sim_tasks:
        tasks = [SimTask(f"t{i}", rng.uniform(1, 10), rng.uniform(0, 8 * 2**20)) for i in range(args.sim_tasks)]
        domains = [list(range(d * 8, d * 8 + 8)) for d in range(64)]
        for policy in ("scalpel", "fifo"):
            start = time.perf_counter()
            result = simulate(tasks, domains, 32 * 2**20, policy)
            print(f"simulate: {args.sim_tasks} tasks on 64x8, policy {policy}: {time.perf_counter() - start:.1f} s "
                  f"(makespan {result.makespan:.0f} s, lower bound {result.lower_bound:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
