"""Fitting the contention model's ρ and σ to measured co-runs, and who ran beside whom.

::

    spans (domain, start, end) ── co_runner_segments ──> each task's life cut where its co-runners change
                                                            │ + footprints, + measured slowdown
                                                            v
    CoRun(footprint, segments, slowdown) ... ── fit_contention ──> ContentionModel(ρ, σ), rms error
       (a measured pair is one segment with one co-runner;
        k copies, one segment with k - 1)

One fit serves every source of co-runs: ``scalpel calibrate``'s measured pairs
(:mod:`scalpel_executor.experiments.contention_fit`), the simulated machines' k-copies surfaces
(:mod:`scalpel_executor.core.machines`), and the executor's own finished tasks
(:mod:`scalpel_executor.learning.host_model`). Pure functions; no clock, no I/O.

A task whose co-runners changed during its life ran ``d_k`` wall seconds beside co-runner set k,
progressing at 1 / s_k of its solo speed there, so its solo time is Σ d_k / s_k and the model
predicts the slowdown Σ d_k / Σ (d_k / s_k): the wall-time-weighted harmonic mean of the
segments' slowdowns (:func:`predicted_slowdown`). A segment with no co-runner has s_k = 1.

**A solo time that was never measured.** A workflow that keeps every core busy never runs its
large tasks alone, so their slowdowns have no denominator. Such co-runs carry a ``baseline``: the
co-runs of one baseline share an unknown solo time, and their ``slowdown`` is their wall time
over any time common to them (their wall time itself will do). In log space log wall = log solo
+ log S(footprint, co-runners; ρ, σ); for a given ρ, σ the best log solo is the mean over the
baseline's co-runs of (log wall − log S), so the fit profiles it out: a baseline's residuals are
its co-runs' deviations from their own mean. A baseline tells ρ, σ only through co-runs that
differ in co-runners (beside a small task and beside a large one), and one of its co-runs goes
to its solo time: :func:`observations` counts what a fit rests on that way.

>>> pair = CoRun(20 * 2**20, ((1.0, (20 * 2**20,)),), 1.4)
>>> model, error = fit_contention([pair], 32 * 2**20, log=False)
>>> round(predicted_slowdown(model, pair, 32 * 2**20), 3)
1.4
"""

from __future__ import annotations

import math
import numbers
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from scalpel_executor.core.contention import ContentionModel

__all__ = ["CoRun", "check_coruns", "co_runner_segments", "fit_contention", "load_model", "model_error",
           "observations", "predicted_slowdown", "rho_grid"]

#: What σ is when no observation can tell it (every one fits the cache at that ρ): the default's.
UNTOLD_SENSITIVITY = ContentionModel().sensitivity
GAUSS_NEWTON_STEPS = 8  # from the closed-form start; one step is exact for single-segment slowdown error


@dataclass(frozen=True)
class CoRun:
    """One task's run beside known co-runners.

    ``segments`` are (wall seconds, the co-runners' footprints in bytes) over the task's life,
    ``slowdown`` its wall time over its solo time, ``weight`` how much it counts in the fit.
    ``baseline`` None: the solo time was measured. Otherwise the co-runs with this ``baseline``
    share a solo time no one measured, and ``slowdown`` is the wall time over any time common to
    them (module docstring); the fit profiles their solo time out.
    """

    footprint: float
    segments: tuple[tuple[float, tuple[float, ...]], ...]
    slowdown: float
    weight: float = 1.0
    baseline: Hashable | None = None


def observations(coruns: Iterable[CoRun]) -> int:
    """How many co-runs a fit of ``coruns`` rests on: each with a measured solo time counts one; a
    ``baseline``'s co-runs count beyond one (one goes to its unknown solo time), and none when they
    all ran beside the same co-runners for the same shares of their lives (their slowdowns are
    then equal whatever ρ and σ are, so they tell only the solo time).

    >>> big, small = 30 * 2**20, 2**20
    >>> observations([CoRun(big, ((1.0, (small,)),), 2.0, baseline="lookup"),
    ...               CoRun(big, ((1.0, (big,)),), 2.6, baseline="lookup"),
    ...               CoRun(big, ((1.0, (big,)),), 2.5, baseline="lookup"),
    ...               CoRun(big, ((1.0, (small,)),), 1.1)])
    3
    """
    count = 0
    shapes: dict[Hashable, set] = defaultdict(set)
    sizes: dict[Hashable, int] = defaultdict(int)
    for corun in coruns:
        if corun.baseline is None:
            count += 1
        else:
            shapes[corun.baseline].add(_shape(corun))
            sizes[corun.baseline] += 1
    return count + sum(sizes[b] - 1 for b, seen in shapes.items() if len(seen) > 1)


def _shape(corun: CoRun) -> tuple:
    """What the model's prediction for ``corun`` depends on: its footprint and each co-runner set's
    share of its life."""
    wall = sum(seconds for seconds, _ in corun.segments) or 1.0
    shares: dict[tuple[float, ...], float] = defaultdict(float)
    for seconds, others in corun.segments:
        shares[tuple(sorted(others))] += seconds / wall
    return corun.footprint, tuple(sorted((others, round(share, 6)) for others, share in shares.items()))


def rho_grid(low: float = 0.01, high: float = 4.0, points: int = 200) -> list[float]:
    """The geometric grid of ρ the fit searches: 0.01 reaches a sysfs LLC that overstates what the
    cores share tenfold and more (a VM's 480 MiB for some 48–64 MiB); 4 one that understates it."""
    return [low * (high / low) ** (k / (points - 1)) for k in range(points)]


def predicted_slowdown(model: ContentionModel, corun: CoRun, llc: float) -> float:
    """The slowdown ``model`` predicts for ``corun``: the wall-time-weighted harmonic mean of its
    segments' slowdowns (module docstring). O(segments · co-runners log co-runners)."""
    wall = sum(seconds for seconds, _ in corun.segments)
    solo = sum(seconds / _segment_slowdown(model, corun.footprint, others, llc) for seconds, others in corun.segments)
    return wall / solo if solo > 0 else 1.0


def _segment_slowdown(model: ContentionModel, footprint: float, others: Sequence[float], llc: float) -> float:
    if not others:
        return 1.0
    sigma = model.sensitivity
    return model.slowdowns([footprint, *others], [sigma] * (len(others) + 1), llc)[0]


def fit_contention(coruns: Sequence[CoRun], llc: float, *, log: bool = True, rhos: Iterable[float] | None = None,
                   max_sensitivity: float = 8.0) -> tuple[ContentionModel, float]:
    """ρ and σ that best explain ``coruns`` on an LLC of ``llc`` bytes, and the fit's weighted rms error.

    Parameters
    ----------
    coruns : sequence of CoRun
        The observations; their ``weight`` weighs their squared errors.
    llc : float
        The LLC size (bytes) the model's ρ is relative to.
    log : bool
        Minimise the squared error of log slowdowns (default: a co-run's noise is relative to its
        run time) or of the slowdowns themselves (``scalpel calibrate``'s pairs).
    rhos : iterable of float, optional
        The ρ grid (default :func:`rho_grid`); refined twice between the best point's neighbours.
    max_sensitivity : float
        σ is clipped to [0, ``max_sensitivity``].

    Returns
    -------
    (ContentionModel, float)
        The model, and its rms error (in log or slowdown units, as fitted); a ``baseline``'s
        residuals are deviations from its own mean, and its solo time takes one co-run's share
        of the weight from the denominator.

    Notes
    -----
    For each ρ the excess slowdown per unit σ of every segment is computed once (the model is σ
    times it); σ starts from the closed-form least squares of the segments' time-weighted mean,
    exact for single-segment co-runs fitted on slowdowns, and takes Gauss-Newton steps on the
    harmonic prediction. Co-runs with a ``baseline`` enter both the start and the steps centred
    on their baseline's weighted mean (log error only: the best solo time is then that mean,
    so profiling it out is exact). When no observation exceeds the cache at some ρ, σ is
    :data:`UNTOLD_SENSITIVITY`. Segments with equal footprints are computed once per ρ, so the cost
    is O(grid · (distinct segments + observations · segments)); a few hundred co-runs of a few
    keys fit in well under a second.

    Raises
    ------
    ValueError
        No observation, a non-positive ``llc``, an observation whose slowdown is not a finite
        number > 0, or a ``baseline`` with ``log=False``.
    """
    if not coruns:
        raise ValueError("need at least one measured co-run to fit the contention model")
    check_coruns(coruns, llc)
    for corun in coruns:
        if corun.baseline is not None and not log:
            raise ValueError(f"a co-run with an unmeasured solo time (baseline {corun.baseline!r}) can only be "
                             f"fitted on log slowdowns: pass log=True, or give it its measured solo time")
    grid = sorted(rhos) if rhos is not None else rho_grid()
    target = [math.log(c.slowdown) if log else c.slowdown for c in coruns]
    best = min((_best_sigma(rho, coruns, target, llc, log, max_sensitivity) for rho in grid), key=lambda b: b[0])
    for _ in range(2):  # refine between the best point's neighbours
        k = min(range(len(grid)), key=lambda i: abs(grid[i] - best[1].capacity_fraction))
        low, high = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
        grid = [low + (high - low) * i / 40 for i in range(41)]
        best = min([best, *(_best_sigma(rho, coruns, target, llc, log, max_sensitivity) for rho in grid)],
                   key=lambda b: b[0])
    return best[1], best[0]


def check_coruns(coruns: Iterable, llc: float, *,
                 task: Callable[[Any], str] = lambda corun: f"a {corun.footprint:.0f}-byte task") -> None:
    """Raise ValueError unless ``llc`` is a positive number of bytes and every co-run's slowdown a
    finite number > 0: what any fit over co-runs needs (this module's :class:`CoRun`s, or
    ``core.interference_fit``'s keyed ones). ``task`` names a co-run's task in the message."""
    if not (llc > 0):
        raise ValueError(f"llc must be a positive number of bytes, got {llc!r}")
    for corun in coruns:
        if not (math.isfinite(corun.slowdown) and corun.slowdown > 0):
            raise ValueError(f"a co-run's slowdown must be a finite number > 0 (wall over solo time), got "
                             f"{corun.slowdown!r} for {task(corun)}")


def _best_sigma(rho: float, coruns: Sequence[CoRun], target: Sequence[float], llc: float, log: bool,
                max_sensitivity: float) -> tuple[float, ContentionModel]:
    """(rms error, model) with the best σ at this ρ."""
    unit = ContentionModel(rho, 1.0)
    cache: dict[tuple[float, tuple[float, ...]], float] = {}

    def excess(footprint: float, others: tuple[float, ...]) -> float:
        key = (footprint, tuple(sorted(others)))
        if key not in cache:
            cache[key] = _segment_slowdown(unit, footprint, key[1], llc) - 1.0
        return cache[key]

    parts = [[(seconds, excess(c.footprint, others)) for seconds, others in c.segments] for c in coruns]
    weights = [c.weight for c in coruns]
    groups = _baseline_groups(coruns)
    # Closed form on the time-weighted mean, 1 + σ·ē, on slowdown error: the start. A baseline's
    # co-runs enter centred, log slowdown ≈ σ·ē against ē, as its solo time is unknown.
    means = [sum(d * e for d, e in part) / (sum(d for d, _ in part) or 1.0) for part in parts]
    observed = [c.slowdown - 1.0 for c in coruns]
    for members in groups:
        _centre(means, weights, members)
        for i in members:
            observed[i] = target[i]
        _centre(observed, weights, members)
    denominator = sum(w * m * m for w, m in zip(weights, means))
    if denominator <= 0:
        sigma = min(UNTOLD_SENSITIVITY, max_sensitivity)
        return _rms(parts, weights, target, groups, sigma, log), ContentionModel(rho, sigma)
    sigma = sum(w * m * y for w, m, y in zip(weights, means, observed)) / denominator
    sigma = min(max(sigma, 0.0), max_sensitivity)
    for _ in range(GAUSS_NEWTON_STEPS):
        residuals, jacobians = [], []
        for part, t in zip(parts, target):
            wall = sum(d for d, _ in part)
            solo = sum(d / (1.0 + sigma * e) for d, e in part)
            if wall <= 0 or solo <= 0:
                residuals.append(0.0)
                jacobians.append(0.0)
                continue
            predicted = wall / solo
            slope = predicted * predicted / wall * sum(d * e / (1.0 + sigma * e) ** 2 for d, e in part)
            residuals.append((math.log(predicted) if log else predicted) - t)
            jacobians.append(slope / predicted if log else slope)
        for members in groups:
            _centre(residuals, weights, members)
            _centre(jacobians, weights, members)
        numerator = sum(w * j * r for w, j, r in zip(weights, jacobians, residuals))
        curvature = sum(w * j * j for w, j in zip(weights, jacobians))
        if curvature <= 0:
            break
        step = numerator / curvature
        new = min(max(sigma - step, 0.0), max_sensitivity)
        if abs(new - sigma) < 1e-9:
            break
        sigma = new
    return _rms(parts, weights, target, groups, sigma, log), ContentionModel(rho, sigma)


def model_error(model: ContentionModel, coruns: Sequence[CoRun], llc: float, *, log: bool = True) -> float:
    """The weighted rms error of a given ``model`` on ``coruns``, as :func:`fit_contention`
    measures its own (baselines profiled out): how well a model not fitted to them explains them."""
    if not coruns:
        raise ValueError("need at least one co-run to measure a model's error on")
    unit = ContentionModel(model.capacity_fraction, 1.0)
    parts = [[(seconds, _segment_slowdown(unit, c.footprint, others, llc) - 1.0) for seconds, others in c.segments]
             for c in coruns]
    target = [math.log(c.slowdown) if log else c.slowdown for c in coruns]
    return _rms(parts, [c.weight for c in coruns], target, _baseline_groups(coruns), model.sensitivity, log)


def _baseline_groups(coruns: Sequence[CoRun]) -> list[list[int]]:
    """The indices of the co-runs of each ``baseline``."""
    groups: dict[Hashable, list[int]] = defaultdict(list)
    for i, corun in enumerate(coruns):
        if corun.baseline is not None:
            groups[corun.baseline].append(i)
    return list(groups.values())


def _centre(values: list[float], weights: Sequence[float], members: Sequence[int]) -> None:
    """Subtract the weighted mean of ``values`` over ``members`` from each of them: what is left
    once the baseline's best solo time (that mean, in log space) is taken out."""
    total = sum(weights[i] for i in members)
    mean = sum(weights[i] * values[i] for i in members) / total if total > 0 else 0.0
    for i in members:
        values[i] -= mean


def _rms(parts, weights, target, groups, sigma: float, log: bool) -> float:
    residuals = []
    for part, t in zip(parts, target):
        wall = sum(d for d, _ in part)
        solo = sum(d / (1.0 + sigma * e) for d, e in part)
        predicted = wall / solo if wall > 0 and solo > 0 else 1.0
        residuals.append((math.log(predicted) if log else predicted) - t)
    total = sum(weights)
    for members in groups:
        _centre(residuals, weights, members)
        total -= sum(weights[i] for i in members) / len(members)  # one co-run's worth goes to the solo time
    error = sum(w * r * r for w, r in zip(weights, residuals))
    return math.sqrt(error / total) if total > 0 else 0.0


def co_runner_segments(spans: Sequence[tuple[Hashable, float, float]]) -> list[list[tuple[float, tuple[int, ...]]]]:
    """Who ran beside each task: its life cut where its co-runners change.

    Parameters
    ----------
    spans : sequence of (domain, start, end)
        Each task's LLC domain and the interval it ran in (one clock for all).

    Returns
    -------
    list
        Per task, in order, its segments: (seconds, indices of the tasks beside it on its domain),
        consecutive segments with the same co-runners merged; an empty interval has none.

    Notes
    -----
    A sweep over each domain's start and end times: O(n log n + Σ segments · co-runners).

    >>> co_runner_segments([(0, 0.0, 2.0), (0, 1.0, 3.0), (1, 0.0, 1.0)])
    [[(1.0, ()), (1.0, (1,))], [(1.0, (0,)), (1.0, ())], [(1.0, ())]]
    """
    out: list[list[tuple[float, tuple[int, ...]]]] = [[] for _ in spans]
    by_domain: dict[Hashable, list[int]] = defaultdict(list)
    for i, (domain, start, end) in enumerate(spans):
        if end > start:
            by_domain[domain].append(i)
    for members in by_domain.values():
        times = sorted({spans[i][1] for i in members} | {spans[i][2] for i in members})
        by_start = sorted(members, key=lambda i: spans[i][1])
        active: list[int] = []
        k = 0
        for left, right in zip(times, times[1:]):
            while k < len(by_start) and spans[by_start[k]][1] <= left:
                active.append(by_start[k])
                k += 1
            active = [i for i in active if spans[i][2] > left]
            for i in active:
                others = tuple(sorted(j for j in active if j != i))
                segments = out[i]
                if segments and segments[-1][1] == others:
                    segments[-1] = (segments[-1][0] + right - left, others)
                else:
                    segments.append((right - left, others))
    return out


def load_model(document: dict) -> ContentionModel:
    """The model of a ``calibration.json`` (``scalpel calibrate --out``: ``capacity_fraction`` and
    ``sensitivity``). Raises ValueError naming the missing or bad field."""
    try:
        rho, sigma = document["capacity_fraction"], document["sensitivity"]
    except (KeyError, TypeError):
        raise ValueError("not a calibration document: it needs capacity_fraction and sensitivity "
                         "(scalpel calibrate --out)") from None
    for name, value in (("capacity_fraction", rho), ("sensitivity", sigma)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number (scalpel calibrate --out writes it), got {value!r}")
    return ContentionModel(float(rho), float(sigma))
