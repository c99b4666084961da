"""Search over dispatch orders in the contention model: a fast evaluator, a rollout and an oracle. Pure.

Any schedule a work-conserving policy produces is reproduced by ``fifo`` fed its *dispatch order*
(the order in which its tasks started), so a search for good schedules can run over dispatch orders
under first come, first served. :class:`FcfsEvaluator` predicts the makespan of a dispatch order
with exactly :func:`scalpel_executor.core.simulate.simulate`'s rules (round-robin dispatch over
domains, rates from the :class:`~scalpel_executor.core.contention.ContentionModel`, completions
within 1e-9 relative), specialised to that case; tests/core check that the two agree to 1e-9.
On top of it:

* :func:`trace` turns any policy's decisions into its dispatch order (the base orders of the
  ``scalpel`` policy);
* :func:`improve_tail` improves the end of an order by a seeded local search whose tail widens
  a wave at a time (the ``scalpel`` policy's second step); :func:`rollout_order` improves it one
  position at a time (the step it replaced, kept for comparison);
* :func:`local_search` and :func:`branch_and_bound` look for the best order, and
  :func:`best_schedule` combines them into the oracle that benchmarks compare policies with: proven
  optimal where branch and bound finishes within its node budget, otherwise the best a seeded local
  search found, reported with its effort and the contention-free lower bound.

Batches arrive at time 0 on an empty machine; each task has a solo time (the scheduler's
estimate), a footprint and a sensitivity.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from scalpel_executor.core.contention import ContentionModel

__all__ = ["FcfsEvaluator", "trace", "improve_tail", "rollout_order", "local_search", "branch_and_bound", "best_schedule",
           "SearchResult"]


class FcfsEvaluator:
    """Makespan of a dispatch order under ``fifo``, with simulate()'s rules (round-robin dispatch
    over domains, rates from the ContentionModel, completions within 1e-9 relative).

    ``solo``, ``footprints`` and ``sensitivities`` (None: the model's default) describe the tasks,
    indexed 0..n-1; orders are lists of these indices. :meth:`of` builds one from SimTasks.
    ``running`` — (domain, footprint, remaining seconds) of tasks already running — makes every
    simulation start from them instead of an empty machine (they are indices n, n+1, ... inside).
    """

    def __init__(self, solo: Sequence[float], footprints: Sequence[float], sensitivities: Sequence[float | None],
                 cores_per_domain: Sequence[int], llc: float, model: ContentionModel,
                 running: Sequence[tuple[int, float, float]] = ()):
        if not (len(solo) == len(footprints) == len(sensitivities)):
            raise ValueError(f"solo times, footprints and sensitivities differ in length: "
                             f"{len(solo)}, {len(footprints)}, {len(sensitivities)}")
        self.n = len(solo)
        self.solo = [float(s) for s in solo] + [float(r[2]) for r in running]
        sigma0 = model.sensitivity
        kinds: dict[tuple, int] = {}
        self.kind = []
        for footprint, sensitivity in zip([*footprints, *(r[1] for r in running)],
                                          [*sensitivities, *(None for _ in running)]):
            key = (footprint, sigma0 if sensitivity is None else sensitivity)
            self.kind.append(kinds.setdefault(key, len(kinds)))
        self.kind_fp = [k[0] for k in kinds]
        self.kind_sig = [k[1] for k in kinds]
        self.cpd = list(cores_per_domain)
        self.P, self.N, self.maxc = len(self.cpd), sum(self.cpd), max(self.cpd)
        self.llc, self.model = llc, model
        self._rates: dict[tuple, dict[int, float]] = {}
        self.tol = [1e-9 * max(1.0, s) for s in self.solo]
        self.evaluations = 0
        self.starts = 0  # task starts simulated, over all evaluations: the work done
        self._initial = None
        if running:
            state = self.start_state()
            for number, (domain, _, remaining) in enumerate(running):
                state[2][domain].append([self.n + number, float(remaining), 1.0])
                state[5][domain] = max(0, state[5][domain] - 1)
            for domain, entries in enumerate(state[2]):
                self._refresh(entries, domain, 0.0, state[4], state[7])
            self._initial = state

    @classmethod
    def of(cls, tasks: Sequence, cores_per_domain: Sequence[int], llc: float, model: ContentionModel) -> FcfsEvaluator:
        """An evaluator of SimTasks (``solo_time``, ``footprint``, ``sensitivity``)."""
        return cls([t.solo_time for t in tasks], [t.footprint for t in tasks], [t.sensitivity for t in tasks],
                   cores_per_domain, llc, model)

    def rates(self, kinds_running: list[int]) -> dict[int, float]:
        key = tuple(sorted(kinds_running))
        hit = self._rates.get(key)
        if hit is None:
            factors = self.model.slowdowns([self.kind_fp[k] for k in key], [self.kind_sig[k] for k in key], self.llc)
            hit = {k: 1.0 / f for k, f in zip(key, factors)}
            if len(self._rates) < 200_000:
                self._rates[key] = hit
        return hit

    def start_state(self) -> list:
        if self._initial is not None:
            return self.copy_state(self._initial)
        # [now, pos, running per domain ([idx, rem, rate]), updated_at, next finish, idle, makespan,
        #  (tie-break stamp per domain, counter)]: simultaneous events on two domains are taken in
        # the order simulate()'s heap takes them, the domain rescheduled first goes first
        return [0.0, 0, [[] for _ in range(self.P)], [0.0] * self.P, [math.inf] * self.P, list(self.cpd), 0.0,
                [[0] * self.P, 0]]

    @staticmethod
    def copy_state(state: list) -> list:
        now, pos, running, upd, nxt, idle, mk, (stamp, counter) = state
        return [now, pos, [[e[:] for e in dom] for dom in running], upd[:], nxt[:], idle[:], mk, [stamp[:], counter]]

    @staticmethod
    def next_domain(nxt: list, ties: list) -> int:
        stamp = ties[0]
        return min(range(len(nxt)), key=lambda d: (nxt[d], stamp[d]))

    def _refresh(self, running_d: list, d: int, now: float, nxt: list, ties: list) -> None:
        if not running_d:
            nxt[d] = math.inf
            return
        ties[1] += 1
        ties[0][d] = ties[1]
        rates = self.rates([self.kind[e[0]] for e in running_d])
        kind = self.kind
        finish = math.inf
        for e in running_d:
            e[2] = rates[kind[e[0]]]
            t = max(e[1], 0.0) / e[2]
            if t < finish:
                finish = t
        nxt[d] = now + finish

    def run(self, order: Sequence[int], state: list | None = None, stop: int | None = None, *,
            reuse: bool = False, cutoff: float = math.inf, on_start: Callable | None = None):
        """Makespan of ``order`` (from ``state``, a snapshot, when given). With ``stop``: return
        the state just before the dispatch step that would start position ``stop``. With
        ``reuse``, ``state`` is advanced in place instead of copied (the caller drops it).
        With ``cutoff``: return ``math.inf`` as soon as the makespan is sure to exceed it (a task
        starts whose solo time alone ends past it, or an event past it with work left; contention
        only slows tasks down), so an order that cannot beat an incumbent costs only its prefix.
        With ``on_start``: called as ``on_start(i, running)`` before task ``i`` starts, ``running``
        the indices already running on its domain."""
        self.evaluations += 1
        st = self.start_state() if state is None else state if reuse else self.copy_state(state)
        now, pos, running, upd, nxt, idle, mk, ties = st
        first = pos
        stamp, counter = ties
        n, P, maxc = len(order), self.P, self.maxc
        solo, tol, kind, rates_of = self.solo, self.tol, self.kind, self.rates
        inf = math.inf
        heap = [(nxt[d], stamp[d], d) for d in range(P) if nxt[d] != inf]
        heapq.heapify(heap)
        push, pop = heapq.heappush, heapq.heappop

        def refresh(d: int) -> None:
            nonlocal counter
            entries = running[d]
            if not entries:
                nxt[d] = inf
                return
            counter += 1
            stamp[d] = counter
            rates = rates_of([kind[e[0]] for e in entries])
            finish = inf
            for e in entries:
                rate = e[2] = rates[kind[e[0]]]
                t = (e[1] if e[1] > 0.0 else 0.0) / rate
                if t < finish:
                    finish = t
            nxt[d] = now + finish
            push(heap, (now + finish, counter, d))

        dispatch = True
        while True:
            if dispatch and pos < n:
                if stop is not None and pos + sum(idle) > stop:
                    self.starts += pos - first
                    return [now, pos, running, upd, nxt, idle, mk, [stamp, counter]]
                domains = [d for d in range(P) if idle[d]]
                if len(domains) == 1:  # the usual case: only the domain that just freed a core
                    d = domains[0]
                    elapsed = now - upd[d]
                    if elapsed > 0:
                        for e in running[d]:
                            e[1] -= elapsed * e[2]
                    upd[d] = now
                    take = min(idle[d], n - pos)
                    for i in order[pos:pos + take]:
                        if now + solo[i] > cutoff:
                            self.starts += pos - first
                            return math.inf
                        if on_start is not None:
                            on_start(i, [e[0] for e in running[d]])
                        running[d].append([i, solo[i], 1.0])
                    pos += take
                    idle[d] -= take
                    refresh(d)
                else:
                    counts = idle[:]
                    touched = []
                    for rank in range(maxc):
                        for d in domains:
                            if rank < counts[d] and pos < n:
                                if idle[d] == counts[d]:  # first start on d in this step
                                    elapsed = now - upd[d]
                                    if elapsed > 0:
                                        for e in running[d]:
                                            e[1] -= elapsed * e[2]
                                    upd[d] = now
                                    touched.append(d)
                                i = order[pos]
                                if now + solo[i] > cutoff:
                                    self.starts += pos - first
                                    return math.inf
                                pos += 1
                                if on_start is not None:
                                    on_start(i, [e[0] for e in running[d]])
                                running[d].append([i, solo[i], 1.0])
                                idle[d] -= 1
                    for d in touched:
                        refresh(d)
            dispatch = False
            # next event: the earliest finish, ties in the order simulate()'s heap takes them
            while heap:
                t, s_, d = pop(heap)
                if s_ == stamp[d] and nxt[d] != inf:
                    break
            else:
                break
            if t > cutoff:
                self.starts += pos - first
                return math.inf
            now = t
            elapsed = now - upd[d]
            if elapsed > 0:
                for e in running[d]:
                    e[1] -= elapsed * e[2]
            upd[d] = now
            left = [e for e in running[d] if e[1] > tol[e[0]]]
            finished = len(running[d]) - len(left)
            if finished:
                running[d] = left
                idle[d] += finished
                mk = now
                dispatch = True
            refresh(d)
        self.starts += pos - first
        if stop is not None:
            return [now, pos, running, upd, nxt, idle, mk, [stamp, counter]]
        return mk


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
        low = snapshot[1]
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


def improve_tail(ev: FcfsEvaluator, order: Sequence[int], *, budget: int | None = None, seed: int = 0
                 ) -> list[int]:
    """``order`` with its end improved by a seeded local search, never predicted worse.

    The search starts on the last wave (the last ``ev.N`` positions, N the cores): random swap or
    insert moves between two positions of that tail, each order simulated first come first served
    from a snapshot of the simulation where the tail begins and abandoned as soon as it cannot beat
    the incumbent (``cutoff``); ties are accepted (so the search walks plateaus), strict
    improvements reset a patience counter. After m(m - 1) moves in a row without a strict
    improvement (m = the tail's length), the tail widens by another wave, until it covers the whole
    order. Most of the gain is in the last wave, where a shorter task or a lighter co-runner
    decides when the last core frees; the widening spends what is left of ``budget`` (task starts
    simulated, ``ev.starts``; each move is also charged one start) on the waves before it.
    Returns ``order`` itself unless the search found a strictly shorter predicted makespan.
    """
    best = list(order)
    n = len(best)
    if n < 2:
        return best
    value = start_value = ev.run(best)
    limit = math.inf if budget is None else ev.starts + budget
    rng = random.Random(seed)
    signature = [(ev.solo[i], ev.kind[i]) for i in range(n)]
    width = min(n, ev.N)
    while ev.starts < limit:
        snapshot = ev.run(best, stop=n - width) if width < n else None
        low = snapshot[1] if snapshot is not None else 0
        patience, idle = (n - low) * (n - low - 1), 0
        while idle < patience and ev.starts < limit:
            idle += 1
            i, j = rng.randrange(low, n), rng.randrange(low, n)
            swap = rng.random() < 0.5
            if i == j or (swap and signature[best[i]] == signature[best[j]]):
                continue  # the same order
            candidate = best[:]
            if swap:
                candidate[i], candidate[j] = candidate[j], candidate[i]
            else:
                candidate.insert(j, candidate.pop(i))
            ev.starts += 1
            cutoff = value + 1e-12 * max(1.0, value)
            candidate_value = ev.run(candidate, state=snapshot, cutoff=cutoff)
            if candidate_value <= cutoff:
                if candidate_value < value - 1e-9 * max(1.0, value):
                    idle = 0
                best, value = candidate, min(value, candidate_value)
        if low == 0:
            break
        width = min(n, width + ev.N)
    return best if value < start_value - 1e-9 * max(1.0, start_value) else list(order)


class BudgetExceeded(Exception):
    pass


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

    def settle(state):
        """Advance to the next decision (or the end): returns (state, slots to fill) or the makespan."""
        now, pos, running, upd, nxt, idle, mk, ties = state
        while True:
            d = ev.next_domain(nxt, ties)
            t = nxt[d]
            if t == math.inf:
                return None, mk
            now = t
            elapsed = now - upd[d]
            if elapsed > 0:
                for e in running[d]:
                    e[1] -= elapsed * e[2]
            upd[d] = now
            left = [e for e in running[d] if e[1] > tol[e[0]]]
            finished = len(running[d]) - len(left)
            running[d] = left
            ev._refresh(running[d], d, now, nxt, ties)
            if finished:
                idle[d] += finished
                mk = now
                state[0], state[6] = now, mk
                return state, None

    def fill_slots(idle):
        return [d for r in range(ev.maxc) for d in range(P) if r < idle[d]]

    def close_step(state, step_picks: dict) -> None:
        """Rates of the domains a dispatch step started tasks on, refreshed after the whole step in
        the order the step first touched them, exactly as :meth:`FcfsEvaluator.run` does (the
        refresh order breaks ties between domains finishing at the same instant)."""
        for d in step_picks.get("touched", ()):
            ev._refresh(state[2][d], d, state[0], state[4], state[7])

    def dfs(state, waiting: list[int], slots: list[int], step_picks: dict, order: list[int]):
        nonlocal nodes
        nodes += 1
        if nodes > budget:
            raise BudgetExceeded
        now, pos, running, upd, nxt, idle, mk, ties = state
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
            dfs(st2, waiting, fill_slots(st2[5]), {}, order)
            return
        waiting_work = sum(solo[i] for i in waiting)
        if bound(now, running, upd, idle, waiting_work, max(solo[i] for i in waiting)) >= best[0] - 1e-9:
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
            child = ev.copy_state(state)
            c_now, _, c_running, c_upd, c_nxt, c_idle, _, c_ties = child
            elapsed = c_now - c_upd[d]
            if elapsed > 0:
                for e in c_running[d]:
                    e[1] -= elapsed * e[2]
            c_upd[d] = c_now
            c_running[d].append([i, solo[i], 1.0])
            c_idle[d] -= 1
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
        dfs(start, waiting, fill_slots(start[5]), {}, [])
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


def trace(ev: FcfsEvaluator, choose: Callable[[list[int]], list[int]]) -> list[int]:
    """The dispatch order of a work-conserving policy that decides as cores free, in ``ev``'s model.

    At every dispatch step ``choose`` gets the domains of the idle cores, in the order the
    evaluator fills them (round-robin over domains: the first idle core of each, then the
    second...), and returns one task index per core, in that order. Replaying the result with
    ``ev.run`` reproduces the policy's schedule. Cost: one evaluation's events plus O(n) per step.
    """
    order = [0] * ev.n  # positions past the fixed prefix are never read before ``stop``
    placed = [False] * ev.n
    fixed = 0
    state = None
    while fixed < ev.n:
        state = ev.run(order, state=state, stop=fixed, reuse=True)
        idle = state[5]
        slots = [d for r in range(ev.maxc) for d in range(ev.P) if r < idle[d]][:ev.n - fixed]
        picks = choose(slots)
        if len(picks) != len(slots) or any(placed[i] for i in picks):
            raise ValueError(f"trace(): the policy started {picks!r} on {len(slots)} idle cores; it must start "
                             "one waiting task on each while tasks wait")
        for i in picks:
            placed[i] = True
            order[fixed] = i
            fixed += 1
    return order


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
