"""The oracle order of a contention mix: the submission order under which first come, first served
finishes soonest on one domain, searched in the contention model. Pure.

The search is :func:`scalpel_executor.experiments.order_search.best_schedule`: branch and bound up to 12 cases
(proven optimal in the model when it finishes within its node budget), otherwise a seeded local
search from the best of the ``fifo``, ``longest_first`` and ``scalpel`` orders, which only finds a
good order. The method travels with the order so every "gap closed" figure can say which it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.planning import PlanContext, scalpel_order
from scalpel_executor.core.orders import FcfsEvaluator
from scalpel_executor.experiments.order_search import SearchResult, best_schedule
from scalpel_executor.core.tasks import Task


class Oracle(NamedTuple):
    cases: tuple  # the mix's cases in the oracle's submission order
    search: SearchResult  # its predicted makespan, the method, the effort and the lower bound


def oracle_search(cases: Sequence, seconds: Sequence[float], cores: int, llc: float, model=None, *,
                  exhaustive_max_tasks: int = 12, node_budget: int = 200_000, local_evals: int = 2_000,
                  seed: int = 0) -> Oracle:
    """The submission order under which first come, first served finishes ``cases`` (each lasting
    ``seconds`` alone) soonest on one domain of ``cores`` cores sharing ``llc`` bytes, in ``model``.

    On one domain the submission order is the dispatch order, so the search runs over orders
    directly (:func:`~scalpel_executor.experiments.order_search.best_schedule`). Seeds: submission order,
    longest first and the ``scalpel`` policy's plan. Cost: up to ``node_budget`` branch-and-bound
    nodes (8 cases on 2 cores: well under a second), or ``local_evals`` simulations.
    """
    if len(cases) != len(seconds):
        raise ValueError(f"{len(cases)} cases but {len(seconds)} run times")
    if not cases:
        raise ValueError("the oracle needs at least one case")
    model = model or ContentionModel()
    n = len(cases)
    ev = FcfsEvaluator(list(seconds), [c.footprint_bytes for c in cases], [None] * n, [cores], llc, model)
    tasks = [Task(i, c.footprint_bytes, s) for i, (c, s) in enumerate(zip(cases, seconds))]
    for seq, task in enumerate(tasks):
        task.seq = seq
    seeds = [list(range(n)), sorted(range(n), key=lambda i: (-seconds[i], i)),
             scalpel_order(tasks, PlanContext([cores], llc=llc, model=model))]
    result = best_schedule(ev, seeds, exhaustive_max_tasks=exhaustive_max_tasks, node_budget=node_budget,
                           local_evals=local_evals, seed=seed)
    return Oracle(tuple(cases[i] for i in result.order), result)


def oracle_order(cases: Sequence, seconds: Sequence[float], cores: int, llc: float, model=None) -> tuple:
    """The cases in :func:`oracle_search`'s order."""
    return oracle_search(cases, seconds, cores, llc, model).cases
