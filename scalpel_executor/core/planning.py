"""The default policy, ``scalpel``: a dispatch order checked in the contention model. Pure.

The published algorithm (``scalpel-paper``) keeps heavy footprints apart but runs its padded,
partial groups last whatever their run times, and so loses to plain longest-first
(``longest_first``) on many batches; longest-first ignores the cache. The default keeps the better
of the two on every batch and then improves the end of the schedule, where both lose most:

1. **Base order.** Trace, in the contention model and on what the scheduler knows (run-time
   estimates, footprints), the dispatch orders of ``longest_first``, ``scalpel-paper`` and
   ``scalpel-lpt`` (Algorithm 1 groups ordered by their longest task); keep the one with the
   shortest predicted makespan (longest-first on ties).
2. **Search of the tail** (a batch planned on an idle machine only). A seeded local search over the end of that order
   (:func:`~scalpel_executor.core.orders.improve_tail`): random swaps and moves between positions
   of the last wave (the last N positions, N the cores), each order simulated first come first
   served from a snapshot of where that wave begins and abandoned as soon as it cannot beat the
   best so far; when m(m - 1) moves in a row (m positions searched) found nothing better, the
   search widens by another wave, until the allowance is spent or it covers the whole batch. It
   keeps the result only if its predicted makespan is strictly shorter. The last wave goes first
   because that is where the gain is: the end of the schedule is decided by which tasks, and
   which co-runners, hold the last cores. Under the same allowance this closed 51% of the
   longest-first-to-search gap on 8 x 8 cores, 74% on 16 cores in one domain and 97% on the
   paper machine (first batches of one size each), against 23%, 64% and 84% for the rollout it
   replaced (docs/benchmarks.md).
3. **Robustness check**, only when some estimate is uncertain (``Task.runtime_spread`` > 0: the profile
   store's run-time std / mean for the task's key) and the plan is not longest-first's order:
   replay longest-first's order, the base order and the plan in up to 32 scenarios whose run times
   are drawn around the estimates (one factor exp(N(0, spread)) per distinct task), and keep the
   plan or the base only if it beats longest-first by more than two standard errors of the mean
   log ratio (:func:`robust_choice`); otherwise dispatch longest-first's order. A quarter of the
   allowance is kept for it. When that quarter cannot pay for 4 scenarios of two orders (batches
   of hundreds of tasks or more on short makespans), no gain can be checked, so steps 1 and 2
   are not run and longest-first's order is dispatched.
4. **Terms check**, only when some task is told per-key interference terms (``Task.interference``)
   and the batch is planned on an idle machine: steps 1-3 run twice, on the tasks as told and with
   their terms dropped, and where the two orders differ the one made with the terms is kept only
   if, replayed in :data:`ROBUST_SCENARIOS` scenarios whose terms are drawn :data:`TERMS_SPREAD`
   around the told ones, it ends sooner on average by more than one standard error
   (:func:`robust_choice`, z = :data:`TERMS_Z`). Otherwise the
   batch is scheduled as one told nothing: the plan made without terms, its tasks' terms dropped,
   so the admission rule checks its starts as it would without them. A plan searched for on the
   told terms is flattered by them (the optimizer's curse): on the paper machine's seed 1 the
   learned terms predicted their plan 5.2% sooner than footprint-only's, and it ran 4.0% later.
5. **Dispatch** the order first come first served: any free core takes the next task.

Why it is never much worse than longest-first: the base orders of step 1 reproduce the schedules of
``longest_first`` and ``scalpel-paper`` exactly when replayed first come first served, and step 2
only keeps a change that lowers the predicted makespan, so with exact estimates the plan never
ends later than either in the model. With wrong estimates or a wrong model it can; step 3 keeps
longest-first unless the plan's gain survives the spread the estimates are known to have (in
simulation, with estimates off by exp(N(0, 0.3)), it cut the paper machine's batches that ended
later than longest-first from 28% to 1%; docs/benchmarks.md measures how far).

Cost: step 1 traces three orders, O(n log n + n·C) each for n tasks on domains of C cores; each
move of step 2 simulates at most the searched tail and the N tasks running where it begins,
O((m + N)·C), independent of n. The whole plan may simulate at most min(``budget``, ``rate``
(:data:`STARTS_PER_SECOND`) x the predicted makespan of longest-first, times :data:`REFERENCE_WIDTH`
/ C where the widest domain has C < 8 cores, C at least :data:`NARROWEST_WIDTH`) task starts
(``budget`` defaults to :data:`DEFAULT_BUDGET`; each move of step 2 is charged one start more);
step 2 stops when that is spent, keeping what it has improved so far, and step 1 is skipped when
it would not fit (about 6n starts). So a batch of short tasks (no-op tasks: predicted makespan
near 0) is planned as plain longest-first, and planning stays a small share of what it plans: a
simulated start costs more the more tasks a domain runs at once, 11-15 microseconds on domains
of 8 and 16 cores with 64 tasks waiting, 4-6 on domains of 2 and 4 (``python
benchmarks/plan_cost.py``), so the plan costs at most about 0.2-0.3% of the batch's predicted
makespan on any of these widths. The rate is higher on narrow domains because a short batch there
could not otherwise be searched to its head: 16 planted tasks of 1 s on 2 cores got 1,900
starts, and the tail search, widening a wave at a time, never reached the first pairs, where a
stream started beside the task it hurts (docs/results/planted.md).
With terms told, steps 1-3 run twice and the terms check replays two orders in at most
:data:`ROBUST_SCENARIOS` scenarios, within the budget again: a plan costs up to three times as much.
Without an LLC size the model predicts no contention and the plan is a contention-free
longest-processing-time improvement.

Tasks of several cores: a batch holding one is checked in
:class:`~scalpel_executor.core.multicore_orders.MulticoreEvaluator`, which books, reserves and
backfills as the scheduler does, from what runs when the plan is made; step 1 is largest area
first (run time x cores) alone, step 2 replays each move from the start (not on a replan while
tasks run, as for one-core tasks). A plan that gains nothing on largest-area-first is dispatched
unchecked, as are batches that evaluator does not replay (a task wider than any domain, memory
or accelerators declared). One-core tasks planned beside running wide ones stay with
:class:`~scalpel_executor.core.orders.FcfsEvaluator`, which counts the cores those hold.

The plan starts from what is running when it is made (``PlanContext.running``,
:class:`~scalpel_executor.core.orders.RunningTask`: each running task's domain, the cores it holds
there, its footprint and estimated remaining time; empty for a batch on an idle machine, as
Algorithm 1 assumes); tasks arriving while others run are planned again together with every task
that has not started, around the ones that have.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from scalpel_executor.core.admission import TOLERANCE, slowdown_increase, told_terms
from scalpel_executor.core.interference import Terms
from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.multicore_orders import MulticoreEvaluator, supports
from scalpel_executor.core.orders import FcfsEvaluator, RunningTask, improve_tail, trace
from scalpel_executor.core.tasks import Group, Task, rank

__all__ = ["PlanContext", "plan_scalpel", "scalpel_order", "robust_choice", "starts_allowed", "DEFAULT_BUDGET",
           "STARTS_PER_SECOND", "REFERENCE_WIDTH", "NARROWEST_WIDTH",
           "BASE_POLICIES", "TAIL_SEED", "ROBUST_SCENARIOS", "ROBUST_MIN_SCENARIOS",
           "ROBUST_Z", "TERMS_SPREAD", "TERMS_Z"]

DEFAULT_BUDGET = 60_000  # most task starts one plan may simulate
STARTS_PER_SECOND = 200  # and at most this many per second of the batch's predicted makespan on domains of 8 cores or more,
REFERENCE_WIDTH = 8  # ... times REFERENCE_WIDTH / the widest domain's cores on narrower ones, where a start costs less
NARROWEST_WIDTH = 2  # ... counting a narrower domain as this wide
BASE_POLICIES = ("longest_first", "scalpel-paper", "scalpel-lpt")
TAIL_SEED = 16  # the tail search is seeded, so a plan is a function of its tasks
ROBUST_SCENARIOS = 32  # run-time scenarios the robustness check draws, at most
ROBUST_MIN_SCENARIOS = 4  # fewer fit in the allowance: nothing is checked, longest-first kept
ROBUST_Z = 2.0  # another order wins only when its mean log ratio + 2 standard errors is below 0
ROBUST_SEED = 15  # the scenarios are seeded, so a plan is a function of its tasks
#: How far a learned key's terms may be off, in log slowdown: the sd a fit's noise (about ±20%,
#: core.interference_fit.DEFAULT_NOISE) leaves on a mean over the 40-60 co-runs a key is in among the
#: 400 a host keeps, 0.2 / √50. The check of a plan made with terms (step 5) draws each key's
#: sensitivity and pressure this far around what it was told.
TERMS_SPREAD = 0.03
#: ... and keeps the plan made with the terms only where, over those draws, its mean log ratio to the
#: plan made without them is below 0 by more than this many standard errors. At 0 (the mean alone)
#: the learned plans of the interference study's epyc batches ended 0.3% later than footprint-only's
#: (seeds 60-65, one instance 2.2%); at 1 they end 0.1% sooner. On seeds 70-75 and 80-85, drawn
#: after it was chosen, no cell ends later than at 0 and the worst instance falls from 1.063x
#: footprint-only's makespan to 1.024x (docs/results/interference.md, "A margin for the terms' check").
TERMS_Z = 1.0

Chooser = Callable[[list[int]], list[int]]


@dataclass
class PlanContext:
    """What a plan function may know about the machine besides the tasks.

    ``chooser(policy, tasks)`` returns a step function for :func:`~scalpel_executor.core.orders.trace`
    that makes ``policy``'s decisions on ``tasks`` (the Scheduler provides it, by running a scheduler
    of that policy); only the model-checked policy uses it.
    """

    cores_per_domain: Sequence[int]
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    llc: float | None = None  # bytes of LLC per domain; None: unknown (no contention predicted)
    model: ContentionModel = field(default_factory=ContentionModel)
    budget: int = DEFAULT_BUDGET
    rate: float = STARTS_PER_SECOND  # simulated starts allowed per second of predicted makespan (starts_allowed)
    chooser: Callable[[str, list[Task]], Chooser] | None = None
    running: Sequence[RunningTask] = ()  # the tasks running now: domain, cores held there, footprint, time left


def plan_scalpel(tasks: list[Task], context: PlanContext) -> list[Group]:
    """The default policy (module docstring): a base order checked in the model, its tail searched.

    Each task's ``foreseen_harm`` is set to the slowdown increase the plan predicted, and accepted,
    when it starts (the admission rule leaves such a co-run alone), or None where the plan's
    co-runs were not checked (the robustness check kept longest-first, or nothing could be checked).
    Where the plan made with per-key terms did not survive their check (step 4), each task's
    ``interference`` is set to None: the batch is scheduled as one told nothing, admission included."""
    order, ev, with_terms = _plan(tasks, context)
    for task in tasks:
        task.foreseen_harm = None
        if not with_terms:
            task.interference = None
    if ev is not None:
        model, llc = context.model, ev.llc
        footprints = [t.footprint for t in tasks] + [r.footprint for r in context.running]
        terms = [t.interference for t in tasks] + [r.interference for r in context.running]

        def foresee(i: int, running: list[int]) -> None:
            increases, own = slowdown_increase(model, llc, [footprints[j] for j in running], footprints[i],
                                               [terms[j] for j in running], terms[i])
            tasks[i].foreseen_harm = max([own, *increases])

        ev.run(order, on_start=foresee)
    return [Group([tasks[i]], 1) for i in order]


def scalpel_order(tasks: list[Task], context: PlanContext) -> list[int]:
    """Indices of ``tasks`` in the order :func:`plan_scalpel` dispatches them."""
    return _plan(tasks, context)[0]


def _plan(tasks: list[Task], context: PlanContext) -> tuple[list[int], FcfsEvaluator | None, bool]:
    """The order, the evaluator that checked it (None when its co-runs were not checked), and
    whether the tasks' terms stay told (False: the batch goes back to footprint-only, step 4)."""
    order, ev = _checked_plan(tasks, context)
    if ev is None or not isinstance(ev, FcfsEvaluator) or context.running or not any(told_terms(t) for t in tasks):
        return order, ev, True
    plain, plain_ev = _checked_plan([replace(t, interference=None) for t in tasks], context)
    if plain == order:
        return order, ev, True
    spreads = [t.runtime_spread if t.runtime_spread > 0 and math.isfinite(t.runtime_spread) else 0.0 for t in tasks]
    llc = context.llc if context.llc and context.llc > 0 else math.inf
    # The plan made with the terms was searched for on them, so the told terms flatter it: on seeds
    # 0-5 (docs/results/interference.md) they predicted it up to 9% sooner than the plan made
    # without them where it ended up to 4% later. Terms drawn around them do not. The plan made
    # with them is kept where, so drawn, it ends sooner by more than TERMS_Z standard errors.
    # The check has the plan's budget of its own.
    kept = robust_choice(tasks, spreads, [plain, order], context, llc, context.budget,
                         terms_spread=TERMS_SPREAD, z=TERMS_Z)
    return (order, ev, True) if kept is order else (plain, plain_ev, False)


def _checked_plan(tasks: list[Task], context: PlanContext) -> tuple[list[int], FcfsEvaluator | None]:
    """Steps 1-3 on what the tasks are told: the order, and the evaluator that checked it."""
    n = len(tasks)
    lpt = sorted(range(n), key=lambda i: (-rank(tasks[i]) * tasks[i].cores, tasks[i].seq))
    if n <= 1:
        return lpt, None
    llc = context.llc if context.llc and context.llc > 0 else math.inf
    evaluator = _evaluator(tasks, context, llc)
    if evaluator is None:
        return lpt, None  # largest area first, unchecked
    ev = evaluator([t.runtime for t in tasks])
    best, best_time = lpt, ev.run(lpt)
    allowance = starts_allowed(context, best_time)
    spreads = [t.runtime_spread if t.runtime_spread > 0 and math.isfinite(t.runtime_spread) else 0.0 for t in tasks]
    uncertain = any(spreads)
    if uncertain and allowance // 4 < ROBUST_MIN_SCENARIOS * 2 * n:
        return lpt, None  # no plan could be checked against the estimates' spread (step 3)
    if context.chooser is not None and allowance >= 3 * n and ev.resumable:  # each base policy costs about two runs
        candidates = [trace(ev, context.chooser(policy, tasks)) for policy in BASE_POLICIES[1:]]
        if math.isfinite(llc) and not context.running:  # like the tail search: not on a DAG's replans
            candidates.append(apart_order(ev, lpt, context.model))
        for candidate in candidates:
            predicted = ev.run(candidate)
            if predicted < best_time - 1e-9 * max(1.0, best_time):
                best, best_time = candidate, predicted
    base = best
    # Keep a share of the allowance for the robustness check (step 3) when estimates are uncertain.
    reserve = min(allowance // 4, ROBUST_SCENARIOS * 3 * n) if uncertain else 0
    left = allowance - reserve - ev.starts
    # The last wave first, widening while the allowance lasts; only improvements kept. Not on a
    # replan while tasks run: the waiting tasks' tail is then not the workload's (a DAG releases
    # children later), and searching it held back tasks whose children were the critical path.
    if left > 0 and not context.running:
        best = improve_tail(ev, best, budget=left, seed=TAIL_SEED * 1_000_003 + n)
    if uncertain:  # co-runs are trusted only where a plan's gain survived the spread
        best = robust_choice(tasks, spreads, [lpt, base, best], context, llc, allowance - ev.starts,
                             evaluator=evaluator) if best != lpt else lpt
        return best, ev if best != lpt else None
    if best == lpt and any(task.cores != 1 for task in tasks):
        # Nothing gained on largest-area-first: its co-runs stay the admission rule's to check
        # (past ROLLOUT_LIMIT waiting tasks it keeps heavy ones apart, which gained up to 8% on
        # epyc's 1,024-task batches, docs/benchmarks.md), as before the plan could see wide tasks.
        return lpt, None
    return best, ev


def starts_allowed(context: PlanContext, predicted: float) -> int:
    """The task starts a plan of a batch predicted to take ``predicted`` seconds may simulate: its
    rate per second scaled to the domain width (module docstring, "Cost"), within its budget.

    >>> [starts_allowed(PlanContext([cores]), 10.0) for cores in (16, 8, 4, 2, 1)]
    [2000, 2000, 4000, 8000, 8000]
    >>> starts_allowed(PlanContext([2]), 1000.0)  # the budget bounds it
    60000
    """
    widest = max(context.cores_per_domain, default=REFERENCE_WIDTH)
    scale = REFERENCE_WIDTH / min(REFERENCE_WIDTH, max(NARROWEST_WIDTH, widest))
    return int(min(context.budget, context.rate * scale * predicted))


def _evaluator(tasks: list[Task], context: PlanContext, llc: float) -> Callable[[list[float]], FcfsEvaluator] | None:
    """What predicts the batch's schedule, as a function of the tasks' solo times: one task per
    core first come first served, or, with tasks of several cores waiting or running, as the
    scheduler books, reserves and backfills them around what runs (for the tasks it replays);
    None where neither does."""
    footprints, tails = [t.footprint for t in tasks], [t.tail for t in tasks]
    terms = [t.interference for t in tasks]
    if all(task.cores == 1 for task in tasks):  # running tasks of several cores hold that many
        return lambda solo: FcfsEvaluator(solo, footprints, [None] * len(tasks), context.cores_per_domain, llc,
                                          context.model, context.running, tails, terms)
    if not supports(tasks, context.cores_per_domain):
        return None
    return lambda solo: MulticoreEvaluator(tasks, context.cores_per_domain, llc, context.model, solo=solo,
                                           running=context.running)


APART_LOOKAHEAD = 64  # waiting tasks apart_order scans for one that fits


def apart_order(ev: FcfsEvaluator, base: Sequence[int], model: ContentionModel) -> list[int]:
    """The dispatch order of the admission rule's greedy form applied to ``base``: each free core
    starts the first of the next :data:`APART_LOOKAHEAD` tasks of ``base`` that fits beside what
    its domain runs (no task slowed by more than ``admission.TOLERANCE``), else ``base``'s next.
    Longest-first keeps large tasks together where the cores free at once; this order pairs them
    with small ones, and FCFS replays it exactly (as :func:`~scalpel_executor.core.orders.trace`).
    Cost: one evaluation's events plus O(n · lookahead) footprint checks."""
    n = ev.n
    footprint = [ev.kind_fp[k] for k in ev.kind]
    terms = [ev.kind_terms[k] for k in ev.kind]
    order, fixed, state = [0] * n, 0, None
    waiting = list(base)
    while fixed < n:
        state = ev.run(order, state=state, stop=fixed, reuse=True)
        idle, running = state.idle, [[e[0] for e in entries] for entries in state.running]
        for d in [d for r in range(ev.maxc) for d in range(ev.P) if r < idle[d]][:n - fixed]:
            pick = 0
            for at, i in enumerate(waiting[:APART_LOOKAHEAD]):
                increases, own = slowdown_increase(model, ev.llc, [footprint[j] for j in running[d]], footprint[i],
                                                   [terms[j] for j in running[d]], terms[i])
                if max([own, *increases]) <= TOLERANCE:
                    pick = at
                    break
            i = waiting.pop(pick)
            order[fixed], fixed = i, fixed + 1
            running[d].append(i)
    return order


def robust_choice(tasks: list[Task], spreads: Sequence[float], orders: list[list[int]], context: PlanContext,
                  llc: float, budget: int, *, evaluator: Callable[[list[float]], FcfsEvaluator] | None = None,
                  terms_spread: float = 0.0, z: float = ROBUST_Z) -> list[int]:
    """Of ``orders`` (the first is longest-first's), the one with the lowest expected makespan when
    the run times are off by what the estimates' spreads say; the first unless another wins.

    Each of up to :data:`ROBUST_SCENARIOS` seeded scenarios draws, for every distinct task (same
    run-time estimate, footprint and spread), one factor exp(N(0, spread)) and replays every
    order first come first served with the run times so scaled (the same scenarios for every
    order). An order other than the first wins only when the mean of log(its makespan / the first
    order's), plus ``z`` (:data:`ROBUST_Z`) standard errors of that mean, is below 0: a gain the spread of
    the estimates cannot explain away. With fewer than :data:`ROBUST_MIN_SCENARIOS` scenarios in
    ``budget`` (task starts) nothing can be checked and the first order is kept. ``evaluator``
    builds the evaluator of a scenario's solo times (default: one task per core, from what runs).
    ``terms_spread`` > 0 (one-core tasks, no ``evaluator``): each scenario also draws, for every
    distinct set of told terms (a key's, the running tasks' included), its sensitivity and pressure
    N(0, terms_spread) around what was told, so a plan chosen for the told terms wins only where
    terms that far off would still rank it first.
    """
    distinct = [o for i, o in enumerate(orders) if all(o != p for p in orders[:i])]
    n = len(tasks)
    scenarios = min(ROBUST_SCENARIOS, budget // max(1, len(distinct) * n))
    if len(distinct) < 2:
        return orders[-1]
    if scenarios < ROBUST_MIN_SCENARIOS:
        return orders[0]
    rng = random.Random(ROBUST_SEED * 1_000_003 + n)
    signature = [(t.runtime, t.footprint, s, t.interference) for t, s in zip(tasks, spreads)]
    log_ratio = [[] for _ in distinct]
    footprints = [t.footprint for t in tasks]
    terms_rng = random.Random(ROBUST_SEED * 1_000_003 + n + 1)  # apart, so run-time draws are as without terms
    for _ in range(scenarios):
        factors: dict[tuple, float] = {}
        solo = []
        for t, key, s in zip(tasks, signature, spreads):
            if key not in factors:
                factors[key] = math.exp(rng.gauss(0.0, s)) if s > 0 else 1.0
            solo.append(t.runtime * factors[key])
        drawn: dict[tuple, Terms] = {}

        def terms(told: tuple[float, ...] | None) -> Terms | None:
            if told is None or terms_spread <= 0 or not any(told):
                return told
            if told not in drawn:
                own = Terms(*told)
                drawn[told] = own._replace(sensitivity=own.sensitivity + terms_rng.gauss(0.0, terms_spread),
                                           pressure=own.pressure + terms_rng.gauss(0.0, terms_spread))
            return drawn[told]

        running = [replace(r, interference=terms(r.interference)) for r in context.running] if terms_spread > 0 \
            else context.running
        ev = evaluator(solo) if evaluator is not None else \
            FcfsEvaluator(solo, footprints, [None] * n, context.cores_per_domain, llc, context.model, running,
                          [t.tail for t in tasks], [terms(t.interference) for t in tasks])
        times = [ev.run(o) for o in distinct]
        for k, value in enumerate(times):
            log_ratio[k].append(math.log(value / times[0]) if times[0] > 0 and value > 0 else 0.0)

    def upper(k: int) -> float:  # the mean log ratio plus z standard errors
        values = log_ratio[k]
        mean = sum(values) / len(values)
        sd = math.sqrt(sum((x - mean) ** 2 for x in values) / (len(values) - 1))
        return mean + z * sd / math.sqrt(len(values))

    winner = min(range(len(distinct)), key=lambda k: (upper(k), k))
    return distinct[winner] if upper(winner) < -1e-9 else distinct[0]
