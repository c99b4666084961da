"""The default policy, ``scalpel``: a dispatch order checked in the contention model. Pure.

The published algorithm (``scalpel-paper``) keeps heavy footprints apart but runs its padded,
partial groups last whatever their run times, and so loses to plain longest-first
(``longer_first``) on many batches; longest-first ignores the cache. The default keeps the better
of the two on every batch and then improves the end of the schedule, where both lose most:

1. **Base order.** Trace, in the contention model and on what the scheduler knows (run-time
   estimates, footprints), the dispatch orders of ``longer_first``, ``scalpel-paper`` and
   ``scalpel-lpt`` (Algorithm 1 groups ordered by their longest task); keep the one with the
   shortest predicted makespan (longest-first on ties).
2. **Rollout of the tail.** For each of the last T = min(n, cores) positions of that order, in
   turn, try there the order's own next task and each of the 7 longest other distinct waiting
   tasks, simulate each completed order first come first served, and fix the one with the shortest
   predicted makespan (the order's own on ties) (:func:`~scalpel_executor.core.search.rollout_order`);
   then, with what the allowance leaves, the same over the last min(n, 2 x cores) positions. The
   last wave goes first because that is where most of the gain is when the allowance runs short
   (on 8 x 8 cores, 33% of the longest-first-to-search gap against 13% for a single pass over two
   waves under the same allowance; docs/benchmarks.md).
3. **Dispatch** the order first come first served: any free core takes the next task.

Why it is never much worse than longest-first: the base orders of step 1 reproduce the schedules of
``longer_first`` and ``scalpel-paper`` exactly when replayed first come first served, and step 2
only accepts a change that lowers the predicted makespan, so with exact estimates the plan never
ends later than either in the model. With wrong estimates or a wrong model it can; docs/benchmarks.md
and docs/policy-study.md measure how far.

Cost: step 1 traces three orders, O(n log n + n·C) each for n tasks on domains of C cores; step 2
simulates at most 3N x 8 tails of O((T + N)·C) for N cores, independent of n. The whole plan may
simulate at most min(``budget``, ``rate`` (:data:`STARTS_PER_SECOND`) x the predicted makespan
of longest-first) task starts (``budget`` defaults to :data:`DEFAULT_BUDGET`); the rollout stops when
that is spent, keeping what it has improved so far, and step 1 is skipped when it would not fit
(about 6n starts). So a batch of short tasks (no-op tasks: predicted makespan near 0) is planned
as plain longest-first, and planning stays a small share of what it plans: a simulated start
costs 10-30 microseconds in CPython, so the plan costs at most about 0.2-0.6% of the batch's
predicted makespan (docs/benchmarks.md has measured plan times).
Without an LLC size the model predicts no contention and the plan is a contention-free
longest-processing-time improvement.

The plan assumes the tasks of one priority level start on an empty machine (as Algorithm 1 does);
tasks arriving while others run are planned again together with every task that has not started.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.search import FcfsEvaluator, rollout_order, trace
from scalpel_executor.core.tasks import Group, Task

__all__ = ["PlanContext", "plan_scalpel", "scalpel_order", "DEFAULT_BUDGET", "STARTS_PER_SECOND", "BASE_POLICIES",
           "ROLLOUT_WINDOW", "ROLLOUT_PASSES"]

DEFAULT_BUDGET = 60_000  # most task starts one plan may simulate
STARTS_PER_SECOND = 200  # and at most this many per second of the batch's predicted makespan
BASE_POLICIES = ("longer_first", "scalpel-paper", "scalpel-lpt")
ROLLOUT_WINDOW = 8  # candidates per rollout position: the order's own and 7 others
ROLLOUT_PASSES = (1, 2)  # rollout passes over the last 1, then 2 x cores positions

Chooser = Callable[[list[int]], list[int]]


@dataclass
class PlanContext:
    """What a plan function may know about the machine besides the tasks.

    ``chooser(policy, tasks)`` returns a step function for :func:`~scalpel_executor.core.search.trace`
    that makes ``policy``'s decisions on ``tasks`` (the Scheduler provides it, by running a scheduler
    of that policy); only the model-checked policy uses it.
    """

    cores_per_domain: Sequence[int]
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    llc: float | None = None  # bytes of LLC per domain; None: unknown (no contention predicted)
    model: ContentionModel = field(default_factory=ContentionModel)
    budget: int = DEFAULT_BUDGET
    rate: float = STARTS_PER_SECOND  # simulated starts allowed per second of predicted makespan
    chooser: Callable[[str, list[Task]], Chooser] | None = None


def plan_scalpel(tasks: list[Task], context: PlanContext) -> list[Group]:
    """The default policy (module docstring): a base order checked in the model, its tail rolled out."""
    order = scalpel_order(tasks, context)
    return [Group([tasks[i]], 1) for i in order]


def scalpel_order(tasks: list[Task], context: PlanContext) -> list[int]:
    """Indices of ``tasks`` in the order :func:`plan_scalpel` dispatches them."""
    n = len(tasks)
    lpt = sorted(range(n), key=lambda i: (-tasks[i].runtime, tasks[i].seq))
    if n <= 1:
        return lpt
    llc = context.llc if context.llc and context.llc > 0 else math.inf
    ev = FcfsEvaluator([t.runtime for t in tasks], [t.footprint for t in tasks], [None] * n,
                       context.cores_per_domain, llc, context.model)
    best, best_time = lpt, ev.run(lpt)
    allowance = int(min(context.budget, context.rate * best_time))
    if context.chooser is not None and allowance >= 3 * n:  # each base policy costs about two runs
        for policy in BASE_POLICIES[1:]:
            candidate = trace(ev, context.chooser(policy, tasks))
            predicted = ev.run(candidate)
            if predicted < best_time - 1e-9 * max(1.0, best_time):
                best, best_time = candidate, predicted
    # The last wave first (where most of the gain is when the allowance is short), then the last
    # two waves with what is left; each pass only accepts predicted improvements.
    for waves in ROLLOUT_PASSES:
        left = allowance - ev.starts
        if left <= 0:
            break
        best = rollout_order(ev, tail=waves * ev.N, window=ROLLOUT_WINDOW, base=best, budget=left)
    return best
