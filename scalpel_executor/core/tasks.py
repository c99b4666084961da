"""The task as every decision sees it, and the groups, cores and assignments made of it.

One :class:`Task` type serves both drivers: the live pool puts its job (the serialized call, the
walltime, where it ran) in ``payload`` and the simulator its simulated task; the scheduler and the
policies read only the fields here.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True, eq=False)
class Task:
    """What the scheduler knows of one task. ``payload`` is the driver's, never read here."""

    id: Hashable
    footprint: float = 0.0  # bytes touched in an LLC-share window
    runtime: float = 1.0  # estimated solo run time, seconds
    priority: float = 0.0
    intensity: float | None = None  # LLC miss rate for `di`; footprint when unknown
    payload: Any = None
    seq: int = -1  # submission order, set by Scheduler.add
    runtime_spread: float = 0.0  # relative error of ``runtime`` (the key's run-time std / mean); 0: exact
    key: str | None = None  # the profile key: tasks of one key learn each other's footprint in the run
    footprint_known: bool = True  # False: ``footprint`` is the prior, nothing measured or hinted yet
    foreseen_harm: float | None = None  # the slowdown increase a checked plan accepted at this task's
    #                                     start (core.admission); None: nobody checked its co-runners
    cores: int = 1  # CPUs of one LLC domain the task runs on at once (its footprint counts there once)
    memory: float = 0.0  # bytes of the node's memory it holds (declared, else learned; 0: not counted)
    gpus: int = 0  # accelerators it needs (the scheduler books which: Assignment.devices)
    tail: float = 0.0  # estimated seconds of the longest chain of tasks that wait for its result (its
    #                    upward rank less its own run time; 0: none known). The default policy starts a
    #                    task with a long tail early and predicts a schedule's end as the latest
    #                    finish + tail (core.planning)
    wide_tail: float | None = None  # the same chain with each malleable task in it at its widest width in a
    #                    cache domain, by its key's speed-up so far: what the width rule weighs (core.widths),
    #                    as it widens a task whose end decides the work's; None: ``tail``
    interference: tuple[float, ...] | None = None  # its profile key's core.interference.Terms: sensitivity,
    #                    pressure and bandwidth intensity, residuals in log slowdown beside co-runners;
    #                    None: the footprint model alone
    max_cores: int | None = None  # malleable: it may start on up to this many cores of its domain, ``cores``
    #                    its narrowest width and ``runtime`` its estimate there; the scheduler sets ``cores``
    #                    and ``runtime`` to the width it chooses at the start (core.widths). None: fixed ``cores``
    width_reason: str | None = None  # why a malleable task started on its width (core.widths' reasons)
    serial_fraction: float | None = None  # a malleable task's key's Amdahl serial fraction as earlier runs
    #                    learned it (the profile store), resting on ``serial_readings`` readings; None: none
    serial_readings: int = 0
    family: str | None = None  # a malleable task's key's family (its app's keys, which differ in argument
    #                    values): what its key borrows while it has no speed-up reading of its own
    #                    (core.widths.SpeedupModel.join); None: none
    family_serial: float | None = None  # the serial fraction every key of the family read in earlier runs
    family_readings: int = 0  # (the profile store's) and the readings it rests on; None and 0: none
    width_reading: float | None = None  # the serial fraction its run at a width read, set when it ends (core.widths)

    @property
    def malleable(self) -> bool:
        """It may start on more cores than ``cores`` (``max_cores`` above it)."""
        return self.max_cores is not None and self.max_cores > self.cores


def width_tail(task: Task) -> float:
    """The chain the width rule weighs behind ``task``: ``wide_tail`` where told, else ``tail``."""
    return task.tail if task.wide_tail is None else task.wide_tail


def rank(task: Task) -> float:
    """A task's upward rank: its run time plus the longest chain that waits for it (``tail``)."""
    return task.runtime + task.tail


@dataclass(slots=True, eq=False)
class Group:
    """Tasks meant to co-run on one LLC domain, in the order they should start."""

    tasks: list[Task]
    capacity: int  # cores of the domain it was formed for
    domain: int | None = None  # pinned to a domain (the `di` baseline); None: any domain

    @property
    def full(self) -> bool:
        """Its tasks' cores fill its domain (a group's demand is its cores)."""
        return sum(t.cores for t in self.tasks) >= self.capacity

    @property
    def runtime(self) -> float:
        return max(t.runtime for t in self.tasks)

    @property
    def footprint(self) -> float:
        return sum(t.footprint for t in self.tasks)


@dataclass(frozen=True, slots=True)
class Slot:
    index: int  # position in the topology's CPU order
    cpu: int
    domain: int


@dataclass(frozen=True, slots=True)
class Assignment:
    """Start ``task`` on ``slot``; a task of ``cores`` k books ``slots`` (k cores of the slot's
    domain, ``slot`` first), each released with ``slot``."""

    slot: Slot
    task: Task
    reason: str = "planned"  # why this task started here (core.admission's reasons)
    slots: tuple[Slot, ...] = ()  # every core booked, ``slot`` first; () means (slot,)
    devices: tuple[int, ...] = ()  # indices of the node's accelerators the task is given
    waited: float = 0.0  # seconds a core of its domain idled, before it started, for a measurement (MEASURE_WAIT)

    @property
    def booked(self) -> tuple[Slot, ...]:
        return self.slots or (self.slot,)
