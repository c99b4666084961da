"""How should the ``scalpel`` policy spend its planning allowance on the end of the schedule?

For seeded batches of one machine (the policy study's pools and seeds,
``scalpel_executor.experiments.study_machines``), plans each
batch with the package's ``scalpel`` policy under several settings of its second step and compares
their predicted makespans (exact estimates, so prediction = simulated outcome) with longest-first's
and with the best a local search finds (1,000 evaluations from the best plan, moves in the last two
waves above 64 tasks):

* ``tail-search``: the shipped step, ``core.orders.improve_tail`` (a seeded local search over the
  last wave, widening a wave at a time), under the allowance;
* ``rollout``: the step it replaced: ``experiments.order_search.rollout_order`` over the last wave, then over the
  last two waves (8 candidates per position), under the same allowance;
* ``tail-search-unbounded``, ``rollout-unbounded``: the same without the allowance (only the
  60,000-start budget); planning then costs more than it gains on large machines.

Prints per batch the makespan over the best and the planning seconds, then the share of the
longest-first-to-search gap each closes (geometric means)::

    python benchmarks/tail_search.py wide 640 8
    python benchmarks/tail_search.py xeon16 160 10
    python benchmarks/tail_search.py paper 16 20
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

import scalpel_executor.core.planning as planning
from scalpel_executor.core.orders import FcfsEvaluator
from scalpel_executor.core.scheduler import Scheduler
from scalpel_executor.core.simulate import simulate
from scalpel_executor.core.tasks import Task
from scalpel_executor.experiments.order_search import local_search, rollout_order
from scalpel_executor.experiments.simulated_policies import batch_for, gmean
from scalpel_executor.experiments.study_machines import STUDY_MACHINES, machine_setup, model_named

CALIBRATION = Path(__file__).resolve().parent.parent / "docs" / "data" / "calibration-dev-vm.json"


def rollout_two_passes(ev: FcfsEvaluator, order, *, budget: int, seed: int = 0) -> list[int]:
    """The previous second step: a rollout over the last wave, then over the last two waves."""
    limit = ev.starts + budget
    for waves in (1, 2):
        if ev.starts >= limit:
            break
        order = rollout_order(ev, tail=waves * ev.N, window=8, base=order, budget=limit - ev.starts)
    return order


VARIANTS = {  # name: (second step, plan_rate)
    "tail-search": (planning.improve_tail, planning.STARTS_PER_SECOND),
    "rollout": (rollout_two_passes, planning.STARTS_PER_SECOND),
    "tail-search-unbounded": (planning.improve_tail, math.inf),
    "rollout-unbounded": (rollout_two_passes, math.inf),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("machine", choices=list(STUDY_MACHINES))
    parser.add_argument("tasks", type=int)
    parser.add_argument("batches", type=int)
    parser.add_argument("--model", default="default")
    args = parser.parse_args(argv)
    domains, llc, pool, _ = machine_setup(args.machine)
    model = model_named(args.model, CALIBRATION)
    shipped = planning.improve_tail
    rows = []
    try:
        for b in range(args.batches):
            batch = batch_for(pool, args.tasks, b, 0)
            ev = FcfsEvaluator.of(batch, [len(d) for d in domains], llc, model)
            lf_order = simulate(batch, domains, llc, "longest_first", model=model).order
            out, secs, orders = {"lf": ev.run(lf_order)}, {"lf": 0.0}, {"lf": lf_order}
            for name, (step, rate) in VARIANTS.items():
                planning.improve_tail = step
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
        planning.improve_tail = shipped
    lf = gmean([r[0]["lf"] / r[2] for r in rows])
    for name in ["lf", *VARIANTS]:
        over = gmean([r[0][name] / r[2] for r in rows])
        gap = 100 * (lf - over) / (lf - 1) if lf > 1 else float("nan")
        print(f"{name:22s} makespan / best {over:.4f}, gap closed {gap:.0f}%, plan "
              f"{sum(r[1][name] for r in rows) / len(rows):.3f} s, mean longest-first makespan "
              f"{sum(r[0]['lf'] for r in rows) / len(rows):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
