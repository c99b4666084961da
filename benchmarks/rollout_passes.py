"""Which positions should the ``scalpel`` policy's rollout spend its planning allowance on?

For seeded batches of one machine (``benchmarks/policy_study.py``'s pools and seeds), plans each
batch with the package's ``scalpel`` policy under several rollout settings and compares their
predicted makespans (exact estimates, so prediction = simulated outcome) with longest-first's and
with the best a local search finds (1,000 evaluations from the best plan, moves in the last two
waves above 64 tasks):

* ``twopass``: the shipped setting: the last wave, then the last two waves, under the allowance;
* ``w1x8``: one pass over the last wave; ``w2x8``: one pass over the last two waves (the first
  shipped setting), both under the allowance;
* ``unbounded``: one pass over the last two waves without the allowance (planning costs more than
  it gains on large machines; for comparison only).

Prints per batch the makespan over the best and the planning seconds, then the share of the
longest-first-to-search gap each closes (geometric means)::

    python benchmarks/rollout_passes.py wide 640 8
    python benchmarks/rollout_passes.py xeon16 160 10
    python benchmarks/rollout_passes.py paper 16 20
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import policy_study as ps  # noqa: E402

import scalpel_executor.core.planning as planning  # noqa: E402
from scalpel_executor.core.scheduler import Scheduler  # noqa: E402
from scalpel_executor.core.search import FcfsEvaluator, local_search  # noqa: E402
from scalpel_executor.core.tasks import Task  # noqa: E402

VARIANTS = {  # name: (rollout passes in waves, window, plan_rate)
    "twopass": ((1, 2), 8, planning.STARTS_PER_SECOND),
    "w1x8": ((1,), 8, planning.STARTS_PER_SECOND),
    "w2x8": ((2,), 8, planning.STARTS_PER_SECOND),
    "unbounded": ((2,), 8, math.inf),
}


def gmean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("machine", choices=list(ps.MACHINES))
    parser.add_argument("tasks", type=int)
    parser.add_argument("batches", type=int)
    parser.add_argument("--model", default="default")
    args = parser.parse_args(argv)
    domains, llc, pool, _ = ps.machine_setup(args.machine)
    model = ps.model_named(args.model)
    shipped = planning.ROLLOUT_PASSES, planning.ROLLOUT_WINDOW
    rows = []
    try:
        for b in range(args.batches):
            batch = ps.batch_for(pool, args.tasks, b, 0)
            ev = FcfsEvaluator.of(batch, [len(d) for d in domains], llc, model)
            _, lf_order = ps.run_policy("longer_first", batch, domains, llc, model)
            out, secs, orders = {"lf": ev.run(lf_order)}, {"lf": 0.0}, {"lf": lf_order}
            for name, (passes, window, rate) in VARIANTS.items():
                planning.ROLLOUT_PASSES, planning.ROLLOUT_WINDOW = passes, window
                scheduler = Scheduler(domains, "scalpel", llc=llc, model=model, plan_rate=rate)
                scheduler.add(Task(i, t.footprint, t.solo_time) for i, t in enumerate(batch))
                began = time.perf_counter()
                scheduler._replan()
                secs[name] = time.perf_counter() - began
                orders[name] = [group.tasks[0].id for group in reversed(scheduler._plan)]
                out[name] = ev.run(orders[name])
            seed = min(out, key=out.get)
            _, best = local_search(ev, orders[seed], out[seed], 1000, random.Random(b),
                                   2 if args.tasks > 64 else None)
            best = min(best, *out.values())
            rows.append((out, secs, best))
            print(b, {k: round(v / best, 4) for k, v in out.items()}, {k: round(v, 3) for k, v in secs.items()},
                  flush=True)
    finally:
        planning.ROLLOUT_PASSES, planning.ROLLOUT_WINDOW = shipped
    lf = gmean([r[0]["lf"] / r[2] for r in rows])
    for name in ["lf", *VARIANTS]:
        over = gmean([r[0][name] / r[2] for r in rows])
        gap = 100 * (lf - over) / (lf - 1) if lf > 1 else float("nan")
        print(f"{name:10s} makespan / best {over:.4f}, gap closed {gap:.0f}%, plan "
              f"{sum(r[1][name] for r in rows) / len(rows):.3f} s, mean longest-first makespan "
              f"{sum(r[0]['lf'] for r in rows) / len(rows):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
