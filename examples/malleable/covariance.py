"""Smooth noisy tiles, project them on a random basis, and reduce them to one covariance spectrum,
with the numpy steps marked malleable: the executor chooses how many cores each one starts on.

    python examples/malleable/covariance.py                      # widths chosen by the executor
    python examples/malleable/covariance.py --width 1            # every task on one core
    python examples/malleable/covariance.py --width 2 --tiles 6  # every task on two cores
    python examples/malleable/covariance.py --executor htex      # the same on Parsl's HTEX

The workflow, as a scientist writes it::

    fields   = [smooth(seed, n, sweeps) for seed in seeds]        numpy stencil sweeps (one thread)
    projects = [project(field, n, seed) for field in fields]      matrix products (BLAS threads)
    spectrum = covariance(*projects)                              the reduce: a Gram matrix, eigenvalues
    line     = bash: the spectrum's summary line into a file
    top      = summarize(spectrum, inputs=[line's file])

``smooth``, ``project`` and ``covariance`` are marked ``@app_hints(max_cores=...)`` (every core of
the node): the executor starts each on one core up to that many, as it judges the work waiting and
what it learned of each app's speed-up (docs/design.md, "Widths of malleable tasks"). ``--width 1`` or
``--width 2`` fixes every task's width instead (the resource specification's ``cores`` and
``max_cores``), the way another executor would run them. Results do not depend on the width.

The last line printed is JSON: the spectrum's checksum, the makespan from the tasks' own
timestamps, the core-seconds the tasks held (each task's own run time times its width), the cores, and
the widths the executor chose and why.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter

import parsl
from parsl import bash_app, python_app
from parsl.config import Config
from parsl.data_provider.files import File
from parsl.executors import HighThroughputExecutor
from parsl.providers import LocalProvider

from scalpel_executor import ScalpelExecutor, app_hints

CORES = os.cpu_count() or 1


@python_app
@app_hints(max_cores=CORES, size_free=("seed",))
def smooth(seed, n, sweeps, parsl_resource_specification=None):
    """A noisy n x n field relaxed by Jacobi sweeps of the five-point stencil."""
    import numpy as np
    field = np.random.default_rng(seed).standard_normal((n, n))
    for _ in range(sweeps):
        field[1:-1, 1:-1] = 0.25 * (field[:-2, 1:-1] + field[2:, 1:-1] + field[1:-1, :-2] + field[1:-1, 2:])
    return {"seed": seed, "field": field, "energy": float((field ** 2).sum())}


@python_app
@app_hints(max_cores=CORES, size_free=("seed",))
def project(tile, n, seed, rounds=3, parsl_resource_specification=None):
    """The field projected on a random orthogonal-ish basis, several times (BLAS products)."""
    import numpy as np
    basis = np.random.default_rng(1000 + seed).standard_normal((n, n)) / np.sqrt(n)
    projected = tile["field"]
    for _ in range(rounds):
        projected = projected @ basis
        projected /= np.linalg.norm(projected) or 1.0
    return {"seed": tile["seed"], "rows": projected[: n // 4].copy()}


@python_app
@app_hints(max_cores=CORES)
def covariance(*projections, parsl_resource_specification=None):
    """The reduce: every tile's rows stacked, their Gram matrix, its leading eigenvalues."""
    import numpy as np
    stacked = np.vstack([p["rows"] for p in sorted(projections, key=lambda p: p["seed"])])
    gram = stacked.T @ stacked
    gram = gram @ gram  # squared: sharpens the spectrum, and is the reduce's heavy product
    values = np.linalg.eigvalsh(gram)[::-1]
    return {"tiles": len(projections), "top": [float(v) for v in values[:5]], "trace": float(values.sum())}


@bash_app
def record(summary, outputs=(), parsl_resource_specification=None):
    return f"echo 'tiles={summary['tiles']} trace={summary['trace']:.6e}' > {outputs[0]}"


@python_app
def summarize(spectrum, inputs=(), parsl_resource_specification=None):
    with open(inputs[0]) as handle:
        line = handle.read().strip()
    return {"line": line, "top": spectrum["top"]}


def width_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every run takes: the executor, the width, the profile store, Parsl's run directory."""
    parser.add_argument("--executor", choices=("scalpel", "htex"), default="scalpel",
                        help="scalpel (default), or htex: Parsl's HighThroughputExecutor, one worker per core "
                             "pinned to it (cpu_affinity='block'), as many users configure it")
    parser.add_argument("--width", choices=("auto", "1", "2"), default="auto",
                        help="auto: the executor chooses (default); 1 or 2: every task on that many cores")
    parser.add_argument("--store", help="the profile store (default: the executor's own)")
    parser.add_argument("--run-dir", help="Parsl's run directory (default: a temporary one)")


def at_least_one(parser: argparse.ArgumentParser, args: argparse.Namespace, *names: str) -> None:
    """Refuse a count or size below 1, naming the option and the value given."""
    for name in names:
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")


def specification(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict:
    """The resource specification of ``--width``: {} (the apps' own hints: malleable) or a fixed width."""
    if args.executor == "htex" and args.width != "auto":
        parser.error(f"--width {args.width} is for --executor scalpel: HTEX takes no per-task cores")
    if args.width == "auto":
        return {}
    width = int(args.width)
    if width > CORES:
        parser.error(f"--width {width} is more than this machine's {CORES} cores")
    return {"cores": width, "max_cores": width}


def run(args: argparse.Namespace, name: str, workflow, apps: tuple[str, ...]) -> dict:
    """Load the executor, run ``workflow(run_dir)`` (its result's dict), clean up, and add the
    makespan from the tasks' own timestamps, the core-seconds they held, and the widths ``apps``'
    tasks ran at, and why (a ScalpelExecutor's run report; HTEX keeps none: None, None and {})."""
    run_dir = args.run_dir or tempfile.mkdtemp(prefix=f"{name}-")
    if args.executor == "htex":
        executor = HighThroughputExecutor(label="htex", max_workers_per_node=CORES, cpu_affinity="block",
                                          provider=LocalProvider(init_blocks=1, max_blocks=1))
    else:
        executor = ScalpelExecutor(label="scalpel", **({"profiles": args.store} if args.store else {}))
    dfk = parsl.load(Config(executors=[executor], run_dir=os.path.join(run_dir, "runinfo"), strategy="none"))
    try:
        result = workflow(run_dir)
        tasks = executor.run_report()["tasks"] if args.executor == "scalpel" else None
    finally:
        dfk.cleanup()
        parsl.clear()
    if tasks is None:
        return {**result, "makespan": None, "busy_core_seconds": None, "cores": CORES, "widths": {},
                "finished": time.time()}
    starts = [t["started"] for t in tasks if t.get("started") is not None]
    ends = [t["finished"] for t in tasks if t.get("finished") is not None]
    busy = sum((t.get("measured_runtime") or t["finished"] - t["started"]) * (t.get("width") or t["cores"])
               for t in tasks if t.get("started") is not None and t.get("finished") is not None)  # run, not handed
    widths = Counter(f"{t.get('width') or t.get('cores')}: {t.get('width_reason') or 'fixed'}" for t in tasks
                     if t["profile_key"].split("(")[0].rsplit(".", 1)[-1] in apps)
    return {**result, "makespan": max(ends) - min(starts) if starts and ends else None,
            "busy_core_seconds": round(busy, 6), "cores": CORES,
            "widths": dict(sorted(widths.items())), "finished": time.time()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiles", type=int, default=8, help="tiles to smooth and project (default 8)")
    parser.add_argument("--size", type=int, default=900, help="tile side n (default 900: n x n doubles)")
    parser.add_argument("--sweeps", type=int, default=60, help="stencil sweeps per tile (default 60)")
    parser.add_argument("--seed", type=int, default=0, help="the first tile's seed (default 0)")
    width_arguments(parser)
    args = parser.parse_args(argv)
    at_least_one(parser, args, "tiles", "size", "sweeps")
    spec = specification(parser, args)

    def workflow(run_dir: str) -> dict:
        seeds = range(args.seed, args.seed + args.tiles)
        fields = [smooth(seed, args.size, args.sweeps, parsl_resource_specification=spec) for seed in seeds]
        projects = [project(field, args.size, seed, parsl_resource_specification=spec)
                    for field, seed in zip(fields, seeds)]
        spectrum = covariance(*projects, parsl_resource_specification=spec)
        line = record(spectrum, outputs=[File(os.path.join(run_dir, "spectrum.txt"))])
        top = summarize(spectrum, inputs=[line.outputs[0]]).result()
        print(top["line"], "| top eigenvalues:", ", ".join(f"{v:.4g}" for v in top["top"][:3]), file=sys.stderr)
        return {"checksum": round(sum(top["top"]), 6), "line": top["line"]}

    print(json.dumps(run(args, "covariance", workflow, ("smooth", "project", "covariance"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
