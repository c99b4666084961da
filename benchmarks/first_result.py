"""Seconds from a fresh script's start to its first result on ScalpelExecutor, and to its exit:
this tree against another one (``--before``, a checkout of an earlier commit), interleaved.

Each sample is a fresh Python process that imports Parsl and the executor, loads it (an empty
profile store of its own), submits one no-op task, waits for its result, submits ten more, and
cleans up; it prints the seconds of each phase. The first result holds the node manager's start
and its workers' (``parsl.load()`` returns before them). Usage::

    python benchmarks/first_result.py --before /path/to/old/checkout [--rounds 8] [--out FILE]

Figures in docs/results/whole-process.md, "A node manager that starts without Parsl".
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import time; began = time.time()
import json, os, sys, tempfile
import parsl
from parsl import python_app
from parsl.config import Config
from scalpel_executor import ScalpelExecutor
imported = time.time()

@python_app
def noop(x):
    return x

run_dir = tempfile.mkdtemp()
executor = ScalpelExecutor(label="scalpel", profiles=os.path.join(run_dir, "profiles.sqlite"))
dfk = parsl.load(Config(executors=[executor], run_dir=os.path.join(run_dir, "runinfo"), strategy="none"))
loaded = time.time()
noop(0).result()
first = time.time()
[f.result() for f in [noop(i) for i in range(10)]]
dfk.cleanup()
print(json.dumps({"import": imported - began, "load": loaded - imported, "first_result": first - loaded,
                  "cleanup_done": time.time() - first, "module": sys.modules["scalpel_executor"].__file__}))
"""


def sample(tree: str) -> dict:
    env = {**os.environ, "PYTHONPATH": tree}
    began = time.time()
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300,
                          check=True, cwd=tempfile.gettempdir())  # not a checkout: "" leads sys.path
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    if not figures.pop("module").startswith(os.path.realpath(tree)):
        raise SystemExit(f"the sample did not import the executor from {tree}")
    return {**figures, "whole": time.time() - began}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="a checkout of the code to compare against")
    parser.add_argument("--rounds", type=int, default=8, help="interleaved rounds (default 8)")
    parser.add_argument("--out", help="write every sample and the medians (JSON) to this file")
    args = parser.parse_args()
    trees = {"before": os.path.realpath(args.before), "now": os.path.realpath(os.path.join(os.path.dirname(__file__), ".."))}
    samples = {name: [] for name in trees}
    for round_ in range(args.rounds):
        for name in (list(trees) if round_ % 2 == 0 else list(reversed(trees))):
            samples[name].append(sample(trees[name]))
            print(f"round {round_ + 1} {name}: " + ", ".join(f"{k} {v:.2f}" for k, v in samples[name][-1].items()),
                  file=sys.stderr)
    medians = {name: {k: round(statistics.median(s[k] for s in runs), 3) for k in runs[0]}
               for name, runs in samples.items()}
    ratios = [now["whole"] / before["whole"] for now, before in zip(samples["now"], samples["before"])]
    summary = {"medians": medians, "whole now/before": {"median": round(statistics.median(ratios), 3),
                                                         "min": round(min(ratios), 3), "max": round(max(ratios), 3)},
               "load_average": os.getloadavg()}
    print(json.dumps(summary, indent=1))
    if args.out:
        with open(args.out, "w") as out:
            json.dump({"command": "python " + " ".join(sys.argv), "samples": samples, "summary": summary}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
