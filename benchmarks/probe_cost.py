"""What the measurement probe costs a task: the same ~1 s CPU+memory task with the probe on and off.

For every pair, two fresh workers (``python -m scalpel_executor.runtime.worker``), one started with
``--probe on`` and one with ``--probe off``, are pinned to the same CPU and run the task once
each, the order alternating from pair to pair, so the machine's drift hits both alike (and no
worker's memory placement favours one side for the whole run). ``--control`` starts both with the
probe off: the ratio it prints is the noise floor. The task
is fixed work (numpy sweeps over a ``--size`` array plus a little Python per sweep), calibrated
once to last about ``--seconds``. Times are the workers' own task wall times (no transport).

Prints the median wall time of each, the median of the per-pair ratios on/off (the probe's
cost), the sampler's CPU per task and the windows it took; ``--json`` writes every sample.

    python benchmarks/probe_cost.py --pairs 15 --seconds 1.0
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

from scalpel_executor.core.units import parse_size
from scalpel_executor.runtime.processes import WorkerClient


def work(size: int, sweeps: int) -> float:
    """Sweep a ``size``-byte array ``sweeps`` times (add, then a little Python); returns its seconds."""
    import time

    import numpy as np

    start = time.perf_counter()
    data = np.ones(size // 8)
    total = 0.0
    for index in range(sweeps):
        data += 1.0
        total += float(data[index % data.size])
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=15, help="on/off pairs to run (default 15)")
    parser.add_argument("--seconds", type=float, default=1.0, help="target task length (default 1.0)")
    parser.add_argument("--size", default="16MiB", help="the task's array (default 16MiB)")
    parser.add_argument("--cpu", type=int, default=min(os.sched_getaffinity(0)), help="CPU both workers run on")
    parser.add_argument("--json", metavar="FILE", help="write every sample to FILE")
    parser.add_argument("--control", action="store_true",
                        help="A/A control: run the 'on' worker with the probe off too, to see the noise floor")
    args = parser.parse_args(argv)
    if args.pairs < 1 or args.seconds <= 0:
        parser.error(f"--pairs must be at least 1 and --seconds positive, got {args.pairs} and {args.seconds}")
    size = parse_size(args.size, what="--size")

    with WorkerClient([args.cpu], probe=False) as plain:
        plain.run(work, size, 10)
        per_sweep = min(plain.run(work, size, 100)[1] for _ in range(3)) / 100
    sweeps = max(1, round(args.seconds / per_sweep))
    on, off, ratios, probe_cpu, windows, footprints = [], [], [], [], [], []
    for pair in range(args.pairs):
        # Fresh workers for every pair: a worker's heap keeps its physical pages from task to task,
        # and their placement alone made one process 20 % slower than another for the whole run.
        with WorkerClient([args.cpu], probe=not args.control) as probed, \
                WorkerClient([args.cpu], probe=False) as plain:
            for worker in (probed, plain):  # imports, the array's first touch, the sampler's first windows
                worker.run(work, size, max(10, sweeps // 3))
            walls = {}
            for worker in (probed, plain) if pair % 2 == 0 else (plain, probed):
                ok, _, stats = worker.run(work, size, sweeps)
                if not ok:
                    raise RuntimeError(f"the task failed in the {'probed' if worker is probed else 'plain'} worker")
                walls[worker is probed] = stats["wall"]
                if worker is probed:
                    probe_cpu.append(stats.get("probe_cpu") or 0.0)
                    windows.append(stats.get("windows") or 0)
                    footprints.append(stats.get("footprint"))
        on.append(walls[True])
        off.append(walls[False])
        ratios.append(walls[True] / walls[False])
        print(f"pair {pair + 1:2d}: on {walls[True]:.3f} s  off {walls[False]:.3f} s  "
              f"ratio {ratios[-1]:.3f}  sampler {probe_cpu[-1] * 1e3:.1f} ms CPU in {windows[-1]} windows",
              file=sys.stderr)

    median_ratio = statistics.median(ratios)
    measured = [f for f in footprints if f is not None]
    print(f"task: {sweeps} sweeps of {args.size} on CPU {args.cpu}, {args.pairs} interleaved pairs")
    print(f"median wall, probe off: {statistics.median(off):.3f} s")
    print(f"median wall, probe on:  {statistics.median(on):.3f} s")
    print(f"median ratio on/off:    {median_ratio:.4f}  (probe cost {100 * (median_ratio - 1):+.2f} %)")
    print(f"sampler CPU per task:   {statistics.median(probe_cpu) * 1e3:.1f} ms median "
          f"({100 * statistics.median(probe_cpu) / statistics.median(off):.2f} % of the task), "
          f"{statistics.median(windows):.0f} windows")
    if measured:
        print(f"footprint measured:     {statistics.median(measured) / 2**20:.2f} MiB median (array {size / 2**20:.2f} MiB)")
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"size": size, "sweeps": sweeps, "cpu": args.cpu, "on": on, "off": off, "ratios": ratios,
                       "probe_cpu": probe_cpu, "windows": windows, "footprints": footprints}, file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
