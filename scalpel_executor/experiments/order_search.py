"""Searches for the best dispatch order in the contention model: the oracle benchmarks compare policies with.

Built on the default policy's evaluator (:class:`~scalpel_executor.core.orders.FcfsEvaluator`), which
predicts the makespan of a dispatch order fed first come first served:

* :func:`local_search` (seeded hill climbing over orders) and :func:`branch_and_bound` (over dispatch
  decisions) look for the best order, and :func:`best_schedule` combines them into the oracle: proven
  optimal where branch and bound finishes within its node budget, otherwise the best a seeded local
  search found, reported with its effort and the contention-free lower bound (``scalpel bench``'s
  oracle mix, ``benchmarks/archive/policy_study.py``);
* :func:`rollout_order` improves the end of an order one position at a time: the default policy's
  second step before :func:`~scalpel_executor.core.orders.improve_tail` replaced it, kept for the
  comparison in docs/results/simulated-machines.md (``benchmarks/tail_search.py``) and ``policy_study.py``'s
  rollout candidates.

No policy calls these; they measure policies. Pure, like the core they search.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from scalpel_executor.core.orders import FcfsEvaluator, SimState

__all__ = ["local_search", "branch_and_bound", "best_schedule", "SearchResult", "rollout_order"]


def local_search(ev: FcfsEvaluator, order: Sequence[int], best_time: float, evals: int, rng: random.Random,
                 tail_waves: int | None = None) -> tuple[list[int], float]:
    """Hill climbing on the order: random swap or insert moves, ties accepted; ``evals`` evaluations.
    With ``tail_waves``, moves only touch the last tail_waves x cores positions, each evaluated from
    a snapshot of the simulation where that tail begins."""
    best = list(order)
    n = len(best)
    if n < 2 or evals <= 0:
        return best, best_time
    snapshot, low = None, 0
    if tail_waves is not None and n > tail_waves * ev.N:
        snapshot = ev.run(best, stop=n - tail_waves * ev.N)
        low = snapshot.position
    if n - low < 2:
        return best, best_time
    for _ in range(evals):
        i, j = rng.randrange(low, n), rng.randrange(low, n)
        if i == j:
            continue
        candidate = best[:]
        if rng.random() < 0.5:
            candidate[i], candidate[j] = candidate[j], candidate[i]
        else:
            candidate.insert(j, candidate.pop(i))
        value = ev.run(candidate, state=snapshot)
        if value <= best_time + 1e-12:
            best, best_time = candidate, min(value, best_time)
    return best, best_time


class BudgetExceeded(Exception):
    """Branch and bound visited its budget of nodes."""


def branch_and_bound(ev: FcfsEvaluator, incumbent: float, incumbent_order: Sequence[int], budget: int
                     ) -> tuple[list[int], float, bool, int]:
    """Best FCFS dispatch order by depth-first branch and bound over dispatch decisions.

    A decision is which waiting task a free core starts; children are tried longest task first.
    Pruned: identical tasks (same solo time and footprint) are tried once per decision; the tasks
    one dispatch step starts on one domain are taken in one canonical order (its cores are
    identical); and a node whose bound from solo work (max of the cores' free times, their mean
    plus the waiting work, the earliest free core plus the longest waiting task; contention only
    adds to these) is no better than the incumbent. Domains are *not* taken as interchangeable:
    under first come, first served, ties between domains finishing at the same instant are broken
    by domain, so a mirrored schedule is not always an order's schedule.

    Returns (order, makespan, proven optimal, nodes); ``proven`` is False when ``budget`` nodes
    ran out first (the order is then the best found).
    """
    n, P, N = ev.n, ev.P, ev.N
    solo = ev.solo
    rank = sorted(range(n), key=lambda i: (-solo[i], ev.kind[i], i))  # canonical order: longest first
    position = {i: r for r, i in enumerate(rank)}
    signature = [(solo[i], ev.kind[i]) for i in range(n)]
    best = [incumbent, list(incumbent_order)]
    nodes = 0
    tol = ev.tol

    def bound(now, running, upd, idle, waiting_work, longest_waiting):
        free = []
        for d in range(P):
            elapsed = now - upd[d]  # domains other than the one that just changed were last advanced earlier
            for e in running[d]:
                free.append(now + max(e[1] - elapsed * e[2], 0.0))  # the rest of its solo work, at rate <= 1
            free.extend([now] * idle[d])
        lb = max(max(free), (sum(free) + waiting_work) / N)
        if longest_waiting:
            lb = max(lb, min(free) + longest_waiting)
        return lb

    def settle(state: SimState):
        """Advance to the next decision (or the end): returns (state, None) or (None, the makespan)."""
        running = state.running
        while True:
            d = ev.next_domain(state)
            t = state.next_end[d]
            if t == math.inf:
                return None, state.makespan
            now = state.now = t
            ev.advance(state, d)
            left = [e for e in running[d] if e[1] > tol[e[0]]]
            finished = len(running[d]) - len(left)
            running[d] = left
            ev.refresh(state, d)
            if finished:
                state.idle[d] += finished
                state.makespan = now
                return state, None

    def fill_slots(idle):
        return [d for r in range(ev.maxc) for d in range(P) if r < idle[d]]

    def close_step(state, step_picks: dict) -> None:
        """Rates of the domains a dispatch step started tasks on, refreshed after the whole step in
        the order the step first touched them, exactly as :meth:`FcfsEvaluator.run` does (the
        refresh order breaks ties between domains finishing at the same instant)."""
        for d in step_picks.get("touched", ()):
            ev.refresh(state, d)

    def dfs(state: SimState, waiting: list[int], slots: list[int], step_picks: dict, order: list[int]):
        nonlocal nodes
        nodes += 1
        if nodes > budget:
            raise BudgetExceeded
        if not waiting:
            # no decision left: run to the end
            close_step(state, step_picks)
            st = state
            while True:
                st2, done = settle(st)
                if st2 is None:
                    if done < best[0] - 1e-9:
                        best[0], best[1] = done, list(order)
                    return
                st = st2
        if not slots:
            close_step(state, step_picks)
            st2, done = settle(state)
            if st2 is None:  # cannot happen with tasks waiting
                return
            dfs(st2, waiting, fill_slots(st2.idle), {}, order)
            return
        waiting_work = sum(solo[i] for i in waiting)
        longest = max(solo[i] for i in waiting)
        if bound(state.now, state.running, state.updated, state.idle, waiting_work, longest) >= best[0] - 1e-9:
            return
        d = slots[0]
        seen = set()
        previous = step_picks.get(d)  # last task this step put on d: picks on a domain increase
        for i in waiting:  # waiting is kept in canonical order
            if signature[i] in seen:
                continue
            seen.add(signature[i])
            if previous is not None and position[i] < position[previous]:
                continue
            child = state.copy()
            ev.advance(child, d)
            child.running[d].append([i, solo[i], 1.0])
            child.idle[d] -= 1
            picks = dict(step_picks)
            picks[d] = i
            if d not in step_picks.get("touched", ()):
                picks["touched"] = (*step_picks.get("touched", ()), d)
            rest = [w for w in waiting if w != i]
            order.append(i)
            dfs(child, rest, slots[1:], picks, order)
            order.pop()

    start = ev.start_state()
    waiting = sorted(range(n), key=position.__getitem__)
    proven = True
    try:
        dfs(start, waiting, fill_slots(start.idle), {}, [])
    except BudgetExceeded:
        proven = False
    return best[1], best[0], proven, nodes


def rollout_order(ev: FcfsEvaluator, *, tail: int | None = None, window: int | None = None,
                  base: Sequence[int] | None = None, budget: int | None = None) -> list[int]:
    """Rollout (a pilot method) over the dispatch order, with ``base`` (default: longest-first) as
    the heuristic that completes partial orders.

    For each of the last ``tail`` positions (all when None), in turn: the base's own next task and
    every other distinct waiting task among the ``window`` longest distinct ones (all when None)
    are tried at that position, the rest of the order kept in the base's order, and each order
    simulated first come first served in the contention model from a snapshot of the fixed
    prefix; the task with the shortest predicted makespan is fixed there (ties: the base's own
    choice). The base's choice is always a candidate, so each step's prediction is at most the
    previous one, and the result is never predicted worse than the base. Cost: tail x window
    evaluations, each simulating the tail and the tasks running when it begins; with ``budget``
    (task starts simulated, ``ev.starts``) the rollout stops when the budget is spent, keeping
    the order as improved so far (still never predicted worse than the base).
    """
    n = ev.n
    solo = ev.solo
    lpt_key = lambda i: (-solo[i], ev.kind[i], i)  # noqa: E731
    order = list(base) if base is not None else sorted(range(n), key=lpt_key)
    limit = math.inf if budget is None else ev.starts + budget
    start = 0 if tail is None else max(0, n - tail)
    fixed = order[:start]
    remaining = order[start:]
    current = ev.run(fixed + remaining)
    snapshot = None
    for p in range(start, n - 1):
        if ev.starts >= limit:
            break
        # the prefix before p is fixed, so the previous snapshot (taken before p - 1) stays valid
        snapshot = ev.run(fixed + remaining, state=snapshot, stop=p)
        seen = {(solo[remaining[0]], ev.kind[remaining[0]])}
        candidates = []
        for i in sorted(remaining, key=lpt_key):
            signature = (solo[i], ev.kind[i])
            if signature not in seen:
                seen.add(signature)
                candidates.append(i)
                if window is not None and len(candidates) >= window - 1:
                    break
        best_i, best_value = remaining[0], current
        for i in candidates:
            rest = [i] + [j for j in remaining if j != i]
            value = ev.run(fixed + rest, state=snapshot)
            if value < best_value - 1e-9:
                best_i, best_value = i, value
        fixed.append(best_i)
        remaining.remove(best_i)
        current = best_value
    return fixed + remaining


@dataclass(frozen=True)
class SearchResult:
    """What :func:`best_schedule` found: the best dispatch order, its makespan in the model, how."""

    order: list[int]
    makespan: float
    method: str  # "branch and bound (proven optimal)" or "local search (best found)"
    proven: bool
    nodes: int  # branch-and-bound nodes visited
    evaluations: int  # orders simulated, all methods together
    lower_bound: float  # contention-free: max(longest task, total work / cores)


def best_schedule(ev: FcfsEvaluator, seeds: Sequence[Sequence[int]], *, exhaustive_max_tasks: int = 12,
                  node_budget: int = 20_000, local_evals: int = 1_000, tail_waves: int = 2,
                  seed: int = 0) -> SearchResult:
    """The best dispatch order a search finds in ``ev``'s model, starting from ``seeds`` (orders).

    Up to ``exhaustive_max_tasks`` tasks, branch and bound from the best seed (``node_budget``
    nodes); when it finishes, the result is proven optimal. Otherwise (or when the budget runs out)
    a seeded local search of ``local_evals`` evaluations improves the best order so far; above 64
    tasks its moves are confined to the last ``tail_waves`` x cores positions. ``method`` says which
    one produced the answer; ``lower_bound`` is what no schedule can beat.
    """
    if not seeds:
        raise ValueError("best_schedule() needs at least one seed order")
    before = ev.evaluations
    best_order, best_time = None, math.inf
    for order in seeds:
        value = ev.run(order)
        if value < best_time - 1e-12:
            best_order, best_time = list(order), value
    proven, nodes = False, 0
    if ev.n <= exhaustive_max_tasks:
        best_order, best_time, proven, nodes = branch_and_bound(ev, best_time, best_order, node_budget)
    if not proven:
        best_order, best_time = local_search(ev, best_order, best_time, local_evals, random.Random(seed),
                                             tail_waves if ev.n > 64 else None)
    bound = max(max(ev.solo, default=0.0), sum(ev.solo) / ev.N)
    method = "branch and bound (proven optimal)" if proven else "local search (best found)"
    return SearchResult(best_order, best_time, method, proven, nodes, ev.evaluations - before, bound)
