"""What one simulated start costs the ``scalpel`` plan, by domain width and batch size.

The plan's allowance (``core.planning.starts_allowed``) is a number of simulated task starts per
second of the batch's predicted makespan, larger on narrow domains: a start costs more the more
tasks a domain runs at once. This script plans seeded batches of one-core tasks (footprints of
0.5-20 MiB on a 32 MiB LLC, run times 0.5-2 s, half of them told per-key terms) on each machine
shape with an allowance of ``--starts`` starts and no rate, and prints the starts simulated (the
allowance is spent once with the terms and once without, and the check between them has its own),
the microseconds each cost (CPU time, the median over ``--repeats`` plans), the rate the planner
allows on that shape and the share of the predicted makespan that rate lets a plan spend.
``--wide``: tasks of one or two cores, which the multicore evaluator replays::

    python benchmarks/plan_cost.py
    python benchmarks/plan_cost.py --wide

Run it with PYTHONPATH pointing at another checkout to compare two versions of the planner.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time

from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.domains import Topology
from scalpel_executor.core.planning import PlanContext, scalpel_order, starts_allowed
from scalpel_executor.core.tasks import Task

MiB = 1 << 20
LLC = 32 * MiB


def batch(n: int, seed: int, wide: bool) -> list[Task]:
    """``n`` seeded tasks: four footprints, run times 0.5-2 s; one core each, every other one told
    terms, or (``wide``) one or two cores each, which the multicore evaluator replays."""
    rng = random.Random(seed)
    return [Task(id=i, footprint=rng.choice([0.5, 2, 8, 20]) * MiB, runtime=rng.uniform(0.5, 2.0), seq=i,
                 key=f"k{i % 5}", cores=rng.choice([1, 2]) if wide else 1,
                 interference=(0.05, rng.uniform(0.0, 0.3)) if i % 2 and not wide else None)
            for i in range(n)]


def shape(text: str) -> list[int]:
    """A topology spec (``DxC``: D domains of C cores) as cores per domain; ValueError naming it."""
    return [len(domain.cpus) for domain in Topology.from_spec(text).domains]


def cost(cores: list[int], n: int, starts: int, repeats: int, wide: bool) -> tuple[int, float]:
    """The starts one plan simulated and the median microseconds of CPU per start."""
    per_start, simulated = [], 0
    for seed in range(repeats):
        context = PlanContext(cores, llc=LLC, model=ContentionModel(), budget=starts, rate=math.inf)
        counted = _counting()
        begin = time.process_time()
        scalpel_order(batch(n, seed, wide), context)
        spent = time.process_time() - begin
        simulated = counted()
        per_start.append(spent / max(1, simulated) * 1e6)
    return simulated, statistics.median(per_start)


def _counting():
    """Wrap the evaluators the plan builds so their starts can be read after it."""
    import scalpel_executor.core.planning as planning

    made = []
    originals = {name: getattr(planning, name) for name in ("FcfsEvaluator", "MulticoreEvaluator")}
    for name, original in originals.items():
        setattr(planning, name, type(name, (original,), {"__init__": _recorded(original, made)}))

    def count() -> int:
        for name, original in originals.items():
            setattr(planning, name, original)
        return sum(ev.starts for ev in made)

    return count


def _recorded(original, made: list):
    def __init__(self, *args, **kwargs):
        original.__init__(self, *args, **kwargs)
        made.append(self)
    return __init__


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="1x2,2x4,2x8,1x16,16x8",
                        help="machines as DOMAINSxCORES, comma-separated (default: %(default)s)")
    parser.add_argument("--tasks", default="16,64", help="batch sizes, comma-separated (default: %(default)s)")
    parser.add_argument("--starts", type=int, default=20_000, help="the allowance of each plan (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="plans per cell, seeded (default: %(default)s)")
    parser.add_argument("--wide", action="store_true",
                        help="tasks of one or two cores (the multicore evaluator), none told terms")
    args = parser.parse_args()
    try:
        shapes = [(text, shape(text)) for text in args.shapes.split(",")]
    except ValueError as error:
        parser.error(str(error))
    try:
        sizes = [int(n) for n in args.tasks.split(",")]
    except ValueError:
        parser.error(f"--tasks takes whole numbers, comma-separated; got {args.tasks!r}")
    if any(n < 2 for n in sizes) or args.starts < 1 or args.repeats < 1:
        parser.error("--tasks must be at least 2, --starts and --repeats at least 1")
    print(f"{'machine':>8} {'tasks':>6} {'starts':>8} {'us/start':>9} {'rate/s':>7} {'plan share':>10}")
    for text, cores in shapes:
        rate = starts_allowed(PlanContext(cores, budget=10**12), 1.0)  # the shipped rate on this shape
        for n in sizes:
            simulated, micro = cost(cores, n, args.starts, args.repeats, args.wide)
            print(f"{text:>8} {n:>6} {simulated:>8} {micro:>9.1f} {rate:>7.0f} {rate * micro * 1e-6:>10.2%}", flush=True)


if __name__ == "__main__":
    main()
