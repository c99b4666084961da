"""An ensemble of implicit solves: each member filters a forcing field by FFT and solves a dense
linear system for it; the ensemble is reduced to its mean response. The numpy steps are marked
malleable: the executor chooses how many cores each one starts on.

    python examples/malleable/ensemble.py                        # widths chosen by the executor
    python examples/malleable/ensemble.py --width 1              # every task on one core

The workflow, as a scientist writes it::

    forcings  = [forcing(member, n) for member in members]        FFT low-pass filter (one thread)
    responses = [respond(forcing, n, member) for ...]             Cholesky solves (LAPACK threads)
    mean      = ensemble_mean(*responses)                         the reduce: mean and spread
    check     = bash: the mean's summary line into a file
    result    = report(mean, inputs=[check's file])

The options, the runner and the JSON of the last line are those of ``covariance.py`` beside it.
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
@app_hints(max_cores=CORES, size_free=("member",))
def forcing(member, n, parsl_resource_specification=None):
    """A random forcing on an n x n grid, low-pass filtered in Fourier space."""
    import numpy as np
    field = np.random.default_rng(member).standard_normal((n, n))
    spectrum = np.fft.rfft2(field)
    ky = np.fft.fftfreq(n)[:, None]
    kx = np.fft.rfftfreq(n)[None, :]
    spectrum *= np.exp(-(kx ** 2 + ky ** 2) * 400.0)
    return {"member": member, "field": np.fft.irfft2(spectrum, s=(n, n))}


@python_app
@app_hints(max_cores=CORES, size_free=("member",))
def respond(force, n, member, parsl_resource_specification=None):
    """The response A x = f of a dense, well-conditioned operator A, for every column of f."""
    import numpy as np
    rng = np.random.default_rng(10_000 + member)
    coupling = rng.standard_normal((n, n)) / np.sqrt(n)
    operator = coupling @ coupling.T + n * 0.05 * np.eye(n)
    factor = np.linalg.cholesky(operator)
    response = np.linalg.solve(factor.T, np.linalg.solve(factor, force["field"]))
    return {"member": force["member"], "response": response}


@python_app
@app_hints(max_cores=CORES)
def ensemble_mean(*responses, parsl_resource_specification=None):
    """The reduce: the members' mean response, and their spread about it through a Gram product."""
    import numpy as np
    stack = np.stack([r["response"] for r in sorted(responses, key=lambda r: r["member"])])
    mean = stack.mean(axis=0)
    deviations = (stack - mean).reshape(len(responses), -1)
    gram = deviations @ deviations.T
    mixed = mean @ mean.T @ mean
    return {"members": len(responses), "mean_norm": float(np.linalg.norm(mean)),
            "spread": float(np.trace(gram)), "mixed": float(np.abs(mixed).sum())}


@bash_app
def check(summary, outputs=(), parsl_resource_specification=None):
    return f"echo 'members={summary['members']} spread={summary['spread']:.6e}' > {outputs[0]}"


@python_app
def report(summary, inputs=(), parsl_resource_specification=None):
    with open(inputs[0]) as handle:
        return {"line": handle.read().strip(), "mean_norm": summary["mean_norm"], "mixed": summary["mixed"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=10, help="ensemble members (default 10)")
    parser.add_argument("--size", type=int, default=1100, help="grid side n (default 1100)")
    parser.add_argument("--seed", type=int, default=0, help="the first member's seed (default 0)")
    width_arguments(parser)
    args = parser.parse_args(argv)
    at_least_one(parser, args, "members", "size")
    spec = specification(parser, args)

    def workflow(run_dir: str) -> dict:
        members = range(args.seed, args.seed + args.members)
        forces = [forcing(m, args.size, parsl_resource_specification=spec) for m in members]
        responses = [respond(f, args.size, m, parsl_resource_specification=spec) for f, m in zip(forces, members)]
        mean = ensemble_mean(*responses, parsl_resource_specification=spec)
        line = check(mean, outputs=[File(os.path.join(run_dir, "ensemble.txt"))])
        result = report(mean, inputs=[line.outputs[0]]).result()
        print(result["line"], f"| mean norm {result['mean_norm']:.6g}", file=sys.stderr)
        return {"checksum": round(result["mean_norm"], 9), "line": result["line"]}

    print(json.dumps(run(args, "ensemble", workflow, ("forcing", "respond", "ensemble_mean"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
