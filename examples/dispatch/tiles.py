"""Histograms of many image tiles, merged by row, then one summary and a shell step.

    python examples/dispatch/tiles.py --executor scalpel --tiles 2000 --pixels 1024
    python examples/dispatch/tiles.py --executor htex

The workflow, as a scientist writes it::

    rows    = [merge(*[histogram(row, col, seed) for col in range(per_row)]) for row in range(rows)]
    summary = summarise(*rows)                  waits for every row
    archive(summary["tiles"], outputs=[File("summary.txt")])     a bash step

Each tile is ``--pixels`` noise values drawn from its own seed and binned: 1-2 ms at 1,024, where
the driver hands tasks over as fast as it can; ``--pixels 16384`` makes each take 15-30 ms, long
enough that the workers, not the driver, are busy. The last line printed is JSON: the summary (the same on every executor) and the seconds since
the script started, imports, ``parsl.load()`` and ``dfk.cleanup()`` included. Run it under each
executor in turn with ``examples/dispatch/compare.sh tiles.py``.
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

BINS = 16


@python_app
def histogram(row: int, col: int, seed: int, pixels: int) -> dict:
    import random

    rng = random.Random(seed * 1_000_003 + row * 1009 + col)
    counts = [0] * 16
    for _ in range(pixels):
        counts[min(15, int(rng.betavariate(2.0, 5.0) * 16))] += 1
    return {"row": row, "col": col, "counts": counts}


@python_app
def merge(*tiles: dict) -> dict:
    counts = [sum(tile["counts"][b] for tile in tiles) for b in range(16)]
    return {"row": tiles[0]["row"], "tiles": len(tiles), "counts": counts}


@python_app
def summarise(*rows: dict) -> dict:
    counts = [sum(row["counts"][b] for row in rows) for b in range(16)]
    total = sum(counts)
    return {"tiles": sum(row["tiles"] for row in rows), "pixels": total,
            "mode_bin": max(range(16), key=counts.__getitem__),
            "mean_bin": round(sum(b * c for b, c in enumerate(counts)) / total, 9)}


@bash_app
def archive(tiles: int, outputs=()):
    return f"echo {tiles} tiles > {outputs[0].filepath}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executor", choices=EXECUTORS, default="scalpel")
    parser.add_argument("--tiles", type=int, default=2000, help="tiles, in rows of 50 (default %(default)s)")
    parser.add_argument("--pixels", type=int, default=1024, help="noise values per tile (default %(default)s)")
    parser.add_argument("--seed", type=int, default=7, help="the noise's seed (default %(default)s)")
    parser.add_argument("--run-dir", default=None, help="Parsl's run directory (default: a temporary one)")
    args = parser.parse_args()
    for name in ("tiles", "pixels"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    per_row = min(50, args.tiles)
    rows = -(-args.tiles // per_row)
    run_dir = args.run_dir or tempfile.mkdtemp(prefix="tiles-")
    with parsl.load(Config(executors=[executor(args.executor)], run_dir=run_dir)):
        merged = [merge(*[histogram(row, col, args.seed, args.pixels)
                          for col in range(min(per_row, args.tiles - row * per_row))]) for row in range(rows)]
        summary = summarise(*merged).result()
        archive(summary["tiles"], outputs=[File(os.path.join(run_dir, "summary.txt"))]).result()
    print(json.dumps({"executor": args.executor, "summary": summary,
                      "seconds": round(time.perf_counter() - STARTED, 3)}))


if __name__ == "__main__":
    main()
