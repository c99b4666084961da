"""Per-task resources on one node: cores of an LLC domain, memory, accelerators. Pure.

A task declares ``cores`` (CPUs it runs on at once), ``memory`` (bytes it holds) and ``gpus``
(:class:`~scalpel_executor.core.tasks.Task`). A k-core task takes k cores of one LLC domain, and its
footprint counts on that domain once; one asking more cores than any domain has takes cores of
several domains (its footprint counts on the first). Memory and accelerators are the node's: the
tasks running never hold more than the node's budget of either::

    free core on domain d, head h (the task the policy would start next)
      h fits: h.cores idle cores on d (or on the node, for a task wider than any domain),
              memory used + h.memory <= budget, accelerators used + h.gpus <= count
        └─> start h
      else h is *reserved*: the earliest time it fits if running tasks end as estimated
              (their remaining seconds), on which domain, and what is spare then (reservation)
           a later task b may start now only if it fits and cannot delay h: it ends before
           the reservation (b.runtime <= at), or uses only what h leaves spare then (backfill)

This is EASY backfilling (Lifka, 1995; Mu'alem and Feitelson, 2001) on one node: a wide or large
task is never starved by a stream of small ones, and no core idles that a task could use without
delaying it.

Accelerators are booked by index. Where the node says which LLC domains each device is near
(``Capacity.device_domains``, from the NUMA node of its PCI device), a task asking for k of them
starts on a domain with k free devices near it when one has the cores free now
(:func:`nearer_domain`), and is given the devices near its domain first (:func:`choose_devices`). With every task one core, no memory and no accelerator (the default) every task fits
any idle core and nothing here changes a decision.

Cost: a reservation sorts the running tasks by their estimated end, O(R log R) for R running tasks,
and is computed only when the head does not fit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scalpel_executor.core.tasks import Task
from scalpel_executor.core.units import format_size

__all__ = ["Capacity", "Holding", "Reservation", "needs_resources", "unfit_reason", "fits", "reserve", "may_backfill",
           "nearer_domain", "choose_devices", "counted_memory"]


@dataclass(frozen=True, slots=True)
class Capacity:
    """What one node offers: cores per LLC domain, memory in bytes (None: not counted), accelerators,
    and for each accelerator the LLC domains near it (``device_domains``; () or an empty set: not known)."""

    cores_per_domain: tuple[int, ...]
    memory: float | None = None
    gpus: int = 0
    device_domains: tuple[frozenset[int], ...] = ()

    def __post_init__(self) -> None:
        if self.memory is not None and not (isinstance(self.memory, (int, float)) and self.memory >= 0
                                            and math.isfinite(self.memory)):
            raise ValueError(f"the node's memory budget must be a finite number of bytes >= 0 or None, "
                             f"got {self.memory!r}")
        if isinstance(self.gpus, bool) or not isinstance(self.gpus, int) or self.gpus < 0:
            raise ValueError(f"the node's accelerator count must be an integer >= 0, got {self.gpus!r}")
        if self.device_domains and len(self.device_domains) != self.gpus:
            raise ValueError(f"device_domains names the domains near {len(self.device_domains)} accelerators; the "
                             f"node has {self.gpus}")


@dataclass(frozen=True, slots=True)
class Holding:
    """A running task as reservations see it: what it holds and when it is expected to end."""

    remaining: float  # estimated seconds left
    cores: tuple[int, ...]  # cores it holds on each domain
    memory: float
    gpus: int


@dataclass(frozen=True, slots=True)
class Reservation:
    """When a blocked task is expected to fit (``at`` seconds from now; inf: not while the running
    tasks end), on which ``domain``, and what is left spare for others then."""

    at: float
    domain: int | None
    spare_cores: int  # on ``domain``, beyond the task's
    spare_memory: float
    spare_gpus: int


def needs_resources(task: Task) -> bool:
    """Whether ``task`` asks for more than one core, any memory or an accelerator."""
    return task.cores != 1 or task.memory > 0 or task.gpus > 0


def counted_memory(memory: float, declared: bool, budget: float | None) -> float:
    """The memory a task counts against a node of ``budget`` bytes: a declared figure in full; a
    learned one (the peak RSS its key measured) at most the budget, so learning never makes a task
    unrunnable.

    >>> counted_memory(5e9, False, 4e9), counted_memory(5e9, True, 4e9), counted_memory(5e9, False, None)
    (4000000000.0, 5000000000.0, 5000000000.0)
    """
    if declared or budget is None:
        return float(memory)
    return float(min(memory, budget))


def unfit_reason(task: Task, capacity: Capacity, who: str | None = None) -> str | None:
    """Why ``task`` can never run on this node (a sentence naming the figures), or None; ``who``
    names the task (default ``task <its id>``)."""
    total = sum(capacity.cores_per_domain)
    who = f"task {task.id!r}" if who is None else who
    if task.cores > total:
        return (f"{who} asks for {task.cores} cores; this node has {total} "
                f"(LLC domains of {', '.join(map(str, capacity.cores_per_domain))})")
    if capacity.memory is not None and task.memory > capacity.memory:
        return f"{who} asks for {format_size(task.memory)} of memory; this node's budget is {format_size(capacity.memory)}"
    if task.gpus > capacity.gpus:
        return f"{who} asks for {task.gpus} accelerator{'s' * (task.gpus != 1)}; this node has {capacity.gpus}"
    return None


def fits(task: Task, domain: int, free: Sequence[int], capacity: Capacity, memory_used: float, gpus_used: int) -> bool:
    """Whether ``task`` can start now on a free core of ``domain`` (``free``: idle cores per domain)."""
    widest = max(capacity.cores_per_domain)
    cores_ok = free[domain] >= task.cores if task.cores <= widest else free[domain] >= 1 and sum(free) >= task.cores
    return (cores_ok and (capacity.memory is None or memory_used + task.memory <= capacity.memory)
            and gpus_used + task.gpus <= capacity.gpus)


def reserve(task: Task, free: Sequence[int], capacity: Capacity, memory_used: float, gpus_used: int,
            running: Sequence[Holding]) -> Reservation:
    """The earliest time ``task`` fits if the ``running`` tasks end as estimated (module docstring)."""
    free = list(free)
    memory_free = math.inf if capacity.memory is None else capacity.memory - memory_used
    gpus_free = capacity.gpus - gpus_used
    widest = max(capacity.cores_per_domain)
    at = 0.0
    ending = sorted(running, key=lambda holding: holding.remaining)
    for step in range(len(ending) + 1):
        if step:
            holding = ending[step - 1]
            at = holding.remaining
            for domain, cores in enumerate(holding.cores):
                free[domain] += cores
            memory_free += holding.memory
            gpus_free += holding.gpus
            if step < len(ending) and ending[step].remaining == at:
                continue  # tasks ending together free their resources together
        if memory_free < task.memory or gpus_free < task.gpus:
            continue
        if task.cores <= widest:
            domain = next((d for d, idle in enumerate(free) if idle >= task.cores), None)
            if domain is not None:
                return Reservation(at, domain, free[domain] - task.cores, memory_free - task.memory,
                                   gpus_free - task.gpus)
        elif sum(free) >= task.cores:
            return Reservation(at, None, 0, memory_free - task.memory, gpus_free - task.gpus)
    return Reservation(math.inf, None, 0, 0.0, 0)


def may_backfill(task: Task, domain: int, reservation: Reservation) -> bool:
    """Whether ``task``, which fits now on ``domain``, may start without delaying the reserved task:
    it ends before the reservation, or it holds only what the reserved task leaves spare then."""
    if task.runtime <= reservation.at:
        return True
    if reservation.domain is None and reservation.at < math.inf:
        cores_ok = False  # a task wider than any domain needs every core it counted on
    else:
        cores_ok = domain != reservation.domain or task.cores <= reservation.spare_cores
    return cores_ok and task.memory <= reservation.spare_memory and task.gpus <= reservation.spare_gpus


def _near(device_free: Sequence[bool], device_domains: Sequence[frozenset[int]], domain: int) -> int:
    return sum(1 for free, near in zip(device_free, device_domains) if free and domain in near)


def nearer_domain(task: Task, domain: int, free: Sequence[int], capacity: Capacity,
                  device_free: Sequence[bool]) -> int | None:
    """Another domain where ``task`` fits now with more of its accelerators near than on ``domain``
    (the one with the most free devices near it, then the lowest), or None: start it here.

    >>> gpu = Task("g", 0.0, 1.0, gpus=1)
    >>> node = Capacity((2, 2), gpus=2, device_domains=(frozenset({0}), frozenset({1})))
    >>> nearer_domain(gpu, 0, [2, 2], node, [False, True])
    1
    >>> nearer_domain(gpu, 0, [2, 0], node, [False, True]) is None  # domain 1 has no core free
    True
    """
    if not task.gpus or not capacity.device_domains or task.cores > max(capacity.cores_per_domain):
        return None
    here = _near(device_free, capacity.device_domains, domain)
    if here >= task.gpus:
        return None
    best, best_near = None, here
    for other, idle in enumerate(free):
        near = _near(device_free, capacity.device_domains, other)
        if other != domain and idle >= task.cores and near > best_near:
            best, best_near = other, near
    return best


def choose_devices(count: int, domain: int, device_free: Sequence[bool],
                   device_domains: Sequence[frozenset[int]]) -> tuple[int, ...]:
    """Indices of ``count`` free accelerators for a task on ``domain``: those near it first, then the
    rest, each in index order.

    >>> choose_devices(1, 1, [True, True, True], (frozenset({0}), frozenset(), frozenset({1})))
    (2,)
    """
    free = [i for i, ok in enumerate(device_free) if ok]
    near = [i for i in free if device_domains and domain in device_domains[i]]
    return tuple((near + [i for i in free if i not in near])[:count])
