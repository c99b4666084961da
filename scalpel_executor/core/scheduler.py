"""Two-level task scheduling (Scalpel Algorithm 2) and its baselines, as a state machine with no I/O.

A driver — the live executor or the simulator — owns the clock and the processes; this module
only decides. The conversation is always the same three calls::

    scheduler.add(tasks)          # tasks arrived; they join the waiting set (regrouped lazily)
    scheduler.dispatch()          # -> [Assignment(slot, task), ...] for every idle core that can work
    scheduler.release(slot)       # the task on this core finished (or died); the core is idle again

After ``dispatch(now)``, ``scheduler.wake_at`` is the driver's time at which a core it left idle,
waiting for a running task's first measurement (:data:`~scalpel_executor.core.admission.MEASURE_WAIT`),
may start a task; the driver calls ``dispatch`` again then (None: no core waits so).

A live driver also loses cores for a while (a worker died and its replacement is starting):
``disable(slot)`` takes a core out of dispatch and hands back the task it was running, if any;
``enable(slot)`` puts it back. Both are idempotent, so the driver's bookkeeping does not depend on
whether a death, a replacement's "ready" or a late result reaches it first.

Cores are *slots*: positions in the topology's CPU order, each belonging to one LLC domain.

How a free core chooses (Algorithm 2, generalised):

1. Tasks are planned by the policy into *groups*, ordered for dispatch. ``scalpel-paper`` forms
   Algorithm 1 groups; full groups go before partial ones and the longest group (its longest task)
   first; inside a group the longest task first. The default, ``scalpel``
   (:mod:`scalpel_executor.core.planning`), plans single-task groups in an order it checked in
   the contention model, which is why the scheduler takes the LLC size and the model.
2. A free core on domain d runs the next task of d's *buffer*, the rest of the group that d took.
3. If d's buffer is empty, it takes the next waiting group: the core runs its first task and the
   rest goes into d's buffer.
4. If no group waits either, it takes the head of the fullest other buffer. The paper's algorithm
   would leave the core idle here; we steal so that no core ever idles while a task waits
   (work conservation), at the cost of one reassociated task.

Regrouping: tasks that arrive while others run are grouped again together with every task that has
not left the waiting set (where the plan is a sort of the waiting tasks, ``fifo`` and
``longest_first``, an arrival takes its place in the sort instead, which is the same plan); tasks
in a buffer belong to a group that has started on its domain and stay there, and running tasks are
never touched. Under the default policy a task that has waited
more than :data:`OVERDUE_AFTER` times the longest run-time estimate added so far is planned ahead of
its level's later arrivals (:meth:`Scheduler._overdue`), unless a task of its level has a known
chain waiting for it (``Task.tail``): the plan then orders the level by rank (run time + tail).

Admission (the default policy, ``scalpel``, only: :data:`CHECKED_AT_DISPATCH`): before a free core
starts the plan's next task, :func:`scalpel_executor.core.admission.decide` checks it against what
runs on the core's domain now, and may start a later task of the plan that fits instead, or leave
the core idle until the domain has room; a co-run past the tolerance is left for a core served
later in the round on a domain where the task fits (:meth:`Scheduler._elsewhere`). Each :class:`Assignment` says why its task started.
:meth:`Scheduler.learn` gives every task of a profile key a footprint measured during the run.

Resources (:mod:`scalpel_executor.core.resources`): a task of ``cores`` k takes k cores of one
domain (its :class:`Assignment` books them all, released together), and memory and accelerators
count against the node's ``memory`` and ``gpus``. Whatever the policy would start next but does
not fit yet is reserved, and a later task starts only where it cannot delay it (EASY
backfilling); with one-core tasks and no memory or accelerators asked this changes nothing.

Cost: an arrival and a start cost about as much with 10,000 tasks waiting as with 100, under
``scalpel``, ``fifo`` and ``longest_first`` (``benchmarks/scheduler_cost.py``, 16 cores: under
``scalpel`` 3.3 ms per arrival and 15 ms per overflowing start at 10,000 before, about 0.07 ms and
0.3 ms now). The default policy's plan is indexed by place, rank and admission signature
(:mod:`~scalpel_executor.core.plan_index`), so a merge reads a few tasks of each distinct rank below
the arrival's and an admission check the look-ahead and the first task of each signature, not every
waiting task; what still walks: a merge past overdue tasks of a lower rank, and an admission check
while a task of several cores, memory or accelerators waits. A dispatch with nothing waiting asks no
core. Planning again (a batch into a short plan, a footprint learned, any arrival under a grouping
policy) costs what the policy's plan costs.

Widths (:mod:`scalpel_executor.core.widths`): a malleable task (``Task.max_cores`` above its
``cores``) is planned and admitted at its narrowest width; when a core starts it, the scheduler's
:class:`~scalpel_executor.core.widths.Widths` chooses how many of the domain's free cores it books
(``Task.cores``, ``Task.runtime`` and ``Task.width_reason`` are set to the choice), and the run
time a driver reports at :meth:`Scheduler.release` teaches the key's speed-up. A task not marked
malleable is scheduled exactly as before.

Priorities (``Task.priority``, higher first): the policy plans each priority level separately, and
the levels are dispatched highest first. A free core whose buffer head has a lower priority than
the best waiting group takes from that group instead (its rest goes to the front of the buffer).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
from bisect import bisect_left, insort
from collections import Counter, deque
from collections.abc import Hashable, Iterable, Sequence

from scalpel_executor.core import admission, resources
from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.plan_index import PlanIndex
from scalpel_executor.core.planning import DEFAULT_BUDGET, STARTS_PER_SECOND, PlanContext
from scalpel_executor.core.policies import (DEFAULT_POLICY, POLICIES, plan_fifo, plan_longest_first,
                                            resolve_policy)
from scalpel_executor.core.resources import (Capacity, Holding, Reservation, may_backfill, needs_resources,
                                             unfit_reason)
from scalpel_executor.core.interference import corun_slowdowns
from scalpel_executor.core.multicore_orders import BACKFILL_LOOKAHEAD, MulticoreEvaluator, supports
from scalpel_executor.core.orders import FcfsEvaluator, RunningTask
from scalpel_executor.core.tasks import Assignment, Group, Slot, Task, rank, width_tail
from scalpel_executor.core import widths
from scalpel_executor.core.widths import EXPLORING, Crowding, Outlook, Peer, Widths, at_width

__all__ = ["Scheduler", "Task", "Assignment", "Slot", "Group", "POLICIES", "resolve_policy", "CHECKED_AT_DISPATCH"]

#: Policies whose plan is checked at dispatch time against what runs (core.admission); the
#: baselines run their plans as published, so they stay what they are compared as.
CHECKED_AT_DISPATCH = frozenset({"scalpel"})
#: Waiting tasks past which the admission rule does not simulate the rest of the plan.
ROLLOUT_LIMIT = 512
#: The same while malleable tasks wait: planned at their widths, most of a batch may wait wide, and a
#: rollout at every start of a narrower task beside them cost 49 ms a start (768 kernels on ``epyc``,
#: their speed-ups known), 3.5 ms with this limit (``benchmarks/width_scheduling_cost.py``); at 64 the
#: study's first runs ended 1.2% later on the tuning seeds, at 256 within 0.3% of no limit.
MALLEABLE_ROLLOUT_LIMIT = 256
#: A waiting task passed by later arrivals no more once it has waited this many times the longest
#: run time estimate added so far (Scheduler._overdue).
OVERDUE_AFTER = 2.0
#: Plans that are a sort of the waiting tasks by a key of each task alone, highest priority first:
#: an arrival into a plan that is up to date takes its place in the sort, where planning everything
#: again would put it, instead of a regroup at the next start (one per start while tasks trickle in,
#: each O(n log n) in the waiting tasks). The key orders the plan list, whose last group is next.
SORTED_PLANS = {
    plan_fifo: lambda task: (task.priority, -task.seq),
    plan_longest_first: lambda task: (task.priority, task.runtime * task.cores, -task.seq),
}


def _work(task: Task) -> float:
    """Core-seconds a task not started holds the node for at its narrowest width (0 if not finite)."""
    work = task.runtime * task.cores
    return work if math.isfinite(work) else 0.0


def _malleable_by_rank(plan: list[Group], malleable: dict[int, object]) -> list[Group]:
    """``plan`` (dispatch order) with the places of its malleable one-task groups (ids in ``malleable``) refilled by those
    tasks in order of rank, highest first (stable); the rest stay where the policy put them.

    A malleable task's width is chosen from the cores free when it starts, and the first tasks of a
    round find the most: a plan that ties orders at one-core run times (any order ends a batch with
    the longest task) put the longest last, on one core, ending the batch there (a 11.5 s task of
    32 on 16 cores, every other task ending by 5.5 s). Moved tasks lose what the plan foresaw of
    their co-runs (``Task.foreseen_harm``). Without malleable tasks the plan is returned unchanged."""
    places = [at for at, group in enumerate(plan) if len(group.tasks) == 1 and id(group.tasks[0]) in malleable]
    if len(places) < 2:
        return plan
    ordered = sorted((plan[at] for at in places), key=lambda group: -rank(group.tasks[0]))
    plan = list(plan)
    for at, group in zip(places, ordered):
        if plan[at] is not group:
            group.tasks[0].foreseen_harm = None
            plan[at] = group
    return plan


class Scheduler:
    """Decides which waiting task runs on which free core; see the module docstring.

    Parameters
    ----------
    domains : sequence of sequence of int
        The CPUs of each LLC domain, e.g. ``topology.domains`` mapped to ``d.cpus``, or
        ``[[0, 1, 2, 3], [4, 5, 6, 7]]``. Slots are numbered in this order.
    policy : str
        One of :data:`POLICIES`.
    seed : int
        Seeds the ``random`` policy; every other policy is deterministic.
    llc : float, optional
        Bytes of LLC per domain, for the model-checked ``scalpel`` policy (None: unknown, it then
        predicts no contention and orders by run time alone).
    model : ContentionModel, optional
        The contention model ``scalpel`` plans with (default: ``ContentionModel()``).
    plan_budget : int
        Task starts ``scalpel`` may simulate per plan (:data:`~scalpel_executor.core.planning.DEFAULT_BUDGET`).
    plan_rate : float
        And at most this many per second of the batch's predicted makespan on domains of 8 cores or
        more, up to four times as many on narrower ones (:data:`~scalpel_executor.core.planning.STARTS_PER_SECOND`,
        :func:`~scalpel_executor.core.planning.starts_allowed`; ``math.inf``: only the budget counts).
    memory : float, optional
        Bytes of memory the running tasks' ``Task.memory`` may hold together (None: not counted).
    gpus : int
        Accelerators on the node; the running tasks' ``Task.gpus`` never add up to more.
    device_domains : sequence of sets of int, optional
        For each accelerator, the domains (indices into ``domains``) near it; a task asking for
        accelerators starts where its devices are near when such a domain has the cores free now,
        and :class:`Assignment` ``.devices`` names the ones it is given, near ones first.
    width_rule : Widths, optional
        The width rule for malleable tasks and the speed-up it learns (default: ``Widths()``, the
        soonest predicted end on topology-shaped widths; :mod:`scalpel_executor.core.widths`).
    crowding : bool
        Whether the width rule counts the cache a narrow width crowds (:class:`~scalpel_executor.core.widths.Crowding`),
        which takes ``model`` for the truth: True (the default) where it is (a simulated machine's
        model, one given or fitted on the host); a pool planning with the default model's guess
        passes False (``PoolOptions.model_measured``).

    Examples
    --------
    >>> s = Scheduler([[0, 1], [2, 3]], "scalpel-paper")
    >>> s.add(Task(i, footprint=f, runtime=1.0) for i, f in enumerate([8, 1, 7, 2]))
    >>> [(a.slot.cpu, a.task.id) for a in s.dispatch()]
    [(0, 0), (2, 2), (1, 1), (3, 3)]
    """

    def __init__(self, domains: Sequence[Sequence[int]], policy: str = DEFAULT_POLICY, *, seed: int = 0,
                 llc: float | None = None, model: ContentionModel | None = None, plan_budget: int = DEFAULT_BUDGET,
                 plan_rate: float = STARTS_PER_SECOND, memory: float | None = None, gpus: int = 0,
                 device_domains: Sequence[Iterable[int]] = (), width_rule: Widths | None = None,
                 crowding: bool = True):
        self._plan_function = resolve_policy(policy)
        self.policy = policy
        self._admits = policy in CHECKED_AT_DISPATCH
        if llc is not None and not (isinstance(llc, (int, float)) and llc > 0):
            raise ValueError(f"llc must be a positive number of bytes or None, got {llc!r}")
        if isinstance(plan_budget, bool) or not isinstance(plan_budget, int) or plan_budget < 0:
            raise ValueError(f"plan_budget must be an integer >= 0, got {plan_budget!r}")
        if isinstance(plan_rate, bool) or not isinstance(plan_rate, (int, float)) or not plan_rate >= 0:
            raise ValueError(f"plan_rate must be a number >= 0 (simulated starts per second), got {plan_rate!r}")
        cpu_lists = [list(cpus) for cpus in domains]
        self._domains = cpu_lists
        if not cpu_lists or any(len(cpus) == 0 for cpus in cpu_lists):
            raise ValueError(f"every LLC domain needs at least one core, got domains {cpu_lists!r}")
        self.cores_per_domain = [len(cpus) for cpus in cpu_lists]
        self.capacity = Capacity(tuple(self.cores_per_domain), memory, gpus,
                                 tuple(frozenset(near) for near in device_domains))
        self.slots = tuple(
            Slot(index, cpu, domain)
            for index, (domain, cpu) in enumerate((d, cpu) for d, cpus in enumerate(cpu_lists) for cpu in cpus)
        )
        self._rng = random.Random(seed)
        self._context = PlanContext(self.cores_per_domain, self._rng, llc, model or ContentionModel(), plan_budget,
                                    plan_rate, self._chooser)
        self._seq = 0
        self._waiting: dict[int, Task] = {}  # seq -> task, tasks in no buffer and not running
        # dispatch order reversed: the next group is _plan[-1]. A deque: most arrivals join the end of
        # the dispatch order (its front), which a list paid a memmove of the whole plan for (9 µs at 10,000).
        self._plan: deque[Group] = deque()
        self._index: PlanIndex | None = None  # the plan's tasks by place, rank and signature (one-task groups)
        self._sort_key = SORTED_PLANS.get(self._plan_function)  # the plan is this sort (SORTED_PLANS)
        self._dirty = False  # tasks were added since the plan was made
        self._buffers = [deque() for _ in cpu_lists]
        self._running: dict[int, Task] = {}  # slot index -> task
        self._idle = [True] * len(self.slots)
        self._idle_slots: set[int] = set(range(len(self.slots)))  # the indices _idle marks: dispatch reads only these
        self._disabled: set[int] = set()  # slots with no worker to run a task (being replaced)
        self._started: dict[int, float] = {}  # slot index -> the driver's clock when its task started
        self._clock = 0.0  # the driver's clock at the latest dispatch
        self._timed = False  # the latest dispatch was told the driver's clock
        self._wake: float | None = None  # when a core left idle for a measurement may start (wake_at)
        self._wait_began: dict[int, float] = {}  # domain -> when a core of it began idling for a measurement
        self._waited: dict[int, float] = {}  # slot index -> seconds the wait its task ended lasted
        self._waiting_domains: set[int] = set()  # domains a core of which idles for a measurement this dispatch
        self._reason: dict[int, str] = {}  # slot index -> why its running task started
        self.reasons: Counter[str] = Counter()  # starts by reason (core.admission)
        self._learned_tasks: set[int] = set()  # id() of tasks whose footprint was learned in the run (learn)
        self._terms: admission.TermsLedger | None = None  # whether told terms held, from the first told task on
        self._domain_slots = [[s.index for s in self.slots if s.domain == d] for d in range(len(cpu_lists))]
        self._booked: dict[int, tuple[int, ...]] = {}  # slot index -> every core its running task holds
        self._holder: dict[int, int] = {}  # a core held by a wider task -> the slot index that task runs on
        self._memory_used = 0.0
        self._serving_next: list[Slot] | None = None  # during dispatch: the idle cores it serves after this one
        self._passed: set[int] = set()  # slot indices a dispatch round passed over once (_elsewhere)
        self._joined_running = False  # the latest tasks added arrived while others ran
        self._arrived: dict[int, float] = {}  # task seq -> the driver's clock at the first dispatch after its add
        self._unstamped: list[int] = []  # seqs added since the latest dispatch told the clock
        self._last_arrival = -math.inf  # the latest arrival stamped: only tasks older than it can be passed
        self._wide_waiting = 0  # waiting tasks of several cores, or declaring memory or accelerators
        self._longest = 0.0  # the longest run time estimate added so far (_overdue)
        self._device_free = [True] * gpus  # by accelerator index: no running task holds it
        self._devices: dict[int, tuple[int, ...]] = {}  # slot index -> accelerators its running task holds
        self.widths = width_rule if width_rule is not None else Widths()
        self._crowds = crowding
        self.width_reasons: Counter[str] = Counter()  # malleable starts by the reason for their width
        self._waiting_work = 0.0  # core-seconds of the tasks not started, at their narrowest widths (finite ones)
        self._malleable_waiting = 0  # malleable tasks not started
        self._allotted: Crowding | None = None  # the cache the last allotment counted (_retarget), if any
        self._narrow: dict[int, tuple[int, float]] = {}  # id() of a malleable task not started -> its narrowest
        #                                                   cores and run time estimate there
        self._planned_explore: set[int] = set()  # id() of a waiting task planned at an explored width (_retarget)
        self._free_now: set[int] = set()  # id() of a planned task started narrower on the cores free (_sooner_now)
        self._capped: set[int] = set()  # id() of a waiting task packed narrower than allotted: it starts no wider
        self._explored_arrival: dict[Hashable, int] = {}  # key -> id() of its task planned wider at its
        #                                                   arrival (_explore_arrival), until that task ends
        self._starts_and_ends = 0  # counts each change of the running tasks (_running_work's cache)
        self._running_work_at: tuple[float, int, float] | None = None  # (clock, that count, the work then)
        self._widened: dict[int, tuple[int, float]] = {}  # slot index of a running malleable task -> its
        #                                                   narrowest cores and run time estimate there
        self._seeded: set = set()  # keys whose speed-up earlier runs' readings started (Task.serial_fraction)
        self._guessed_of: dict[Hashable, list[Task]] = {}  # key -> its malleable tasks whose run time came a
        #                                                    guess (_learn_runtime), until one of them ends
        #                                                    whose run reads (a wider one: until then, unread)
        self._learned_unread: set = set()  # keys whose guessed tasks took a wider run's time (_learn_runtime)
        self._unread: set[int] = set()  # id() of malleable tasks estimated from such a run: no reading of theirs
        self._ran: dict[Hashable, tuple[int, float, float]] = {}  # key -> (runs, mean, M2) of its malleable
        #                                 tasks' seconds at their narrowest in this run (Welford: _spread)
        self._slowed: dict[int, list[float]] = {}  # slot index of a running malleable task -> [its predicted
        #                         slowdown integrated over its run so far (s), the clock then, the slowdown since]

    # -- driver API -------------------------------------------------------------------------

    def add(self, tasks: Iterable[Task]) -> None:
        """Tasks arrived. They wait until :meth:`dispatch` finds them a core.

        Under a policy checked at dispatch, tasks that arrive while the plan still holds at least
        two tasks per core are merged into it in longest-first position, unplanned (the admission
        check sees them at once) instead of planning everything again; the next arrival into a
        shorter plan plans them all. Under a policy whose plan is a sort of the waiting tasks
        (:data:`SORTED_PLANS`: ``fifo``, ``longest_first``), an arrival into an up-to-date plan takes
        the place in it that planning again would give it."""
        tasks = list(tasks)
        for task in tasks:
            if (problem := unfit_reason(task, self.capacity)) is not None:
                raise ValueError(problem)
        if self._terms is None and self._admits and any(admission.told_terms(task) for task in tasks):
            self._terms = admission.TermsLedger(self._context.model, self._context.llc)
            for index, running in self._running.items():  # co-runners from now on, their own co-runs unjudged
                self._terms.started(self.slots[index].domain, running, self._clock, whole=False)
        merge = self._admits and not self._dirty and len(self._plan) >= 2 * len(self.slots)
        place = self._sort_key is not None and not self._dirty
        if tasks:  # tasks joining work under way: what waits is not all the work (_deferral_pays)
            self._joined_running = bool(self._running)
        for task in tasks:
            task.seq = self._seq
            self._seq += 1
            self._waiting[task.seq] = task
            self._unstamped.append(task.seq)
            self._longest = max(self._longest, task.runtime)
            self._wide_waiting += task.cores > 1 or needs_resources(task)
            self._waiting_work += _work(task)
            if task.malleable:
                self._malleable_waiting += 1
                self._narrow[id(task)] = (task.cores, task.runtime)
                if admission.guessed(task) and task.key is not None:
                    self._guessed_of.setdefault(task.key, []).append(task)
                if task.serial_fraction is not None and task.key not in self._seeded:
                    self._seeded.add(task.key)  # what earlier runs learned, once per key, before this run's readings
                    self.widths.model.seed(task.key, min(1.0, max(0.0, task.serial_fraction)), max(0, task.serial_readings))
                if task.family is not None:
                    self.widths.model.join(task.key, task.family, min(1.0, max(0.0, task.family_serial or 0.0)),
                                           max(0, task.family_readings))
            if (merge or place) and task.malleable:
                self._allot_arrival(task)
            if merge:
                self._merge(task)
            elif place and math.isfinite(task.runtime) and not math.isnan(task.priority):
                insort(self._plan, Group([task], 1), key=lambda group: self._sort_key(group.tasks[0]))
            else:
                self._dirty = True

    def _merge(self, task: Task) -> None:
        """Put ``task`` into the plan (reversed dispatch order) among its priority level's tasks,
        before the first one with a lower rank (run time + tail) that is not overdue (or, for a
        task with a tail, before the first with a lower rank); nobody checked its co-runs.

        The plan's levels are contiguous, highest priority next (a plan is made level by level, and
        a merge keeps it so), so the level's place is a bisection and its first task of a lower rank
        the plan's index's (:class:`~scalpel_executor.core.plan_index.PlanIndex`): a walk from the
        plan's head cost 0.19 µs per waiting task, 1.9 ms per arrival at 10,000 waiting. Only past an
        overdue task of a lower rank does the walk go on, one task at a time."""
        task.foreseen_harm = None
        if math.isnan(task.priority) or math.isnan(rank(task)):
            self._index = None  # no order to bisect: walked until the next plan
        index = self._index
        if index is None:
            at = self._merge_walk(task, len(self._plan) - 1)
        else:
            level = bisect_left(self._plan, task.priority, key=lambda group: group.tasks[0].priority)
            first = index.first_below(task.priority, rank(task))
            if first is None:
                at = level  # after its level, before the next lower one
            elif task.tail > 0 or not self._overdue(self._plan[first].tasks[0]):
                at = first + 1
            else:
                at = self._merge_walk(task, first - 1)
        self._plan.insert(at, Group([task], 1))
        if index is not None:
            index.insert(at, task, lambda i: self._plan[i].tasks[0])

    def _merge_walk(self, task: Task, start: int) -> int:
        """Where :meth:`_merge` puts ``task``, walking the plan in dispatch order from ``start``."""
        for position in range(start, -1, -1):
            head = self._plan[position].tasks[0]
            if head.priority < task.priority or (head.priority == task.priority and rank(head) < rank(task)
                                                 and (task.tail > 0 or not self._overdue(head))):
                return position + 1
        return 0

    def dispatch(self, now: float | None = None) -> list[Assignment]:
        """Give a task to every idle core that can get one; returns what to start.

        ``now`` is the driver's clock (seconds, any origin): with it the scheduler knows how long
        each running task has run, which the admission rule reads; without it a running task is
        taken to have just started.

        Idle cores are served round-robin over domains (the first idle core of each domain, then
        the second, ...) so that the first P groups go to P different domains (Alg. 2 line 10).
        Under the default policy a core whose task would co-run past the tolerance, while a core
        served later in the round is idle on a domain where it fits, is passed over once and
        served again at the end of the round (:meth:`_elsewhere`).
        """
        self._wake = None
        self._waiting_domains.clear()
        if now is not None:  # the tasks added since the latest dispatch arrived by now
            self._clock = now
            for seq in self._unstamped:
                if seq in self._waiting:
                    self._arrived[seq] = now
                    self._last_arrival = now
        self._unstamped.clear()  # without the clock nothing is stamped: no task becomes overdue
        if not self._waiting and not any(self._buffers):  # nothing to start: no core is asked
            self._wait_began.clear()
            return []
        per_domain: list[list[Slot]] = [[] for _ in self.cores_per_domain]
        for index in sorted(self._idle_slots):  # in slot order, as a scan of every slot gives them
            if index not in self._disabled:
                slot = self.slots[index]
                per_domain[slot.domain].append(slot)
        assignments = []
        serving = [slots[depth] for depth in range(max(map(len, per_domain))) for slots in per_domain
                   if depth < len(slots)]
        self._passed.clear()
        again: set[int] = set()
        try:
            for at, slot in enumerate(serving):
                if self._idle[slot.index]:  # not booked by a wider task since
                    self._serving_next = serving[at + 1:]
                    task = self.next_for(slot, now)
                    if task is None and slot.index in self._passed and slot.index not in again:
                        again.add(slot.index)  # passed over for a later core's domain: served once more at the end
                        serving.append(slot)
                        continue
                    if task is not None:
                        booked = self._booked[slot.index]
                        assignments.append(Assignment(slot, task, self._reason[slot.index],
                                                      tuple(self.slots[i] for i in booked) if len(booked) > 1 else (),
                                                      self._devices.get(slot.index, ()),
                                                      self._waited.pop(slot.index, 0.0)))
        finally:
            self._serving_next = None
        for domain in set(self._wait_began) - self._waiting_domains:  # its wait ended with no start there
            del self._wait_began[domain]
        return assignments

    def next_for(self, slot: Slot | int, now: float | None = None) -> Task | None:
        """Core ``slot`` is free: the task it runs next, marked running; None if nothing waits."""
        slot = self.slots[slot] if isinstance(slot, int) else slot
        if not self._idle[slot.index]:
            raise ValueError(f"core {slot.cpu} (slot {slot.index}) is still running task {self._running[slot.index].id!r}")
        if slot.index in self._disabled:
            raise ValueError(f"core {slot.cpu} (slot {slot.index}) is disabled; enable() it first")
        if now is not None:
            self._clock = now
        self._timed = now is not None
        task, reason = self._admit(slot) if self._admits else (self._choose(slot.domain), admission.PLANNED)
        if task is not None:
            self.reasons[reason] += 1
            self._waiting_work = max(0.0, self._waiting_work - _work(task))
            if (narrow := self._narrow.pop(id(task), None)) is not None:
                self._malleable_waiting -= 1
                self._widen(slot, task, narrow)
            self._book(slot, task)
            self._running[slot.index] = task
            self._starts_and_ends += 1
            self._started[slot.index] = 0.0 if now is None else now
            if now is not None and self._widened:
                if slot.index in self._widened:
                    self._slowed[slot.index] = [0.0, now, 1.0]
                self._restamp(slot.domain, now)
            self._reason[slot.index] = reason
            if self._terms is not None:
                self._terms.started(slot.domain, task, now)
            if (began := self._wait_began.pop(slot.domain, None)) is not None:  # the start that ends the wait
                self._waited[slot.index] = self._clock - began
        return task

    def release(self, slot: Slot | int, now: float | None = None) -> Task:
        """The task on ``slot`` ended (done, failed or its worker died); the core is idle. ``now``
        (the driver's clock) times a malleable task's run, which teaches its key's speed-up."""
        index = slot if isinstance(slot, int) else slot.index
        if self._idle[index] or index in self._holder:
            raise ValueError(f"slot {index} has no running task to release")
        began = self._started.pop(index, None)
        domain = self.slots[index].domain
        # no reading against a guessed run time (measured reason: a single-threaded stencil estimated
        # at the prior's 1 s ran 0.23 s on two cores, read as perfectly parallel, and the profile
        # store kept a serial fraction of 0 over 8 readings, docs/results/widths.md)
        if ((narrowest := self._widened.pop(index, None)) is not None and now is not None and began is not None
                and not admission.guessed(self._running[index]) and id(self._running[index]) not in self._unread):
            task = self._running[index]
            self._restamp(domain, now)
            slowed, _, since = self._slowed.pop(index, (0.0, now, 1.0))
            slowdown = slowed / (now - began) if now > began and slowed > 0 else since
            task.width_reading = self.widths.observe(task.key, narrowest[0], task.cores, (now - began) / max(slowdown, 1e-9),
                                                     narrowest[1], task.width_reason == EXPLORING)
            if task.width_reading is not None and self.widths.model.readings(task.key) == widths.SURE_AFTER:
                self._allot_sure(task.key)
        elif narrowest is not None and self._running[index].width_reason == EXPLORING:
            self.widths.model.explore(self._running[index].key, -1)
        if narrowest is not None and now is not None and began is not None and now > began:
            self._count_run(index, narrowest[0], now - began)
            self._learn_runtime(index, narrowest[0], now - began)
        self._slowed.pop(index, None)
        self._waited.pop(index, None)
        self._learned_tasks.discard(id(self._running[index]))
        self._unread.discard(id(self._running[index]))
        if self._terms is not None:
            self._terms.ended(self.slots[index].domain, self._running[index], now)
        self._unbook(index)
        released = self._running.pop(index)
        if self._explored_arrival.get(released.key) == id(released):
            del self._explored_arrival[released.key]
        self._starts_and_ends += 1
        if now is not None and self._slowed:
            self._restamp(domain, now)
        return released

    def _restamp(self, domain: int, now: float) -> None:
        """The tasks running on ``domain`` changed at ``now``: add the seconds since the last change,
        times the slowdown the contention model predicted for them, to each malleable task's running
        integral there, and predict its slowdown beside what runs now. A malleable task's width
        reading is its run time over that mean slowdown (:meth:`release`): a task widened beside
        co-runners that overflow the cache runs slower than its width alone explains, and read raw
        it taught its key a serial fraction near 1 (no gain).

        Cost: O(tasks running on the domain), only while a malleable task runs there."""
        tracked = [i for i in self._domain_slots[domain] if i in self._slowed]
        if not tracked:
            return
        for i in tracked:
            entry = self._slowed[i]
            entry[0] += max(0.0, now - entry[1]) * entry[2]
            entry[1] = now
        llc, model = self._context.llc, self._context.model
        here = [i for i in self._domain_slots[domain] if i in self._running]
        if llc is None or len(here) < 2:
            factors = dict.fromkeys(here, 1.0)
        else:
            tasks = [self._running[i] for i in here]
            footprints = [t.footprint if math.isfinite(t.footprint) else 0.0 for t in tasks]
            factors = dict(zip(here, corun_slowdowns(model, footprints, [model.sensitivity] * len(tasks), llc,
                                                     [t.interference for t in tasks])))
        for i in tracked:
            self._slowed[i][2] = factors.get(i, 1.0)

    def _book(self, slot: Slot, task: Task) -> None:
        """Mark ``slot`` and the other cores ``task`` needs busy (nearest ones of its domain first,
        then, for a task wider than any domain, the idlest other domains'), with its memory and
        accelerators."""
        chosen = [slot.index]
        if task.cores > 1:
            def idle(indices):
                return [i for i in indices if self._idle[i] and i not in self._disabled and i != slot.index]
            chosen += sorted(idle(self._domain_slots[slot.domain]), key=lambda i: (abs(i - slot.index), i))
            others = sorted((d for d in range(len(self._domain_slots)) if d != slot.domain),
                            key=lambda d: -len(idle(self._domain_slots[d])))
            for domain in others:
                chosen += idle(self._domain_slots[domain])
            chosen = chosen[:task.cores]
        for index in chosen:
            self._idle[index] = False
            self._idle_slots.discard(index)
        for index in chosen[1:]:
            self._holder[index] = slot.index
        self._booked[slot.index] = tuple(chosen)
        self._memory_used += task.memory
        if task.gpus:
            devices = resources.choose_devices(task.gpus, slot.domain, self._device_free, self.capacity.device_domains)
            for device in devices:
                self._device_free[device] = False
            self._devices[slot.index] = devices

    def _widen(self, slot: Slot, task: Task, narrow: tuple[int, float]) -> None:
        """Set malleable ``task``'s width for its start on ``slot`` (:mod:`~scalpel_executor.core.widths`):
        its ``cores`` (at least the width it was allotted and admitted at, :meth:`_retarget`), the run
        time estimated there and the reason. ``narrow``: its narrowest cores and estimate there."""
        peers, peer_work = self._peers() if self.widths.rule in widths.ALLOTTING else ((), 0.0)
        idle = [i for i in self._idle_slots if i not in self._disabled]
        free = sum(1 for i in idle if self.slots[i].domain == slot.domain)
        outlook = Outlook(
            cores=len(self.slots) - len(self._disabled),
            domain_cores=self.cores_per_domain[slot.domain],
            free=free,
            free_elsewhere=len(idle) - free,
            # read only by a second try of a key (choose_width's ``exploring``): summed only then
            planned=sum(waiting.cores for waiting in self._waiting.values() if id(waiting) in self._narrow)
            if self.widths.model.exploring(task.key) else 0,
            backlog=max(0.0, self._waiting_work - peer_work) + self._running_work(),
            malleable=self._malleable_waiting + len(self._widened) + 1,
            peers=peers,
            crowding=self._crowding(peers, self.cores_per_domain[slot.domain], task.footprint),
            footprint=task.footprint,
        )
        planned = task.cores
        capped = id(task) in self._capped
        self._capped.discard(id(task))
        high = task.cores if capped else task.max_cores
        # explored while its run time is a guess too (_retarget)
        choice = self.widths.choose(task.key, task.cores, high, task.runtime, width_tail(task), outlook,
                                    narrowest=narrow, spread=self._spread(task))
        self._widened[slot.index] = narrow
        if choice.width != task.cores:
            # An explored width's run time is taken at its hope (perfectly parallel): at its key's
            # fit, no gain, every later start saw it running past their ends and stayed narrow.
            serial = 0.0 if choice.reason == EXPLORING else self.widths.model.serial_fraction(task.key)
            task.runtime = at_width(narrow[1], serial, narrow[0], choice.width)
            task.cores = choice.width
        reason = choice.reason
        planned_explore = id(task) in self._planned_explore
        if planned_explore and choice.width == task.cores:
            # A planned exploration started runs, as one chosen at its start, at its hope: at its
            # key's fit, no gain, the running work it left counted every core it holds for its run
            # time on one, and later starts saw a node full long after it had ended (a first run of
            # batch-0.5 on ``wide``, seed 101: 233 core-seconds left on 64 cores, its last eight tasks
            # on one core each, 3.66 s against 2.64 s on whole domains; 2.68 s so, docs/results/widths.md).
            task.runtime = at_width(narrow[1], 0.0, narrow[0], task.cores)
        self._planned_explore.discard(id(task))
        free_now = id(task) in self._free_now
        self._free_now.discard(id(task))
        if free_now and choice.width == planned and reason not in (EXPLORING, widths.KEPT):
            reason = widths.FREE_NOW  # narrower than planned: started on the cores free (_sooner_now)
        elif choice.width == task.cores > narrow[0] and reason not in (EXPLORING, widths.KEPT):
            # the width it was allotted when planned: to learn its key's speed-up (estimated at its
            # fit, no gain), thriftier there, or widened because its own end came last
            readings = self.widths.model.readings(task.key)
            reason = widths.PLANNED_EXPLORATION if planned_explore else widths.wider_reason(
                Peer(narrow[1], width_tail(task), self.widths.model.serial_fraction(task.key), narrow[0],
                     sure=readings >= widths.SURE_AFTER, footprint=task.footprint),
                task.cores, outlook.crowding)
        elif capped and choice.width == narrow[0] and reason not in (EXPLORING, widths.KEPT):
            reason = widths.PACKED  # narrower than allotted: so the few waiting start without a second round
        task.width_reason = reason
        self.width_reasons[reason] += 1

    def _peers(self, tasks: Iterable[Task] | None = None) -> tuple[tuple[Peer, ...], float]:
        """The malleable tasks not started (or those of ``tasks``), as the width choice weighs them
        (finite estimates only), and the core-seconds they are counted for now."""
        widest, fits = max(self.cores_per_domain), {}
        peers, work = [], 0.0
        for task in itertools.chain(self._waiting.values(), *self._buffers) if tasks is None else tasks:
            narrow = self._narrow.get(id(task))
            if narrow is not None and math.isfinite(narrow[1]) and math.isfinite(width_tail(task)):
                if task.key not in fits:  # its serial fraction and the readings it rests on
                    fits[task.key] = (self.widths.model.serial_fraction(task.key),
                                      self.widths.model.readings(task.key))
                fit, readings = fits[task.key]
                peers.append(Peer(narrow[1], width_tail(task), fit, narrow[0], min(task.max_cores, widest),
                                  readings >= widths.SURE_AFTER, task.footprint, task.key, readings > 0,
                                  self._spread(task)))
                work += _work(task)
        return tuple(peers), work

    def _crowding(self, peers: Sequence[Peer], domain_cores: int, footprint: float = 0.0) -> Crowding | None:
        """The cache a width leaves a malleable task (:class:`~scalpel_executor.core.widths.Crowding`):
        co-runners of the malleable tasks' footprint weighted by their work
        (:func:`~scalpel_executor.core.widths.co_runner_footprint`; ``footprint``, the starting
        task's, when none waits); None without a last-level cache size or ``crowding``."""
        if self._context.llc is None or not self._crowds or self.widths.rule not in widths.ALLOTTING:
            return None
        return Crowding(self._context.model, float(self._context.llc), domain_cores,
                        widths.co_runner_footprint(peers, footprint))

    def _running_work(self) -> float:
        """Core-seconds the running tasks have left (each task's remaining seconds times its cores),
        kept until the clock moves or a task starts or ends: each arrival merged into a plan asks
        (:meth:`_allot_arrival`), and summed afresh it doubled an arrival's cost with 64 tasks running."""
        if self._running_work_at is None or self._running_work_at[:2] != (self._clock, self._starts_and_ends):
            work = sum(self._remaining(index, self._clock) * len(self._booked.get(index, (index,)))
                       for index in self._running)
            self._running_work_at = (self._clock, self._starts_and_ends, work)
        return self._running_work_at[2]

    def _retarget(self) -> None:
        """Allot widths to the malleable tasks waiting (:func:`~scalpel_executor.core.widths.allot`)
        and plan them at those widths: each waits, reserved and backfilled around, for the cores
        allotted (``Task.cores``), and may start wider when more are free (:meth:`_widen`).

        Cores free one at a time as tasks end at staggered times: chosen only at the start, a width
        was one core (a Montage run's 48 reprojections ended 1,100 s later at one core each than at
        two, the last ones started alone)."""
        tasks = [task for task in self._waiting.values() if id(task) in self._narrow
                 and math.isfinite(self._narrow[id(task)][1]) and math.isfinite(width_tail(task))]
        if not tasks or self.widths.rule not in widths.ALLOTTING:
            return
        peers, work = self._peers(tasks)
        backlog = max(0.0, self._waiting_work - work) + self._running_work()
        shape = (len(self.slots) - len(self._disabled), max(self.cores_per_domain), backlog)
        self._allotted = self._crowding(peers, max(self.cores_per_domain))
        fitted, _, _ = widths.allot(peers, *shape, shaped=self.widths.rule == "scalpel", crowding=self._allotted)
        self._capped.clear()
        chainless = widths.packs(peers)  # with a chain after them, the check only narrows
        if (len(peers) <= widths.PACKED_PEERS and self._waiting_work - work <= 1e-9 * work
                and not any(self._buffers)
                and (chainless or not self._guessed(tasks))):
            allotted_widths = fitted
            fitted = widths.packed(peers, fitted, self._free_at(), shaped=self.widths.rule == "scalpel",
                                   crowding=self._allotted, wider=chainless)
            if not chainless:  # packed narrower only, and kept to it at the start
                self._capped.update(id(task) for task, width, plain in zip(tasks, fitted, allotted_widths)
                                    if width < plain)
        exploring = Counter(task.key for task in self._running.values()
                            if task.width_reason in (EXPLORING, widths.PLANNED_EXPLORATION))
        busy = {key for key, running in exploring.items()  # as many explored as it takes to be sure
                if self.widths.model.readings(key) + running >= widths.SURE_AFTER}
        # A task whose run time is a guess is explored too, its cost reckoned at the guess: its run
        # is read where a task of its key ended before it (the run time learned, _learn_runtime),
        # never against the guess itself (release). Kept narrow until a task of its key ended, a
        # first run told no run time ran its batch a core a task: 0.79x as soon as every task on
        # two cores on the width study's seeds 100-102, explored 0.998x (docs/results/widths-log.md,
        # "A first run told no run time: run times learned in the run, and explored on the guess").
        allotted = widths.explore_allotted(peers, fitted, *shape, shaped=self.widths.rule == "scalpel", busy=busy,
                                           crowding=self._allotted)
        for task, peer, width, plain in zip(tasks, peers, allotted, fitted):
            if width > plain:  # planned wider than its key's fit gives: an exploration (reported so at its start)
                self._planned_explore.add(id(task))
            else:
                self._planned_explore.discard(id(task))
            if width != task.cores:
                self._set_width(task, peer, width)

    def _sooner_now(self, head: Task, domain: int) -> bool:
        """Whether malleable ``head``, planned wider than ``domain``'s free cores with nothing to
        backfill them, ends sooner started now on them than at its reservation
        (:func:`~scalpel_executor.core.widths.start_now`): it is planned there, to start now. A
        planned exploration waits for its width (started narrower it would learn nothing), and so does
        a task while its run time or a running task's is a guess (``admission.GUESSED_SPREAD``): when
        its cores free is then unknown. (Measured reason: on first live runs of
        ``examples/malleable/covariance.py``, run times still the prior's 1 s for tasks of 0.2 s, four
        tasks planned on both cores started on one, and the tasks ended at 2.39-2.40 s against 1.97 s
        in the run where none did, docs/results/widths.md.)"""
        narrow = self._narrow.get(id(head))
        if (narrow is None or id(head) in self._planned_explore or self.widths.rule not in widths.ALLOTTING
                or head.gpus or head.memory > self._memory_left()):
            return False
        free = self._free_cores()[domain]
        peers, _ = self._peers((head,))
        if (free < narrow[0] or not peers
                or self._guessed((head,))):
            return False
        peer = peers[0]
        width = widths.start_now(peer, head.cores, free, self._reservation(head).at, self.cores_per_domain[domain],
                                 shaped=self.widths.rule == "scalpel", crowding=self._allotted)
        if width is None:
            return False
        self._set_width(head, peer, width)
        self._free_now.add(id(head))
        return True

    def _waits_wider(self, head: Task, domain: int) -> bool:
        """Whether malleable ``head``, the last task waiting (nothing else waits or is buffered) and
        fitting ``domain``'s free cores at its planned width, ends sooner waiting for more of them as
        the running tasks end (:func:`~scalpel_executor.core.widths.wait_wider`): it is planned
        there and waits, reserved, for them. Not while its run time or a running task's is a guess
        (when cores free is then unknown); a planned exploration keeps its width."""
        narrow = self._narrow.get(id(head))
        if (narrow is None or len(self._waiting) != 1 or any(self._buffers) or id(head) in self._planned_explore
                or self.widths.rule not in widths.ALLOTTING or head.gpus or self._guessed((head,))):
            return False
        peers, _ = self._peers((head,))
        free_at = self._free_at()[domain]
        if not peers or sum(1 for left in free_at if left == 0) < head.cores:
            return False
        width = widths.wait_wider(peers[0], head.cores, free_at, shaped=self.widths.rule == "scalpel",
                                  crowding=self._allotted)
        if width <= head.cores:
            return False
        self._set_width(head, peers[0], width)
        return True

    def _guessed(self, tasks: Iterable[Task]) -> bool:
        """Whether the run time of any of ``tasks``, or of a running task, is a guess
        (:func:`~scalpel_executor.core.admission.guessed`): when cores free is then unknown."""
        return any(admission.guessed(task) for task in itertools.chain(tasks, self._running.values()))

    def _free_at(self) -> list[list[float]]:
        """Per LLC domain, each core's seconds until it frees (0: idle), disabled cores left out."""
        left = {core: self._remaining(index, self._clock) for index in self._running
                for core in self._booked.get(index, (index,))}
        return [[left.get(core, 0.0) for core in cores if core not in self._disabled] for cores in self._domain_slots]

    def _set_width(self, task: Task, peer: Peer, width: int) -> None:
        """Plan waiting ``task`` (as ``peer``, at its narrowest) at ``width`` cores."""
        self._waiting_work -= _work(task)
        self._wide_waiting -= task.cores > 1 or needs_resources(task)
        task.cores = width
        task.runtime = at_width(peer.runtime, peer.serial, peer.low, width)
        self._waiting_work += _work(task)
        self._wide_waiting += task.cores > 1 or needs_resources(task)

    def _allot_sure(self, key: Hashable) -> None:
        """Key ``key``'s speed-up was just measured (its readings reached
        :data:`~scalpel_executor.core.widths.SURE_AFTER`): its waiting tasks, planned while it was unsure (at no gain, their narrowest), are
        planned as a task of it arriving now would be (:meth:`_allot_arrival`), where that is wider.
        O(tasks waiting), once per key; not a replan, which would order and explore the whole batch again.
        The plan's index, which keeps each task's rank, is built again where a width changed."""
        changed = False
        for task in self._waiting.values():
            if task.key == key and id(task) in self._narrow and id(task) not in self._planned_explore:
                changed |= self._allot_arrival(task, narrower=False)
        if changed and self._index is not None:
            self._index = PlanIndex([group.tasks[0] for group in self._plan])

    def _allot_arrival(self, task: Task, *, narrower: bool = True) -> bool:
        """Plan malleable ``task``, arriving into a plan that is up to date (merged, not planned
        again), at its thriftiest width with the cache the last allotment counted (:meth:`_retarget`),
        and wider while its own run time there would end the work alone: the allotment of it alone
        (:func:`~scalpel_executor.core.widths.allot`), the work waiting and running as the area, its
        chain not counted (each of a stage's tasks arriving alone would count the stage's chain as
        its own). O(widths + running tasks), not a replan.

        Merged at its narrowest, a key's later tasks started on the one core free beside the first
        ones' (a SoyKB run on ``xeon16`` with its speed-ups known: 208 of its 300 haplotype callers of
        192 MiB on one core, crowded sixteen to a 300 MiB LLC, 0.77x the whole domain's makespan;
        0.98x planned so, docs/results/widths.md). At its thriftiest width, a Montage background
        model of 38,000 s on one core (``paper``, seed 801, its speed-ups known) started on the two
        cores free and ran 25,000 s, the last 18,000 s after every other task had ended: 0.765x the
        whole domain's makespan, 0.960x planned on a whole domain. Returns whether its width changed."""
        peers, _ = self._peers((task,))
        if not peers:  # an estimate not finite
            return False
        alone = dataclasses.replace(peers[0], tail=0.0)
        shape = (len(self.slots) - len(self._disabled), max(self.cores_per_domain),
                 max(0.0, self._waiting_work - _work(task)) + self._running_work())  # cores, domain, backlog
        if not alone.sure:  # a key whose speed-up is not measured
            return self._explore_arrival(task, alone, shape)
        (width,), _, _ = widths.allot((alone,), *shape, shaped=self.widths.rule == "scalpel", crowding=self._allotted)
        if width > task.cores or (narrower and width < task.cores):
            self._set_width(task, alone, width)
            return True
        return False

    def _explore_arrival(self, task: Task, alone: Peer, shape: tuple[int, int, float]) -> bool:
        """Plan malleable ``task`` of a key whose speed-up is not measured, arriving into a plan that
        is up to date, at the width a replan would explore it at
        (:func:`~scalpel_executor.core.widths.explore_allotted` of it alone, its chain not counted):
        its hope where no gain at all would end the work at most
        :data:`~scalpel_executor.core.widths.EXPLORE_COST` later, its cores reserved. One task of a
        key at a time: not while another planned so at its arrival has not ended or one of its
        tasks runs ``exploring``, nor where its run time is a guess (a wider run would read no
        speed-up). ``alone``: the task as a peer, its chain not counted; ``shape``: the node's cores,
        the widest domain's and the backlog, as :meth:`_allot_arrival` counts them. O(widths).

        Merged at its narrowest, it started on the one core free: on a first Montage run on
        ``xeon16`` (seed 801) a background model of 38,000 s arrived while the node was full of
        one-core tasks, ran on one core and ended the work alone, 0.625x the makespan of every task
        on two cores; planned on eight, 1.255x (docs/results/widths.md). Returns whether its width changed."""
        if admission.guessed(task) or task.key in self._explored_arrival or self.widths.model.exploring(task.key):
            return False
        shaped = self.widths.rule == "scalpel"
        (fitted,), _, _ = widths.allot((alone,), *shape, shaped=shaped, crowding=self._allotted)
        (width,) = widths.explore_allotted((alone,), (fitted,), *shape, shaped=shaped, crowding=self._allotted)
        if width <= max(fitted, task.cores):
            return False
        self._planned_explore.add(id(task))
        self._explored_arrival[task.key] = id(task)
        self._set_width(task, alone, width)
        return True

    def _learn_runtime(self, index: int, narrowest: int, seconds: float) -> None:
        """Malleable task on slot ``index``, ``narrowest`` cores at its narrowest, ran ``seconds``: the
        tasks of its key whose run time came a guess (submitted before any of it had run), waiting or
        running, take that reading at their own widths by the key's fit, as sure as a key seen once
        (:data:`~scalpel_executor.core.admission.ONE_RUN_SPREAD`, as the estimator tells a task of
        it submitted now), and the waiting ones are planned again. Once per key, O(its tasks).

        A wider run while the key has no speed-up reading teaches them too, at no gain (its seconds
        stand for the narrowest width's, which they are at least), but no speed-up is read against
        it (``_unread``): read so, a wider run reads no gain (a live first run of three fits on two
        cores, each tried on both: the learned run read "no gain" of a key measured at 1.5-1.7x).
        A later run that reads (a narrow one, or a wider one once the key has a reading) teaches the
        tasks not started again. (Measured reason: a first run whose batch starts on the guess
        explores every key wider at once, and none of its tasks then learned a run time; on the
        width study's seeds 100-102, first runs told no run time, docs/results/widths-log.md, "A
        first run told no run time plans on what its runs tell".)

        A workflow submits a batch at once: a first run's tasks were otherwise guesses to the end,
        so none was widened, waited for or explored, and no run taught the key a speed-up (three
        least-squares fits on two cores, ``examples/malleable/fits.py --regions 3``: every first run
        ran each on one core, docs/results/widths.md)."""
        ran = self._running[index]
        if ran.key is None:
            return
        unread = ran.cores > narrowest and not self.widths.model.readings(ran.key)
        if unread:  # a wider run, its key's speed-up unknown: once, and kept for a run that reads
            if ran.key in self._learned_unread:
                return
            self._learned_unread.add(ran.key)
            tasks = self._guessed_of.get(ran.key)
        else:
            tasks = self._guessed_of.pop(ran.key, None)
        if not tasks:
            return
        serial = self.widths.model.serial_fraction(ran.key)
        running = {id(task): i for i, task in self._running.items()}
        for task in tasks:
            if task is ran or not (admission.guessed(task) or id(task) in self._unread):
                continue
            if (narrow := self._narrow.get(id(task))) is not None:  # not started: its plan's estimates
                if unread:
                    self._unread.add(id(task))
                else:
                    self._unread.discard(id(task))
                low = narrow[0]
                waiting = self._waiting.get(task.seq) is task
                if waiting:
                    self._waiting_work -= _work(task)
                self._narrow[id(task)] = (low, at_width(seconds, serial, narrowest, low))
                task.runtime = at_width(seconds, serial, narrowest, task.cores)
                if waiting:
                    self._waiting_work += _work(task)
                self._longest = max(self._longest, task.runtime)
                self._dirty = True
            elif (at := running.get(id(task))) is not None:  # its end, and the reading its run will give
                if unread:
                    self._unread.add(id(task))
                task.runtime = at_width(seconds, serial, narrowest, task.cores)
                if (widened := self._widened.get(at)) is not None:
                    self._widened[at] = (widened[0], at_width(seconds, serial, narrowest, widened[0]))
                self._running_work_at = None
            else:
                continue
            task.runtime_spread = admission.ONE_RUN_SPREAD

    def _count_run(self, index: int, narrowest: int, seconds: float) -> None:
        """Malleable task on slot ``index`` ran ``seconds``: one more run of its key, at its narrowest
        width by the key's fit, in the spread its tasks' ends are reckoned with (:meth:`_spread`)."""
        ran = self._running[index]
        if ran.key is None:
            return
        x = at_width(seconds, self.widths.model.serial_fraction(ran.key), ran.cores, narrowest)
        runs, mean, m2 = self._ran.get(ran.key, (0, 0.0, 0.0))
        runs += 1
        delta = x - mean
        mean += delta / runs
        self._ran[ran.key] = (runs, mean, m2 + delta * (x - mean))

    def _spread(self, task: Task) -> float:
        """The relative std of malleable ``task``'s run time, as the width rule reckons its end with
        (:data:`~scalpel_executor.core.widths.RISK_SPREADS`): an estimate's, its key's runs in this
        run once two have ended (at most :data:`~scalpel_executor.core.admission.GUESSED_SPREAD`),
        else the spread it was told (0: exact); a guess's is not counted.

        Run times within a key spread: a task of a key whose estimate says it is short may be the
        batch's longest, and started on one core it runs alone long after the rest have ended.
        (Measured reason: first runs told no run time, on the width study's seeds 100-102,
        docs/results/widths-log.md, "A first run told no run time plans on what its runs tell".)
        A guess says nothing of a task's scale: counted, every task of a key that does not speed up
        looked as late narrow as tried wide, and three of 2 s on two cores were all tried on both,
        one after another: 1.51x the end of each on one core."""
        spread = task.runtime_spread
        if spread >= admission.GUESSED_SPREAD:
            return 0.0
        runs, mean, m2 = self._ran.get(task.key, (0, 0.0, 0.0))
        if spread > 0 and runs >= 2 and mean > 0:  # no estimate counted less sure than a guess
            return min(math.sqrt(m2 / (runs - 1)) / mean, admission.GUESSED_SPREAD)
        return spread

    def _unbook(self, index: int) -> None:
        task = self._running[index]
        for core in self._booked.pop(index, (index,)):
            self._idle[core] = True
            self._idle_slots.add(core)
            self._holder.pop(core, None)
        self._memory_used = max(0.0, self._memory_used - task.memory)
        for device in self._devices.pop(index, ()):
            self._device_free[device] = True

    def learn(self, key: str, footprint: float) -> int:
        """A task of profile key ``key`` was measured at ``footprint`` bytes during the run: every
        task of that key whose footprint is still the prior (``footprint_known`` False) or was
        learned so, running or waiting, takes it (the latest reading wins), and waiting tasks are
        planned again. Returns how many tasks changed."""
        changed = 0
        for task in [*self._waiting.values(), *self._running.values(), *(t for b in self._buffers for t in b)]:
            if task.key == key and (not task.footprint_known or id(task) in self._learned_tasks):
                task.footprint, task.footprint_known = float(footprint), True
                self._learned_tasks.add(id(task))
                changed += 1
        if changed:
            self._dirty = True
        return changed

    def lengthen(self, task_id: Hashable, tail: float, wide_tail: float) -> bool:
        """The chain waiting for task ``task_id`` (``Task.id``) is longer than it was told: ``tail``
        seconds (``wide_tail`` at its malleable tasks' widest). A task not started yet takes it where
        it is longer, and the waiting tasks are planned again; a task started, ended or unknown is
        left alone. Returns whether a task took it. O(tasks waiting).

        A parent is handed over before the script invokes its children (Parsl launches a task with
        no inputs at once), so it is told no chain; a later task's sighting shows them
        (``runtime.driver.path_learning``)."""
        for task in itertools.chain(self._waiting.values(), *self._buffers):
            if task.id == task_id:
                if tail <= task.tail:
                    return False
                task.tail, task.wide_tail = float(tail), float(wide_tail)
                self._dirty = True
                return True
        return False

    def disable(self, slot: Slot | int) -> Task | None:
        """Core ``slot`` cannot run tasks until :meth:`enable`; returns the task it was running, if any.

        The returned task leaves the scheduler (the driver fails or resubmits it). Idempotent.
        """
        index = slot if isinstance(slot, int) else slot.index
        self._disabled.add(index)
        if self._idle[index] or index in self._holder:  # a core a wider task holds: free when it ends
            return None
        if (narrowest := self._widened.pop(index, None)) is not None:  # handed back as it came (narrowest)
            task = self._running[index]
            if task.width_reason == EXPLORING:
                self.widths.model.explore(task.key, -1)
            task.cores, task.runtime, task.width_reason = narrowest[0], narrowest[1], None
        self._slowed.pop(index, None)
        self._started.pop(index, None)
        self._waited.pop(index, None)
        self._learned_tasks.discard(id(self._running[index]))
        self._unread.discard(id(self._running[index]))
        if self._terms is not None:  # it did not end: its co-run tells nothing
            self._terms.ended(self.slots[index].domain, self._running[index], None)
        self._unbook(index)
        self._starts_and_ends += 1
        return self._running.pop(index)

    def enable(self, slot: Slot | int) -> None:
        """Core ``slot`` can run tasks again (its new worker is ready). Idempotent."""
        self._disabled.discard(slot if isinstance(slot, int) else slot.index)

    def drain(self) -> list[Task]:
        """Remove and return every task that has not started (for shutdown); running ones stay."""
        left = [t for buffer in self._buffers for t in buffer] + list(self._waiting.values())
        for task in left:  # a malleable task goes back at its narrowest width
            if (narrow := self._narrow.pop(id(task), None)) is not None:
                task.cores, task.runtime = narrow
            self._unread.discard(id(task))
        self._planned_explore.clear()
        self._free_now.clear()
        running = {id(task) for task in self._running.values()}
        self._explored_arrival = {key: at for key, at in self._explored_arrival.items() if at in running}
        for buffer in self._buffers:
            buffer.clear()
        self._waiting.clear()
        self._arrived.clear()
        self._unstamped.clear()
        self._wide_waiting = 0
        self._waiting_work, self._malleable_waiting = 0.0, 0
        self._plan = deque()
        self._index = PlanIndex([]) if self._admits else None
        self._dirty = False
        return left

    # -- state ------------------------------------------------------------------------------

    @property
    def waiting(self) -> int:
        """Tasks that have not started: waiting to be grouped, or buffered on a domain."""
        return len(self._waiting) + sum(len(b) for b in self._buffers)

    @property
    def running(self) -> dict[int, Task]:
        return dict(self._running)

    @property
    def idle_slots(self) -> list[Slot]:
        """Cores that can take a task now: idle and not disabled."""
        return [s for s in self.slots if self._idle[s.index] and s.index not in self._disabled]

    @property
    def booked(self) -> dict[int, tuple[int, ...]]:
        """Slot index of each running task -> every core it holds (its own first)."""
        return {index: self._booked.get(index, (index,)) for index in self._running}

    @property
    def memory_used(self) -> float:
        """Bytes of ``Task.memory`` the running tasks hold."""
        return self._memory_used

    @property
    def gpus_used(self) -> int:
        return self._gpus_used

    @property
    def _gpus_used(self) -> int:
        return len(self._device_free) - sum(self._device_free)  # the booked devices are the count

    @property
    def disabled_slots(self) -> frozenset[int]:
        return frozenset(self._disabled)

    def buffered(self, domain: int) -> list[Task]:
        return list(self._buffers[domain])

    # -- the decision -----------------------------------------------------------------------

    def _replan(self) -> None:
        if self._narrow:
            self._retarget()
        self._context.running = self._running_now(self._clock)
        levels: dict[float, list[Task]] = {}
        for task in self._waiting.values():
            levels.setdefault(task.priority, []).append(task)
        plan: list[Group] = []
        for priority in sorted(levels, reverse=True):
            overdue, rest = [], []
            # A known chain (Task.tail) orders the level by rank instead: what waits longest yields to it.
            chains = any(task.tail > 0 for task in levels[priority])
            for task in levels[priority]:
                (overdue if self._admits and not chains and self._overdue(task) else rest).append(task)
            for part in (overdue, rest):
                if part:
                    plan += _malleable_by_rank(self._plan_function(part, self._context), self._narrow)
        # Pinned groups (di) go straight to their domain's buffer; the rest wait in order.
        self._plan = deque()
        for group in plan:
            if group.domain is not None:
                self._commit(group.tasks, group.domain)
            else:
                self._plan.appendleft(group)
        self._index = PlanIndex([group.tasks[0] for group in self._plan]) if self._admits and all(
            len(group.tasks) == 1 and not math.isnan(group.tasks[0].priority) and not math.isnan(rank(group.tasks[0]))
            for group in self._plan) else None
        self._dirty = False

    def _overdue(self, task: Task) -> bool:
        """Whether ``task`` has waited longer than :data:`OVERDUE_AFTER` times the longest run time
        estimate added so far, and tasks arrived after it: those of its priority level no longer go
        before it (a batch that arrived at once keeps its plan's order however long it runs). A replan orders what waits by run
        time, so without this a short task released early (a DAG's task gating others) was passed
        by every longer task released after it."""
        arrived = self._arrived.get(task.seq)
        return (arrived is not None and arrived < self._last_arrival
                and self._clock - arrived > self._longest * OVERDUE_AFTER)

    def _chooser(self, policy: str, tasks: list[Task]):
        """A step function for :func:`~scalpel_executor.core.orders.trace`: ``policy``'s decisions
        on ``tasks`` (by index), made by a scheduler of that policy on this machine's cores."""
        shadow = Scheduler(self._domains, policy)
        shadow.add(Task(i, t.footprint, t.runtime, t.priority, t.intensity) for i, t in enumerate(tasks))
        by_domain = [[s for s in shadow.slots if s.domain == d] for d in range(len(self.cores_per_domain))]

        def choose(slot_domains: list[int]) -> list[int]:
            idle_wanted = Counter(slot_domains)
            for d, slots in enumerate(by_domain):  # cores that finished since the last step
                busy = [s for s in slots if not shadow._idle[s.index]]
                for slot in busy[:max(0, len(busy) - (len(slots) - idle_wanted[d]))]:
                    shadow.release(slot)
            picks = []
            for d in slot_domains:
                slot = next(s for s in by_domain[d] if shadow._idle[s.index])
                picks.append(shadow.next_for(slot).id)
            return picks

        return choose

    def _commit(self, tasks: list[Task], domain: int, *, front: bool = False) -> None:
        for task in tasks:
            del self._waiting[task.seq]
            self._arrived.pop(task.seq, None)
            self._wide_waiting -= task.cores > 1 or needs_resources(task)
        if front:
            self._buffers[domain].extendleft(reversed(tasks))
        else:
            self._buffers[domain].extend(tasks)

    def _admit(self, slot: Slot) -> tuple[Task | None, str]:
        """The plan's next task for free core ``slot``, checked by :func:`admission.decide`.

        A head that does not fit the domain's idle cores, the memory or the accelerators left is
        reserved (:mod:`~scalpel_executor.core.resources`); the rule then runs on the first task
        that may be backfilled, among those that may."""
        domain = slot.domain
        position = self._next_group(self.cores_per_domain[domain])
        if position is None or self._buffers[domain]:
            return self._choose(domain), admission.FITS
        head = self._plan[position].tasks[0]
        if self._waits_wider(head, domain):
            return None, admission.FITS
        eligible = self._eligible(head, domain)
        backfill = eligible is not None
        if backfill:
            head_at = position
            position = next((at for at in range(position - 1, max(-1, position - 1 - BACKFILL_LOOKAHEAD), -1)
                             if eligible(self._plan[at].tasks[0])), None)
            if position is None:
                if self._sooner_now(head, domain):
                    return self._take_planned(head_at, domain), admission.FITS
                return None, admission.FITS
            head = self._plan[position].tasks[0]
        else:
            def eligible(task: Task) -> bool:
                return self._fits(task, domain)
        clock = self._clock
        here = [(index, task) for index, task in self._running.items() if self.slots[index].domain == domain]
        if not here or self._cannot_harm(head, [task for _, task in here]):  # admission.decide's FITS, read in O(1) a task
            return self._take_planned(position, domain), admission.BACKFILLED if backfill else admission.FITS
        running = [admission.Running(task, self._remaining(index, clock)) for index, task in here]
        positions: dict[int, int] = {}  # id(task) -> its position in the plan

        def others():
            for at in range(position - 1, -1, -1):
                task = self._plan[at].tasks[0]
                if task.priority != head.priority:
                    return
                if eligible(task):
                    positions[id(task)] = at
                    yield task

        indexed = self._index is not None and not backfill and not self._wide_waiting  # every waiting task eligible
        candidates = self._others_indexed(head, position, positions) if indexed else others()
        decision = admission.decide(head, candidates, running, model=self._context.model, llc=self._context.llc,
                                    held=None if self._terms is None else self._terms.held,
                                    deferral_pays=lambda h, w: self._deferral_pays(position, positions[id(w)], clock, slot))
        at = position if decision.task is head else positions[id(decision.task)]
        if decision.reason != admission.FITS and self._joined_running and self._elsewhere(decision.task, slot, running):
            self._passed.add(slot.index)
            return None, decision.reason
        reason = admission.BACKFILLED if backfill and decision.reason == admission.FITS else decision.reason
        if reason == admission.CORUN_NOTHING_FITS and (until := self._measure_wait(head, domain)) is not None:
            if clock < until:  # the core idles until its twin is measured (learn) or the wait ends
                self._wake = until if self._wake is None else min(self._wake, until)
                self._waiting_domains.add(domain)
                self._wait_began.setdefault(domain, clock)
                return None, reason
            reason = admission.CORUN_AFTER_MEASURE_WAIT
        return self._take_planned(at, domain), reason

    def _cannot_harm(self, head: Task, here: list[Task]) -> bool:
        """Whether :func:`admission.decide` must start ``head`` beside ``here`` with ``FITS``, read
        without weighing a co-run: its footprint is no bet (measured, or no key to share a bet
        with), no task involved carries per-key terms, and all the footprints together stay within
        the model's capacity, where it predicts no slowdown at all. A node's worth of small tasks
        (no-ops) then costs a start a sum over what runs, not a co-run model over it
        (docs/results/throughput.md, "64 and 128 emulated workers")."""
        if head.interference is not None or not (head.footprint_known or head.key is None):
            return False
        llc, model = self._context.llc, self._context.model
        if any(task.interference is not None for task in here):
            return False
        return llc is None or sum(task.footprint for task in here) + head.footprint <= model.capacity_fraction * llc

    def _others_indexed(self, head: Task, position: int, positions: dict[int, int]):
        """What ``_admit``'s walk yields (the waiting tasks of ``head``'s level after it, in plan
        order) as far as :func:`admission.decide` reads it, when every waiting task is eligible: the
        first :data:`~scalpel_executor.core.admission.LEAST_HARM_LOOKAHEAD` of them, then the first
        of each signature not yet yielded (``decide`` passes over a signature it has weighed, and
        past the look-ahead a task's count does not matter), and nothing once every signature of the
        level has been yielded. The walk read every waiting task when none fitted: 1.9 ms per start
        with 3,000 waiting 3 MiB tasks on 16 cores."""
        index = self._index
        counts = index.signatures_counted(head.priority)
        counts[admission.signature(head)] -= 1  # the head is no candidate
        signatures = sum(1 for count in counts.values() if count > 0)
        yielded: set = set()
        at = position - 1
        while at >= 0 and len(yielded) < signatures and position - 1 - at < admission.LEAST_HARM_LOOKAHEAD:
            task = self._plan[at].tasks[0]
            if task.priority != head.priority:
                return
            positions[id(task)] = at
            yield task
            yielded.add(admission.signature(task))
            at -= 1
        if at < 0 or len(yielded) == signatures:
            return
        for at in index.first_of_signatures(head.priority, at + 1, yielded.__contains__):
            task = self._plan[at].tasks[0]
            positions[id(task)] = at
            yield task

    def _elsewhere(self, task: Task, slot: Slot, running: list[admission.Running]) -> bool:
        """Whether ``task``, which would co-run past the tolerance on ``slot``'s domain, would start
        on the domain of an idle core this dispatch round serves later (it fits there, is no
        unmeasured bet there, and no core there waits for a measurement): ``slot`` is then passed
        over once and served again at the end of the round, leaving the task to that core. Plans dispatch
        to domains in a fixed order, so a task arriving while others run (a DAG's child) was
        planned onto the first domain with a free core, beside a long task there, while another
        domain stood idle. Only while no task waiting or running asks for several cores, memory or
        accelerators (counted in ``_wide_waiting``): a core idle beside a wider task's
        reservation is not free to take, and with wide tasks waiting moving a one-core task cost
        more than it saved (docs/notebook.md, "A co-run placed where it fits")."""
        model, llc = self._context.model, self._context.llc
        if (self._serving_next is None or slot.index in self._passed or self._wide_waiting
                or not admission.overflows(model, llc, running, task)
                or any(t.cores > 1 or needs_resources(t) for t in self._running.values())):
            return False
        for other in self._serving_next:
            if other.domain == slot.domain or not self._idle[other.index] or other.index in self._disabled:
                continue
            there = [admission.Running(t, 0.0) for index, t in self._running.items()
                     if self.slots[index].domain == other.domain]
            if (not admission.overflows(model, llc, there, task) and not admission.unmeasured_risk(task, there, model, llc)
                    and self._measure_wait(task, other.domain) is None):
                return True  # it would start there: it fits, and it is no unmeasured bet there
        return False

    def _measure_wait(self, head: Task, domain: int) -> float | None:
        """When a free core of ``domain`` may stop waiting for the first reading of a running
        unmeasured task of ``head``'s key (admission.MEASURE_WAIT from its start); None: no such
        task runs there, or the driver did not say what time it is."""
        if head.footprint_known or head.key is None or not self._timed:
            return None
        starts = [self._started[index] for index, task in self._running.items()
                  if self.slots[index].domain == domain and task.key == head.key and not task.footprint_known]
        return min(starts) + admission.MEASURE_WAIT if starts else None

    @property
    def wake_at(self) -> float | None:
        """The driver's time at which a core the latest :meth:`dispatch` left idle, waiting for a
        running task's first measurement, may start a task even without a :meth:`learn`; call
        :meth:`dispatch` then. None: no core waits so."""
        return self._wake

    def _take_planned(self, position: int, domain: int) -> Task:
        """Take the group at plan ``position`` onto ``domain``; its first task starts."""
        group = self._plan[position]
        del self._plan[position]
        if self._index is not None:
            self._index.remove(position, group.tasks[0])
        self._commit(group.tasks, domain, front=True)
        return self._buffers[domain].popleft()

    # -- resources (core.resources) ---------------------------------------------------------

    def _free_cores(self) -> list[int]:
        return [sum(1 for i in slots if self._idle[i] and i not in self._disabled) for slots in self._domain_slots]

    def _fits(self, task: Task, domain: int, *, committed: bool = False) -> bool:
        """Whether ``task`` may start on a free core of ``domain`` now: it fits, and no other domain
        with room has more of its accelerators near and would take it next (:meth:`_nearer_taker`)."""
        if not needs_resources(task):
            return True  # the free core is all it needs
        free = self._free_cores()
        return (resources.fits(task, domain, free, self.capacity, self._memory_used, self._gpus_used)
                and (committed or self._nearer_taker(task, domain, free) is None))

    def _nearer_taker(self, task: Task, domain: int, free: list[int]) -> int | None:
        """A domain with more of ``task``'s accelerators near than ``domain``, room for it now, and
        ``task`` as the next task its free cores take; None: start it where it is asked.

        Only such a domain may hold a task back: hypothesis found every core idle with tasks
        waiting when the nearer domain's core took another group (one formed for its size) or its
        own buffer, or when the task sat in the other domain's buffer."""
        nearer = resources.nearer_domain(task, domain, free, self.capacity, self._device_free)
        return nearer if nearer is not None and self._head(nearer)[0] is task else None

    def _eligible(self, head: Task, domain: int, *, committed: bool = False):
        """None when ``head`` fits on ``domain`` now; else the test a later task must pass to start
        there instead: it fits, and it cannot delay ``head``'s reservation. A ``committed`` head
        (in ``domain``'s buffer) is not held back for another domain: none takes it from there."""
        if self._fits(head, domain, committed=committed):
            return None
        free = self._free_cores()  # nothing starts while the candidates are tested
        nearer = None if committed else self._nearer_taker(head, domain, free)
        if nearer is not None and resources.fits(head, nearer, free, self.capacity, self._memory_used, self._gpus_used):
            # it starts on ``nearer`` in this dispatch: what it leaves spare there and now is free to take here
            reservation = Reservation(0.0, nearer, free[nearer] - head.cores,
                                      self._memory_left() - head.memory, self.capacity.gpus - self._gpus_used - head.gpus)
        else:
            reservation = self._reservation(head)

        def eligible(task: Task) -> bool:
            fits = not needs_resources(task) or resources.fits(task, domain, free, self.capacity,
                                                               self._memory_used, self._gpus_used)
            return fits and may_backfill(task, domain, reservation)

        return eligible

    def _memory_left(self) -> float:
        return math.inf if self.capacity.memory is None else self.capacity.memory - self._memory_used

    def _reservation(self, task: Task) -> Reservation:
        holdings = []
        for index, running in self._running.items():
            cores = [0] * len(self._domain_slots)
            for core in self._booked.get(index, (index,)):
                cores[self.slots[core].domain] += 1
            holdings.append(Holding(self._remaining(index, self._clock), tuple(cores), running.memory, running.gpus))
        return resources.reserve(task, self._free_cores(), self.capacity, self._memory_used, self._gpus_used,
                                 holdings)

    def _remaining(self, index: int, now: float) -> float:
        task = self._running[index]
        return max(task.runtime - (now - self._started.get(index, now)), admission.OVERDUE_FRACTION * task.runtime)

    def _deferral_pays(self, head_at: int, fitting_at: int, now: float, slot: Slot) -> bool:
        """Whether the model predicts the schedule ends no later with the fitting task (plan
        position ``fitting_at``) started now on ``slot`` and the head (``head_at``) next than with
        the head now: the rest of the plan simulated from what runs, first come first served with
        one-core tasks (:class:`~scalpel_executor.core.orders.FcfsEvaluator`), or, with a task of
        several cores queued or running, as this scheduler books, reserves and backfills them
        (:class:`~scalpel_executor.core.multicore_orders.MulticoreEvaluator`: the running tasks
        hold their cores until their estimated ends; now, the cores of this dispatch round are
        served in its order, so one core's rollout starts where the previous core's deferral left
        it), where the schedule must end strictly earlier: on 128 cores most deferrals tie (the
        end is another domain's), and deferring on ties pushed heavy tasks to the end (DAG
        arrivals: 22 of 120 instances more than 1% below largest-area-first against 19). Past
        :data:`ROLLOUT_LIMIT` waiting tasks (:data:`MALLEABLE_ROLLOUT_LIMIT` while malleable ones wait)
        the end is far off and deferring one start costs nothing.

        With wide tasks about, the head starts (no rollout) where the multicore rollout misjudged
        deferrals or cannot replay them (docs/notebook.md, "Mixed core counts, in simulation"):

        * the latest tasks joined work under way (a DAG's children, a later wave): the waiting
          tasks are then not the rest of the work, and deferring a head delayed its children
          (DAG arrivals: 41 of 120 instances more than 1% below largest-area-first, 15 before);
        * an estimate is uncertain (``Task.runtime_spread`` > 0): a deferral predicted to pay on
          estimates off by exp(N(0, 0.3)) ended up to 5.8% later than largest-area-first;
        * a task is wider than any domain (it spans domains) or declares memory or accelerators
          (``multicore_orders.supports``): run as k one-core copies, a k-core task misjudged
          deferrals (2% later than largest-area-first on the paper machine)."""
        if len(self._plan) > (MALLEABLE_ROLLOUT_LIMIT if self._malleable_waiting else ROLLOUT_LIMIT):
            return True
        queued = [group.tasks[0] for group in reversed(self._plan)]
        running = self._running_now(now)
        llc, model = self._context.llc or math.inf, self._context.model
        if all(task.cores == 1 for task in (*queued, *self._running.values())):
            ev = FcfsEvaluator([t.runtime for t in queued], [t.footprint for t in queued], [None] * len(queued),
                               self.cores_per_domain, llc, model, running, [t.tail for t in queued],
                               [t.interference for t in queued])
        elif (not self._joined_running and supports([*queued, *self._running.values()], self.cores_per_domain)
              and not any(task.runtime_spread > 0 for task in (*queued, *self._running.values()))):
            ev = MulticoreEvaluator(queued, self.cores_per_domain, llc, model, running=running)
        else:
            return False
        last = len(self._plan) - 1  # plan positions count from the end, queued indices from the start
        head, fitting = last - head_at, last - fitting_at
        rest = [i for i in range(len(queued)) if i not in (head, fitting)]
        plan_order = [head] + [i for i in range(len(queued)) if i != head]  # the plan's own next start first
        deferred = [fitting, head, *rest]
        if isinstance(ev, MulticoreEvaluator):
            # Now, the replay serves the cores this dispatch serves, in its order: each order's first
            # task on this core, then the cores after it in the round. So what it predicts with the
            # fitting task started is what the next core's rollout starts from.
            serving = [slot] + [s for s in self._serving_next if self._idle[s.index]] \
                if self._serving_next is not None else None
            if serving is not None:
                serving = [(s.domain, s.index - self._domain_slots[s.domain][0]) for s in serving]
            first = (slot.domain, slot.index - self._domain_slots[slot.domain][0])
            as_planned = ev.run(plan_order, first=first, serving=serving)  # a tie buys nothing: the head starts
            return ev.run(deferred, cutoff=as_planned, first=first, serving=serving) < as_planned * (1 - 1e-9)
        as_planned = ev.run(plan_order)
        return ev.run(deferred, cutoff=as_planned * (1 + 1e-9)) <= as_planned * (1 + 1e-9)

    def _running_now(self, now: float) -> list[RunningTask]:
        """Every running task as the evaluators see it: its domain, the cores it holds there, its
        footprint and estimated remaining seconds. A task wider than any domain holds cores of
        several: it is one RunningTask per domain, its footprint on its own."""
        running = []
        for index, task in self._running.items():
            domain = self.slots[index].domain
            held: dict[int, list[int]] = {domain: []}
            for core in self._booked.get(index, (index,)):
                held.setdefault(self.slots[core].domain, []).append(core - self._domain_slots[self.slots[core].domain][0])
            remaining = self._remaining(index, now)
            for other, cores in held.items():
                running.append(RunningTask(other, task.footprint if other == domain else 0.0, remaining,
                                           tuple(cores), task.runtime,
                                           interference=task.interference if other == domain else None))
        return running

    def _next_group(self, cores: int) -> int | None:
        """Position in ``_plan`` of the group a domain of ``cores`` cores should take next.

        The head of the plan, unless it was formed for a larger domain and a group of the same
        priority further on fits (only on topologies with unequal domains).
        """
        if self._dirty:
            self._replan()
        if not self._plan:
            return None
        head = self._plan[-1]
        if head.capacity > cores:
            for position in range(len(self._plan) - 2, -1, -1):
                group = self._plan[position]
                if group.tasks[0].priority != head.tasks[0].priority:
                    break
                if group.capacity <= cores:
                    return position
        return len(self._plan) - 1

    def _choose(self, domain: int) -> Task | None:
        """The policy's next task for a free core of ``domain``: its buffer's head, the next
        group, or the head of the fullest other buffer; one that does not fit is reserved and
        the first later one that may be backfilled starts instead."""
        head, committed = self._head(domain)
        if head is None or (not committed and self._waits_wider(head, domain)):
            return None
        eligible = self._eligible(head, domain, committed=committed)
        for task, take in itertools.islice(self._candidates(domain), BACKFILL_LOOKAHEAD):
            if eligible is None or eligible(task):
                return take()
        if not committed and self._sooner_now(head, domain):
            return next(take for task, take in self._candidates(domain) if task is head)()
        return None

    def _head(self, domain: int) -> tuple[Task | None, bool]:
        """The task a free core of ``domain`` takes next if it fits: its buffer's head (committed:
        True), the next group's, or the head of the fullest other buffer."""
        buffer = self._buffers[domain]
        position = self._next_group(self.cores_per_domain[domain])
        group = None if position is None else self._plan[position]
        if buffer and (group is None or group.tasks[0].priority <= buffer[0].priority):
            return buffer[0], True
        if group is not None:
            return group.tasks[0], False
        fullest = max(range(len(self._buffers)), key=lambda d: len(self._buffers[d]))
        return (self._buffers[fullest][0] if self._buffers[fullest] else None), False

    def _candidates(self, domain: int):
        """Every waiting task a free core of ``domain`` may take, in the policy's order of
        preference (the head :meth:`_choose` names first), each with the call that takes it."""
        buffer = self._buffers[domain]
        position = self._next_group(self.cores_per_domain[domain])
        group = None if position is None else self._plan[position]
        buffer_first = bool(buffer) and (group is None or group.tasks[0].priority <= buffer[0].priority)
        if buffer_first:
            yield from self._buffer_candidates(domain)
        if group is not None:
            yield group.tasks[0], lambda: self._take_planned(position, domain)
        for at in range(len(self._plan) - 1, -1, -1):
            if at != position:
                yield self._plan[at].tasks[0], lambda at=at: self._take_planned(at, domain)
        if not buffer_first:
            yield from self._buffer_candidates(domain)
        for other in sorted(range(len(self._buffers)), key=lambda d: -len(self._buffers[d])):
            if other != domain:
                yield from self._buffer_candidates(other)

    def _buffer_candidates(self, domain: int):
        buffer = self._buffers[domain]
        for index, task in enumerate(list(buffer)):
            def take(index=index):
                task = buffer[index]
                del buffer[index]
                return task
            yield task, take
