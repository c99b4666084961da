"""Discrete-event simulation of a multi-domain machine running a task batch under any policy.

The simulator is the second driver of :class:`scalpel_executor.core.scheduler.Scheduler` (the live
executor is the first): it feeds the same ``add`` / ``dispatch`` / ``release`` calls, with a
simulated clock instead of worker processes, so what it predicts is what the executor would do
given the same completions.

Each task runs at the rate the contention model
(:class:`~scalpel_executor.core.contention.ContentionModel`) gives it next to the tasks sharing its
LLC domain, its true per-key residuals (``SimTask.interference``,
:func:`~scalpel_executor.core.interference.corun_slowdowns`) on top; rates change whenever a task
starts or ends on the domain. What the scheduler is told of those residuals is
``SimTask.told_interference`` (default: nothing, the footprint model alone), as
``runtime_estimate`` is what it is told of the run time: a machine whose tasks depart from the
footprint model can be planned for with no residuals, learned ones or the truth. Tasks that arrive later
(``SimTask.arrival``) join the scheduler through the same batch rule as the live pool
(:mod:`scalpel_executor.core.batching`) when ``batching`` is given, so the window's cost shows.
A task that names parents (``SimTask.parents``, indices into the task list) arrives when the last
of them ends, or at its own ``arrival`` if that is later, through the same batch rule: a workflow's
DAG as Parsl releases it, an app submitted when the futures it takes are done.
A malleable task (``SimTask.max_cores`` above its ``cores``) runs on the width the scheduler gives
it at its start (:mod:`scalpel_executor.core.widths`), in the time its speed-up curve says
(Amdahl's law with ``SimTask.serial_fraction``), and the scheduler is told how long it ran.
With a ``prior``, run times are told as a first run's executor learns them (``learning.estimates``).
Where malleable tasks end at one instant on several domains, every end of that instant reaches the
scheduler before it dispatches, as the live pool reads every result ready in one pass; other ends
at one instant go one at a time, as the plan's evaluators (``core.orders``) foresee them.

Cost: O(C) per start or end of a task on a domain of C cores, plus a heap operation; a million
tasks on 64 domains simulate in seconds to tens of seconds.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

from scalpel_executor.core.admission import GUESSED_SPREAD, ONE_RUN_SPREAD
from scalpel_executor.core.batching import Batcher, Batching
from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.interference import Terms, corun_slowdowns
from scalpel_executor.core.policies import DEFAULT_POLICY
from scalpel_executor.core.scheduler import CHECKED_AT_DISPATCH, Scheduler, Task
from scalpel_executor.core.widths import at_width, widest

__all__ = ["SimTask", "SimResult", "SimRecord", "ContentionModel", "Batching", "simulate", "lower_bound",
           "graph_tails"]


@dataclass(frozen=True)
class SimTask:
    """A task of a simulated batch."""

    name: str
    solo_time: float  # seconds when running alone on the machine
    footprint: float = 0.0  # bytes
    sensitivity: float | None = None  # None: the model's default
    arrival: float = 0.0  # seconds after the start
    runtime_estimate: float | None = None  # what the scheduler is told; None: solo_time
    runtime_spread: float = 0.0  # how far the scheduler is told its estimate may be off (relative std)
    priority: float = 0.0
    intensity: float | None = None
    parents: tuple[int, ...] = ()  # indices of the tasks whose ends release this one (a DAG)
    cores: int = 1  # cores of one LLC domain it runs on at once (its solo time is on that many)
    memory: float = 0.0  # bytes of the node's memory it holds (counted against simulate's ``memory``)
    gpus: int = 0
    tail: float = 0.0  # what the scheduler is told waits for its result (Task.tail; graph_tails computes it)
    wide_tail: float | None = None  # the same chain at its malleable tasks' widest (Task.wide_tail); None: tail
    interference: Terms | None = None  # its true residuals in log slowdown (core.interference.Terms); None: none
    told_interference: Terms | None = None  # what the scheduler is told of them (Task.interference); None: nothing
    max_cores: int | None = None  # malleable up to this many cores (Task.max_cores); None: fixed ``cores``
    serial_fraction: float = 1.0  # Amdahl's serial fraction: on w cores it takes solo_time·amdahl(s, w)/amdahl(s, cores)
    key: str | None = None  # its profile key (Task.key): tasks of one key share a learned speed-up
    family: str | None = None  # its key's family (Task.family): a key with no speed-up read borrows the family's

    def solo_at(self, width: int) -> float:
        """Seconds alone on ``width`` cores (``solo_time`` at its own ``cores``)."""
        return at_width(self.solo_time, self.serial_fraction, self.cores, width)

    @property
    def fastest(self) -> float:
        """Seconds alone at its widest (``solo_time`` unless malleable)."""
        return self.solo_at(max(self.cores, self.max_cores or self.cores))

    def __post_init__(self) -> None:
        for name in ("solo_time", "footprint", "arrival", "tail", "wide_tail"):
            value = getattr(self, name)
            if name == "wide_tail" and value is None:
                continue
            if not isinstance(value, (int, float)) or math.isnan(value) or math.isinf(value) or value < 0:
                raise ValueError(f"task {self.name!r}: {name} must be a finite number ≥ 0, got {value!r}")
        for name in ("cores", "gpus"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (1 if name == "cores" else 0):
                raise ValueError(f"task {self.name!r}: {name} must be an integer ≥ {1 if name == 'cores' else 0}, "
                                 f"got {value!r}")
        if self.max_cores is not None and (isinstance(self.max_cores, bool) or not isinstance(self.max_cores, int)
                                           or self.max_cores < self.cores):
            raise ValueError(f"task {self.name!r}: max_cores must be None or an integer ≥ cores ({self.cores}), "
                             f"got {self.max_cores!r}")
        if isinstance(self.serial_fraction, bool) or not isinstance(self.serial_fraction, (int, float)) \
                or not 0 <= self.serial_fraction <= 1:
            raise ValueError(f"task {self.name!r}: serial_fraction must be a number in [0, 1] (Amdahl's), "
                             f"got {self.serial_fraction!r}")
        if not isinstance(self.memory, (int, float)) or not 0 <= self.memory < math.inf:
            raise ValueError(f"task {self.name!r}: memory must be a finite number of bytes ≥ 0, got {self.memory!r}")
        spread = self.runtime_spread
        if isinstance(spread, bool) or not isinstance(spread, (int, float)) or not 0 <= spread < math.inf:
            raise ValueError(f"task {self.name!r}: runtime_spread must be a finite number ≥ 0, got {spread!r}")
        if isinstance(self.parents, (str, bytes)) or not hasattr(self.parents, "__iter__"):
            raise ValueError(f"task {self.name!r}: parents must be a sequence of task indices, got {self.parents!r}")
        parents = tuple(self.parents)
        for parent in parents:
            if isinstance(parent, bool) or not isinstance(parent, int) or parent < 0:
                raise ValueError(f"task {self.name!r}: parents must be indices ≥ 0 into the task list, "
                                 f"got {parent!r} in {parents!r}")
        for name in ("interference", "told_interference"):
            terms = getattr(self, name)
            if terms is None:
                continue
            if (isinstance(terms, (str, bytes)) or not hasattr(terms, "__len__") or len(terms) not in (2, 3)
                    or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
                               for x in terms)):
                raise ValueError(f"task {self.name!r}: {name} must be None or (sensitivity, pressure[, bandwidth]), "
                                 f"two or three finite numbers in log slowdown, got {terms!r}")
            object.__setattr__(self, name, Terms(*map(float, terms)))
        object.__setattr__(self, "parents", parents)  # a list given is kept as a tuple: the task stays hashable


@dataclass
class SimRecord:
    name: str
    cpu: int
    domain: int
    start: float
    end: float
    solo_time: float  # alone, at its width
    footprint: float
    cores: int = 1  # its width

    @property
    def slowdown(self) -> float:
        return (self.end - self.start) / self.solo_time if self.solo_time > 0 else 1.0


@dataclass
class SimResult:
    policy: str
    makespan: float
    lower_bound: float
    utilisation: float  # busy core-seconds / (cores × makespan)
    records: list[SimRecord] = field(repr=False)
    order: list[int] = field(default_factory=list, repr=False)  # task indices in the order they started

    @property
    def mean_slowdown(self) -> float:
        return sum(r.slowdown for r in self.records) / len(self.records) if self.records else 1.0

    def to_dict(self, *, with_tasks: bool = False) -> dict:
        out = {
            "policy": self.policy,
            "makespan": self.makespan,
            "lower_bound": self.lower_bound,
            "utilisation": self.utilisation,
            "mean_slowdown": self.mean_slowdown,
            "tasks": len(self.records),
        }
        if with_tasks:
            out["records"] = [vars(r) for r in self.records]
        return out


def lower_bound(solo_times: Sequence[float], cores: int, widths: Sequence[int] | None = None) -> float:
    """No schedule beats max(longest task, total work / cores) (solo times, no contention; a task
    of ``widths[i]`` cores is that many cores' work)."""
    work = sum(solo_times) if widths is None else sum(t * w for t, w in zip(solo_times, widths))
    return max(max(solo_times, default=0.0), work / cores)


def _dag(tasks: Sequence[SimTask]) -> tuple[list[list[int]], list[float]]:
    """Each task's children and the longest chain of solo times ending at it; ValueError when
    ``parents`` name no task, the task itself, or a cycle. Kahn's algorithm, O(tasks + edges)."""
    children: list[list[int]] = [[] for _ in tasks]
    for index, task in enumerate(tasks):
        for parent in task.parents:
            if parent >= len(tasks):
                raise ValueError(f"task {task.name!r} (index {index}): parent {parent} is not a task; parents are "
                                 f"indices into the task list, 0 to {len(tasks) - 1}")
            if parent == index:
                raise ValueError(f"task {task.name!r} (index {index}) names itself as a parent; remove {index} "
                                 f"from its parents")
            children[parent].append(index)
    unfinished = [len(task.parents) for task in tasks]
    chain = [0.0] * len(tasks)
    ready = [index for index, count in enumerate(unfinished) if count == 0]
    for index in ready:  # the list grows as tasks become ready
        chain[index] += tasks[index].fastest
        for child in children[index]:
            chain[child] = max(chain[child], chain[index])
            unfinished[child] -= 1
            if unfinished[child] == 0:
                ready.append(child)
    if len(ready) < len(tasks):
        # Every task left has a parent left, so walking up parents from one of them must repeat.
        left = {index for index, count in enumerate(unfinished) if count}
        walk, seen = [min(left)], {}
        while walk[-1] not in seen:
            seen[walk[-1]] = len(walk) - 1
            walk.append(next(p for p in tasks[walk[-1]].parents if p in left))
        cycle = walk[seen[walk[-1]]:][::-1]
        raise ValueError("the parents of tasks " + " -> ".join(f"{tasks[i].name!r} ({i})" for i in cycle)
                         + " form a cycle, so none of them could ever start; a task's parents must not "
                           "depend on it")
    return children, chain


def graph_tails(tasks: Sequence[SimTask], *, estimates: bool = True,
                serial_fraction: Callable[[Hashable], float] | None = None,
                domain_cores: int | None = None) -> list[float]:
    """Each task's tail: the longest chain of its descendants' run times (its upward rank less its
    own run time), on the run-time estimates (``estimates``) or the solo times; what an executor
    that sees the whole graph would tell the scheduler (``SimTask.tail``). O(tasks + edges).

    With ``serial_fraction`` (a profile key's, as the width rule knows it:
    ``Widths.model.serial_fraction``), a malleable task counts at its widest width, capped at
    ``domain_cores``, as the executor's tails at the widest count it (``SimTask.wide_tail``, what the
    width rule weighs; :func:`scalpel_executor.core.widths.at_width`)."""
    children, _ = _dag(tasks)  # validates parents and finds cycles
    duration = [t.runtime_estimate if estimates and t.runtime_estimate is not None else t.solo_time for t in tasks]
    if serial_fraction is not None:
        duration = [at_width(seconds, serial_fraction(t.key), t.cores, widest(t.cores, t.max_cores, domain_cores))
                    if t.max_cores is not None and t.max_cores > t.cores else seconds
                    for t, seconds in zip(tasks, duration)]
    unfinished = [len(t.parents) for t in tasks]
    order = [i for i, count in enumerate(unfinished) if count == 0]
    for index in order:  # topological: the list grows as tasks become ready
        for child in children[index]:
            unfinished[child] -= 1
            if unfinished[child] == 0:
                order.append(child)
    tail = [0.0] * len(tasks)
    for index in reversed(order):
        tail[index] = max((duration[c] + tail[c] for c in children[index]), default=0.0)
    return tail


def simulate(
    tasks: Sequence[SimTask],
    domains: Sequence[Sequence[int]],
    llc_size: float,
    policy: str = DEFAULT_POLICY,
    *,
    model: ContentionModel | None = None,
    seed: int = 0,
    batching: Batching | None = None,
    scheduler: Scheduler | None = None,
    on_time: Callable[[float], None] | None = None,
    memory: float | None = None,
    gpus: int = 0,
    prior: float | None = None,
) -> SimResult:
    """Run ``tasks`` on a machine of LLC ``domains`` (CPU lists) under ``policy``.

    Parameters
    ----------
    tasks : sequence of SimTask
        A task with ``parents`` is released when all of them have ended (not before its ``arrival``);
        ValueError if ``parents`` name an index outside ``tasks``, the task itself, or a cycle.
    domains : sequence of sequence of int
        CPUs of each LLC domain, e.g. ``[d.cpus for d in Topology.from_spec("2x4:12MiB").domains]``.
    llc_size, policy : float, str
        Bytes of LLC per domain; a name from :data:`scalpel_executor.core.scheduler.POLICIES`.
    model : ContentionModel, optional
        How co-runners slow each other down; the ``scalpel`` policy plans with the same model (the
        simulator assumes the scheduler knows the machine's footprint model), and each task's true
        ``interference`` on top of it, of which the scheduler knows ``told_interference``.
    seed : int
        Seeds the ``random`` policy.
    batching : Batching, optional
        Hold arrivals as the live pool does (its ``batching``); None (default): each at once.
    scheduler : Scheduler, optional
        Drive this scheduler (built for the same ``domains``; a subclass, say) instead of a new one
        of ``policy``, which then only names the result.
    on_time : callable, optional
        Called with the simulated time of every event before the scheduler hears of it, for a
        scheduler that reads a clock.
    memory, gpus : the node's memory budget (bytes; None: not counted) and accelerators, against
        which the tasks' ``memory`` and ``gpus`` are booked (the scheduler's).
    prior : float, optional
        Seconds guessed for a task of a key none of whose tasks has ended; a later one is told their
        mean at its narrowest, as sure as a key seen once. None (default): ``runtime_estimate``.

    Returns
    -------
    SimResult
        Makespan, lower bound (with parents, also the longest chain of solo times), utilisation and
        one record per task.
    """
    if not llc_size or llc_size <= 0:
        raise ValueError(f"llc_size must be a positive number of bytes, got {llc_size!r}")
    if prior is not None and not (isinstance(prior, (int, float)) and prior > 0 and math.isfinite(prior)):
        raise ValueError(f"prior must be a positive number of seconds, got {prior!r}")
    children, chain = _dag(tasks)
    unfinished_parents = [len(t.parents) for t in tasks]
    model = model or ContentionModel()
    if scheduler is None:
        scheduler = Scheduler(domains, policy, seed=seed, llc=llc_size, model=model, memory=memory, gpus=gpus)
    slots = scheduler.slots
    n_domains = len(scheduler.cores_per_domain)
    default_sigma = model.sensitivity

    # Per domain: running slot -> [sim task, remaining solo-seconds of work, rate]
    running: list[dict[int, list]] = [{} for _ in range(n_domains)]
    updated_at = [0.0] * n_domains
    version = [0] * n_domains
    starts: dict[int, float] = {}
    widths: dict[int, int] = {}  # slot index -> cores its running task was given
    dispatched: list[int] = []
    records: list[SimRecord] = []
    events: list[tuple[float, int, int, int]] = []  # (time, order, domain or -1 for arrival, version)
    order = 0

    def advance(domain: int, now: float) -> None:
        elapsed = now - updated_at[domain]
        if elapsed > 0:
            for entry in running[domain].values():
                entry[1] -= elapsed * entry[2]
        updated_at[domain] = now

    def malleable(task: SimTask) -> bool:
        return (task.max_cores or 0) > task.cores

    def ended(domain: int, now: float) -> list[int]:
        """The slots of ``domain`` whose tasks end at ``now``: within tolerance, or too little left
        to move the clock."""
        advance(domain, now)
        return [s for s, e in running[domain].items()
                if e[1] <= 1e-9 * max(1.0, e[0].solo_at(widths[s])) or now + e[1] / e[2] <= now]

    def reschedule(domain: int, now: float) -> None:
        nonlocal order
        version[domain] += 1
        entries = list(running[domain].values())
        if not entries:
            return
        factors = corun_slowdowns(
            model,
            [e[0].footprint for e in entries],
            [default_sigma if e[0].sensitivity is None else e[0].sensitivity for e in entries],
            llc_size,
            [e[0].interference for e in entries],
        )
        for entry, factor in zip(entries, factors):
            entry[2] = 1.0 / factor
        finish = min(max(e[1], 0.0) / e[2] for e in entries)
        order += 1
        heapq.heappush(events, (now + finish, order, domain, version[domain]))

    def start_assigned(now: float) -> None:
        nonlocal order
        touched = set()
        for assignment in scheduler.dispatch(now):
            slot = assignment.slot
            if slot.domain not in touched:
                advance(slot.domain, now)
                touched.add(slot.domain)
            sim_task = assignment.task.payload
            widths[slot.index] = width = assignment.task.cores
            running[slot.domain][slot.index] = [sim_task, sim_task.solo_at(width), 1.0]
            starts[slot.index] = now
            dispatched.append(assignment.task.id)
        for domain in touched:
            reschedule(domain, now)
        if scheduler.wake_at is not None:  # a core idles for a measurement: dispatch again when it may stop
            order += 1
            heapq.heappush(events, (max(scheduler.wake_at, now), order, -3, 0))

    seen: dict[Hashable, list[float]] = {}  # with a prior: key -> its ended tasks' times at their narrowest

    def to_task(i: int, t: SimTask) -> Task:
        estimate = t.solo_time if t.runtime_estimate is None else t.runtime_estimate
        spread, ended_times = t.runtime_spread, seen.get(t.key) if prior is not None else None
        if prior is not None:  # a key never ended: the guess; else its tasks' mean (learning.estimates)
            estimate, spread = (sum(ended_times) / len(ended_times), ONE_RUN_SPREAD) if ended_times else (prior, GUESSED_SPREAD)
        return Task(i, t.footprint, estimate, t.priority, t.intensity, payload=t, runtime_spread=spread,
                    cores=t.cores, memory=t.memory, gpus=t.gpus, tail=t.tail, wide_tail=t.wide_tail,
                    interference=t.told_interference,
                    key=t.key, max_cores=t.max_cores, family=t.family)

    batcher: Batcher[Task] | None = (None if batching is None
                                     else Batcher(batching, len(slots), runtime_of=lambda task: task.runtime,
                                                  hold_while_busy=scheduler.policy not in CHECKED_AT_DISPATCH))
    batch_due: float | None = None  # the pending "batch due" event's time, if one is queued

    def arrive(new: list[Task], now: float) -> None:
        if batcher is None:
            scheduler.add(new)
            return
        batcher.hold(new, now)
        release_batch(now)

    def release_batch(now: float) -> None:
        nonlocal batch_due, order
        if batcher is None:
            return
        batch = batcher.release(now, scheduler.waiting, len(scheduler.running))
        if batch:
            scheduler.add(batch)
        due = batcher.wake_at(scheduler.waiting, len(scheduler.running))
        if due is not None and due != batch_due:
            batch_due = due
            order += 1
            heapq.heappush(events, (max(due, now), order, -2, 0))

    arrivals = sorted((i for i in range(len(tasks)) if not tasks[i].parents), key=lambda i: tasks[i].arrival)
    now = 0.0
    arrive([to_task(i, tasks[i]) for i in arrivals if tasks[i].arrival <= 0], now)
    for i in arrivals:
        if tasks[i].arrival > 0:
            order += 1
            heapq.heappush(events, (tasks[i].arrival, order, -1, i))
    start_assigned(now)

    busy = 0.0
    while events:
        now, _, domain, stamp = heapq.heappop(events)
        if on_time is not None:
            on_time(now)
        if domain == -1:
            arrive([to_task(stamp, tasks[stamp])], now)
            start_assigned(now)
            continue
        if domain == -3:  # a core waiting for a measurement may start
            start_assigned(now)
            continue
        if domain == -2:  # the held batch may be due
            release_batch(now)
            start_assigned(now)
            continue
        if stamp != version[domain]:
            continue  # superseded by a later start or end on this domain
        ending = {domain: ended(domain, now)}
        same = []  # other domains' ends at this very moment
        while events and events[0][2] >= 0 and events[0][0] <= now:
            same.append(heapq.heappop(events))
        if same:
            more = {d: ended(d, now) for _, _, d, stamp in same if stamp == version[d] and d not in ending}
            if any(malleable(running[d][s][0]) for d, done in (*ending.items(), *more.items()) for s in done):
                # A malleable task among them: all end before anything starts (module docstring). One
                # at a time, the first one's cores were filled before the others' readings taught its
                # key (docs/results/widths-log.md, "Ends at one instant heard together").
                ending.update(more)
            else:  # one at a time, as the plan's evaluators (core.orders) foresee them
                for event in same:
                    heapq.heappush(events, event)
        released = []
        for domain, done in ending.items():
            for slot_index in done:
                sim_task = running[domain].pop(slot_index)[0]
                began = starts.pop(slot_index)
                width = widths.pop(slot_index)
                busy += (now - began) * width
                slot = slots[slot_index]
                records.append(SimRecord(sim_task.name, slot.cpu, domain, began, now, sim_task.solo_at(width),
                                         sim_task.footprint, width))
                released_task = scheduler.release(slot_index, now)
                if prior is not None and sim_task.key is not None:  # what the estimator learns, at its narrowest
                    seen.setdefault(sim_task.key, []).append(at_width(
                        now - began, scheduler.widths.model.serial_fraction(sim_task.key), width, sim_task.cores))
                for child in children[released_task.id]:
                    unfinished_parents[child] -= 1
                    if unfinished_parents[child]:
                        continue
                    if tasks[child].arrival <= now:
                        released.append(child)
                    else:
                        order += 1
                        heapq.heappush(events, (tasks[child].arrival, order, -1, child))
        if released:  # children freed by the same ends arrive together, as one burst
            arrive([to_task(i, tasks[i]) for i in sorted(released)], now)
        release_batch(now)  # fewer tasks wait now: a held batch may be due
        start_assigned(now)
        for domain in ending:
            reschedule(domain, now)

    if scheduler.waiting or any(running) or (batcher is not None and batcher.held) or len(records) < len(tasks):
        raise AssertionError("simulation ended with unfinished tasks")  # a scheduler bug, never user input
    makespan = max((r.end for r in records), default=0.0)
    cores = len(slots)
    return SimResult(
        policy=policy,
        makespan=makespan,
        lower_bound=max(lower_bound([t.fastest for t in tasks], cores, [t.cores for t in tasks]),
                        max(chain, default=0.0)),
        utilisation=busy / (cores * makespan) if makespan > 0 else 0.0,
        records=records,
        order=dispatched,
    )
