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
A key with no reading of its own borrows its *family*'s fit, worth up to :data:`BORROWED` readings
(:meth:`SpeedupModel.join`; ``Task.family``): the keys of one app whose calls differ in an
argument's value, so a parameter sweep, one key per value, learns from each of its runs. (Measured
reason: on simulated sweeps, every task a key of its own, a learned run of new values ended as
late as a first run; borrowing, it ended 1.010x and 1.035x as soon on two seed sets not tuned on.
Worth one reading, not as many as the family's up to two, borrowed keys stayed unsure and kept
exploring: 1.016-1.021x as soon as one key per kernel's first run on the tuning seeds, against
1.052-1.057x; docs/results/widths.md, "A parameter sweep learns through its family".)

**The width** (:func:`choose_width`) is the one that ends the work soonest as far as the
scheduler can tell at the start: for each candidate width w the predicted end is the latest of

* the task's own end and the chain that waits for it: T(w) + ``Task.wide_tail`` (its malleable
  tasks counted at their widest: :func:`at_width`; ``Task.tail``, the chain as they run, orders
  the tasks instead);
* the node's backlog spread over its cores: (core-seconds waiting and left to run + w·T(w)) / cores,
  which grows with w as the efficiency (s·w + 1 − s)⁻¹ falls: while many tasks wait, wide tasks
  waste cores on sub-linear speed-ups (reason ``many waiting``); then the shortest chain of the
  malleable tasks waiting beside it, since the last of them ends no sooner than that spread (as
  :func:`explore_allotted` counts). (Measured reason: without that chain, a first Epigenomics run
  on ``xeon16`` (seed 952) started the first of its five splits, 880 s each on one core, on all
  16 cores to explore its key, its own chain hiding the four splits waiting behind it; they ran
  until 1,349 s, and the run ended 0.672× as soon as every task on two cores; with it, 0.956×.
  On seven seed sets not tuned on, the workflows ended sooner on geometric mean in every
  condition; docs/results/widths-log.md, "The chain after the tasks waiting beside a task".)
* the ends of the malleable tasks waiting beside it, as allotted (reason ``others end later``).

What runs counts only as core-seconds left to run, not as an end that no width moves: a running
task's chain goes through tasks not yet planned, often through this one's (siblings share their
merge), and such an end tied every width below it, so the narrowest was taken. (Measured reason:
on ``epyc``, a 1000genome run kept 13 of its 16 merges, serial fraction 0.02, on one core each
behind one long individual and ended 0.58× as soon as every task on its whole domain; the seeds
not tuned on moved from 0.980× to 1.009× the hindsight best on a first run, docs/results/widths.md.)

*Spread* (``Peer.spread``, ``choose_width``'s ``spread``): a task's own end, in every term above
and in the allotment, is reckoned :data:`RISK_SPREADS` of its spread later than its estimate (the
relative std of its key's run times, as the scheduler tells it: ``Scheduler._spread``), and the
core-seconds it spends at its estimate: so a task that may be the long one starts wider where its
own end would decide. A guess's spread is not counted: it says nothing of the task's scale.
(Measured reason: a batch's tasks of one key spread, and a first run that estimates them by the
key's first end started its longest on one core, where it ran long after the rest; with the
spread, and run times taught by a wider run (``Scheduler._learn_runtime``), first runs told no
run time ended 3.9% and 5.0% sooner on geometric mean on two seed sets not tuned on, 2.7% on the
tuning seeds; docs/results/widths-log.md, "A first run told no run time plans on what its runs
tell".)

*Crowding* (:class:`Crowding`): each run time above is slowed by the cache the width leaves the
task. On a domain kept full by tasks of width w, a task shares the LLC with ⌊domain cores / w⌋ − 1
co-runners (the malleable tasks waiting: their footprints weighted by the core-seconds each holds a
domain for, :func:`co_runner_footprint`), and the contention model predicts
its slowdown there; a task's footprint counts once whatever its width, so narrow tasks crowd the
cache and wide ones do not. Where the misses of a crowded domain cost more than the serial
fraction wastes, a wider width spends fewer core-seconds: the allotment starts each task from its
thriftiest width, not its narrowest (reason ``fewer co-runners``), and so are the widths the
waiting tasks are planned at, their cores reserved (``Scheduler._retarget``; a task arriving into a
plan that is up to date, at its thriftiest width or wider where its own run time would end the
work alone, ``Scheduler._allot_arrival``). Footprints that
fit the cache slow nothing, and the choice is the one made without crowding. The task starting is
crowded whether or not its key was seen wider (estimated at no gain, a key never seen wider starts
wider where the co-runners it sheds save more than the cores it holds, or where its own end,
crowded, would end the work); the tasks waiting beside it only
where their keys were seen wider at least once (``Peer.seen``): a plan bets nothing on the cache
for a key it has not seen wider. (Measured reasons: crowding the task starting too, first runs on
the six seed sets not tuned on went from 137 to 109 of 504 instances more than 2% behind the best
fixed width, learned ones from 50 to 39, docs/results/widths.md; on the tuning seeds' ``epyc`` Montage, 48 reprojections of
15 MiB at one core each ran 1.47× their solo time beside each other on 32 MiB domains, and the
rule had no term that saw it; crowded only once sure, a learned batch on ``paper`` whose keys rest
on one reading each ran 42 of its 48 tasks on one core, up to 1.75× their solo time, 0.77× the
whole domain's makespan.)

Of the widths within :data:`TIE` of the soonest end, the one spending the fewest core-seconds is
taken (the narrowest of those within :data:`TIE` of the fewest): where the cache is not counted
that is the narrowest (a core given for nothing is a core a later arrival could use); where it is,
a wider one when the co-runners it sheds save more than its serial fraction wastes. (Measured
reason: while many wait, one task's saving moves the work's end by less than :data:`TIE`, and the
narrowest tie kept crowded domains crowded; on the seeds not tuned on, 2-5 fewer instances per 84
ended more than 2% after the best fixed width, docs/results/widths.md.) At the tail of a batch, or
on the critical path, the backlog is small and the task's own end decides: it starts wide
(``tail``, ``critical path``).

*Candidate widths* are topology-shaped as in Schönherr, Juurlink and Richling's topology-aware
equipartitioning (``../shared/papers/topology-aware-equipartitioning.md``): 1, 2, the fractions of
the task's LLC domain that divide it, the whole domain (:func:`shaped_sizes`), capped by the
domain's free cores and the task's range. *Hysteresis*: a key's previous width is kept while it
is predicted to end within :data:`HYSTERESIS` of the best and to spend no more than that share of
core-seconds more (reason ``kept``), so widths do not flap as tasks come and go. (Ends alone are
no guard while many wait: one wide task moves the backlog's end by its waste over the node's
cores, a fraction of a percent on 128, however many tasks then start as wide.)
*Exploration*: a task of a key whose fit rests on fewer than :data:`SURE_AFTER`
readings starts (``exploring``) at the width that would be best were its key perfectly
parallel, or, while many wait, one task of the key at a time at the next size up, when even no
gain at all would end the work at most :data:`EXPLORE_COST` later (idle cores at the tail make
that guess free; a full node makes it dear, unless the backlog is long beside the task). Both
are reckoned from the task's narrowest width, and a task that starts wider than it anyway
(planned wider to explore, say, or for fewer co-runners) tries no size up: its run there reads
the key. (Measured reason: a first run of batch-2 on ``xeon16`` (seed 600) planned its longest
task, 11.2 s on one core, at four cores to explore, its estimate there at no gain 11.2 s; from
that, the hope was eight cores, 27 core-seconds at its serial fraction of 0.204, and the run
ended at 7.90 s, 7.28 s without that try; first runs sooner on geometric mean on every seed set,
docs/results/widths-log.md, "An exploration reckoned from the narrowest width".) While a
task of its key explores already, a second try takes no core that the malleable tasks waiting
beside it, at their planned widths, would all start on now (``Outlook.planned``): the first's
reading comes anyway, and the pool of core-seconds does not see the round they would wait.
(Measured reason: a first Epigenomics run on ``xeon16`` (seed 980) explored its second split on
the eight cores the first left while three splits waited for them, 0.771× as soon as every task on
two cores; 1.119× without that try, docs/results/widths-log.md, "A second try takes no core the
waiting tasks start on".) The same
guess is planned (:func:`explore_allotted`): waiting tasks of unsure keys are allotted their
hoped widths, key by key and a dear hope a size narrower, where no gain would cost as little, and
while so many wait that no hope widens a key, one task of it at a time is planned one size up; so
their cores are reserved rather than taken from whatever is free when a core reaches them, which
on a full node is one core (reason ``exploring, planned``). They are planned at their key's fit
(estimated at their hope while waiting, they ended the work later on the seeds not tuned on,
0.966× the hindsight best on a first run against 0.980×) and, once started, estimated at their
hope, as an exploration chosen at its start is (``Scheduler._widen``).
A task of an unsure key arriving into a plan that is up to date is planned so alone, one per key
at a time (``Scheduler._explore_arrival``). The reading that makes a key sure plans its tasks
still waiting as a task of it arriving then would be (``Scheduler._allot_sure``): at their
thriftiest width, where the cache is counted.

*Packing the last few* (:func:`packs`, :func:`packed`): the allotment's end counts the node's
cores as one pool, but a task cannot span domains. Where few malleable tasks wait, nothing else
does, and no chain waits for them, their allotment is list-scheduled on the cores as they free
(:func:`packed_end`) against every task at one size, and the soonest kept. Where a chain waits
for them, only narrower: each at the width the list schedule starts it on, capped at its allotted
one, and a start keeps to it (reason ``packed on the domains``).

*Starting on the cores free* (:func:`start_now`): a task planned wider than the cores free on a
domain, where nothing may backfill them, starts now on those cores where that ends it sooner than
its reservation and spends no more core-seconds (reason ``sooner on the cores free``). Its mirror
(:func:`wait_wider`): the last task waiting, nothing else waiting beside it, fitting the cores free
at its planned width, waits for more of them where they free soon enough to end it sooner (reason
``tail`` at its start): the core it leaves idle would run nothing.

Plain equipartitioning, the paper's baseline (``EQ``), is :func:`equipartition`: the node's cores
divided evenly among the malleable tasks waiting and running, any width. It is a rule a study
compares with (``Widths(rule="equipartition")``), not the default.

Cost: O(candidate widths) per start, at most the domain's core count.
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
import math
from bisect import bisect_right
from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass, field

from scalpel_executor.core.contention import ContentionModel

__all__ = ["amdahl", "at_width", "widest", "serial_fraction_from", "borrowed", "shrunk", "shaped_sizes", "SpeedupModel",
           "Crowding", "Peer", "Outlook", "WidthChoice",
           "co_runner_footprint", "allot", "packed_end", "packs", "packed", "start_now", "wait_wider",
           "explore_allotted",
           "thriftiest",
           "choose_width", "wider_reason",
           "equipartition",
           "Widths", "RULES", "REASONS",
           "TAIL", "CRITICAL_PATH", "FEWER_CORUNNERS", "MANY_WAITING", "NO_SPEEDUP", "NO_GAIN", "OTHERS_LONGER",
           "EXPLORING", "PLANNED_EXPLORATION", "KEPT", "FREE_NOW", "PACKED",
           "EQUAL_SHARE", "REASONS_EXPLAINED", "RISK_SPREADS", "SHRINK", "SURE_AFTER", "BORROWED", "EXPLORE_COST", "HYSTERESIS", "TIE",
           "PACKED_PEERS"]

#: Pseudo-readings of "no gain" (s = 1) each key's serial fraction starts from.
SHRINK = 0.25
#: Readings at a width above the narrowest past which a key's fit is no longer explored.
SURE_AFTER = 2
#: Readings a key with none of its own borrows from its family's fit at most (:meth:`SpeedupModel.join`):
#: as sure as its family, so a family sure of its speed-up explores no further through its new keys.
BORROWED = SURE_AFTER
#: An unmeasured width is tried only when, with no gain at all, the work would end at most this much later.
EXPLORE_COST = 0.02
#: A key's previous width is kept while it is predicted to end within this share of the best width's end
#: and to spend at most this share more core-seconds.
HYSTERESIS = 0.03
#: Widths predicted to end within this share of the soonest end count as ties; the cheapest in core-seconds is taken.
TIE = 0.005
#: A task's own end is reckoned at its estimate plus this many of its spreads (``Task.runtime_spread``,
#: the relative std of its key's run times; a guess's is 1): the chance that it is the long one.
RISK_SPREADS = 2.0
#: At most this many malleable tasks waiting, nothing else, and none with a chain waiting for it: their
#: allotment is checked by a list schedule on the cores as they free (:func:`packs`, :func:`packed`).
PACKED_PEERS = 64

TAIL = "tail"
CRITICAL_PATH = "critical path"
FEWER_CORUNNERS = "fewer co-runners"
MANY_WAITING = "many waiting"
NO_SPEEDUP = "no speed-up learned"
NO_GAIN = "no gain"
OTHERS_LONGER = "others end later"
EXPLORING = "exploring"
PLANNED_EXPLORATION = "exploring, planned"
KEPT = "kept"
FREE_NOW = "sooner on the cores free"
PACKED = "packed on the domains"
EQUAL_SHARE = "equal share"
#: Every reason a width is given and what it says, for reports (``scalpel report``'s legend).
REASONS_EXPLAINED = {
    TAIL: "wider: the task's own end decides the work's",
    CRITICAL_PATH: "wider: the chain that waits for the task decides the work's end",
    FEWER_CORUNNERS: "wider: fewer core-seconds so, the cache misses of a full domain counted",
    MANY_WAITING: "narrow: the backlog decides the end, and width would waste cores on it",
    NO_SPEEDUP: "narrow: its key was never seen at a wider width",
    NO_GAIN: "narrow: its key was seen wider and does not speed up enough to pay",
    OTHERS_LONGER: "narrow: a running task ends later than this one could at any width",
    EXPLORING: "wider, to learn its key's speed-up where a wrong guess is cheap",
    PLANNED_EXPLORATION: "wider as planned, to learn its key's speed-up where a wrong guess is cheap: its "
                         "cores were reserved",
    KEPT: f"its key's previous width, predicted within {HYSTERESIS:.0%} of the best width's end and "
          "core-seconds",
    FREE_NOW: "narrower than planned: waiting for its planned width would end it later",
    PACKED: "narrow: allotted wider, some of the few waiting would start only as others end",
    EQUAL_SHARE: "plain equipartitioning's width (the study's baseline rule)",
}
REASONS = tuple(REASONS_EXPLAINED)

#: Width rules: ``scalpel`` (the default: the soonest end, topology-shaped sizes), ``scalpel-any``
#: (the same on any width), ``equipartition`` (plain, any width) and ``equipartition-shaped``
#: (the paper's TA: the largest shaped size within the equal share).
RULES = ("scalpel", "scalpel-any", "equipartition", "equipartition-shaped")
#: The rules that allot widths among the malleable tasks waiting (:func:`allot`).
ALLOTTING = ("scalpel", "scalpel-any")


def amdahl(serial_fraction: float, width: int) -> float:
    """Run time on ``width`` cores over run time on one: s + (1 − s)/w."""
    return serial_fraction + (1.0 - serial_fraction) / width


def at_width(seconds: float, serial_fraction: float, width: int, to: int) -> float:
    """``seconds`` on ``width`` cores, taken to ``to`` cores by Amdahl's law.

    The chain the width rule weighs behind a task (``Task.wide_tail``) counts each malleable task
    of it at its widest width, at its key's serial fraction so far (:func:`scalpel_executor.core.simulate.graph_tails`,
    the executor's tails): the allotment widens such a task when it arrives where its end decides
    the work's, so its narrowest width overstates the chain, and the tasks the chain waits for were
    widened for ``critical path`` to meet an end it would not have. (Measured reason: 1000genome on
    ``wide``, its speed-ups known, widened 32 of 160 individuals to four or eight cores for chains
    of 240-410 s that the merges, widened in their turn, made far shorter; 0.91-0.93x the best
    fixed width on seeds 600-602, 0.96-1.02x with its chains at their widest, docs/results/widths.md.)

    >>> at_width(10.0, 0.2, 1, 4)
    4.0
    """
    return seconds if width == to else seconds * amdahl(serial_fraction, to) / amdahl(serial_fraction, width)


def widest(low: int, high: int | None, domain_cores: int | None) -> int:
    """The widest width of a task of ``low`` to ``high`` cores (None: ``low``) on a domain of
    ``domain_cores`` cores (None: no cap), never below ``low``: where a chain counts it (:func:`at_width`).

    >>> widest(1, 16, 8), widest(8, 16, 4), widest(2, None, 8)
    (8, 8, 2)
    """
    high = low if high is None else high
    return max(low, min(high, high if domain_cores is None else domain_cores))


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


def _check_seed(serial_fraction: float, readings: int) -> None:
    if not 0 <= serial_fraction <= 1 or readings < 0:
        raise ValueError(f"a seed needs a serial fraction in [0, 1] and readings >= 0, got "
                         f"{serial_fraction!r} and {readings!r}")


def borrowed(total: float, readings: int) -> tuple[float, int]:
    """What a key with no reading of its own borrows from its family's ``readings`` readings summing
    to ``total`` (:meth:`SpeedupModel.join`): their mean, worth at most :data:`BORROWED` readings.

    >>> borrowed(0.75, 3), borrowed(0.125, 1), borrowed(0.0, 0)
    ((0.5, 2), (0.125, 1), (0.0, 0))
    """
    worth = min(readings, BORROWED)
    return (total / readings * worth, worth) if readings > 0 else (0.0, 0)


def shrunk(total: float, readings: int, shrink: float = SHRINK) -> float:
    """A key's serial fraction from ``readings`` readings summing to ``total``: their mean shrunk
    toward 1 (no gain) by ``shrink`` pseudo-readings; 1 with none.

    >>> shrunk(0.0, 0), round(shrunk(0.125, 5), 3)
    (1.0, 0.071)
    """
    return (total + shrink) / (readings + shrink)


@dataclass
class _KeyFit:
    readings: int = 0
    total: float = 0.0  # sum of the readings' serial fractions
    exploring: int = 0  # tasks of the key running at an explored width


class SpeedupModel:
    """Per profile key, Amdahl's serial fraction fitted from run times at several widths, shrunk
    toward 1 (no gain) by :data:`SHRINK` pseudo-readings (module docstring). A key with no reading
    of its own borrows its family's (:meth:`join`), worth up to :data:`BORROWED` readings."""

    def __init__(self, shrink: float = SHRINK):
        if not (isinstance(shrink, (int, float)) and shrink > 0 and math.isfinite(shrink)):
            raise ValueError(f"shrink must be a positive number of pseudo-readings, got {shrink!r}")
        self.shrink = float(shrink)
        self._fits: dict[Hashable, _KeyFit] = {}
        self._families: dict[Hashable, _KeyFit] = {}  # family -> every reading of its keys
        self._family_of: dict[Hashable, Hashable] = {}

    def observe(self, key: Hashable, narrowest: int, width: int, ratio: float) -> float | None:
        """A task of ``key`` ran on ``width`` cores in ``ratio`` times its estimate on ``narrowest``;
        returns the serial fraction that reads (None: no reading, the widths being equal)."""
        reading = serial_fraction_from(ratio, narrowest, width)
        if reading is not None:
            self.add(key, reading)
        return reading

    def add(self, key: Hashable, reading: float) -> None:
        """One serial fraction read for ``key`` (in [0, 1]): the key's and its family's."""
        _check_seed(reading, 1)
        for fit in (self._fits.setdefault(key, _KeyFit()), self._families.get(self._family_of.get(key))):
            if fit is not None:
                fit.readings += 1
                fit.total += reading

    def seed(self, key: Hashable, serial_fraction: float, readings: int) -> None:
        """Start ``key`` from ``readings`` readings of ``serial_fraction`` (a profile store's)."""
        _check_seed(serial_fraction, readings)
        fit = self._fits.setdefault(key, _KeyFit())
        fit.readings += readings
        fit.total += serial_fraction * readings

    def join(self, key: Hashable, family: Hashable, serial_fraction: float = 0.0, readings: int = 0) -> None:
        """``key`` is one of ``family``'s keys: the calls of one app whose arguments differ in value
        (a parameter swept, a size), each key learning alone. While ``key`` has no reading of its own
        it borrows the family's fit, its mean worth up to :data:`BORROWED` readings (as sure as the
        family); its own first reading then replaces them. The family starts, at its first join, from ``readings``
        readings of ``serial_fraction`` (every key of it in a profile store), and gains every reading
        of its keys from then on."""
        _check_seed(serial_fraction, readings)
        self._family_of.setdefault(key, family)
        if family not in self._families:
            self._families[family] = _KeyFit(readings, serial_fraction * readings)

    def _fit(self, key: Hashable) -> tuple[float, int]:
        """(sum of readings, readings) the key's fit rests on: its own, else its family's as borrowed."""
        fit = self._fits.get(key)
        if fit is not None and fit.readings:
            return fit.total, fit.readings
        family = self._families.get(self._family_of.get(key))
        return borrowed(family.total, family.readings) if family is not None else (0.0, 0)

    def serial_fraction(self, key: Hashable) -> float:
        """The key's serial fraction: its readings' mean shrunk toward 1."""
        return shrunk(*self._fit(key), self.shrink)

    def readings(self, key: Hashable) -> int:
        return self._fit(key)[1]

    def knows(self, key: Hashable) -> bool:
        """Whether ``key`` was seeded, read or explored (a reader seeds each key once)."""
        return key in self._fits

    def joined(self, key: Hashable) -> bool:
        """Whether ``key`` joined a family."""
        return key in self._family_of

    def own(self, key: Hashable) -> tuple[float, int] | None:
        """The mean of ``key``'s own readings and their count, not shrunk; None with none."""
        fit = self._fits.get(key)
        return (fit.total / fit.readings, fit.readings) if fit is not None and fit.readings else None

    def exploring(self, key: Hashable) -> int:
        """Tasks of ``key`` running at an explored width."""
        fit = self._fits.get(key)
        return fit.exploring if fit else 0

    def explore(self, key: Hashable, change: int) -> None:
        fit = self._fits.setdefault(key, _KeyFit())
        fit.exploring = max(0, fit.exploring + change)


def shaped_sizes(domain_cores: int) -> list[int]:
    """Topology-shaped widths on a domain of ``domain_cores`` cores: 1, 2, the fractions that divide
    it, the whole domain (its divisors; 2 only where it divides the domain, so that two tasks of 2
    fill it).

    >>> shaped_sizes(8), shaped_sizes(6), shaped_sizes(16)
    ([1, 2, 4, 8], [1, 2, 3, 6], [1, 2, 4, 8, 16])
    """
    return [size for size in range(1, domain_cores + 1) if domain_cores % size == 0]


@dataclass(frozen=True, slots=True)
class Crowding:
    """The cache a width leaves a task: on a domain of ``domain_cores`` cores kept full by tasks of
    width w, a task runs beside ⌊domain_cores / w⌋ − 1 others, each of footprint ``beside`` (the
    malleable tasks waiting, weighted by their work: :func:`co_runner_footprint`), and the contention model slows it by
    :meth:`slowdown`. Narrow tasks crowd a domain with co-runners; a wide one shares its cache with
    fewer (its footprint counts there once, whatever its width)."""

    model: ContentionModel
    llc: float  # bytes of the domain's last-level cache
    domain_cores: int
    beside: float  # bytes: the footprint of each co-runner

    def slowdown(self, footprint: float, width: int) -> float:
        """The contention model's slowdown of a task of ``footprint`` bytes on ``width`` cores of a full domain."""
        return _crowded(self.model, self.llc, max(1, self.domain_cores // max(1, width)), float(footprint),
                        float(self.beside))


@functools.lru_cache(maxsize=4096)
def _crowded(model: ContentionModel, llc: float, tasks: int, footprint: float, beside: float) -> float:
    return model.slowdowns([footprint, *[beside] * (tasks - 1)], [model.sensitivity] * tasks, llc)[0]


@dataclass(frozen=True, slots=True)
class Peer:
    """A malleable task waiting beside the one that starts, as the width choice weighs it."""

    runtime: float  # estimated seconds at its narrowest width
    tail: float = 0.0  # seconds of the chain that waits for it, at the widest (Task.wide_tail)
    serial: float = 1.0  # its key's serial fraction
    low: int = 1  # its narrowest width
    high: int = 1  # its widest (within a domain)
    sure: bool = True  # its key's fit rests on SURE_AFTER readings or more (else exploration hopes for it)
    footprint: float = 0.0  # bytes (its crowding, Crowding)
    key: Hashable = None  # its profile key (explore_allotted plans one task of an unsure key at a time)
    seen: bool = True  # its key was seen wider at least once: the plan counts the cache for it (Crowding)
    spread: float = 0.0  # relative std of its run time: its own end is reckoned RISK_SPREADS of it later (_late)


def co_runner_footprint(peers: Sequence[Peer], default: float) -> float:
    """The footprint of a crowded domain's co-runners (:attr:`Crowding.beside`): the malleable tasks
    waiting, each weighted by the core-seconds it holds a domain for (its run time at its narrowest
    width times that width), since a domain kept full holds long tasks for longer; ``default`` (the
    starting task's) when none waits. By count, Montage's 120 fits of 3 MiB drowned its 15
    reprojections of 15 MiB, which hold the domains most of the time, and the model predicted no
    crowding (docs/results/widths-log.md, "Ties go to the cheapest width").

    >>> MiB = 2**20
    >>> peers = [Peer(10.0, footprint=15 * MiB)] * 15 + [Peer(1.0, footprint=3 * MiB)] * 120
    >>> round(co_runner_footprint(peers, 0.0) / MiB, 2)  # by count: 4.33
    9.67
    """
    work = sum(peer.runtime * peer.low for peer in peers)
    if work > 0:
        return sum(peer.footprint * peer.runtime * peer.low for peer in peers) / work
    return sum(peer.footprint for peer in peers) / len(peers) if peers else default


@dataclass(frozen=True, slots=True)
class Outlook:
    """What the scheduler knows of the node when a malleable task starts."""

    cores: int  # cores of the node that can run tasks
    domain_cores: int  # cores of the task's LLC domain
    free: int  # free cores of that domain now, the starting core included
    backlog: float  # core-seconds left to running tasks and waiting in tasks not malleable, this task excluded
    malleable: int = 1  # malleable tasks waiting and running, this one included (equipartitioning's share)
    peers: tuple[Peer, ...] = ()  # the malleable tasks waiting, this one excluded
    crowding: Crowding | None = None  # the cache each width leaves a task; None: widths do not change it
    footprint: float = 0.0  # bytes: the starting task's footprint
    free_elsewhere: int = 0  # free cores of the node's other domains now
    planned: int = 0  # cores the malleable tasks waiting are planned at, together (read while its key explores)


@dataclass(frozen=True, slots=True)
class WidthChoice:
    width: int
    reason: str
    ends: float = math.nan  # the predicted end of the work (seconds from now) at this width


def _sizes(low: int, cap: int, domain_cores: int, shaped: bool) -> list[int]:
    sizes = shaped_sizes(domain_cores) if shaped else range(1, domain_cores + 1)
    return sorted({low, *(size for size in sizes if low <= size <= max(low, cap))})


def _own(runtime: float, serial: float, low: int, width: int) -> float:
    return at_width(runtime, serial, low, width)


def _late(own: float, peer: Peer) -> float:
    """``peer``'s own run time ``own`` as its end is reckoned: :data:`RISK_SPREADS` of its spread
    later (the core-seconds it spends are reckoned at ``own``)."""
    return own * (1.0 + RISK_SPREADS * peer.spread)


def _crowded_own(peer: Peer, width: int, crowding: Crowding | None) -> float:
    """``peer``'s run time on ``width`` cores, slowed by the co-runners that width leaves it
    (``crowding``) where its key was seen wider (``peer.seen``; the task starting always is): a plan
    bets nothing on the cache for a waiting task of a key it has not seen wider."""
    own = _own(peer.runtime, peer.serial, peer.low, width)
    return own if crowding is None or not peer.seen else own * crowding.slowdown(peer.footprint, width)


def allot(peers: Sequence[Peer], cores: int, domain_cores: int, backlog: float,
          *, shaped: bool = True, crowding: Crowding | None = None) -> tuple[list[int], float, float]:
    """Widths for ``peers`` that end them soonest together, greedily: the predicted end is the latest
    of each one's own end (run time at its width + tail), and the core-seconds of all of them and
    ``backlog`` over ``cores`` followed by the shortest of their chains (whichever task ends last,
    a chain at least that long waits for it); the task that ends last is widened to its next size
    while that brings the end closer (Turek, Wolf and Yu's allotment for malleable tasks: widen the
    longest until the work's area binds). With ``crowding``, a run time at a width is slowed by the
    co-runners a domain full of tasks of that width holds (:class:`Crowding`). Returns the widths,
    the latest own end and the area.

    The chain after the area is the bound :func:`choose_width` and :func:`explore_allotted` weigh
    a width against. (Measured reason: without it, five Epigenomics splits on ``paper``, each with
    a chain of four short steps, were allotted 2, 2, 2, 4 and 4 cores: widened until their area
    alone bound, though their chains end the work later whatever the widths, and two waited for
    whole domains. Learned runs of the workflows ended 1-2% later on every seed set,
    docs/results/widths-log.md, "The allotment bounded by the same chain".)

    Where no wider size brings the end of the task that ends last closer (it is at its widest, or
    its key does not speed up), that task is set aside, and the others are widened while their own
    run times, not their chains, end after the area: a task's own seconds are all its width
    decides. Where the end set aside is its chain's, the chain's tasks are allotted as they arrive,
    at widths that end it sooner than the tail told now (estimated at their narrowest); where it has
    none, the others' widths spend only core-seconds the area leaves free before it. (Measured
    reason: an Epigenomics run on ``epyc``, its speed-ups known, stopped the allotment at a 3 s
    task with a 154 s chain on eight cores; a 98 s alignment of the same stage was left on one core
    and ended 39 s after the rest of its stage, 0.83x the makespan of every task on a whole domain,
    1.05x allotted so, docs/results/widths.md.)

    Cost: O(n·k·log n) for n peers and k sizes.
    """
    sizes: dict[tuple[int, int], list[int]] = {}
    widths = [peer.low if crowding is None else thriftiest(peer, sizes.setdefault(
        (peer.low, peer.high), _sizes(peer.low, min(peer.high, domain_cores), domain_cores, shaped)), crowding)
        for peer in peers]
    owns = [_crowded_own(peer, width, crowding) for peer, width in zip(peers, widths)]
    ends = [_late(own, peer) + peer.tail for own, peer in zip(owns, peers)]
    area = backlog + sum(width * own for width, own in zip(widths, owns))
    heap = [(-end, i) for i, end in enumerate(ends)]
    heapq.heapify(heap)
    chains = True  # the heap orders own ends with their chains; False: own run times alone
    after = min((peer.tail for peer in peers), default=0.0)  # the last to end ends after the area, then its chain
    while heap:
        top, i = heap[0]
        top = -top
        peer = peers[i]
        if top <= area / cores + (after if chains else 0.0):
            break
        options = sizes.setdefault((peer.low, peer.high), _sizes(peer.low, min(peer.high, domain_cores),
                                                                   domain_cores, shaped))
        wider = next((w for w in options if w > widths[i]), None)
        stands = wider is None  # no width brings its end closer: the rest are widened for their own run times
        if not stands:
            new_own = _crowded_own(peer, wider, crowding)
            new_area = area - widths[i] * owns[i] + wider * new_own
            if new_area / cores + (after if chains else 0.0) >= top:
                break
            late = _late(new_own, peer)
            ordered = late + peer.tail if chains else late
            stands = ordered >= top
        if stands:
            heapq.heappop(heap)
            if chains:
                chains = False
                heap = [(-_late(owns[j], peers[j]), j) for _, j in heap]
                heapq.heapify(heap)
            continue
        widths[i], owns[i], ends[i], area = wider, new_own, late + peer.tail, new_area
        heapq.heapreplace(heap, (-ordered, i))
    return widths, max(ends, default=0.0), area


def packed_end(peers: Sequence[Peer], chosen: Sequence[int], free_at: Sequence[Sequence[float]],
               *, shaped: bool = True, crowding: Crowding | None = None) -> float:
    """When ``peers`` at widths ``chosen`` end, their tails included, list-scheduled on the cores as
    they free: the one ending last at its width first (longest first), each as soon as that many
    cores of one domain are free, and wider where cores sit free at its start, as a start widens it
    (its share of the cores free then among the tasks left, :meth:`Scheduler._widen`'s ``tail``).
    Of the domains where it could start as soon, it takes the one with the most cores free: the
    scheduler serves the idle cores round the domains, so narrow tasks starting together spread
    over them, and a wide task behind them waits for a domain to empty. (Measured reason: packed
    onto the first domain, six one-core tasks left the other whole for the ten planned at four
    cores; the scheduler spread them over both, up to three cores idled under the reservations
    for 2-3 s, and a batch on ``paper`` ended 1.22x later than every task at two cores,
    docs/results/widths.md.)
    ``free_at``: per LLC domain, each core's seconds until it frees (0: free now). inf when a width
    exceeds every domain.

    >>> packed_end([Peer(4.0, serial=0.0, high=4), Peer(4.0, serial=0.0, high=4)], [4, 4], [[0, 0, 0, 0]])
    2.0
    """
    return _pack(peers, chosen, free_at, shaped, crowding)[0]


def _pack(peers: Sequence[Peer], chosen: Sequence[int], free_at: Sequence[Sequence[float]], shaped: bool,
          crowding: Crowding | None) -> tuple[float, list[int]]:
    """:func:`packed_end`'s list schedule: the end and the width each peer starts on in it."""
    cores = [sorted(domain) for domain in free_at]
    domain_cores = max((len(domain) for domain in cores), default=0)
    ranked = sorted(range(len(peers)), key=lambda i: -(_crowded_own(peers[i], chosen[i], crowding) + peers[i].tail))
    end, started = 0.0, list(chosen)
    for rank, i in enumerate(ranked):
        peer, width = peers[i], chosen[i]
        # the domain where its width frees first, of those the one with the most cores free then
        start, _, domain = min(((times[width - 1], -bisect_right(times, times[width - 1]), d)
                                for d, times in enumerate(cores) if len(times) >= width), default=(math.inf, 0, -1))
        if domain < 0:
            return math.inf, started
        free = bisect_right(cores[domain], start)
        share = min(free, sum(bisect_right(times, start) for times in cores) // (len(ranked) - rank))
        if share > width:
            width = max(w for w in _sizes(peer.low, min(peer.high, domain_cores), domain_cores, shaped)
                        if w <= max(share, width))
        started[i] = width
        own = _crowded_own(peer, width, crowding)
        cores[domain] = sorted(cores[domain][width:] + [start + own] * width)
        end = max(end, start + own + peer.tail)
    return end, started


def packs(peers: Sequence[Peer]) -> bool:
    """Whether :func:`packed` checks these peers' allotment (the scheduler asks with nothing else
    waiting): at most :data:`PACKED_PEERS` of them, and nothing known to wait for any (no tail).
    Where a chain waits, more work follows that the cores the check would spend are kept for
    (measured reason: checked with their chains, a first Epigenomics run on ``xeon16`` widened its
    early stages for ``critical path`` and ended 1.10x later, docs/results/widths.md)."""
    return 0 < len(peers) <= PACKED_PEERS and all(peer.tail == 0 for peer in peers)


def packed(peers: Sequence[Peer], allotted: Sequence[int], free_at: Sequence[Sequence[float]],
           *, shaped: bool = True, crowding: Crowding | None = None, wider: bool = True) -> list[int]:
    """``allotted`` (from :func:`allot`), or every peer at one size where that ends the peers more
    than :data:`TIE` sooner, list-scheduled on the cores as they free (:func:`packed_end`): for a
    scheduler with few malleable tasks waiting and nothing else (:data:`PACKED_PEERS`).

    The allotment's end is a bound that treats the node's cores as one pool; a task cannot span
    domains, and a narrow one that seems to run beside the wide ones holds a domain a wide one
    needs. (Measured reason: four tasks on ``paper``'s two 4-core domains, their speed-ups known,
    planned two on a domain each and a 1.8 s one on one core, after which the third waited for a
    whole domain: 1.56x the makespan of every task on a whole domain, docs/results/widths.md.)

    ``wider`` False, for peers a chain waits for (more work follows, which the cores are kept for):
    every size is capped at each peer's allotted width, and the widths returned are those the list
    schedule starts each peer on (a start widens a peer where cores sit free), capped so. The pool
    bound does not see rounds: Montage's 48 reprojections on ``wide``'s 64 cores, their speed-ups
    known, were allotted two cores each, and 16 waited for the first 32 to end (0.899x the makespan
    of every task on one core; 1.011x packed, docs/results/widths.md)."""
    domain_cores = max((len(domain) for domain in free_at), default=0)
    best_end, started = _pack(peers, allotted, free_at, shaped, crowding)
    best = list(allotted)
    for size in shaped_sizes(domain_cores) if shaped else range(1, domain_cores + 1):
        trial = [max(w for w in _sizes(peer.low, min(peer.high, domain_cores), domain_cores, shaped)
                     if w <= max(size, peer.low)) for peer in peers]
        if not wider:
            trial = [min(width, plan) for width, plan in zip(trial, allotted)]
        if trial != best and (packing := _pack(peers, trial, free_at, shaped, crowding))[0] < best_end * (1 - TIE):
            best, (best_end, started) = trial, packing
    return best if wider else [min(width, plan) for width, plan in zip(started, allotted)]


def start_now(peer: Peer, planned: int, free: int, wait: float, domain_cores: int,
              *, shaped: bool = True, crowding: Crowding | None = None) -> int | None:
    """The width ``peer``, planned at ``planned`` cores, starts on now on the ``free`` cores of a
    domain (the widest size there), where that ends it more than :data:`TIE` sooner than waiting
    ``wait`` seconds for its planned width (inf: no running task's end frees them) and spends no
    more core-seconds, the co-runners' slowdown counted; None: it waits. For a scheduler whose
    planned task does not fit the cores free and nothing may backfill them (reason ``sooner on the
    cores free``). A narrower start that spends more, a crowded one, would take cores from the tasks
    waiting behind it, which is what its planned width spared them.

    The allotment counts the node's cores as one pool: five tasks with long chains after them on
    8 cores were planned at 2, 2, 2, 4 and 4 cores, and two cores sat idle under the reservations
    until the first three ended (Epigenomics' five splits on ``paper``, docs/results/widths.md,
    "A planned task starts on the cores free").

    >>> start_now(Peer(8.0, serial=0.0, high=4), 4, 2, 3.0, 4)  # 4 s on two cores now, or 3 + 2 s
    2
    >>> start_now(Peer(8.0, serial=0.0, high=4), 4, 2, 1.0, 4) is None  # 4 s now, or 1 + 2 s
    True
    """
    sizes = [w for w in _sizes(peer.low, min(peer.high, domain_cores), domain_cores, shaped)
             if w <= free and w < planned]
    if not sizes:
        return None
    width = sizes[-1]
    own, later = _crowded_own(peer, width, crowding), _crowded_own(peer, planned, crowding)
    if own < (wait + later) * (1 - TIE) and width * own <= planned * later * (1 + TIE):
        return width
    return None


def wait_wider(peer: Peer, planned: int, free_at: Sequence[float], *, shaped: bool = True,
               crowding: Crowding | None = None) -> int:
    """The width the last task waiting, ``peer``, planned at ``planned`` cores and fitting the cores
    free now, ends soonest at on a domain whose cores free after ``free_at`` seconds each (0: free
    now): a width of w cores starts when the w-th of them frees. ``planned`` unless a wider width
    ends it more than :data:`TIE` sooner, the co-runners' slowdown counted. :func:`start_now`'s
    mirror, for a scheduler with nothing else waiting: the core it leaves idle would run nothing.

    (Measured reason: five least-squares fits of a key measured at a serial fraction of 0.2 on two
    cores, ``examples/malleable/fits.py``: the fifth started on the one core free 0.1 s before the
    other freed and ran 3.2 s beside it idle, where on both it takes about 2 s, docs/results/widths.md.)

    >>> wait_wider(Peer(3.6, serial=0.2, high=2), 1, [0.0, 0.1])  # 0 + 3.6 s, or 0.1 + 2.16 s
    2
    >>> wait_wider(Peer(3.6, serial=0.2, high=2), 1, [0.0, 2.0])  # 0 + 3.6 s, or 2.0 + 2.16 s
    1
    """
    times = sorted(free_at)
    sizes = _sizes(planned, min(peer.high, len(times)), len(times), shaped)
    ends = {w: times[w - 1] + _crowded_own(peer, w, crowding) for w in sizes}
    soonest = min(sizes, key=lambda w: ends[w])
    return soonest if ends[soonest] < ends[planned] * (1 - TIE) else planned


def explore_allotted(peers: Sequence[Peer], allotted: Sequence[int], cores: int, domain_cores: int, backlog: float,
                     *, shaped: bool = True, busy: Collection[Hashable] = (),
                     crowding: Crowding | None = None) -> list[int]:
    """``allotted`` (from :func:`allot`) with unsure peers (``sure`` False) planned wider, key by
    key, the cheapest first, while no gain at all would end the work at most :data:`EXPLORE_COST`
    later: a key's peers at the widths they would be allotted were they, and every unsure peer,
    perfectly parallel, or capped a size narrower at a time where that costs too much; a key that
    no such hope widens (many wait), and not in ``busy``, one peer (its shortest) at the next size up.
    The work's end counts the chain after the peers: the last of them ends no sooner than their
    core-seconds fill the cores, and the shortest of their chains follows it; with ``crowding``, a
    peer seen wider is slowed as the allotment slows it.

    The widths planned for waiting tasks are what their cores are reserved for: a key never seen
    wider is otherwise planned at its narrowest, and its one long task, started on the one core
    free, ends the work alone (a first SoyKB run on ``epyc`` ended 3.4x after the whole domain so).
    Key by key, not all hopes or none: all together, a merge of an hour and the twelve tasks
    beside it cost too much, and the merge started on the two cores free (SoyKB on ``xeon16``,
    1.08x later than planned at its hope alone). And on a node kept full, cores free one at a
    time: a width chosen only at a start was the one core free, so a batch with more tasks than
    cores never ran a key wider, and no later run learned its speed-up (docs/results/widths.md,
    "Exploration while many wait"). Without that chain, one of Montage's 48 reprojections one size
    up cost 2.08% of the batch alone, none was ever explored, and learned runs on ``xeon16`` ended
    as low as 0.83x as soon as every task on two cores (docs/results/widths-log.md, "The chain after a batch
    counts in what its exploration costs")."""
    if all(peer.sure for peer in peers):
        return list(allotted)
    base = list(allotted)

    least_tail = min(peer.tail for peer in peers)

    def end(chosen: Sequence[int]) -> float:  # the work's end at the peers' fitted (no-gain) speed-ups
        owns = [_crowded_own(p, w, crowding) for p, w in zip(peers, chosen)]
        area = sum(w * own for w, own in zip(chosen, owns))
        # the last peer to end ends no sooner than their area fills the cores, and a chain follows it
        return max(max(_late(own, p) + p.tail for own, p in zip(owns, peers)), (backlog + area) / cores,
                   area / cores + least_tail)

    limit = end(base) * (1 + EXPLORE_COST)
    hopeful = [peer if peer.sure else dataclasses.replace(peer, serial=0.0) for peer in peers]
    hoped, _, _ = allot(hopeful, cores, domain_cores, backlog, shaped=shaped, crowding=crowding)
    plans: dict[Hashable, dict[int, int]] = {}  # per unsure key: the widening tried, {peer: width}
    for i, (peer, a, h) in enumerate(zip(peers, base, hoped)):
        if not peer.sure and h > a:
            plans.setdefault(peer.key if peer.key is not None else ("peer", i), {})[i] = h
    shortest: dict[Hashable, int] = {}  # else, an unsure key's shortest peer, one size up
    for i, peer in enumerate(peers):
        if not (peer.sure or peer.key is None or peer.key in busy or peer.key in plans
                or base[i] >= _sizes(peer.low, min(peer.high, domain_cores), domain_cores, shaped)[-1]):
            # (at its widest size: a high that no shaped size reaches, 3 on a 4-core domain, has none above 2)
            if peer.key not in shortest or peer.runtime < peers[shortest[peer.key]].runtime:
                shortest[peer.key] = i
    for key, i in shortest.items():
        peer = peers[i]
        plans[key] = {i: next(w for w in _sizes(peer.low, min(peer.high, domain_cores), domain_cores, shaped)
                              if w > base[i])}
    chosen = base
    for plan in sorted(plans.values(), key=lambda plan: sum(peers[i].runtime * (w - base[i]) for i, w in plan.items())):
        # its hoped widths, else capped a size narrower at a time, while they widen anything
        for cap in sorted({w for i in plan for w in _sizes(peers[i].low, plan[i], domain_cores, shaped)},
                          reverse=True):
            trial = [max(w, min(plan[i], cap)) if i in plan else w for i, w in enumerate(chosen)]
            if trial == chosen:
                break
            if end(trial) <= limit:
                chosen = trial
                break
    return chosen


def thriftiest(peer: Peer, sizes: Sequence[int], crowding: Crowding) -> int:
    """The size among ``sizes`` on which ``peer`` spends the fewest core-seconds, co-runners'
    slowdown included (the narrowest of those within :data:`TIE`): its narrowest width unless a
    wider one saves more cache misses than it loses to the serial fraction."""
    spent = {w: w * _crowded_own(peer, w, crowding) for w in sizes}
    least = min(spent.values())
    return next(w for w in sizes if spent[w] <= least * (1 + TIE))


def choose_width(low: int, high: int, runtime: float, tail: float, serial: float, readings: int, outlook: Outlook,
                 *, previous: int | None = None, may_explore: bool = True, exploring: int = 0,
                 shaped: bool = True, narrowest: tuple[int, float] | None = None, spread: float = 0.0) -> WidthChoice:
    """The width a malleable task starts on (module docstring).

    Parameters
    ----------
    low, high : int
        The task's narrowest width (``Task.cores``, at which it was admitted) and widest (``Task.max_cores``).
    runtime : float
        Its estimated run time at ``low`` cores, seconds.
    tail : float
        Seconds of the chain that waits for its result, its malleable tasks at their widest
        (``Task.wide_tail``, else ``Task.tail``: :func:`scalpel_executor.core.tasks.width_tail`).
    serial, readings : float, int
        Its key's serial fraction and the readings it rests on (:class:`SpeedupModel`).
    outlook : Outlook
        The node as the scheduler sees it now, the malleable tasks waiting beside it included
        (``outlook.peers``: their widths are allotted with this task's, :func:`allot`).
    previous : int, optional
        The width the key's previous task started on (hysteresis).
    may_explore : bool
        Whether an unsure key may try a width it has not been seen at (default True).
    exploring : int
        Tasks of its key running at an explored width: while one does, only a width that would be
        best were the key perfectly parallel is explored (the tail's), not merely the next size up.
    shaped : bool
        Topology-shaped sizes (default) or any width.
    narrowest : (int, float), optional
        The task's narrowest width and its estimate there, where ``low`` is a width it was planned
        at above it (``Scheduler._retarget``): the hope of an exploration scales from there, and a
        start at ``low`` reads the key's speed-up without one. None: ``low`` is its narrowest.
    spread : float
        The relative std of its run time (0: exact): its own end is reckoned :data:`RISK_SPREADS`
        of it later, the core-seconds it spends at ``runtime``.

    Returns
    -------
    WidthChoice
        Always ``low`` <= width <= max(``low``, min(``high``, ``outlook.free``)).
    """
    candidates = _sizes(low, min(high, outlook.free), outlook.domain_cores, shaped)
    if not (math.isfinite(runtime) and math.isfinite(tail) and math.isfinite(outlook.backlog)) or len(candidates) == 1:
        return WidthChoice(low, NO_SPEEDUP if readings == 0 else NO_GAIN)
    crowding = outlook.crowding
    me = Peer(runtime, tail, serial, low, high, readings >= SURE_AFTER, outlook.footprint,  # crowded, seen or not
              spread=spread)
    allotted, _, area = allot((me, *outlook.peers), outlook.cores, outlook.domain_cores, outlook.backlog,
                              shaped=shaped, crowding=crowding)
    others_end = max((_late(_crowded_own(p, w, crowding), p) + p.tail for p, w in zip(outlook.peers, allotted[1:])),
                     default=0.0)
    rest = area - allotted[0] * _crowded_own(me, allotted[0], crowding)  # backlog and the peers, as allotted
    floor = others_end  # the malleable tasks waiting beside it, as allotted
    after = min((p.tail for p in outlook.peers), default=0.0)  # the shortest chain after the peers

    def end(width: int, s: float = serial) -> float:
        own = _crowded_own(dataclasses.replace(me, serial=s), width, crowding)
        return max(_late(own, me) + tail, (rest + width * own) / outlook.cores + after, floor)

    def spent(width: int) -> float:
        return width * _crowded_own(me, width, crowding)

    ends = {w: end(w) for w in candidates}
    soonest = min(ends.values())
    # Of the widths that tie on the end, the one spending the fewest core-seconds (the narrowest of
    # those): the narrowest unless the co-runners it sheds save more than its serial fraction wastes.
    # While many wait one task's saving moves the work's end by less than TIE, so the narrowest tie
    # kept a crowded domain crowded (Montage on ``paper``: its reprojections, four to a domain).
    tied = [w for w in candidates if ends[w] <= soonest * (1 + TIE)]
    least = min(spent(w) for w in tied)
    best = next(w for w in tied if spent(w) <= least * (1 + TIE))
    if readings < SURE_AFTER and may_explore:
        # What would be best were the key perfectly parallel, and every unsure key waiting beside it
        # (else the next size up, one task of the key at a time), if no gain at all would cost little.
        # Both from its narrowest width: planned wider, its estimate at ``low`` is its key's fit there
        # (no gain), and a perfectly parallel hope scaled from it overshot by the planned factor.
        base = me if narrowest is None else dataclasses.replace(me, runtime=narrowest[1], low=narrowest[0])
        hopeful = tuple(p if p.sure else dataclasses.replace(p, serial=0.0) for p in outlook.peers)
        hoped_widths, _, _ = allot((dataclasses.replace(base, serial=0.0), *hopeful), outlook.cores,
                                   outlook.domain_cores, outlook.backlog, shaped=shaped,
                                   crowding=crowding)
        hope = max((w for w in candidates if w <= hoped_widths[0]), default=low)
        reads = best > base.low  # a start wider than its narrowest reads the key's speed-up without a try
        if hope <= best and not exploring and not reads:
            hope = next((w for w in candidates if w > best), best)
        if exploring:  # a second try takes no core the waiting tasks, all starting now beside ``best``, start on
            room = outlook.free + outlook.free_elsewhere - max(outlook.planned, sum(peer.low for peer in outlook.peers))
            if best <= room < hope:
                hope = max(w for w in candidates if w <= room)
        if hope > best and end(hope, 1.0) <= end(best, 1.0) * (1 + EXPLORE_COST):
            return WidthChoice(hope, EXPLORING, ends[hope])

    if (previous is not None and previous != best and previous in ends and ends[previous] <= soonest * (1 + HYSTERESIS)
            and spent(previous) <= spent(best) * (1 + HYSTERESIS)):
        return WidthChoice(previous, KEPT, ends[previous])
    return WidthChoice(best, _reason(best, candidates[-1], me, readings, rest, floor, outlook.cores, crowding),
                       ends[best])


def wider_reason(task: Peer, width: int, crowding: Crowding | None = None) -> str:
    """Why ``task`` runs wider than its narrowest width: it spends no more core-seconds there, the
    co-runners' slowdown counted (``fewer co-runners``), else for its own end: the chain after it
    (``critical path``) or the task itself (``tail``)."""
    own = _crowded_own(task, width, crowding)
    if crowding is not None and width * own <= task.low * _crowded_own(task, task.low, crowding):
        return FEWER_CORUNNERS
    return CRITICAL_PATH if task.tail > own else TAIL


def _reason(width: int, widest: int, me: Peer, readings: int, rest: float, floor: float, cores: int,
            crowding: Crowding | None) -> str:
    if width > me.low:
        return wider_reason(me, width, crowding)
    if readings == 0:
        return NO_SPEEDUP
    own = _crowded_own(me, widest, crowding)
    area = (rest + widest * own) / cores
    narrow = _crowded_own(me, me.low, crowding)
    if (area >= max(own + me.tail, floor) * (1 - TIE)
            and (rest + me.low * narrow) / cores >= (narrow + me.tail) * (1 - TIE)):
        return MANY_WAITING
    if floor >= max(own + me.tail, area) and floor > 0:
        return OTHERS_LONGER
    return NO_GAIN


def equipartition(low: int, high: int, outlook: Outlook, *, shaped: bool = False) -> WidthChoice:
    """Plain equipartitioning: the node's cores split evenly among the malleable tasks waiting and
    running (``outlook.malleable``), rounded down, within the task's range and the domain's free
    cores; ``shaped``: the largest topology-shaped size within that share (the paper's TA without
    coscheduling)."""
    share = max(1, outlook.cores // max(1, outlook.malleable))
    candidates = [w for w in _sizes(low, min(high, outlook.free), outlook.domain_cores, shaped) if w <= share]
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

    def choose(self, key: Hashable, low: int, high: int, runtime: float, tail: float, outlook: Outlook,
               *, narrowest: tuple[int, float] | None = None, spread: float = 0.0) -> WidthChoice:
        """The width a task of ``key`` starts on (:func:`choose_width`, or :func:`equipartition`).
        ``narrowest``: its narrowest width and estimate there, where ``low`` is a planned width
        above it; ``spread``: its run time's relative std. Every width may be tried, a run time that is a guess too (``Scheduler._retarget``)."""
        if self.rule.startswith("equipartition"):
            return equipartition(low, high, outlook, shaped=self.rule == "equipartition-shaped")
        choice = choose_width(low, high, runtime, tail, self.model.serial_fraction(key), self.model.readings(key),
                              outlook, previous=self._previous.get(key),
                              exploring=self.model.exploring(key), shaped=self.rule == "scalpel",
                              narrowest=narrowest, spread=spread)
        if choice.reason == EXPLORING:
            self.model.explore(key, +1)
        else:
            self._previous[key] = choice.width
        return choice

    def observe(self, key: Hashable, narrowest: int, width: int, seconds: float, estimate: float,
                explored: bool = False) -> float | None:
        """A task of ``key`` estimated at ``estimate`` seconds on ``narrowest`` cores ran ``seconds``
        on ``width``; ``explored``: it started so (:data:`EXPLORING`). Returns the serial fraction
        that reads, if any (the profile store keeps it for later runs)."""
        if explored:
            self.model.explore(key, -1)
        if estimate > 0 and seconds > 0:
            return self.model.observe(key, narrowest, width, seconds / estimate)
        return None
