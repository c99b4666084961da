"""Admission at dispatch time: which waiting task a free core may start next to what already runs. Pure.

A plan is an order fixed when a batch arrives; run times drift from their estimates, follow-up
tasks arrive as their parents finish, and the robustness check may fall back to longest-first.
So the default policy decides once more when a core frees, from what is running on that core's
LLC domain at that moment (footprints measured or estimated)::

    free core on domain d, plan head h, running set R (d's tasks, with how long each has run)
      h fits: the model predicts no task of R ∪ {h} slowed by more than TOLERANCE beyond R alone,
              and h is not a second unmeasured task of a key already running unmeasured on d
        └─> start h                                                         (FITS)
      h's plan foresaw at least this much harm at its start, and chose it (h.foreseen_harm)
        └─> start h                                                         (FORESEEN)
      else the first waiting task w of h's priority level, in plan order, that fits
        ├─ exists, and deferring h does not make it end past the schedule's end
        │    └─> start w, h waits                                           (KEPT_APART)
        ├─ exists, but h deferred would end later than both the estimated end of the
        │  schedule and h started now, contended
        │    └─> start h                                                    (CORUN_WAIT_COSTS_MORE)
        └─ none fits: idle the core until R lets h fit, if the slowdown's cost in core-seconds
           exceeds that wait and the wait does not push h past the schedule's end (IDLE);
           otherwise start h                                                (CORUN_NOTHING_FITS)

A plan checked in the contention model (``scalpel``'s, with exact estimates, or one whose gain
survived the robustness check) foresees each start's co-runners; when the domain holds no more than
it foresaw, the rule leaves the plan alone, so with exact estimates the schedule is the plan's. What
the plan did not foresee — run times that drifted, tasks that arrived meanwhile (a plan assumes an
empty machine), or an order nobody checked (longest-first kept by the robustness check) — is checked.

"Fits" uses the scheduler's contention model (:class:`~scalpel_executor.core.contention.ContentionModel`),
so a model fitted on a host where co-runs cost nothing admits every pair there, and the default
model keeps apart what overflows its effective capacity ρ·LLC. The first unmeasured tasks of one
key are kept on different domains (or, on one domain, apart in time) while other work waits, so a
first run measures before it bets: once the probe reports one of them, the scheduler learns the
footprint for every task of the key (:meth:`~scalpel_executor.core.scheduler.Scheduler.learn`).

Estimates used (no clock of its own: the driver passes ``now``): a running task's remaining time
is its estimated run time less what it has run, at least :data:`OVERDUE_FRACTION` of the estimate;
a deferred task waits until enough of R has ended for it to fit; the schedule's end is
``now + max(the longest remaining, (remaining running work + queued work) / cores)``. Every start
carries its reason, so drivers can report how often each branch was taken.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.tasks import Task

__all__ = ["TOLERANCE", "OVERDUE_FRACTION", "FITS", "FORESEEN", "KEPT_APART", "CORUN_WAIT_COSTS_MORE", "CORUN_NOTHING_FITS",
           "IDLE", "PLANNED", "REASONS", "Running", "Decision", "decide"]

TOLERANCE = 0.05  # a co-run "overflows" when the model slows some task by more than 5% beyond R alone
OVERDUE_FRACTION = 0.1  # a task past its estimate is assumed to have this fraction of it left

PLANNED = "planned"  # a policy without admission: the plan's choice, unchecked
FITS = "fits"
FORESEEN = "co-run: foreseen by the plan"  # the plan checked this co-run in the model and chose it
KEPT_APART = "kept-apart"
CORUN_WAIT_COSTS_MORE = "co-run: waiting costs more"
CORUN_NOTHING_FITS = "co-run: nothing fits"
IDLE = "idle: co-run costs more than waiting"
REASONS = (PLANNED, FITS, FORESEEN, KEPT_APART, CORUN_WAIT_COSTS_MORE, CORUN_NOTHING_FITS)  # reasons a task started


@dataclass(frozen=True, slots=True)
class Running:
    """A task running on the domain, as the rule sees it."""

    task: Task
    remaining: float  # estimated seconds left


@dataclass(frozen=True, slots=True)
class Decision:
    """What a free core does: start ``task`` (None: stay idle), and why (one of the constants above)."""

    task: Task | None
    reason: str
    deferred: Task | None = None  # the plan's head when another task was started or the core idles


def _unmeasured_twin(task: Task, running: Sequence[Running]) -> bool:
    """``task`` is a second unmeasured task of a key that already runs unmeasured here."""
    if task.footprint_known or task.key is None:
        return False
    return any(r.task.key == task.key and not r.task.footprint_known for r in running)


def slowdown_increase(model: ContentionModel, llc: float | None, footprints: Sequence[float],
                      footprint: float) -> tuple[list[float], float]:
    """Each running task's slowdown increase, and the newcomer's slowdown less 1, if a task of
    ``footprint`` bytes joined tasks of ``footprints`` on one domain of ``llc`` bytes."""
    if llc is None or not footprints:
        return [0.0] * len(footprints), 0.0
    sigma = model.sensitivity
    if sum(footprints) + footprint <= model.capacity_fraction * llc:
        return [0.0] * len(footprints), 0.0
    before = model.slowdowns(list(footprints), [sigma] * len(footprints), llc)
    after = model.slowdowns([*footprints, footprint], [sigma] * (len(footprints) + 1), llc)
    return [a - b for a, b in zip(after, before)], after[-1] - 1.0


def _harm(model: ContentionModel, llc: float | None, running: Sequence[Running], task: Task) -> float:
    increases, own = slowdown_increase(model, llc, [r.task.footprint for r in running], task.footprint)
    return max([own, *increases])


def _wait(model: ContentionModel, llc: float | None, running: Sequence[Running], task: Task) -> float:
    """Seconds until enough of ``running`` has ended (earliest first) for ``task`` to fit."""
    left = sorted(running, key=lambda r: r.remaining)
    waited = 0.0
    while left and _harm(model, llc, left, task) > TOLERANCE:
        waited = left.pop(0).remaining
    return waited


def _corun_cost(model: ContentionModel, llc: float | None, running: Sequence[Running], task: Task,
                wait: float) -> tuple[float, float]:
    """Predicted extra seconds of ``task`` itself, and summed over every task, if it started now.

    The co-run lasts about ``wait`` (until the tasks it contends with have ended)."""
    increases, own = slowdown_increase(model, llc, [r.task.footprint for r in running], task.footprint)
    extra_own = own * min(task.runtime, wait)
    extra_all = extra_own + sum(i * min(r.remaining, task.runtime) for i, r in zip(increases, running))
    return extra_own, extra_all


def decide(head: Task, others: Iterable[Task], running: Sequence[Running], *, now: float, schedule_end: float,
           model: ContentionModel, llc: float | None) -> Decision:
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
    now, schedule_end : float
        The driver's clock, and the estimated end of the schedule on it.
    model, llc : the contention model and the domain's LLC bytes (None: unknown, no contention).
    """
    twin = _unmeasured_twin(head, running)
    harm = _harm(model, llc, running, head)
    overflow = harm > TOLERANCE
    if not twin and not overflow:
        return Decision(head, FITS)
    if not twin and head.foreseen_harm is not None and harm <= head.foreseen_harm + TOLERANCE:
        return Decision(head, FORESEEN)
    tried: set[Hashable] = set()
    fitting = None
    for task in others:
        signature = (task.footprint, task.key if not task.footprint_known else None)
        if signature in tried:
            continue
        tried.add(signature)
        if not _unmeasured_twin(task, running) and _harm(model, llc, running, task) <= TOLERANCE:
            fitting = task
            break
    if not overflow:  # only the unmeasured twin: measure first whenever other work can run
        return Decision(fitting, KEPT_APART, head) if fitting is not None else Decision(head, CORUN_NOTHING_FITS)
    wait = _wait(model, llc, running, head)
    extra_own, extra_all = _corun_cost(model, llc, running, head, wait)
    deferred_end = now + wait + head.runtime
    deferring_is_free = deferred_end <= max(schedule_end, now + head.runtime + extra_own) + 1e-9
    if fitting is not None:
        if deferring_is_free:
            return Decision(fitting, KEPT_APART, head)
        return Decision(head, CORUN_WAIT_COSTS_MORE)
    if deferring_is_free and extra_all > wait and math.isfinite(wait):
        return Decision(None, IDLE, head)
    return Decision(head, CORUN_NOTHING_FITS)
