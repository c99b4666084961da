"""Which tasks the probe measures: the first few of each profile key, every k-th after, and the next one after a drift.

A measured task pays for the probe's sampler on its own core (one ``clear_refs`` and one
``smaps`` walk of the whole worker per window: 1 to 4 % of a 1 s task, ``docs/results/costs.md``).
Every task still reports its wall and CPU time, which cost nothing, so run-time estimates keep
learning from every task; footprints and LLC counts come from measured tasks only. The rule, per
profile key and per run (an executor's lifetime)::

    submit ── Estimator.estimate ── MeasurePlan.decide(key) ──> Estimate.measure ──> Run(..., measure) ──> worker
                                      measure the task if
                                        fewer than measure_first of the key's tasks were measured, or
                                        measure_every - 1 tasks of the key went unmeasured since the last, or
                                        the key drifted (below)
    completion ── Estimator.observe ── MeasurePlan.observe_runtime(key, wall, learned run time)
                                        an unmeasured task whose wall time is off the key's learned
                                        run time by more than remeasure_drift (either way; the longer
                                        of the two at least 0.1 s) makes the key's next task measured

The decision is taken at submit, so a burst submitted together is decided together: its first
``measure_first`` tasks of a key are measured, and a drift seen while the burst runs is acted on
by the next task submitted. Counts are kept for this run only: a key the profile store knew
from earlier runs is still measured ``measure_first`` times, so the store keeps learning on the
machine and the code at hand. This module is pure: no clock, no I/O; the caller holds the lock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["DRIFT_FLOOR", "MEASURE_EVERY", "MEASURE_FIRST", "REMEASURE_DRIFT", "MeasurePlan", "Sampling", "drifted"]

MEASURE_FIRST = 3  # a key's first tasks in a run: a footprint from three runs, not one odd window
MEASURE_EVERY = 20  # then one task in 20: 1/20 of the measured cost, and a key is looked at again
REMEASURE_DRIFT = 2.0  # co-running here slowed tasks by up to 1.4x and the machine's noise is
# +-30 %, so a factor of 1.5 would re-measure on contention alone; a task twice as long (or half)
# as its key's learned run time is doing something else.
DRIFT_FLOOR = 0.1  # seconds: no drift unless the longer of the two times reaches this. A task
# shorter than the probe's first window (20 ms settle + 80 ms) gets no footprint anyway, and a
# 1 ms task taking 3 ms is scheduling jitter, not a changed task.


@dataclass(frozen=True)
class Sampling:
    """The sampling rule's settings (the executor's options of the same names).

    Parameters
    ----------
    measure_first : int
        Measure the first this many tasks of every profile key in a run (>= 0).
    measure_every : int
        After those, measure one task in this many (>= 0): 1 measures every task, 0 none but the
        first ``measure_first`` and those after a drift.
    remeasure_drift : float or None
        Measure a key's next task when an unmeasured one's wall time differs from the key's learned
        run time by more than this factor, either way (> 1), the longer of the two at least
        ``DRIFT_FLOOR`` (0.1 s); None or ``math.inf``: never.
    learn_cold : bool
        Whether a worker's first call of an app, which imported modules (``stats["cold"]``: its
        wall time paid for them, its footprint holds them), teaches its key. True (default): every
        run pays for them once per worker. ``scalpel profile run`` sets False and runs such a call
        again: a numpy product of 1.5 ms stored 26 ms when its first call counted.

    Example
    -------
    >>> plan = MeasurePlan(Sampling(measure_first=2, measure_every=3))
    >>> [plan.decide("k") for _ in range(8)]
    [True, True, False, False, True, False, False, True]
    """

    measure_first: int = MEASURE_FIRST
    measure_every: int = MEASURE_EVERY
    remeasure_drift: float | None = REMEASURE_DRIFT
    learn_cold: bool = True

    def __post_init__(self) -> None:
        for name in ("measure_first", "measure_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a whole number of tasks >= 0, got {value!r}")
        drift = self.remeasure_drift
        if drift is not None and (isinstance(drift, bool) or not isinstance(drift, (int, float))
                                  or math.isnan(drift) or drift <= 1):
            raise ValueError(f"remeasure_drift must be a factor > 1 (2.0: twice or half the learned run time), "
                             f"or None to never re-measure on drift; got {drift!r}")
        if not isinstance(self.learn_cold, bool):
            raise ValueError(f"learn_cold must be True or False, got {self.learn_cold!r}")


def drifted(wall: float, learned: float | None, factor: float | None, floor: float = DRIFT_FLOOR) -> bool:
    """Whether a wall time is off the learned run time by more than ``factor``, either way, with the
    longer of the two at least ``floor`` seconds.

    >>> drifted(2.5, 1.0, 2.0), drifted(0.4, 1.0, 2.0), drifted(1.9, 1.0, 2.0), drifted(5.0, None, 2.0)
    (True, True, False, False)
    >>> drifted(0.003, 0.001, 2.0)  # jitter of a millisecond task
    False
    """
    if factor is None or learned is None or not learned > 0 or not wall > 0 or math.isinf(learned):
        return False
    return max(wall, learned) >= floor and (wall > learned * factor or wall * factor < learned)


@dataclass
class _KeyCount:
    measured: int = 0  # tasks of the key measured this run
    skipped: int = 0  # tasks of the key left unmeasured since the last measured one
    due: bool = False  # a drift asks for the next task to be measured


class MeasurePlan:
    """Applies a :class:`Sampling` rule key by key, within one run (see the module docstring).

    Not thread-safe on its own: the :class:`~scalpel_executor.learning.estimates.Estimator`
    calls it under its lock.
    """

    def __init__(self, sampling: Sampling):
        self.sampling = sampling
        self._keys: dict[str, _KeyCount] = {}

    def decide(self, key: str) -> bool:
        """Whether the next task of ``key`` is measured; counts it either way."""
        count = self._keys.setdefault(key, _KeyCount())
        rule = self.sampling
        measure = (count.measured < rule.measure_first or count.due
                   or (rule.measure_every > 0 and count.skipped + 1 >= rule.measure_every))
        if measure:
            count.measured, count.skipped, count.due = count.measured + 1, 0, False
        else:
            count.skipped += 1
        return measure

    def observe_runtime(self, key: str, wall: float, learned: float | None) -> bool:
        """Note an unmeasured task's wall time; True (and the key's next task measured) on a drift."""
        if not drifted(wall, learned, self.sampling.remeasure_drift):
            return False
        self._keys.setdefault(key, _KeyCount()).due = True
        return True

    def measured(self, key: str) -> int:
        """How many of ``key``'s tasks this run was told to measure."""
        count = self._keys.get(key)
        return count.measured if count is not None else 0
