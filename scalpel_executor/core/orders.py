"""Dispatch orders simulated first come first served in the contention model: the default policy's evaluator. Pure.

Any schedule a work-conserving policy produces is reproduced by ``fifo`` fed its *dispatch order*
(the order in which its tasks started), so the default policy (:mod:`~scalpel_executor.core.planning`)
searches dispatch orders under first come, first served. :class:`FcfsEvaluator` predicts the
makespan of a dispatch order with exactly :func:`scalpel_executor.core.simulate.simulate`'s rules
(round-robin dispatch over domains, rates from the
:class:`~scalpel_executor.core.contention.ContentionModel`, completions within 1e-9 relative),
specialised to that case; tests/core check that the two agree to 1e-9. Where a simulation stands
between two dispatch steps is a :class:`SimState`, which the evaluator can stop at, copy and resume
from. On top of it:

* :func:`trace` turns any policy's decisions into its dispatch order (the base orders of the
  ``scalpel`` policy);
* :func:`improve_tail` improves the end of an order by a seeded local search whose tail widens
  a wave at a time (the ``scalpel`` policy's second step).

The searches benchmarks compare policies with (the oracle: branch and bound, local search) live
in :mod:`scalpel_executor.experiments.order_search`, on this evaluator.

Batches arrive at time 0 on an empty machine, or on the tasks already running that the evaluator
is given (:class:`RunningTask`: where each runs, the cores it holds, its footprint and how long it
has left); each task has a solo time (the scheduler's estimate), a footprint and a sensitivity.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.interference import Terms, corun_slowdowns

__all__ = ["FcfsEvaluator", "RunningTask", "SimState", "trace", "improve_tail"]


@dataclass(frozen=True, slots=True)
class RunningTask:
    """A task running when a simulation of the rest starts, as the evaluators see it.

    ``remaining`` is what the scheduler estimates it has left (its run-time estimate less what it
    has run, at least ``admission.OVERDUE_FRACTION`` of ``runtime``, the whole estimate: its
    reservations read that, ``Scheduler._remaining``); ``work`` the solo seconds of work it really
    has left, where that is known to differ (a simulation's state; None: ``remaining``). ``cores``
    are the cores it holds, as positions among its domain's cores, its own first; () for a one-core
    task whose core does not matter (first come first served counts cores, it does not place them).
    """

    domain: int
    footprint: float
    remaining: float
    cores: tuple[int, ...] = ()
    runtime: float | None = None  # None: ``remaining`` (it has just started)
    work: float | None = None
    interference: Terms | None = None  # its residuals (Task.interference)

    @property
    def width(self) -> int:
        """How many cores it holds."""
        return len(self.cores) or 1

    @property
    def solo_left(self) -> float:
        """Solo seconds of work it has left: ``work``, else the estimate ``remaining``."""
        return self.remaining if self.work is None else self.work


class SimState:
    """Where a first-come-first-served simulation stands: a snapshot :meth:`FcfsEvaluator.run`
    stops at and resumes from.

    ``running[d]`` holds one entry ``[task index, solo seconds of work left, rate]`` per task
    running on domain ``d``; ``updated[d]`` is when its work left was last brought up to date and
    ``next_end[d]`` when its next task ends at the current rates (inf: nothing runs there).
    ``position`` counts the order's tasks started, ``makespan`` is the latest end so far. Tasks
    ending on two domains at the same instant are taken in the order simulate()'s heap takes
    them, the domain rescheduled first going first: ``stamp[d]`` is the value ``counter`` (the
    reschedulings so far) had when ``d`` was last rescheduled.
    """

    __slots__ = ("now", "position", "running", "updated", "next_end", "idle", "makespan", "stamp", "counter")

    def __init__(self, now: float, position: int, running: list[list[list]], updated: list[float],
                 next_end: list[float], idle: list[int], makespan: float, stamp: list[int], counter: int):
        self.now, self.position, self.running, self.updated = now, position, running, updated
        self.next_end, self.idle, self.makespan, self.stamp, self.counter = next_end, idle, makespan, stamp, counter

    def stopped_at(self, now: float, position: int, makespan: float, counter: int) -> SimState:
        """This state, its lists advanced in place, with the scalars a run kept as locals."""
        self.now, self.position, self.makespan, self.counter = now, position, makespan, counter
        return self

    def copy(self) -> SimState:
        return SimState(self.now, self.position, [[e[:] for e in domain] for domain in self.running],
                        self.updated[:], self.next_end[:], self.idle[:], self.makespan, self.stamp[:], self.counter)


class FcfsEvaluator:
    """Makespan of a dispatch order under ``fifo``, with simulate()'s rules (round-robin dispatch
    over domains, rates from the ContentionModel, completions within 1e-9 relative).

    ``solo``, ``footprints`` and ``sensitivities`` (None: the model's default) describe the tasks,
    indexed 0..n-1, and ``interference`` their residuals (:class:`~scalpel_executor.core.interference.Terms`)
    (``Task.interference``; None, or a task's None: the footprint model alone, rates through
    :func:`~scalpel_executor.core.interference.corun_slowdowns`); orders are lists of these
    indices. :meth:`of` builds one from SimTasks. Tasks of one footprint, sensitivity and
    residuals are one *kind*: rates are cached per multiset of kinds running on a domain.
    ``running`` (:class:`RunningTask`: each one's domain, footprint, time left and the cores it
    holds) makes every simulation start from them instead of an empty machine (they are indices
    n, n+1, ... inside; a domain's idle cores are its cores less those they hold).
    """

    resumable = True  # run() stops at and resumes from a SimState

    def __init__(self, solo: Sequence[float], footprints: Sequence[float], sensitivities: Sequence[float | None],
                 cores_per_domain: Sequence[int], llc: float, model: ContentionModel,
                 running: Sequence[RunningTask] = (), tails: Sequence[float] | None = None,
                 interference: Sequence[Terms | None] | None = None):
        if not (len(solo) == len(footprints) == len(sensitivities)):
            raise ValueError(f"solo times, footprints and sensitivities differ in length: "
                             f"{len(solo)}, {len(footprints)}, {len(sensitivities)}")
        self.n = len(solo)
        self.solo = [float(s) for s in solo] + [float(r.solo_left) for r in running]
        sigma0 = model.sensitivity
        if interference is not None and len(interference) != self.n:
            raise ValueError(f"interference terms are given for {len(interference)} tasks, not the {self.n} solo "
                             f"times; give one Terms or None per task")
        kinds: dict[tuple, int] = {}
        self.kind = []
        for footprint, sensitivity, terms in zip([*footprints, *(r.footprint for r in running)],
                                                 [*sensitivities, *(None for _ in running)],
                                                 [*(interference or [None] * self.n),
                                                  *(r.interference for r in running)]):
            key = (footprint, sigma0 if sensitivity is None else sensitivity, terms)
            self.kind.append(kinds.setdefault(key, len(kinds)))
        self.kind_fp = [k[0] for k in kinds]
        self.kind_sig = [k[1] for k in kinds]
        self.kind_terms = [k[2] for k in kinds]
        self.cpd = list(cores_per_domain)
        self.P, self.N, self.maxc = len(self.cpd), sum(self.cpd), max(self.cpd)
        self.llc, self.model = llc, model
        self._rates: dict[tuple, dict[int, float]] = {}
        self.tol = [1e-9 * max(1.0, s) for s in self.solo]
        # what waits for each task's result once it ends (Task.tail): an order's predicted end is
        # its latest finish + tail; None when every tail is 0 (the hot loop then skips it)
        self.tails = ([max(0.0, float(t)) for t in tails] + [0.0] * len(running)
                      if tails is not None and any(t > 0 for t in tails) else None)
        self.evaluations = 0
        self.starts = 0  # task starts simulated, over all evaluations: the work done
        self._initial = None
        # index -> cores held, for the running tasks that hold more than one (None: none does)
        self._wide = {self.n + number: task.width for number, task in enumerate(running) if task.width > 1} or None
        if running:
            state = self.start_state()
            for number, task in enumerate(running):
                state.running[task.domain].append([self.n + number, self.solo[self.n + number], 1.0])
                state.idle[task.domain] = max(0, state.idle[task.domain] - task.width)
            for domain in range(self.P):
                self.refresh(state, domain)
            self._initial = state

    @classmethod
    def of(cls, tasks: Sequence, cores_per_domain: Sequence[int], llc: float, model: ContentionModel) -> FcfsEvaluator:
        """An evaluator of SimTasks as they truly run (``solo_time``, ``footprint``, ``sensitivity``,
        ``interference``): what :func:`~scalpel_executor.core.simulate.simulate` does."""
        return cls([t.solo_time for t in tasks], [t.footprint for t in tasks], [t.sensitivity for t in tasks],
                   cores_per_domain, llc, model, interference=[t.interference for t in tasks])

    def rates(self, kinds_running: list[int]) -> dict[int, float]:
        key = tuple(sorted(kinds_running))
        hit = self._rates.get(key)
        if hit is None:
            factors = corun_slowdowns(self.model, [self.kind_fp[k] for k in key], [self.kind_sig[k] for k in key],
                                      self.llc, [self.kind_terms[k] for k in key])
            hit = {k: 1.0 / f for k, f in zip(key, factors)}
            if len(self._rates) < 200_000:
                self._rates[key] = hit
        return hit

    def start_state(self) -> SimState:
        """The state before the first dispatch step: the machine idle, or running what it was given."""
        if self._initial is not None:
            return self._initial.copy()
        return SimState(0.0, 0, [[] for _ in range(self.P)], [0.0] * self.P, [math.inf] * self.P, list(self.cpd),
                        0.0, [0] * self.P, 0)

    @staticmethod
    def next_domain(state: SimState) -> int:
        """The domain whose next end comes first (ties: the one rescheduled first)."""
        next_end, stamp = state.next_end, state.stamp
        return min(range(len(next_end)), key=lambda d: (next_end[d], stamp[d]))

    @staticmethod
    def advance(state: SimState, d: int) -> None:
        """Bring domain ``d``'s running tasks to ``state.now``: each has done the time since the domain
        was last advanced times its rate of solo work. (:meth:`run` writes this step out on its locals:
        it is the default policy's hot path, and a call per event costs there.)"""
        elapsed = state.now - state.updated[d]
        if elapsed > 0:
            for e in state.running[d]:
                e[1] -= elapsed * e[2]
        state.updated[d] = state.now

    def refresh(self, state: SimState, d: int) -> None:
        """Reschedule domain ``d`` at ``state.now``: its tasks' rates and its next end."""
        running_d = state.running[d]
        if not running_d:
            state.next_end[d] = math.inf
            return
        state.counter += 1
        state.stamp[d] = state.counter
        rates = self.rates([self.kind[e[0]] for e in running_d])
        kind = self.kind
        finish = math.inf
        for e in running_d:
            e[2] = rates[kind[e[0]]]
            t = max(e[1], 0.0) / e[2]
            if t < finish:
                finish = t
        state.next_end[d] = state.now + finish

    def run(self, order: Sequence[int], state: SimState | None = None, stop: int | None = None, *,
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
        st = self.start_state() if state is None else state if reuse else state.copy()
        # the state's fields as locals: this loop is the default policy's hot path
        now, pos, running, upd, nxt, idle, mk = st.now, st.position, st.running, st.updated, st.next_end, st.idle, \
            st.makespan
        stamp, counter = st.stamp, st.counter
        first = pos
        n, P, maxc = len(order), self.P, self.maxc
        solo, tol, kind, rates_of = self.solo, self.tol, self.kind, self.rates
        wide, tails = self._wide, self.tails
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
                    return st.stopped_at(now, pos, mk, counter)
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
                        if now + solo[i] + (tails[i] if tails is not None else 0.0) > cutoff:
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
                                if now + solo[i] + (tails[i] if tails is not None else 0.0) > cutoff:
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
            if elapsed <= 0 and len(left) == len(running[d]):
                # the clock did not move: what is left of a task whose end it cannot tell from now
                # is done (else the same event came back for ever; a plan's run reached 1.7e7 s)
                left = [e for e in left if now + e[1] / e[2] > now]
            finished = len(running[d]) - len(left)
            if finished:
                kept = {id(e) for e in left}
                ended = [e for e in running[d] if id(e) not in kept]
                if wide is not None:  # a task that was running when the simulation began frees its cores
                    finished = sum(wide.get(e[0], 1) for e in ended)
                if tails is not None:  # what waits for a task's result ends no sooner than its tail
                    mk = max(mk, max(now + tails[e[0]] for e in ended))
                else:
                    mk = now
                running[d] = left
                idle[d] += finished
                dispatch = True
            refresh(d)
        self.starts += pos - first
        if stop is not None:
            return st.stopped_at(now, pos, mk, counter)
        return mk


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
        if width < n and ev.resumable:
            snapshot = ev.run(best, stop=n - width)
            low = snapshot.position
        else:  # the whole order, or an evaluator that replays orders from the start
            snapshot, low = None, n - width
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
        idle = state.idle
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
