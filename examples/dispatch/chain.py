"""Per-sample chains of three small steps (parse, normalise, score) over many samples, then one reduce.

    python examples/dispatch/chain.py --executor scalpel --samples 1000
    python examples/dispatch/chain.py --executor scalpel-pin     # ScalpelExecutor(pin_driver="auto")
    python examples/dispatch/chain.py --executor scalpel-unpinned   # ScalpelExecutor(pin_driver=None)
    python examples/dispatch/chain.py --executor htex

The workflow, as a scientist writes it::

    scores  = [score(normalise(parse(s))) for s in range(samples)]   three dependent tasks a sample
    summary = reduce(*scores)                                         waits for every score

Each step takes well under a millisecond, so the executor's dispatch and Parsl's dependency
handling set the pace. The last line printed is JSON: the summary (the same on every executor) and
the seconds since the script started, imports, ``parsl.load()`` and ``dfk.cleanup()`` included.
``examples/dispatch/compare.sh`` runs it under each executor in turn.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

STARTED = time.perf_counter()

import parsl  # noqa: E402 - timed from the start, as a user waits
from parsl.app.app import python_app  # noqa: E402
from parsl.config import Config  # noqa: E402

from sweep import EXECUTORS, executor  # noqa: E402 - the same executors as the sweep


@python_app
def parse(sample: int) -> dict:
    import hashlib

    digest = hashlib.sha256(f"sample-{sample}".encode()).digest()
    return {"sample": sample, "values": [byte / 255 for byte in digest[:16]]}


@python_app
def normalise(record: dict) -> dict:
    total = sum(record["values"]) or 1.0
    return {**record, "values": [value / total for value in record["values"]]}


@python_app
def score(record: dict) -> dict:
    import math

    entropy = -sum(value * math.log(value) for value in record["values"] if value > 0)
    return {"sample": record["sample"], "entropy": entropy}


@python_app
def reduce(*scores: dict) -> dict:
    best = max(scores, key=lambda s: s["entropy"])
    return {"n": len(scores), "best": best["sample"], "mean": round(sum(s["entropy"] for s in scores) / len(scores), 9)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executor", choices=EXECUTORS, default="scalpel")
    parser.add_argument("--samples", type=int, default=1000, help="samples, three tasks each (default %(default)s)")
    parser.add_argument("--run-dir", default=None, help="Parsl's run directory (default: a temporary one)")
    args = parser.parse_args()
    if args.samples < 1:
        parser.error(f"--samples must be at least 1, got {args.samples}")
    run_dir = args.run_dir or tempfile.mkdtemp(prefix="chain-")
    with parsl.load(Config(executors=[executor(args.executor)], run_dir=run_dir)):
        summary = reduce(*[score(normalise(parse(sample))) for sample in range(args.samples)]).result()
    print(json.dumps({"executor": args.executor, "summary": summary,
                      "seconds": round(time.perf_counter() - STARTED, 3)}))


if __name__ == "__main__":
    main()
