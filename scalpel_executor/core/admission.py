"""Admission at dispatch time: which waiting task a free core may start next to what already runs. Pure.

A plan is an order fixed when a batch arrives; run times drift from their estimates, follow-up
tasks arrive as their parents finish, and the robustness check may fall back to longest-first.
So the default policy decides once more when a core frees, from what is running on that core's
LLC domain at that moment (footprints measured or estimated)::

    free core on domain d, plan head h, running set R (d's tasks, with how long each has run)
      h fits: the model predicts no task of R ∪ {h} slowed by more than TOLERANCE beyond R alone,
              and h is no unmeasured bet: its footprint still the prior while an unmeasured task
              of its key, or a large task, runs on d (unmeasured_risk)
        └─> start h                                                         (FITS)
      h's plan foresaw at least this much harm at its start, and chose it (h.foreseen_harm),
      and the run times it foresaw it from are estimates, not the prior's guess (guessed_runtimes)
        └─> start h                                                         (FORESEEN)
      the plan weighed h's co-runs with per-key terms, and the terms of h and of what runs beside
      it have predicted this run's co-runs so far no worse than footprints alone (TermsLedger)
        └─> start h                                                         (KEPT_TO_PLAN)
      else the first waiting task w of h's priority level, in plan order, that fits
        ├─ run times guessed, and h beside the lightest waiting task seen (in place of d's
        │  heaviest) would be slowed no less, within TOLERANCE: waiting buys h nothing
        │    └─> start h                                                    (CORUN_NO_BETTER_LATER)
        ├─ exists, and the run times are guesses, or the model predicts the schedule ends no
        │  later with w first
        │    └─> start w, h waits                                           (KEPT_APART)
        ├─ exists, but the model predicts waiting costs more than the slowdown
        │    └─> start h                                                    (CORUN_WAIT_COSTS_MORE)
        ├─ none fits, run times guessed, and a waiting task w among the next LEAST_HARM_LOOKAHEAD
        │  slows its domain less than h would
        │    └─> start the least harmful such w, h waits                    (CORUN_LEAST_HARM)
        ├─ none fits, run times measured, h told no interference terms, the least harmful
        │  measured w among the next LEAST_HARM_LOOKAHEAD slows its domain less than h would,
        │  and the model predicts the schedule ends no later with w first
        │    └─> start w, h waits                                           (CORUN_LESS_HARM)
        └─ none fits: start h                                               (CORUN_NOTHING_FITS)

A plan checked in the contention model (``scalpel``'s, with exact estimates, or one whose gain
survived the robustness check) foresees each start's co-runners; when the domain holds no more than
it foresaw, the rule leaves the plan alone, so with exact estimates the schedule is the plan's. What
the plan did not foresee — run times that drifted, tasks that arrived meanwhile (a plan assumes an
empty machine), or an order nobody checked (longest-first kept by the robustness check) — is checked.

"Fits" uses the scheduler's contention model (:class:`~scalpel_executor.core.contention.ContentionModel`),
so a model fitted on a host where co-runs cost nothing admits every pair there, and the default
model keeps apart what overflows its effective capacity ρ·LLC. A task whose footprint is still
the prior does not start beside an unmeasured task of its key, nor beside a large task, while a
task that fits waits, so a first run measures before it bets: once the probe reports one of them, the scheduler learns the
footprint for every task of the key (:meth:`~scalpel_executor.core.scheduler.Scheduler.learn`).

A run time still the prior's guess (``Task.runtime_spread`` at least :data:`GUESSED_SPREAD`: the learning
layer gives a never-seen key spread 1) makes neither the plan's foresight nor the rollout below a
prediction: a first run's plan saw its first lookup, 1 s by the prior and 0.66 s into a 1.6 s run,
as 0.34 s from its end and foresaw a second lookup beside it as cheap, and so started its lookups
two by two. So on guessed run times the footprints alone decide: a measured overflow is kept apart
while a task that fits waits, and when none fits (a 65 MiB lookup overflows ρ·LLC alone, so even a
7 MiB FFT beside it slows it by 11%, a second lookup by 21%) the waiting task that harms least
starts, unless waiting cannot buy the head lighter company: a lookup beside a running 3 MiB FFT
is slowed 5% by the model, as it would be beside any FFT, and keeping it apart there had run the
FFTs two by two and left the lookups to run together at the end. No core idles for any of it.

One bounded wait (the scheduler's, which knows when tasks started): when nothing but tasks of a
running unmeasured task's key waits, a free core of its domain stays idle until that task is
measured (or ends), at most :data:`MEASURE_WAIT` from its start; a task that arrives meanwhile
starts at once, and past the wait the twin starts (:data:`CORUN_AFTER_MEASURE_WAIT`). A burst
split by a slow submitter (eight lookups released before the FFTs submitted 40 ms later, on a
loaded machine) otherwise started two lookups side by side before either was measured.

Whether waiting costs more is the model's call: the scheduler simulates the rest of the plan
from what runs now (a running task's remaining time is its estimate less what it has run, at
least :data:`OVERDUE_FRACTION` of the estimate; no clock of its own: the driver passes ``now``),
once with h started now and once with w started now and h next, and keeps h apart only when that
ends no later. With one-core tasks the rollout is first come first served; with a task of several
cores queued or running it books, reserves and backfills as the scheduler does, where a deferral
must end strictly earlier, and only for a batch that arrived whole with exact estimates (else the
head starts: :meth:`~scalpel_executor.core.scheduler.Scheduler._deferral_pays` says why). The same
rollout decides ``co-run: less harm``. A core never idles while a task waits (but for the bounded
wait above): under the contention
model no co-run is slower than running the pair one after the other. Every start carries its
reason, so drivers can report how often each branch was taken.

A head told per-key interference terms (``Task.interference``, not all zero: :func:`told_terms`) is not ceded to a less harmful
task when none fits: with residuals nearly every co-run passes the tolerance, so "none fits" is
the usual case, and ranking the waiting tasks' harm then rests on residuals learned to within
their noise, which the plan, made with the same terms, has already weighed. In simulation
(``benchmarks/interference_study.py``, batches, seeds 0-5) ceding cost learned planning 8 points
of the gap it closes (69% to 77% without), on ``epyc`` −6% to 65% (docs/interference.md).

Which core: a task that joined work under way and would co-run past :data:`TOLERANCE` here
(:func:`overflows`), while an idle core served later in the same dispatch round sits on a domain
where it would start (it fits, and is no unmeasured bet there), is left for that core: the
scheduler passes this core over once and serves it again at the end of the round
(:meth:`~scalpel_executor.core.scheduler.Scheduler._elsewhere`; only while no task asks for several
cores, memory or accelerators).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass

from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.interference import Terms, corun_slowdowns
from scalpel_executor.core.tasks import Task

__all__ = ["signature", "unmeasured_risk", "overflows", "guessed", "guessed_runtimes", "GUESSED_SPREAD", "ONE_RUN_SPREAD", "TOLERANCE", "OVERDUE_FRACTION", "FITS", "FORESEEN", "KEPT_APART", "CORUN_WAIT_COSTS_MORE", "CORUN_NOTHING_FITS",
           "CORUN_LEAST_HARM", "CORUN_LESS_HARM", "CORUN_NO_BETTER_LATER", "CORUN_AFTER_MEASURE_WAIT", "KEPT_TO_PLAN", "LEAST_HARM_LOOKAHEAD", "MEASURE_WAIT", "BACKFILLED", "PLANNED", "REASONS", "ACCEPTED_CORUNS", "REASONS_EXPLAINED", "Running", "Decision", "decide",
           "TermsLedger", "TERMS_EVIDENCE", "told_terms"]

TOLERANCE = 0.05  # a co-run "overflows" when the model slows some task by more than 5% beyond R alone
OVERDUE_FRACTION = 0.1  # a task past its estimate is assumed to have this fraction of it left
GUESSED_SPREAD = 1.0  # a run time this uncertain is a guess (learning.estimates.PRIOR_SPREAD: never seen)
ONE_RUN_SPREAD = 0.25  # a key seen once: its run time is assumed off by about a quarter (learning.estimates)
LEAST_HARM_LOOKAHEAD = 64  # waiting tasks searched for the least harmful when nothing fits on guessed run times
#: Seconds a free core may stay idle, from the start of a running unmeasured task, when only tasks
#: of its profile key wait: its first reading comes about 0.15 s in (runtime.worker.main.EARLY_REPORT).
MEASURE_WAIT = 0.25

PLANNED = "planned"  # a policy without admission: the plan's choice, unchecked
FITS = "fits"
FORESEEN = "co-run: foreseen by the plan"  # the plan checked this co-run in the model and chose it
KEPT_APART = "kept-apart"
CORUN_WAIT_COSTS_MORE = "co-run: waiting costs more"
CORUN_NOTHING_FITS = "co-run: nothing fits"
CORUN_LEAST_HARM = "co-run: least harm, run times guessed"  # nothing fits; the waiting task that harms least
CORUN_LESS_HARM = "co-run: less harm"  # nothing fits; a measured task that harms less, the rollout ending no later
CORUN_NO_BETTER_LATER = "co-run: none lighter later, run times guessed"  # waiting cannot buy the head lighter company
CORUN_AFTER_MEASURE_WAIT = "co-run: nothing fits, after waiting to measure"  # MEASURE_WAIT passed unmeasured
KEPT_TO_PLAN = "co-run: planned with terms that held"  # a plan made with per-key terms, right so far in this run
BACKFILLED = "backfilled"  # the plan's next task waits for cores, memory or accelerators (core.resources)
REASONS = (PLANNED, FITS, FORESEEN, KEPT_APART, CORUN_WAIT_COSTS_MORE, CORUN_NOTHING_FITS,
           CORUN_LEAST_HARM, CORUN_LESS_HARM, CORUN_NO_BETTER_LATER, CORUN_AFTER_MEASURE_WAIT, KEPT_TO_PLAN,
           BACKFILLED)  # reasons a task started
#: The starts the rule made knowing they co-run past TOLERANCE on their domain, or bet an unmeasured
#: footprint beside its twin or a large task: every ``co-run: ...`` reason. The others start a task
#: that fits (FITS, KEPT_APART, BACKFILLED) or one nobody checked (PLANNED).
ACCEPTED_CORUNS = (FORESEEN, CORUN_WAIT_COSTS_MORE, CORUN_NOTHING_FITS, CORUN_LEAST_HARM, CORUN_LESS_HARM,
                   CORUN_NO_BETTER_LATER, CORUN_AFTER_MEASURE_WAIT, KEPT_TO_PLAN)
#: Each reason in one line, for people (``scalpel report``'s legend; README.md's table of them).
REASONS_EXPLAINED = {
    PLANNED: "the policy's plan chose it; this policy does not check a start against what runs (only scalpel does)",
    FITS: f"the model predicted no task on its domain slowed by more than {TOLERANCE:.0%} with it there",
    FORESEEN: f"the model predicted a slowdown past {TOLERANCE:.0%} with it there, but the plan had checked "
              "this co-run and chose it",
    KEPT_APART: "it fits, and started in place of the plan's next task, which would have slowed its domain "
                f"past {TOLERANCE:.0%} (or bet on an unmeasured footprint)",
    CORUN_WAIT_COSTS_MORE: f"a slowdown past {TOLERANCE:.0%} with it there; a waiting task fitted, but the model "
                           "predicted the run ending later with that one first",
    CORUN_NOTHING_FITS: f"a slowdown past {TOLERANCE:.0%} with it there (or a bet on an unmeasured footprint), "
                        "and no waiting task fitted",
    CORUN_LEAST_HARM: "nothing waiting fitted and run times were still guesses: of the waiting tasks, "
                      "this one slowed its domain least",
    CORUN_LESS_HARM: "nothing waiting fitted: this measured task slowed its domain less than the plan's next, "
                     "and the model predicted the run ending no later with it first",
    CORUN_NO_BETTER_LATER: f"a slowdown past {TOLERANCE:.0%} with it there, but run times were guesses and "
                           "waiting would buy no lighter company: beside the lightest waiting task, as slow",
    CORUN_AFTER_MEASURE_WAIT: f"only tasks of its profile key waited: its core idled up to {MEASURE_WAIT} s for a "
                              "running one to be measured, then it started beside it",
    KEPT_TO_PLAN: f"a slowdown past {TOLERANCE:.0%} with it there; the plan, made with per-key interference terms "
                  "that have not predicted this run's co-runs worse than footprints alone, started it here",
    BACKFILLED: "it fits, and started ahead of the plan's next task, which waits for cores, memory or "
                "accelerators and which it cannot delay",
}


@dataclass(frozen=True, slots=True)
class Running:
    """A task running on the domain, as the rule sees it."""

    task: Task
    remaining: float  # estimated seconds left


@dataclass(frozen=True, slots=True)
class Decision:
    """What a free core does: start ``task``, and why (one of the constants above)."""

    task: Task | None
    reason: str
    deferred: Task | None = None  # the plan's head when another task was started instead


def told_terms(task: Task) -> bool:
    """Whether ``task`` was told per-key interference terms that say anything: residuals of zero
    are the footprint model's own prediction, and a task told them is scheduled as one told none
    (hypothesis found a head told zeros kept from a less harmful start that a head told none took)."""
    return task.interference is not None and any(task.interference)


TERMS_EVIDENCE = 3  # co-runs of a key ended in this run before its told terms can be judged wrong
TERMS_TIE = 0.01  # a co-run both models predicted within 1% of each other judges neither (as the hold-out)


class TermsLedger:
    """This run's own co-runs, per profile key: have the interference terms told to its tasks
    predicted them better than the footprint model alone? What :func:`decide` reads to keep to a
    plan made with those terms (``KEPT_TO_PLAN``) or to check its starts as ever. Pure: the
    scheduler passes the driver's clock.

    Every start and end on a domain closes a stretch in which the same tasks ran together; in it
    each model says how much of its solo work a task did (the stretch's seconds over its slowdown
    there: :func:`~scalpel_executor.core.interference.corun_slowdowns` with the told terms, and
    with none). When a task ends, each model's error is log(the work it says was done / the task's
    run-time estimate), and the task's key and the keys of the told tasks it ran beside are each
    credited footprint-only's |error| less the terms' |error|: positive where the terms were
    nearer (a co-run the two predicted within :data:`TERMS_TIE` of each other credits nothing). A key's terms are *wrong* once :data:`TERMS_EVIDENCE` or more co-runs have credited it
    and their median credit is below 0; until then they hold (the plan was made with them, and
    the study showed its own order beating the rule's departures from it, docs/interference.md).

    Cost: O(C) per start or end on a domain of C cores, spent only in a run with told terms (the
    scheduler makes a ledger at the first such task).

    >>> from scalpel_executor.core.contention import ContentionModel
    >>> MiB = 2**20
    >>> ledger = TermsLedger(ContentionModel(), 32 * MiB)
    >>> victim, stream = Task(0, MiB, 1.0, key="v"), Task(1, MiB, 1.0, key="s", interference=(0.0, 0.4))
    >>> ledger.started(0, victim, 0.0); ledger.started(0, stream, 0.0)
    >>> ledger.ended(0, victim, 1.1)  # 1.1x: the terms said 1.49x, footprints 1x
    >>> [round(credit, 2) for credit in ledger.credits("s")]  # footprint-only was nearer
    [-0.21]
    """

    def __init__(self, model: ContentionModel, llc: float | None):
        self.model, self.llc = model, llc
        self._tasks: dict[int, list[Task]] = {}  # domain -> the tasks running there
        self._since: dict[int, float] = {}  # domain -> when its current stretch began
        self._work: dict[int, list] = {}  # id(task) -> [solo work done by the terms, by footprints, keys told beside]
        self._credits: dict[Hashable, list[float]] = {}

    @staticmethod
    def key(task: Task) -> Hashable:
        """What the ledger counts a task under: its profile key, else its terms."""
        return task.key if task.key is not None else task.interference

    def started(self, domain: int, task: Task, now: float | None, *, whole: bool = True) -> None:
        """``task`` started on ``domain`` at ``now``; ``whole`` False: it started earlier, before
        the ledger was made, so its own co-run is not judged (it counts as a co-runner)."""
        self._stretch(domain, now)
        self._tasks.setdefault(domain, []).append(task)
        self._work[id(task)] = [0.0, 0.0, set()] if whole and now is not None else None

    def ended(self, domain: int, task: Task, now: float | None) -> None:
        """``task`` left ``domain`` at ``now`` (None: not timed, or it did not end normally)."""
        self._stretch(domain, now)
        here = self._tasks.get(domain, [])
        if any(t is task for t in here):
            here.remove(task)
        work = self._work.pop(id(task), None)
        if work is None or now is None or not (task.runtime > 0 and math.isfinite(task.runtime)):
            return
        by_terms, by_footprint, beside = work
        keys = beside | ({self.key(task)} if told_terms(task) else set())
        if not keys or by_terms <= 0 or by_footprint <= 0 or abs(math.log(by_terms / by_footprint)) <= TERMS_TIE:
            return  # the two predicted it alike: no evidence either way
        credit = abs(math.log(by_footprint / task.runtime)) - abs(math.log(by_terms / task.runtime))
        for key in keys:
            self._credits.setdefault(key, []).append(credit)

    def credits(self, key: Hashable) -> list[float]:
        """The credits the co-runs so far gave ``key``'s terms (positive: nearer than footprints)."""
        return list(self._credits.get(key, ()))

    def wrong(self, task: Task) -> bool:
        """Whether ``task``'s terms have predicted this run's co-runs worse than footprints alone."""
        credits = self._credits.get(self.key(task))
        return credits is not None and len(credits) >= TERMS_EVIDENCE and _median(credits) < 0

    def held(self, task: Task) -> bool:
        """Whether ``task`` is told terms and they are not (yet) wrong."""
        return told_terms(task) and not self.wrong(task)

    def _stretch(self, domain: int, now: float | None) -> None:
        """Close ``domain``'s stretch at ``now``: credit each task there with the work each model says it did."""
        since, self._since[domain] = self._since.get(domain), now
        here = self._tasks.get(domain)
        if since is None or now is None or not here or now <= since:
            return
        terms = [t.interference for t in here]
        footprints, sigma = [t.footprint for t in here], [self.model.sensitivity] * len(here)
        llc = self.llc if self.llc is not None else math.inf
        with_terms = corun_slowdowns(self.model, footprints, sigma, llc, terms)
        alone = corun_slowdowns(self.model, footprints, sigma, llc, [None] * len(here))
        told = {self.key(t) for t in here if told_terms(t)}
        for task, s_terms, s_alone in zip(here, with_terms, alone):
            work = self._work.get(id(task))
            if work is not None:
                work[0] += (now - since) / s_terms
                work[1] += (now - since) / s_alone
                if len(here) > 1:
                    work[2] |= told - {self.key(task)} if told_terms(task) else told


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def unmeasured_risk(task: Task, running: Sequence[Running], model: ContentionModel, llc: float | None) -> bool:
    """``task``'s footprint is still the prior and it would run beside a task that makes that a bet:
    an unmeasured task of the same key (they may be large together), or a task large enough that a
    copy of it beside it would overflow the domain (anything large beside it overflows too)."""
    if task.footprint_known or task.key is None:
        return False
    for r in running:
        if not r.task.footprint_known:
            if r.task.key == task.key:
                return True
        elif _harm(model, llc, [r], r.task) > TOLERANCE:
            return True
    return False


def signature(task: Task) -> Hashable:
    """What :func:`decide` tells waiting tasks apart by: a task harms, and is harmed, beside what runs
    as any task of its signature does (its footprint, its profile key while that footprint is the
    prior, its interference terms), so only the first waiting task of each signature is weighed."""
    return task.footprint, task.key if not task.footprint_known else None, task.interference


def guessed(task: Task) -> bool:
    """Whether ``task``'s run time is a guess: the prior's, or a key's whose run times spread as
    widely (spread at least :data:`GUESSED_SPREAD`)."""
    return task.runtime_spread >= GUESSED_SPREAD


def guessed_runtimes(task: Task, running: Sequence[Running]) -> bool:
    """Whether ``task``'s run time, or that of a task running beside it, is still a guess
    (:func:`guessed`): how long they would overlap is then unknown to the model."""
    return guessed(task) or any(guessed(r.task) for r in running)


def slowdown_increase(model: ContentionModel, llc: float | None, footprints: Sequence[float],
                      footprint: float, terms: Sequence[Terms | None] | None = None,
                      term: Terms | None = None) -> tuple[list[float], float]:
    """Each running task's slowdown increase, and the newcomer's slowdown less 1, if a task of
    ``footprint`` bytes joined tasks of ``footprints`` on one domain of ``llc`` bytes. ``terms``
    are the running tasks' interference residuals and ``term`` the newcomer's
    (``Task.interference``; None: the footprint model alone)."""
    if llc is None or not footprints:
        return [0.0] * len(footprints), 0.0
    terms = [None] * len(footprints) if terms is None else list(terms)
    sigma = model.sensitivity
    if term is None and all(t is None for t in terms) and sum(footprints) + footprint <= model.capacity_fraction * llc:
        return [0.0] * len(footprints), 0.0
    before = corun_slowdowns(model, list(footprints), [sigma] * len(footprints), llc, terms)
    after = corun_slowdowns(model, [*footprints, footprint], [sigma] * (len(footprints) + 1), llc, [*terms, term])
    return [a - b for a, b in zip(after, before)], after[-1] - 1.0


def overflows(model: ContentionModel, llc: float | None, running: Sequence[Running], task: Task) -> bool:
    """Whether ``task`` beside ``running`` slows some task by more than :data:`TOLERANCE`."""
    return _harm(model, llc, running, task) > TOLERANCE


def _harm(model: ContentionModel, llc: float | None, running: Sequence[Running], task: Task) -> float:
    increases, own = slowdown_increase(model, llc, [r.task.footprint for r in running], task.footprint,
                                       [r.task.interference for r in running], task.interference)
    return max([own, *increases])


def decide(head: Task, others: Iterable[Task], running: Sequence[Running], *,
           deferral_pays: Callable[[Task, Task], bool], model: ContentionModel, llc: float | None,
           held: Callable[[Task], bool] | None = None) -> Decision:
    """The admission rule (module docstring) for one free core.

    Parameters
    ----------
    head : Task
        The task the plan would start next on this core.
    others : iterable of Task
        The other waiting tasks of ``head``'s priority level, in plan order (read lazily, only when
        ``head`` does not fit).
    running : sequence of Running
        The tasks running on the core's domain.
    deferral_pays : callable(head, fitting) -> bool
        Whether the model predicts the schedule ends no later when ``fitting`` starts now and
        ``head`` waits than when ``head`` starts now (the driver's rollout of the rest of the plan).
    model, llc : the contention model and the domain's LLC bytes (None: unknown, no contention).
    held : callable(task) -> bool, optional
        Whether a task's told terms have held in this run so far (:meth:`TermsLedger.held`); None:
        no plan is kept to on the strength of terms.
    """
    twin = unmeasured_risk(head, running, model, llc)
    harm = _harm(model, llc, running, head)
    overflow = harm > TOLERANCE
    if not twin and not overflow:
        return Decision(head, FITS)
    guessed = overflow and guessed_runtimes(head, running)
    if not twin and not guessed and head.foreseen_harm is not None and harm <= head.foreseen_harm + TOLERANCE:
        return Decision(head, FORESEEN)
    if not twin and not guessed and held is not None and keeps_plan(head, running, held):
        return Decision(head, KEPT_TO_PLAN)
    tried: set[Hashable] = set()
    fitting = unmeasured = lighter = company = None
    lightest = harm  # the least harm of a measured waiting task, looked for on guessed run times only
    for seen, task in enumerate(others):
        task_signature = signature(task)
        if task_signature in tried:
            continue
        tried.add(task_signature)
        task_harm = _harm(model, llc, running, task)
        if guessed and task.footprint_known and (company is None or task.footprint < company.footprint):
            company = task
        if task_harm <= TOLERANCE:
            if not unmeasured_risk(task, running, model, llc):
                fitting = task
                break
            unmeasured = unmeasured or task
        elif seen < LEAST_HARM_LOOKAHEAD and task.footprint_known and task_harm < lightest:
            lighter, lightest = task, task_harm
    if fitting is None and overflow and unmeasured is not None:
        # An unmeasured bet beats a co-run known to overflow, whatever a rollout on its prior
        # estimates would say: running it is how its figures stop being the prior.
        return Decision(unmeasured, KEPT_APART, head)
    if not overflow:  # only an unmeasured bet: measure first whenever other work can run
        return Decision(fitting, KEPT_APART, head) if fitting is not None else Decision(head, CORUN_NOTHING_FITS)
    if guessed:
        if company is not None and harm <= company_harm(model, llc, running, head, company) + TOLERANCE:
            return Decision(head, CORUN_NO_BETTER_LATER)
        if fitting is not None or lighter is not None:
            return Decision(fitting, KEPT_APART, head) if fitting is not None else \
                Decision(lighter, CORUN_LEAST_HARM, head)
    elif fitting is not None and deferral_pays(head, fitting):
        return Decision(fitting, KEPT_APART, head)
    elif fitting is None and lighter is not None and not told_terms(head) and deferral_pays(head, lighter):
        return Decision(lighter, CORUN_LESS_HARM, head)
    return Decision(head, CORUN_WAIT_COSTS_MORE if fitting is not None and not guessed else CORUN_NOTHING_FITS)


def keeps_plan(head: Task, running: Sequence[Running], held: Callable[[Task], bool]) -> bool:
    """Whether ``head`` starts as the plan says, unchecked: the plan weighed its co-runs with
    per-key terms (``foreseen_harm`` set, ``head`` told terms), and the terms of ``head`` and of
    every told task running beside it have held in this run (``held``)."""
    return (head.foreseen_harm is not None and held(head)
            and all(held(r.task) for r in running if told_terms(r.task)))


def company_harm(model: ContentionModel, llc: float | None, running: Sequence[Running], head: Task,
                 company: Task) -> float:
    """The harm ``head`` would meet beside ``company`` in place of the domain's heaviest running
    task: on guessed run times, the best co-run waiting could buy it (the lightest task seen waiting)."""
    heaviest = max(range(len(running)), key=lambda i: running[i].task.footprint)
    kept = [r for i, r in enumerate(running) if i != heaviest] + [Running(company, 0.0)]
    return _harm(model, llc, kept, head)
