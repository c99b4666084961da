"""Dispatch orders of tasks of several cores, simulated as the scheduler books them. Pure.

:class:`~scalpel_executor.core.orders.FcfsEvaluator` runs one task per core. A task of ``cores``
k takes k idle cores of one LLC domain (:mod:`~scalpel_executor.core.resources`), so an order of
mixed widths is not dispatched first come first served: when the next task does not fit, it is
reserved and a later one starts only where it cannot delay it (EASY backfilling). This evaluator
replays an order exactly as :class:`~scalpel_executor.core.scheduler.Scheduler` dispatches the
default policy's plan, with :func:`scalpel_executor.core.simulate.simulate`'s clock and rates::

    after each event (t = 0, then each end on a domain), for the idle cores of every domain,
    round-robin over domains (the first idle core of each, then the second, ...):
      head = the order's first task not started
      head fits the core's domain (k idle cores there)         └─> start head there
      else reserve head (resources.reserve when only cores count, from the running tasks'
           estimated ends: their run-time estimate less what they have run, at least
           admission.OVERDUE_FRACTION of it), and start the first of the next BACKFILL_LOOKAHEAD
           tasks that fits and may backfill (resources.may_backfill), or none
    a started task books its core and the nearest idle ones of the domain; its footprint counts
    on the domain once; the domains it started on are rescheduled, then the event's domain

So the default policy can search orders of mixed widths in the contention model, and a plan
checked here is what the scheduler runs (with exact estimates; tests/core/test_multicore_orders.py
checks the evaluator against the simulator to 1e-9). Supported: every task at most as wide as the
widest domain, no memory and no accelerators declared (:func:`supports`); the scheduler's other
cases stay with largest-area-first.

*From what runs.* ``running`` (:class:`~scalpel_executor.core.orders.RunningTask`) starts every
replay from tasks already running: each holds its cores (positions in its domain) until it ends,
its footprint counts on its domain, and reservations read its estimated time left as the
scheduler's do (its remaining estimate less what the replay has run, at least
``OVERDUE_FRACTION`` of its whole estimate); they are indices n, n+1, ... after the order's
tasks. The test stops the simulator at an end and checks the rest against this replay to 1e-9.
The admission rule's rollout (:meth:`Scheduler._deferral_pays`) decides for one core in the
middle of a dispatch round: ``first`` starts the order's first task on that core and
``serving`` serves, at the start, only the cores after it in the round, in its order, as the
scheduler will.

The reservation and the backfill test are :mod:`~scalpel_executor.core.resources`' rules written
out for cores alone (no Holding or Reservation objects: building them was three quarters of a
replay's time on 128 cores); the test against the simulator, which runs the scheduler and so
those rules, keeps the two the same.

Cost: per event, each idle core of the machine tries the head, and when it does not fit a
reservation (O(R log R) for R running tasks) and a scan of at most BACKFILL_LOOKAHEAD waiting
tasks. :attr:`starts` counts the tasks started plus every :data:`WORK_PER_START` tasks so read,
so a plan's allowance bounds its time as for one-core batches. Orders are replayed from the start
(no snapshots: with backfilling, a prefix's decisions read the whole order).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from operator import itemgetter

from scalpel_executor.core.admission import OVERDUE_FRACTION
from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.orders import FcfsEvaluator, RunningTask
from scalpel_executor.core.tasks import Task

__all__ = ["MulticoreEvaluator", "supports", "BACKFILL_LOOKAHEAD"]

#: Waiting tasks a free core looks through for one to backfill while the next one does not fit
#: (the scheduler reads it from here).
BACKFILL_LOOKAHEAD = 1024
#: Tasks read to decide (a reservation reads the running ones, a backfill the waiting ones) that
#: cost as much as a simulated start; :attr:`FcfsEvaluator.starts` counts them so, so the
#: planning allowance bounds the plan's time as it does for one-core batches.
WORK_PER_START = 8


def supports(tasks: Sequence[Task], cores_per_domain: Sequence[int]) -> bool:
    """Whether :class:`MulticoreEvaluator` replays ``tasks`` as the scheduler runs them: none wider
    than the widest domain, none declaring memory or accelerators."""
    widest = max(cores_per_domain)
    return all(t.cores <= widest and not t.memory and not t.gpus for t in tasks)


class MulticoreEvaluator(FcfsEvaluator):
    """Makespan of a dispatch order of tasks of several cores, as the scheduler runs it (module
    docstring). ``tasks`` give the cores and the run-time estimates the scheduler reserves with;
    ``solo`` the times they take alone (default: the estimates). The machine starts idle.

    Orders are lists of indices into ``tasks``; :meth:`run` takes ``cutoff`` and ``on_start``
    as :meth:`FcfsEvaluator.run` does, and no snapshot (``resumable`` is False).
    """

    resumable = False

    def __init__(self, tasks: Sequence[Task], cores_per_domain: Sequence[int], llc: float, model: ContentionModel,
                 solo: Sequence[float] | None = None, running: Sequence[RunningTask] = ()):
        if not supports(tasks, cores_per_domain):
            raise ValueError("MulticoreEvaluator replays tasks at most as wide as the widest domain "
                             f"({max(cores_per_domain)} cores) that declare no memory or accelerators; "
                             "plan the others largest area first")
        solo = [t.runtime for t in tasks] if solo is None else solo
        self.held = _place(running, cores_per_domain)
        super().__init__(solo, [t.footprint for t in tasks], [None] * len(tasks), cores_per_domain, llc, model,
                         running, interference=[t.interference for t in tasks])
        self.estimate = [t.runtime for t in tasks] + [float(r.remaining) for r in running]
        # a reservation counts a task overdue as having this much left (Scheduler._remaining)
        self.least_left = [OVERDUE_FRACTION * t.runtime for t in tasks] + [
            OVERDUE_FRACTION * (r.remaining if r.runtime is None else r.runtime) for r in running]
        self.cores = [t.cores for t in tasks] + [len(cores) for cores in self.held]
        self.running_tasks = tuple(running)

    def run(self, order: Sequence[int], state=None, stop: int | None = None, *,
            reuse: bool = False, cutoff: float = math.inf, on_start: Callable | None = None,
            timeline: list | None = None, first: tuple[int, int] | None = None,
            serving: Sequence[tuple[int, int]] | None = None) -> float:
        """Makespan of ``order`` (as :meth:`FcfsEvaluator.run`). With ``timeline``, a list: one
        ``(index, domain, cores booked, start, end)`` appended per task as it ends, the tasks
        running at the start included (their start 0.0, their index n, n+1, ...). With ``first``,
        ``(domain, core)``: the order's first task starts there before the other idle cores are
        served (the core a scheduler is deciding for; the task must fit there now). With
        ``serving``, ``(domain, core)`` pairs, ``first``'s own first: at the start only these
        cores are served, in this order (the rest of a scheduler's dispatch round: the cores it
        served before ``first`` will not be served again until a task ends)."""
        if state is not None or stop is not None:
            raise ValueError("MulticoreEvaluator replays whole orders: it takes no state or stop")
        if first is not None and order:
            domain, core = first
            held = [c for task, booked in zip(self.running_tasks, self.held) if task.domain == domain for c in booked]
            if not (0 <= domain < self.P and 0 <= core < self.cpd[domain]) or core in held or \
                    self.cores[order[0]] > self.cpd[domain] - len(held):
                raise ValueError(f"the order's first task (index {order[0]}, {self.cores[order[0]]} cores) cannot "
                                 f"start on core {core} of domain {domain}: that core is held or not there, or the "
                                 f"domain has too few idle cores; name an idle core where it fits, or no first")
        else:
            first = None
        self.evaluations += 1
        solo, estimate, cores, kind, rates_of = self.solo, self.estimate, self.cores, self.kind, self.rates
        least_left = self.least_left
        P, cpd, n = self.P, self.cpd, self.n
        waiting = list(order)
        core_idle = [[True] * c for c in cpd]  # per domain, per core
        free = list(cpd)  # idle cores per domain
        # per domain: one entry per running task:
        # [index, solo seconds of work left, rate, start, cores booked, domain, how many]
        running: list[list[list]] = [[] for _ in range(P)]
        in_start_order: list[list] = []  # running entries, earliest start first (the scheduler's holdings order)
        for number, (task, booked) in enumerate(zip(self.running_tasks, self.held)):
            for c in booked:
                core_idle[task.domain][c] = False
            free[task.domain] -= len(booked)
            entry = [n + number, solo[n + number], 1.0, 0.0, list(booked), task.domain, len(booked)]
            running[task.domain].append(entry)
            in_start_order.append(entry)
        updated = [0.0] * P
        version = [0] * P
        events: list[tuple[float, int, int, int]] = []
        counter = 0
        started = work = 0  # tasks started; running and waiting tasks read to decide (charged as starts)
        now = makespan = 0.0

        def advance(d: int) -> None:
            elapsed = now - updated[d]
            if elapsed > 0:
                for e in running[d]:
                    e[1] -= elapsed * e[2]
            updated[d] = now

        def reschedule(d: int) -> None:
            nonlocal counter
            version[d] += 1
            entries = running[d]
            if not entries:
                return
            rates = rates_of([kind[e[0]] for e in entries])
            finish = math.inf
            for e in entries:
                rate = e[2] = rates[kind[e[0]]]
                t = (e[1] if e[1] > 0.0 else 0.0) / rate
                if t < finish:
                    finish = t
            counter += 1
            heapq.heappush(events, (now + finish, counter, d, version[d]))

        def choose(d: int) -> int | None:
            """Position in ``waiting`` of the task a free core of ``d`` starts, or None."""
            nonlocal work
            k = cores[waiting[0]]
            if k <= free[d]:
                return 0
            reserved_at, reserved_domain, spare = reservation(k)
            for at in range(1, min(len(waiting), BACKFILL_LOOKAHEAD + 1)):
                i = waiting[at]
                if cores[i] <= free[d] and (estimate[i] <= reserved_at or d != reserved_domain or cores[i] <= spare):
                    work += at
                    return at
            work += min(len(waiting), BACKFILL_LOOKAHEAD + 1)
            return None

        def reservation(k: int) -> tuple[float, int | None, int]:
            """resources.reserve for a task of k cores when only cores are counted: when k cores of
            one domain are expected idle (the running tasks ending as estimated, ties together),
            the domain, and the cores spare there then."""
            nonlocal work
            for domain, count in enumerate(free):  # k cores idle somewhere now: no need to wait
                if count >= k:
                    return 0.0, domain, count - k
            work += 2 * len(in_start_order)
            ending = sorted([(r if (r := estimate[e[0]] - (now - e[3])) > (f := least_left[e[0]]) else f,
                              e[5], e[6]) for e in in_start_order], key=_first)
            idle = free[:]
            at = 0.0
            for step in range(len(ending) + 1):
                if step:
                    at, domain, count = ending[step - 1]
                    idle[domain] += count
                    if step < len(ending) and ending[step][0] == at:
                        continue
                for domain, count in enumerate(idle):
                    if count >= k:
                        return at, domain, count - k
            return math.inf, None, 0

        def start(at: int, d: int, core: int, touched: set[int]) -> None:
            """Start the task at ``waiting[at]`` on ``core`` of domain ``d`` and the nearest idle cores there."""
            nonlocal started
            i = waiting.pop(at)
            if now + solo[i] > cutoff:
                raise _PastCutoff
            if d not in touched:
                advance(d)
                touched.add(d)
            if on_start is not None:
                on_start(i, [e[0] for e in running[d]])
            booked = [core]
            k = cores[i]
            if k > 1:
                others = sorted((c for c, idle in enumerate(core_idle[d]) if idle and c != core),
                                key=lambda c: (abs(c - core), c))
                booked += others[:k - 1]
            for c in booked:
                core_idle[d][c] = False
            free[d] -= k
            entry = [i, solo[i], 1.0, now, booked, d, k]
            running[d].append(entry)
            in_start_order.append(entry)
            started += 1

        def dispatch(first: tuple[int, int] | None = None) -> None:
            nonlocal work
            work += P
            touched: set[int] = set()  # as simulate() keeps it: rescheduled in the set's order
            if first is not None:
                start(0, *first, touched)
            if serving is not None and first is not None:
                for d, core in serving[1:]:
                    if core_idle[d][core] and waiting and (at := choose(d)) is not None:
                        start(at, d, core, touched)
                for d in touched:
                    reschedule(d)
                return
            idle_lists = [[c for c, idle in enumerate(core_idle[d]) if idle] if free[d] else () for d in range(P)]
            for rank in range(self.maxc):
                for d in range(P):
                    idle_cores = idle_lists[d]
                    if rank >= len(idle_cores) or not core_idle[d][idle_cores[rank]] or not waiting:
                        continue
                    at = choose(d)
                    if at is not None:
                        start(at, d, idle_cores[rank], touched)
            for d in touched:
                reschedule(d)

        try:
            for d in range(P):  # the tasks running at the start, rescheduled in domain order
                reschedule(d)
            dispatch(first)
            while events:
                now, _, d, stamp = heapq.heappop(events)
                if stamp != version[d]:
                    continue
                if now > cutoff:
                    raise _PastCutoff
                advance(d)
                left = []
                for e in running[d]:
                    if e[1] <= self.tol[e[0]]:
                        for c in e[4]:
                            core_idle[d][c] = True
                        free[d] += len(e[4])
                        in_start_order.remove(e)
                        makespan = now
                        if timeline is not None:
                            timeline.append((e[0], d, tuple(e[4]), e[3], now))
                    else:
                        left.append(e)
                running[d] = left
                if waiting:
                    dispatch()
                reschedule(d)
        except _PastCutoff:
            self.starts += started + work // WORK_PER_START
            return math.inf
        self.starts += started + work // WORK_PER_START
        return makespan


def _place(running: Sequence[RunningTask], cores_per_domain: Sequence[int]) -> list[tuple[int, ...]]:
    """The cores each running task holds, as positions in its domain: its ``cores``, or for a task
    that names none the lowest position left idle by the others; ValueError when they do not fit."""
    idle = [[True] * c for c in cores_per_domain]
    held: list[tuple[int, ...] | None] = []
    for task in running:
        if not 0 <= task.domain < len(idle):
            raise ValueError(f"a running task is on domain {task.domain!r}; the machine has domains 0 to "
                             f"{len(idle) - 1}")
        for c in task.cores:
            if not (isinstance(c, int) and 0 <= c < len(idle[task.domain])) or not idle[task.domain][c]:
                raise ValueError(f"a running task holds core {c!r} of domain {task.domain}, which has cores 0 to "
                                 f"{len(idle[task.domain]) - 1}, that another running task holds or that is not "
                                 f"there; give each running task distinct cores of its own domain")
            idle[task.domain][c] = False
        held.append(task.cores or None)
    for number, task in enumerate(running):
        if held[number] is None:
            core = next((c for c, free in enumerate(idle[task.domain]) if free), None)
            if core is None:
                raise ValueError(f"domain {task.domain} has no core left for a running task that names none; "
                                 f"it has {len(idle[task.domain])}")
            idle[task.domain][core] = False
            held[number] = (core,)
    return held


_first = itemgetter(0)


class _PastCutoff(Exception):
    """The order's makespan is sure to exceed the cutoff."""
