"""When small integers get profiles of their own: running moments, their pooling, and the split rule.

A profile key collapses every small integer of a call (``|n| < 16``: a seed, a CPU number, a
loop index, a mode number) to ``n<16`` (:mod:`~scalpel_executor.learning.keys`), because most of
them change nothing a scheduler cares about, and keeping them apart made one profile per value.
Some do change the work (``touch(mib=12)``), so the store keeps, under each shape key, the
statistics of every *exact* key seen (its *variants*; they are not keys), and splits the shape key
when the variants differ::

    observation (shape key S, exact key E) ──> variants[E] += run time, footprint
                                               should_split(variants of S)?
                                                 no:  S stays one profile
                                                 yes: every variant of S becomes a key (its statistics
                                                      move with it); S is marked split, and from the next
                                                      estimate on, calls of S are keyed by E

**The rule** (for run time and for footprint separately; either one splits). Compare the variants
with at least ``MIN_VARIANT_RUNS`` (2) measurements; of three or more, leave out the one whose mean
is furthest (on a log scale) from the median of their means. Of the rest, take the one with the
lowest mean (lo) and the highest (hi); split when

- ``hi >= SPLIT_FACTOR * lo`` (1.5): a smaller difference is left to the run-time spread, which
  the default policy already plans around;
- ``hi - lo >= floor`` (0.1 s of run time, 1 MiB of footprint): below that, no schedule changes;
- ``ln(hi / lo) > SPLIT_Z * sigma * sqrt(1/n_hi + 1/n_lo)`` (``SPLIT_Z`` = 4): the difference is
  beyond measurement noise, where ``sigma`` is the variants' pooled relative spread (std / mean),
  at least ``NOISE_FLOOR`` (0.25, the spread assumed of a key seen once: this host's run times
  varied by up to ±30 %).

So after two runs of each value a factor above 2.7 splits, after three 2.3, and from twelve on
the 1.5 of ``SPLIT_FACTOR``. Eight seeds with the same run time and ±25 % noise put 2.0 between
the extremes on average and 3.5 in one draw in a hundred after one run each (simulated), which is
why one run is not enough. The variant left out is the start-up guard: a fresh worker's first
task also pays for its imports (a 0.25 s task read 0.45 s and 25 MiB instead of 2.2 MiB here), and
in an unchanged workflow that first task is the same small integer run after run, so one variant
reads high every time. The price: among three values, one that alone differs is not split, and
neither is a difference that shows only in values seen once per run for fewer than two runs. A
flag that changes the work is best passed as a bool or a word, which keys verbatim.

Everything here is pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scalpel_executor.core.admission import ONE_RUN_SPREAD  # a key seen once (the scheduler's in-run estimates too)
from scalpel_executor.learning.sampling import DRIFT_FLOOR

__all__ = ["FOOTPRINT_FLOOR", "MIN_VARIANT_RUNS", "Moments", "NOISE_FLOOR", "ONE_RUN_SPREAD", "RUNTIME_FLOOR",
           "SPLIT_FACTOR", "SPLIT_Z", "merge_rows", "pooled", "should_split"]

SPLIT_FACTOR = 1.5
MIN_VARIANT_RUNS = 2  # one reading is too often an outlier (a fresh worker's first task)
SPLIT_Z = 4.0  # the test is re-run on every batch of observations, so one threshold must hold many looks
NOISE_FLOOR = ONE_RUN_SPREAD  # no variant is believed steadier than a key seen once
RUNTIME_FLOOR = DRIFT_FLOOR  # seconds: a shorter difference is scheduling jitter, as for the sampler's drift
FOOTPRINT_FLOOR = float(2**20)  # bytes: an eighth of the smallest LLC domain we model


@dataclass(frozen=True)
class Moments:
    """Count, mean and sum of squared deviations of a series (Welford), mergeable (Chan et al.).

    >>> a = Moments().add(1.0).add(3.0)
    >>> b = Moments().add(5.0)
    >>> merged = a.merge(b)
    >>> merged.count, merged.mean, merged.std
    (3, 3.0, 2.0)
    """

    count: int = 0
    mean: float = 0.0
    m2: float = 0.0

    @classmethod
    def of(cls, count: int | None, mean: float | None, m2: float | None) -> Moments:
        """From a store row's columns (None: nothing measured)."""
        if not count or mean is None:
            return cls()
        return cls(int(count), float(mean), float(m2 or 0.0))

    def add(self, value: float) -> Moments:
        count = self.count + 1
        delta = value - self.mean
        mean = self.mean + delta / count
        return Moments(count, mean, self.m2 + delta * (value - mean))

    def merge(self, other: Moments) -> Moments:
        if not other.count:
            return self
        if not self.count:
            return other
        count = self.count + other.count
        delta = other.mean - self.mean
        mean = self.mean + delta * other.count / count
        return Moments(count, mean, self.m2 + other.m2 + delta * delta * self.count * other.count / count)

    @property
    def std(self) -> float | None:
        return math.sqrt(self.m2 / (self.count - 1)) if self.count > 1 else None

    @property
    def spread(self) -> float | None:
        """std / mean, the relative spread; None with fewer than two values or a mean of 0."""
        std = self.std
        return std / self.mean if std is not None and self.mean > 0 else None


def pooled(series: Iterable[Moments]) -> Moments:
    """Every series merged into one (the mean and spread of all their values together)."""
    total = Moments()
    for moments in series:
        total = total.merge(moments)
    return total


# A store row, as ProfileStore reads it: key, app, runs, runtime_mean, runtime_m2, runtime_ewma,
# footprint_runs, footprint_mean, footprint_m2, footprint_ewma, peak_rss, llc_miss_rate, origin, updated.


def _weighted(pairs: list[tuple[int, float | None]]) -> float | None:
    known = [(weight, value) for weight, value in pairs if value is not None]
    total = sum(weight for weight, _ in known)
    if not known:
        return None
    if not total:
        return known[-1][1]
    return sum(weight * value for weight, value in known) / total


def merge_rows(key: str, rows: list[tuple]) -> tuple:
    """One row holding every run of ``rows``, under ``key``: moments merged (Chan et al.), weighted
    means weighted by runs, the largest peak RSS, the latest update."""
    runtime = Moments()
    footprint = Moments()
    for row in rows:
        runtime = runtime.merge(Moments.of(row[2], row[3], row[4]))
        footprint = footprint.merge(Moments.of(row[6], row[7], row[8]))
    peaks = [row[10] for row in rows if row[10] is not None]
    origins = {row[12] for row in rows}
    return (
        key, rows[0][1],
        runtime.count, runtime.mean if runtime.count else None, runtime.m2 if runtime.count else None,
        _weighted([(row[2], row[5]) for row in rows]),
        footprint.count, footprint.mean if footprint.count else None, footprint.m2 if footprint.count else None,
        _weighted([(row[6], row[9]) for row in rows]),
        max(peaks) if peaks else None, _weighted([(row[6] or row[2], row[11]) for row in rows]),
        origins.pop() if len(origins) == 1 else "measured", max(row[13] for row in rows),
    )


def _differs(series: Sequence[Moments], floor: float) -> bool:
    seen = [moments for moments in series if moments.count >= MIN_VARIANT_RUNS]
    if len(seen) >= 3:  # leave out the variant furthest from the others (the start-up guard)
        means = sorted(math.log(max(moments.mean, floor)) for moments in seen)
        median = means[len(means) // 2]
        seen.remove(max(seen, key=lambda moments: abs(math.log(max(moments.mean, floor)) - median)))
    if len(seen) < 2:
        return False
    low = min(seen, key=lambda moments: moments.mean)
    high = max(seen, key=lambda moments: moments.mean)
    base = max(low.mean, floor)  # a near-zero mean would make any difference a huge ratio
    if high.mean < SPLIT_FACTOR * base or high.mean - low.mean < floor:
        return False
    degrees = sum(moments.count - 1 for moments in seen if moments.spread is not None)
    within = sum((moments.count - 1) * moments.spread ** 2 for moments in seen if moments.spread is not None)
    sigma = max(NOISE_FLOOR, math.sqrt(within / degrees) if degrees else 0.0)
    return math.log(high.mean / base) > SPLIT_Z * sigma * math.sqrt(1 / high.count + 1 / low.count)


def should_split(variants: Iterable[tuple[Moments, Moments]]) -> bool:
    """Whether a shape key's variants differ in run time or footprint (the module docstring's rule).

    Parameters
    ----------
    variants : iterable of (run-time moments in seconds, footprint moments in bytes), one per exact key

    Returns
    -------
    bool

    Example
    -------
    >>> twice = lambda value: Moments().add(value).add(value)
    >>> MiB = 2.0 ** 20
    >>> should_split([(twice(1.0), twice(1 * MiB)), (twice(1.0), twice(12 * MiB))])  # 12x apart, two runs each
    True
    >>> should_split([(twice(1.0), twice(1 * MiB)), (twice(1.0), twice(2 * MiB))])  # 2x: not yet beyond noise
    False
    >>> should_split([(twice(1.0), twice(25 * MiB))] + [(twice(1.0), twice(2 * MiB))] * 5)  # one reads high
    False

    Notes
    -----
    O(V) in the variants.
    """
    runtimes, footprints = [], []
    for runtime, footprint in variants:
        runtimes.append(runtime)
        footprints.append(footprint)
    return _differs(runtimes, RUNTIME_FLOOR) or _differs(footprints, FOOTPRINT_FLOOR)
