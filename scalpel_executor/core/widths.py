"""How many cores a malleable task starts on: a speed-up learned per profile key, and the width
that ends the work soonest. Pure: no I/O, no clock.

A task that can use more cores than it needs (``Task.max_cores`` above ``Task.cores``: numpy,
BLAS, OpenMP code that runs on as many threads as it is given) is *moldable* here: its width is
chosen once, when it starts, and kept to its end. The scheduler asks :meth:`Widths.choose` at
that moment; everything else it decides is unchanged::

    free core of domain d, the policy's next task t (admitted at t.cores, its narrowest width)
      t.max_cores > t.cores ─> Widths.choose(t, Outlook(free cores of d, the node's cores,
                                                        core-seconds waiting and left to run, ...))
                               ─> WidthChoice(width, reason): t books ``width`` cores of d
      t ends                ─> Widths.observe(t's key, width, seconds): the key's speed-up, refitted

**The speed-up model** (:class:`SpeedupModel`) is Amdahl's law, T(w) = T(1)·(s + (1 − s)/w), one
serial fraction s per profile key. Each run at a width w above the task's narrowest width m
gives one reading of s (:func:`serial_fraction_from`: its seconds over the estimate at m); the
key's s is their mean shrunk toward s = 1, "no gain", by :data:`SHRINK` pseudo-readings, so a
key never seen wider runs narrow (reason ``no speed-up learned``) and one reading does not swing it.

**The width** (:func:`choose_width`) is the one that ends the work soonest as far as the
scheduler can tell at the start: for each candidate width w the predicted end is the latest of

* the task's own end and the chain that waits for it: T(w) + ``Task.tail``;
* the node's backlog spread over its cores: (core-seconds waiting and left to run + w·T(w)) / cores,
  which grows with w as the efficiency (s·w + 1 − s)⁻¹ falls: while many tasks wait, wide tasks
  waste cores on sub-linear speed-ups (reason ``many waiting``);
* the longest running task's remaining seconds, which no width shortens.

The narrowest width within :data:`TIE` of the soonest end is taken (a core given for nothing is a
core a later arrival could use). At the tail of a batch, or on the critical path, the backlog is
small and the task's own end decides: it starts wide (``tail``, ``critical path``).

*Candidate widths* are topology-shaped as in Schönherr, Juurlink and Richling's topology-aware
equipartitioning (``../shared/papers/topology-aware-equipartitioning.md``): 1, 2, the fractions of
the task's LLC domain that divide it, the whole domain (:func:`shaped_sizes`), capped by the
domain's free cores and the task's range. *Hysteresis*: a key's previous width is kept while it
is predicted to end within :data:`HYSTERESIS` of the best and to spend no more than that share of
core-seconds more (reason ``kept``), so widths do not flap as tasks come and go. (Ends alone are
no guard while many wait: one wide task moves the backlog's end by its waste over the node's
cores, a fraction of a percent on 128, however many tasks then start as wide.) *Exploration*: a task of a key whose fit rests on fewer than :data:`SURE_AFTER`
readings starts (``exploring``) at the width that would be best were its key perfectly
parallel, when even no gain at all would end the work at most :data:`EXPLORE_COST` later (idle
cores at the tail make that guess free; a full node makes it dear).

Plain equipartitioning, the paper's baseline (``EQ``), is :func:`equipartition`: the node's cores
divided evenly among the malleable tasks waiting and running, any width. It is a rule a study
compares with (``Widths(rule="equipartition")``), not the default.

Cost: O(candidate widths) per start, at most the domain's core count.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, field

__all__ = ["amdahl", "serial_fraction_from", "shaped_sizes", "SpeedupModel", "Outlook", "WidthChoice",
           "choose_width", "equipartition", "Widths", "RULES", "REASONS",
           "TAIL", "CRITICAL_PATH", "MANY_WAITING", "NO_SPEEDUP", "NO_GAIN", "OTHERS_LONGER", "EXPLORING", "KEPT",
           "EQUAL_SHARE", "SHRINK", "SURE_AFTER", "EXPLORE_COST", "HYSTERESIS", "TIE"]

#: Pseudo-readings of "no gain" (s = 1) each key's serial fraction starts from.
SHRINK = 0.5
#: Readings at a width above the narrowest past which a key's fit is no longer explored.
SURE_AFTER = 2
#: An unmeasured width is tried only when, with no gain at all, the work would end at most this much later.
EXPLORE_COST = 0.02
#: A key's previous width is kept while it is predicted to end within this share of the best width's end
#: and to spend at most this share more core-seconds.
HYSTERESIS = 0.03
#: Widths predicted to end within this share of the soonest end count as ties; the narrowest is taken.
TIE = 0.005

TAIL = "tail"  # wider: the task's own end decides the work's
CRITICAL_PATH = "critical path"  # wider: the chain that waits for the task decides the work's end
MANY_WAITING = "many waiting"  # narrow: the backlog decides the end, and width would waste cores on it
NO_SPEEDUP = "no speed-up learned"  # narrow: its key was never seen at a wider width
NO_GAIN = "no gain"  # narrow: its key was seen wider and does not speed up enough to pay
OTHERS_LONGER = "others end later"  # narrow: a running task ends later than this one could at any width
EXPLORING = "exploring"  # wider, to learn its key's speed-up where a wrong guess is cheap
KEPT = "kept"  # its key's previous width, within HYSTERESIS of the best
EQUAL_SHARE = "equal share"  # plain equipartitioning's width (the study's baseline rule)
#: Every reason a width is given, for reports.
REASONS = (TAIL, CRITICAL_PATH, MANY_WAITING, NO_SPEEDUP, NO_GAIN, OTHERS_LONGER, EXPLORING, KEPT, EQUAL_SHARE)

#: Width rules: ``scalpel`` (the default: the soonest end, topology-shaped sizes), ``scalpel-any``
#: (the same on any width), ``equipartition`` (plain, any width) and ``equipartition-shaped``
#: (the paper's TA: the largest shaped size within the equal share).
RULES = ("scalpel", "scalpel-any", "equipartition", "equipartition-shaped")


def amdahl(serial_fraction: float, width: int) -> float:
    """Run time on ``width`` cores over run time on one: s + (1 − s)/w."""
    return serial_fraction + (1.0 - serial_fraction) / width


def serial_fraction_from(ratio: float, narrowest: int, width: int) -> float | None:
    """The serial fraction s that makes a run on ``width`` cores take ``ratio`` times the run time on
    ``narrowest`` cores, clipped to [0, 1]; None when the widths are equal (no reading).

    Solves ratio · (s + (1 − s)/m) = s + (1 − s)/w for s.

    >>> serial_fraction_from(0.55, 1, 2)
    0.1
    """
    if width == narrowest or not math.isfinite(ratio) or ratio <= 0:
        return None
    m, w = narrowest, width
    denominator = ratio * (1 - 1 / m) - 1 + 1 / w
    if denominator == 0:
        return 1.0
    return round(min(1.0, max(0.0, (1 / w - ratio / m) / denominator)), 12)


@dataclass
class _KeyFit:
    readings: int = 0
    total: float = 0.0  # sum of the readings' serial fractions


class SpeedupModel:
    """Per profile key, Amdahl's serial fraction fitted from run times at several widths, shrunk
    toward 1 (no gain) by :data:`SHRINK` pseudo-readings (module docstring)."""

    def __init__(self, shrink: float = SHRINK):
        if not (isinstance(shrink, (int, float)) and shrink > 0 and math.isfinite(shrink)):
            raise ValueError(f"shrink must be a positive number of pseudo-readings, got {shrink!r}")
        self.shrink = float(shrink)
        self._fits: dict[Hashable, _KeyFit] = {}

    def observe(self, key: Hashable, narrowest: int, width: int, ratio: float) -> None:
        """A task of ``key`` ran on ``width`` cores in ``ratio`` times its estimate on ``narrowest``."""
        reading = serial_fraction_from(ratio, narrowest, width)
        if reading is None:
            return
        fit = self._fits.setdefault(key, _KeyFit())
        fit.readings += 1
        fit.total += reading

    def seed(self, key: Hashable, serial_fraction: float, readings: int) -> None:
        """Start ``key`` from ``readings`` readings of ``serial_fraction`` (a profile store's)."""
        if not 0 <= serial_fraction <= 1 or readings < 0:
            raise ValueError(f"a seed needs a serial fraction in [0, 1] and readings >= 0, got "
                             f"{serial_fraction!r} and {readings!r}")
        fit = self._fits.setdefault(key, _KeyFit())
        fit.readings += readings
        fit.total += serial_fraction * readings

    def serial_fraction(self, key: Hashable) -> float:
        """The key's serial fraction: its readings' mean shrunk toward 1."""
        fit = self._fits.get(key)
        readings, total = (fit.readings, fit.total) if fit else (0, 0.0)
        return (total + self.shrink) / (readings + self.shrink)

    def readings(self, key: Hashable) -> int:
        fit = self._fits.get(key)
        return fit.readings if fit else 0


def shaped_sizes(domain_cores: int) -> list[int]:
    """Topology-shaped widths on a domain of ``domain_cores`` cores: 1, 2, the fractions that divide
    it, the whole domain (its divisors; 2 only where it divides the domain, so that two tasks of 2
    fill it).

    >>> shaped_sizes(8), shaped_sizes(6), shaped_sizes(16)
    ([1, 2, 4, 8], [1, 2, 3, 6], [1, 2, 4, 8, 16])
    """
    return [size for size in range(1, domain_cores + 1) if domain_cores % size == 0]


@dataclass(frozen=True, slots=True)
class Outlook:
    """What the scheduler knows of the node when a malleable task starts."""

    cores: int  # cores of the node that can run tasks
    domain_cores: int  # cores of the task's LLC domain
    free: int  # free cores of that domain now, the starting core included
    backlog: float  # core-seconds waiting (at the tasks' narrowest widths) and left to running tasks, this task excluded
    longest_running: float = 0.0  # seconds the running task that ends last has left
    malleable: int = 1  # malleable tasks waiting and running, this one included (equipartitioning's share)


@dataclass(frozen=True, slots=True)
class WidthChoice:
    width: int
    reason: str
    ends: float = math.nan  # the predicted end of the work (seconds from now) at this width


def _candidates(low: int, high: int, outlook: Outlook, shaped: bool) -> list[int]:
    cap = max(low, min(high, outlook.free))
    sizes = shaped_sizes(outlook.domain_cores) if shaped else range(1, outlook.domain_cores + 1)
    return sorted({low, *(size for size in sizes if low <= size <= cap)})


def _end(width: int, low: int, runtime: float, tail: float, serial: float, outlook: Outlook) -> float:
    own = runtime * amdahl(serial, width) / amdahl(serial, low)
    return max(own + tail, (outlook.backlog + width * own) / outlook.cores, outlook.longest_running)


def _area(width: int, serial: float) -> float:
    """Core-seconds on ``width`` cores per second alone on one."""
    return width * amdahl(serial, width)


def choose_width(low: int, high: int, runtime: float, tail: float, serial: float, readings: int, outlook: Outlook,
                 *, previous: int | None = None, may_explore: bool = True, shaped: bool = True) -> WidthChoice:
    """The width a malleable task starts on (module docstring).

    Parameters
    ----------
    low, high : int
        The task's narrowest width (``Task.cores``, at which it was admitted) and widest (``Task.max_cores``).
    runtime : float
        Its estimated run time at ``low`` cores, seconds.
    tail : float
        Seconds of the chain that waits for its result (``Task.tail``).
    serial, readings : float, int
        Its key's serial fraction and the readings it rests on (:class:`SpeedupModel`).
    outlook : Outlook
        The node as the scheduler sees it now.
    previous : int, optional
        The width the key's previous task started on (hysteresis).
    may_explore : bool
        Whether an unsure key may try a width it has not been seen at (default True).
    shaped : bool
        Topology-shaped sizes (default) or any width.

    Returns
    -------
    WidthChoice
        Always ``low`` <= width <= max(``low``, min(``high``, ``outlook.free``)).
    """
    candidates = _candidates(low, high, outlook, shaped)
    if not (math.isfinite(runtime) and math.isfinite(tail) and math.isfinite(outlook.backlog)) or len(candidates) == 1:
        return WidthChoice(low, NO_SPEEDUP if readings == 0 else NO_GAIN)
    ends = {w: _end(w, low, runtime, tail, serial, outlook) for w in candidates}
    soonest = min(ends.values())
    best = next(w for w in candidates if ends[w] <= soonest * (1 + TIE))
    if readings < SURE_AFTER and may_explore:
        # What would be best were the key perfectly parallel, if no gain at all would cost little.
        hoped = {w: _end(w, low, runtime, tail, 0.0, outlook) for w in candidates}
        hope = next(w for w in candidates if hoped[w] <= min(hoped.values()) * (1 + TIE))
        flat = _end(best, low, runtime, tail, 1.0, outlook)
        if hope > best and _end(hope, low, runtime, tail, 1.0, outlook) <= flat * (1 + EXPLORE_COST):
            return WidthChoice(hope, EXPLORING, ends[hope])
    if (previous is not None and previous != best and previous in ends and ends[previous] <= soonest * (1 + HYSTERESIS)
            and _area(previous, serial) <= _area(best, serial) * (1 + HYSTERESIS)):
        return WidthChoice(previous, KEPT, ends[previous])
    return WidthChoice(best, _reason(best, low, runtime, tail, serial, readings, outlook, ends), ends[best])


def _reason(width: int, low: int, runtime: float, tail: float, serial: float, readings: int, outlook: Outlook,
            ends: dict[int, float]) -> str:
    if width > low:
        return CRITICAL_PATH if tail > runtime * amdahl(serial, width) / amdahl(serial, low) else TAIL
    if readings == 0:
        return NO_SPEEDUP
    wider = max(ends)
    if outlook.longest_running >= ends[low] * (1 - 1e-12) and ends[wider] >= ends[low] * (1 - TIE):
        own = runtime * amdahl(serial, wider) / amdahl(serial, low)
        if (outlook.backlog + wider * own) / outlook.cores < outlook.longest_running:
            return OTHERS_LONGER
    if (outlook.backlog + low * runtime) / outlook.cores >= runtime + tail:
        return MANY_WAITING
    return NO_GAIN


def equipartition(low: int, high: int, outlook: Outlook, *, shaped: bool = False) -> WidthChoice:
    """Plain equipartitioning: the node's cores split evenly among the malleable tasks waiting and
    running (``outlook.malleable``), rounded down, within the task's range and the domain's free
    cores; ``shaped``: the largest topology-shaped size within that share (the paper's TA without
    coscheduling)."""
    share = max(1, outlook.cores // max(1, outlook.malleable))
    candidates = [w for w in _candidates(low, high, outlook, shaped) if w <= share]
    return WidthChoice(max(candidates, default=low), EQUAL_SHARE)


@dataclass
class Widths:
    """The scheduler's width rule and what it has learned: one per scheduler.

    ``rule`` is one of :data:`RULES`; ``model`` the per-key speed-up."""

    rule: str = "scalpel"
    model: SpeedupModel = field(default_factory=SpeedupModel)
    _previous: dict[Hashable, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ValueError(f"unknown width rule {self.rule!r}; choose from {', '.join(RULES)}")

    def choose(self, key: Hashable, low: int, high: int, runtime: float, tail: float, outlook: Outlook) -> WidthChoice:
        """The width a task of ``key`` starts on (:func:`choose_width`, or :func:`equipartition`)."""
        if self.rule.startswith("equipartition"):
            return equipartition(low, high, outlook, shaped=self.rule == "equipartition-shaped")
        choice = choose_width(low, high, runtime, tail, self.model.serial_fraction(key), self.model.readings(key),
                              outlook, previous=self._previous.get(key), shaped=self.rule == "scalpel")
        if choice.reason != EXPLORING:
            self._previous[key] = choice.width
        return choice

    def observe(self, key: Hashable, narrowest: int, width: int, seconds: float, estimate: float) -> None:
        """A task of ``key`` estimated at ``estimate`` seconds on ``narrowest`` cores ran ``seconds``
        on ``width``."""
        if estimate > 0 and seconds > 0:
            self.model.observe(key, narrowest, width, seconds / estimate)
