"""What telling a task its chain late costs a submit (``PathLearning.lengthened``).

Under a plain Config, on the executor's defaults (no profile store): 2,000 independent no-op tasks
(each told no chain and kept until it ends; none ever gets a child), then 500 pairs (a parent and a
child invoked right after it: each submit reads that edge). Prints, per part, the calls and their
median, 90th percentile and mean in microseconds. Usage::

    python benchmarks/lengthen_cost.py [--tasks 2000] [--pairs 500]

Figure in docs/critical-path.md ("Cost").
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

import parsl
from parsl import python_app
from parsl.config import Config

from scalpel_executor import ScalpelExecutor
import scalpel_executor.runtime.driver.path_learning as path_learning


@python_app
def noop(x):
    return x


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000, help="independent no-op tasks (default 2000)")
    parser.add_argument("--pairs", type=int, default=500, help="parent and child pairs (default 500)")
    args = parser.parse_args(argv)
    if args.tasks < 1 or args.pairs < 1:
        parser.error(f"--tasks and --pairs must be at least 1, got {args.tasks} and {args.pairs}")
    spent, real = [], path_learning.PathLearning.lengthened

    def timed(self):
        began = time.perf_counter()
        try:
            return real(self)
        finally:
            spent.append(time.perf_counter() - began)

    path_learning.PathLearning.lengthened = timed
    parts = {}
    with tempfile.TemporaryDirectory() as folder:
        dfk = parsl.load(Config(executors=[ScalpelExecutor(profiles=False)], run_dir=os.path.join(folder, "run")))
        try:
            [future.result() for future in [noop(i) for i in range(args.tasks)]]
            parts["independent"], spent[:] = list(spent), []
            [future.result() for future in [noop(noop(i)) for i in range(args.pairs)]]
            parts["pairs"] = list(spent)
        finally:
            dfk.cleanup()
            parsl.clear()
            path_learning.PathLearning.lengthened = real
    for name, seconds in parts.items():
        seconds.sort()
        print(f"{name}: {len(seconds)} submits, median {statistics.median(seconds) * 1e6:.1f} us, "
              f"90th percentile {seconds[int(0.9 * (len(seconds) - 1))] * 1e6:.1f} us, "
              f"mean {statistics.mean(seconds) * 1e6:.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
