"""Regional least-squares fits reduced to one model: each region's observations are fitted by
solving its normal equations (a large Gram product and a Cholesky solve, BLAS and LAPACK threads);
the regions' coefficients are reduced to their mean and spread. The fits and the reduce are marked
malleable: the executor chooses how many cores each one starts on.

    python examples/malleable/fits.py                            # widths chosen by the executor
    python examples/malleable/fits.py --width 1                  # every task on one core
    python examples/malleable/fits.py --regions 7 --rows 12000   # another shape

The workflow, as a scientist writes it::

    fits  = [fit(region, rows, basis) for region in regions]   normal equations, solved (BLAS threads)
    model = combine(*fits)                                     the reduce: mean coefficients, spread
    check = bash: the model's summary line into a file
    result = report(model, inputs=[check's file])

A few long tasks on a few cores is where widths matter: five fits on two cores run two rounds of
two and a third round of one, on one core while its neighbour's core idles, unless it starts on
both. The options, the runner and the JSON of the last line are those of ``covariance.py`` beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from covariance import at_least_one, run, specification, width_arguments  # the runner beside it
from parsl import bash_app, python_app
from parsl.data_provider.files import File

from scalpel_executor import app_hints

CORES = os.cpu_count() or 1


@python_app
@app_hints(max_cores=CORES, size_free=("region",))
def fit(region, rows, basis, parsl_resource_specification=None):
    """Least squares for one region: ``rows`` noisy observations of ``basis`` random features."""
    import numpy as np
    rng = np.random.default_rng(region)
    design = rng.standard_normal((rows, basis))
    truth = np.linspace(-1.0, 1.0, basis)
    observed = design @ truth + 0.1 * rng.standard_normal(rows)
    gram = design.T @ design  # the normal equations: most of the work, in BLAS
    factor = np.linalg.cholesky(gram)
    coefficients = np.linalg.solve(factor.T, np.linalg.solve(factor, design.T @ observed))
    residual = observed - design @ coefficients
    return {"region": region, "coefficients": coefficients, "rss": float(residual @ residual)}


@python_app
@app_hints(max_cores=CORES)
def combine(*fits, parsl_resource_specification=None):
    """The reduce: the regions' mean coefficients and their spread about it."""
    import numpy as np
    stack = np.stack([f["coefficients"] for f in sorted(fits, key=lambda f: f["region"])])
    mean = stack.mean(axis=0)
    spread = float(((stack - mean) ** 2).sum())
    return {"regions": len(fits), "mean_norm": float(np.linalg.norm(mean)), "spread": spread,
            "rss": float(sum(f["rss"] for f in fits))}


@bash_app
def check(model, outputs=(), parsl_resource_specification=None):
    return f"echo 'regions={model['regions']} spread={model['spread']:.6e}' > {outputs[0]}"


@python_app
def report(model, inputs=(), parsl_resource_specification=None):
    with open(inputs[0]) as handle:
        return {"line": handle.read().strip(), "mean_norm": model["mean_norm"], "rss": model["rss"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--regions", type=int, default=5, help="regions to fit (default 5)")
    parser.add_argument("--rows", type=int, default=9000, help="observations per region (default 9000)")
    parser.add_argument("--basis", type=int, default=3000, help="features per fit (default 3000)")
    parser.add_argument("--seed", type=int, default=0, help="the first region's seed (default 0)")
    width_arguments(parser)
    args = parser.parse_args(argv)
    at_least_one(parser, args, "regions", "rows", "basis")
    if args.rows < args.basis:
        parser.error(f"--rows ({args.rows}) must be at least --basis ({args.basis}) for a least-squares fit")
    spec = specification(parser, args)

    def workflow(run_dir: str) -> dict:
        regions = range(args.seed, args.seed + args.regions)
        fits = [fit(region, args.rows, args.basis, parsl_resource_specification=spec) for region in regions]
        model = combine(*fits, parsl_resource_specification=spec)
        line = check(model, outputs=[File(os.path.join(run_dir, "model.txt"))])
        result = report(model, inputs=[line.outputs[0]]).result()
        print(result["line"], f"| mean norm {result['mean_norm']:.6g}", file=sys.stderr)
        # rounded: the sums of a BLAS product depend on its thread count in the last bits
        return {"checksum": round(result["mean_norm"], 6), "line": result["line"]}

    print(json.dumps(run(args, "fits", workflow, ("fit", "combine"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
