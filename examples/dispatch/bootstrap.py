"""A bootstrap: one dataset, many resampled means, a confidence interval per batch, and a shell step.

    python examples/dispatch/bootstrap.py --executor scalpel --resamples 3000
    python examples/dispatch/bootstrap.py --executor htex

The workflow, as a statistician writes it::

    data      = simulate(seed, n)                                   one task: the dataset
    means     = [resample(data, seed, i) for i in range(resamples)]  a task each, the dataset passed to each
    intervals = [interval(*means[k:k + 100]) for k in ...]           a 95% interval per batch of 100
    report(intervals, outputs=[File("interval.txt")])                a bash step

Each resample draws ``--n`` values (2,000 by default: about a millisecond, with the dataset's 2,000
floats sent along with it). The last line printed is JSON: the summary (the same on every executor)
and the seconds since the script started, imports, ``parsl.load()`` and ``dfk.cleanup()`` included.
Run it under each executor in turn with ``examples/dispatch/compare.sh bootstrap.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

STARTED = time.perf_counter()

import parsl  # noqa: E402 - timed from the start, as a user waits
from parsl.app.app import bash_app, python_app  # noqa: E402
from parsl.config import Config  # noqa: E402
from parsl.data_provider.files import File  # noqa: E402

from sweep import EXECUTORS, executor  # noqa: E402 - the same executors as the sweep


@python_app
def simulate(seed: int, n: int) -> list:
    import random

    rng = random.Random(seed)
    return [round(rng.lognormvariate(0.0, 0.75), 6) for _ in range(n)]


@python_app
def resample(data: list, seed: int, index: int) -> float:
    import random

    rng = random.Random(seed * 7919 + index)
    return sum(rng.choices(data, k=len(data))) / len(data)


@python_app
def interval(*means: float) -> dict:
    ordered = sorted(means)
    low, high = ordered[int(0.025 * (len(ordered) - 1))], ordered[int(0.975 * (len(ordered) - 1))]
    return {"n": len(ordered), "low": round(low, 9), "high": round(high, 9)}


@bash_app
def report(low: float, high: float, outputs=()):
    return f"echo '95% interval {low} {high}' > {outputs[0].filepath}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executor", choices=EXECUTORS, default="scalpel")
    parser.add_argument("--resamples", type=int, default=3000, help="resampled means (default %(default)s)")
    parser.add_argument("--n", type=int, default=2000, help="the dataset's size (default %(default)s)")
    parser.add_argument("--seed", type=int, default=11, help="the seed (default %(default)s)")
    parser.add_argument("--run-dir", default=None, help="Parsl's run directory (default: a temporary one)")
    args = parser.parse_args()
    for name in ("resamples", "n"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    run_dir = args.run_dir or tempfile.mkdtemp(prefix="bootstrap-")
    with parsl.load(Config(executors=[executor(args.executor)], run_dir=run_dir)):
        data = simulate(args.seed, args.n)
        means = [resample(data, args.seed, index) for index in range(args.resamples)]
        batches = [interval(*means[k:k + 100]) for k in range(0, args.resamples, 100)]
        intervals = [batch.result() for batch in batches]
        low = round(sum(i["low"] for i in intervals) / len(intervals), 9)
        high = round(sum(i["high"] for i in intervals) / len(intervals), 9)
        report(low, high, outputs=[File(os.path.join(run_dir, "interval.txt"))]).result()
    print(json.dumps({"executor": args.executor, "summary": {"batches": len(intervals), "low": low, "high": high},
                      "seconds": round(time.perf_counter() - STARTED, 3)}))


if __name__ == "__main__":
    main()
