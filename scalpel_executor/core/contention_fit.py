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

>>> pair = CoRun(20 * 2**20, ((1.0, (20 * 2**20,)),), 1.4)
>>> model, error = fit_contention([pair], 32 * 2**20, log=False)
>>> round(predicted_slowdown(model, pair, 32 * 2**20), 3)
1.4
"""

from __future__ import annotations

import math
import numbers
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

from scalpel_executor.core.contention import ContentionModel

__all__ = ["CoRun", "co_runner_segments", "fit_contention", "load_model", "predicted_slowdown", "rho_grid"]

#: What σ is when no observation can tell it (every one fits the cache at that ρ): the default's.
UNTOLD_SENSITIVITY = ContentionModel().sensitivity
GAUSS_NEWTON_STEPS = 8  # from the closed-form start; one step is exact for single-segment slowdown error


@dataclass(frozen=True)
class CoRun:
    """One task's run beside known co-runners.

    ``segments`` are (wall seconds, the co-runners' footprints in bytes) over the task's life,
    ``slowdown`` its wall time over its solo time, ``weight`` how much it counts in the fit.
    """

    footprint: float
    segments: tuple[tuple[float, tuple[float, ...]], ...]
    slowdown: float
    weight: float = 1.0


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
        The model, and its rms error (in log or slowdown units, as fitted).

    Notes
    -----
    For each ρ the excess slowdown per unit σ of every segment is computed once (the model is σ
    times it); σ starts from the closed-form least squares of the segments' time-weighted mean,
    exact for single-segment co-runs fitted on slowdowns, and takes Gauss-Newton steps on the
    harmonic prediction. When no observation exceeds the cache at some ρ, σ is
    :data:`UNTOLD_SENSITIVITY`. Segments with equal footprints are computed once per ρ, so the cost
    is O(grid · (distinct segments + observations · segments)); a few hundred co-runs of a few
    keys fit in well under a second.

    Raises
    ------
    ValueError
        No observation, a non-positive ``llc``, or an observation whose slowdown is not a finite
        number > 0.
    """
    if not coruns:
        raise ValueError("need at least one measured co-run to fit the contention model")
    if not (llc > 0):
        raise ValueError(f"llc must be a positive number of bytes, got {llc!r}")
    for corun in coruns:
        if not (math.isfinite(corun.slowdown) and corun.slowdown > 0):
            raise ValueError(f"a co-run's slowdown must be a finite number > 0 (wall over solo time), got "
                             f"{corun.slowdown!r} for a {corun.footprint:.0f}-byte task")
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
    # Closed form on the time-weighted mean, 1 + σ·ē, on slowdown error: the start.
    means = [sum(d * e for d, e in part) / (sum(d for d, _ in part) or 1.0) for part in parts]
    denominator = sum(w * m * m for w, m in zip(weights, means))
    if denominator <= 0:
        sigma = min(UNTOLD_SENSITIVITY, max_sensitivity)
        return _rms(parts, weights, target, sigma, log), ContentionModel(rho, sigma)
    sigma = sum(w * m * (c.slowdown - 1.0) for w, m, c in zip(weights, means, coruns)) / denominator
    sigma = min(max(sigma, 0.0), max_sensitivity)
    for _ in range(GAUSS_NEWTON_STEPS):
        numerator = curvature = 0.0
        for part, w, t in zip(parts, weights, target):
            wall = sum(d for d, _ in part)
            solo = sum(d / (1.0 + sigma * e) for d, e in part)
            if wall <= 0 or solo <= 0:
                continue
            predicted = wall / solo
            slope = predicted * predicted / wall * sum(d * e / (1.0 + sigma * e) ** 2 for d, e in part)
            residual = (math.log(predicted) if log else predicted) - t
            jacobian = slope / predicted if log else slope
            numerator += w * jacobian * residual
            curvature += w * jacobian * jacobian
        if curvature <= 0:
            break
        step = numerator / curvature
        new = min(max(sigma - step, 0.0), max_sensitivity)
        if abs(new - sigma) < 1e-9:
            break
        sigma = new
    return _rms(parts, weights, target, sigma, log), ContentionModel(rho, sigma)


def _rms(parts, weights, target, sigma: float, log: bool) -> float:
    total = error = 0.0
    for part, w, t in zip(parts, weights, target):
        wall = sum(d for d, _ in part)
        solo = sum(d / (1.0 + sigma * e) for d, e in part)
        predicted = wall / solo if wall > 0 and solo > 0 else 1.0
        error += w * ((math.log(predicted) if log else predicted) - t) ** 2
        total += w
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
