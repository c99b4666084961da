"""A parameter sweep of many small Monte Carlo estimates: each point checked, then a reduce and a shell step.

    python examples/dispatch/sweep.py --executor scalpel --points 3000
    python examples/dispatch/sweep.py --executor scalpel-pin     # ScalpelExecutor(pin_driver="auto")
    python examples/dispatch/sweep.py --executor scalpel-unpinned   # ScalpelExecutor(pin_driver=None)
    python examples/dispatch/sweep.py --executor htex

The workflow, as a scientist writes it::

    checked = [check(estimate(seed, rate)) for seed in range(points)]   two tasks of about a millisecond a point
    summary = reduce([c.result() for c in checked])                     the reduce, in a task
    stamp(summary["n"], outputs=[File("done.txt")])                     a bash step

Tasks this short keep the executor's dispatch, not the workers, busy: the run is as fast as the
driver hands tasks over. The last line printed is JSON: the summary (the same on every executor)
and the seconds since the script started, imports, ``parsl.load()`` and ``dfk.cleanup()`` included.
``examples/dispatch/compare.sh`` runs it under each executor in turn.
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


@python_app
def estimate(seed: int, rate: float, n: int = 2000) -> dict:
    import random

    rng = random.Random(seed)
    hits = sum(1 for _ in range(n) if rng.random() < rate)
    return {"seed": seed, "rate": rate, "estimate": hits / n}


@python_app
def check(point: dict) -> dict:
    return {**point, "error": abs(point["estimate"] - point["rate"])}


@python_app
def reduce(rows: list) -> dict:
    worst = max(rows, key=lambda row: row["error"])
    return {"n": len(rows), "mean_error": round(sum(row["error"] for row in rows) / len(rows), 9),
            "worst_seed": worst["seed"]}


@bash_app
def stamp(n: int, outputs=()):
    return f"echo {n} points > {outputs[0].filepath}"


#: ``--executor``'s ScalpelExecutors: the defaults (the driver's threads on one CPU while they are
#: busy), pinned for the whole run, never pinned.
PIN_DRIVER = {"scalpel": {}, "scalpel-pin": {"pin_driver": "auto"}, "scalpel-unpinned": {"pin_driver": None}}
EXECUTORS = (*PIN_DRIVER, "htex")


def executor(kind: str):
    """The executor a user would configure: HTEX on one worker per core, or ScalpelExecutor."""
    if kind == "htex":
        from parsl.executors import HighThroughputExecutor
        from parsl.providers import LocalProvider

        return HighThroughputExecutor(label="htex", max_workers_per_node=os.cpu_count(), cpu_affinity="block",
                                      provider=LocalProvider(init_blocks=1, max_blocks=1))
    from scalpel_executor import ScalpelExecutor

    return ScalpelExecutor(label="scalpel", **PIN_DRIVER[kind])



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executor", choices=EXECUTORS, default="scalpel")
    parser.add_argument("--points", type=int, default=3000, help="sweep points, two tasks each (default %(default)s)")
    parser.add_argument("--run-dir", default=None, help="Parsl's run directory (default: a temporary one)")
    args = parser.parse_args()
    if args.points < 1:
        parser.error(f"--points must be at least 1, got {args.points}")
    run_dir = args.run_dir or tempfile.mkdtemp(prefix="sweep-")
    with parsl.load(Config(executors=[executor(args.executor)], run_dir=run_dir)):
        checked = [check(estimate(seed, rate=(seed % 10) / 10)) for seed in range(args.points)]
        summary = reduce([future.result() for future in checked]).result()
        stamp(summary["n"], outputs=[File(os.path.join(run_dir, "done.txt"))]).result()
    print(json.dumps({"executor": args.executor, "summary": summary,
                      "seconds": round(time.perf_counter() - STARTED, 3)}))


if __name__ == "__main__":
    main()
