"""The per-key interference model's fit: ridge least squares over co-runs, the hold-out that
chooses it over footprint-only, and the co-runs a host's history gives it.

::

    KeyedCoRun(key, footprint, segments: (seconds, ((co-runner key, footprint), ...)), slowdown, at) ...
        │ fit_interference: ridge least squares of log slowdown around the footprint model,
        │                   shrinking every residual toward 0 (noise_level: how hard)
        v
    InterferenceModel(footprint model, llc, sensitivity s_k, pressure p_k[, bandwidth w_k])
        .slowdowns(keys, footprints)   each member of a group beside the others (like ContentionModel)
        .predicted(corun)              one observed task, over its segments
    choose_interference: fit on the older records, score on the newer ─> InterferenceChoice
        (the per-key model only where it predicts better beyond chance, with bandwidth only where
        that beats it; else footprint-only, and why; a per-key model chosen before stays until
        footprint-only wins the same test against it)

The model itself, what a key's :class:`~scalpel_executor.core.interference.Terms` mean and the one
formula every planner and the simulator compute (``corun_slowdowns``), is in
:mod:`scalpel_executor.core.interference`; this module serves the learning side only
(``learning.host_model``'s refit, the planted workloads, the studies), as
:mod:`~scalpel_executor.core.contention_fit` does for the footprint model.

**Identifiability.** From pairs alone (a 2-core host) only s_a + p_b is told: s_a + c, p_b − c
predict every pair the same. The ridge picks the split of least norm, which predicts pairs as
well as any; co-runs beside 2 or more co-runners, or beside none for part of a life, tell s and p
apart.

**The fit.** Observations are y = log(wall / solo). Over a task's segments the prediction is the
solo-time-weighted harmonic mean of the segments' slowdowns (as in
:func:`~scalpel_executor.core.contention_fit.predicted_slowdown`), which is not linear in the
residuals; Gauss-Newton steps from 0 solve the ridge problem

    min Σ_i (y_i − ŷ_i(s, p))² + λ (Σ_k s_k² + Σ_k p_k²),     λ = (noise / PRIOR_SCALE)²

(one step is exact for single-segment co-runs away from the clamp; a step that overshoots
where the clamp cuts in is halved). This is the posterior mode under a N(0,
PRIOR_SCALE²) prior on each residual and N(0, noise²) observation noise: a key seen n times moves
by about n / (n + λ) of what its co-runs say, so a key with little evidence keeps the footprint
prediction. ``noise`` is measured where the records repeat a co-run (same key beside the same
keys and footprints: the pooled standard deviation of their log slowdowns) and is
:data:`DEFAULT_NOISE` (±20%, the middle of the ±10–30% co-runs scatter on shared hosts) where
fewer than :data:`MIN_REPLICATE_FREEDOM` repeats tell it. At ±20% λ = 1.8: a key seen once moves
36% of the way, one seen 50 times 97%.

**Fitting the bandwidth product.** The intensities' prior sd is :data:`BANDWIDTH_PRIOR`, so a
pair's w² has the residuals' scale; the fit starts from :data:`BANDWIDTH_START` (at 0 the
product has no gradient) and projects w onto ≥ 0. :func:`choose_interference` keeps it only
where it beats the model without it on the hold-out. A general low-rank ⟨v_a, v_b⟩ needs many
distinct partners per key to be told from ±20% noise; it is not built.

**Keys never seen alone** (``KeyedCoRun.solo_known`` False; :func:`coruns_from_history`): their
slowdowns are over a reference time of their own, and the fit gives each a free log baseline, so
their co-runs teach pressures and intensities relative to each other; their own sensitivity is
absorbed by the baseline.

References: J. Feliu et al., "Cache-hierarchy contention aware scheduling in CMPs", IEEE TPDS
25(3), 2014; W. Jin, X. Peng, "SLITS: Sparsity-Lightened Intelligent Thread Scheduling", 2023.

>>> from scalpel_executor.core.contention import ContentionModel
>>> MiB = 2**20
>>> stream = [KeyedCoRun("stream", MiB, ((1.0, (("lookup", MiB),)),), 1.5, at=t) for t in range(20)]
>>> model = fit_interference(stream, ContentionModel(), 32 * MiB)
>>> [round(x, 2) for x in model.slowdowns(["stream", "lookup"], [MiB, MiB])]  # the footprint model: 1.0, 1.0
[1.5, 1.0]

(The lookup was never seen beside the stream: it keeps the footprint model's 1.0.)
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.contention_fit import check_coruns
from scalpel_executor.core.interference import Terms, corun_slowdowns

__all__ = ["InterferenceChoice", "InterferenceModel", "KeyedCoRun", "choose_interference", "coruns_from_history",
           "exploration", "fit_interference", "noise_level", "planted_coruns", "solo_times"]

#: Prior standard deviation of a key's residual, in log slowdown: the footprint model's misses on
#: measured pairs are of this order (two 28 MiB spmv: 1.08× measured, 1.29× modelled, −0.18).
PRIOR_SCALE = 0.15
#: Observation noise, in log slowdown, assumed where repeats do not measure it.
DEFAULT_NOISE = 0.2
NOISE_RANGE = (0.03, 0.5)
MIN_REPLICATE_FREEDOM = 6  # repeats beyond the first, over all repeated co-runs, before the noise is measured
GAUSS_NEWTON_STEPS = 10
BANDWIDTH_STEPS = 30  # the product term is not linear: more steps, each still checked to lower the loss
#: The hold-out: the newest fraction of each key's records, and how many records the test needs at all.
HOLDOUT_FRACTION = 0.3
MIN_RECORDS = 30
#: The per-key model's median error on the hold-out must be this much below footprint-only's ...
MIN_GAIN = 0.1
#: ... and nearer on the held-out records beyond chance: a one-sided Wilcoxon signed-rank test of
#: the records' gains (footprint-only's error less its) at this level. Ranks, not signs: a sign
#: test counted a record nearer by 0.005 as much as one nearer by 0.7, and under planted contention
#: (docs/results/planted.md) the pairs nobody hurts, both models right to within 1-2%, outvoted
#: the hurting pairs the per-key model alone predicted (nearer on 6 of 12, median error 0.107
#: against 0.358: refused).
TEST_LEVEL = 0.05
#: Below this many ranked records the test's distribution is counted exactly, above it the normal
#: approximation (with continuity correction) is used.
EXACT_RANKS = 60
#: Both are judged on the held-out records where the two models' predictions differ by more than
#: this, in log slowdown (1%): a record both predict alike is no evidence either way.
AGREEMENT = 0.01

#: Prior standard deviation of a key's bandwidth intensity w: a pair of equal intensities adds w²,
#: so this lets two streams' product be of the order of PRIOR_SCALE.
BANDWIDTH_PRIOR = math.sqrt(PRIOR_SCALE)
#: Where the fit starts each key's bandwidth intensity: at 0 the product term has no gradient.
BANDWIDTH_START = 0.05
#: A never-alone key's baseline is free: this ridge only keeps the normal equations definite.
BASELINE_SHRINKAGE = 1e-6

Neighbours = tuple[tuple[Hashable | None, float], ...]


@dataclass(frozen=True)
class KeyedCoRun:
    """One task's run beside co-runners whose keys are known.

    ``segments``: (wall seconds, ((co-runner key, its footprint), ...)) over the task's life; a key
    None is a co-runner whose key was not recorded (it exerts footprint pressure only).
    ``slowdown``: wall over the key's solo time. ``at``: when it was recorded (the hold-out keeps
    the newest). ``solo_known`` False: the key was never seen alone, ``slowdown`` is wall over a
    reference time of the key's own, and the fit gives the key a free log baseline (the log of
    its solo time over that reference) beside its residuals.
    """

    key: Hashable
    footprint: float
    segments: tuple[tuple[float, Neighbours], ...]
    slowdown: float
    at: float = 0.0
    solo_known: bool = True


@dataclass(frozen=True)
class InterferenceModel:
    """The footprint model plus per-key residuals (:mod:`scalpel_executor.core.interference`). No residual: the
    footprint model.

    ``bandwidth``: each key's bandwidth intensity w (fitted only where :func:`choose_interference`
    finds the product term predicts better). ``baseline``: for keys never seen alone, the fitted
    log of their solo time over their records' reference time (:attr:`KeyedCoRun.solo_known`); it
    only scores records, it is no term of a task.
    """

    footprint_model: ContentionModel
    llc: float
    sensitivity: Mapping[Hashable, float] = field(default_factory=dict)
    pressure: Mapping[Hashable, float] = field(default_factory=dict)
    noise: float = DEFAULT_NOISE
    evidence: Mapping[Hashable, int] = field(default_factory=dict)  # co-runs each key was in, either side
    bandwidth: Mapping[Hashable, float] = field(default_factory=dict)
    baseline: Mapping[Hashable, float] = field(default_factory=dict)

    @property
    def keys(self) -> list[Hashable]:
        """The keys with terms, sorted."""
        return sorted({*self.sensitivity, *self.pressure, *self.bandwidth}, key=repr)

    def terms(self, key: Hashable | None) -> Terms | None:
        """``key``'s :class:`Terms`, what ``Task.interference`` carries; None where it has none."""
        if key is None or (key not in self.sensitivity and key not in self.pressure and key not in self.bandwidth):
            return None
        return Terms(self.sensitivity.get(key, 0.0), self.pressure.get(key, 0.0), self.bandwidth.get(key, 0.0))

    def residual(self, key: Hashable, beside: Iterable[Hashable | None]) -> float:
        """The log-slowdown added to the footprint model for ``key`` beside the keys ``beside``."""
        beside = list(beside)
        if not beside:
            return 0.0
        return (self.sensitivity.get(key, 0.0) + sum(self.pressure.get(b, 0.0) for b in beside if b is not None)
                + self.bandwidth.get(key, 0.0) * sum(self.bandwidth.get(b, 0.0) for b in beside if b is not None))

    def segment_slowdown(self, key: Hashable, footprint: float, beside: Neighbours) -> float:
        """Slowdown (≥ 1) of ``key`` beside ``beside`` for as long as that set runs."""
        if not beside:
            return 1.0
        return self.slowdowns([key, *(k for k, _ in beside)], [footprint, *(f for _, f in beside)])[0]

    def slowdowns(self, keys: Sequence[Hashable], footprints: Sequence[float]) -> list[float]:
        """Each member's slowdown beside all the others on one domain: ``ContentionModel.slowdowns``
        with keys (:func:`corun_slowdowns`). O(n²) for n members."""
        sigma = self.footprint_model.sensitivity
        return corun_slowdowns(self.footprint_model, list(footprints), [sigma] * len(footprints), self.llc,
                               [self.terms(k) for k in keys])

    def scores(self, corun: KeyedCoRun) -> bool:
        """Whether this model can predict ``corun``: a record of a key never seen alone needs its baseline."""
        return corun.solo_known or corun.key in self.baseline

    def predicted(self, corun: KeyedCoRun) -> float:
        """The slowdown predicted for ``corun`` over its segments: their wall-time-weighted harmonic
        mean (times the key's baseline where ``corun.solo_known`` is False). With no residual for
        it, exactly ``contention_fit.predicted_slowdown``."""
        wall = sum(seconds for seconds, _ in corun.segments)
        solo = sum(seconds / self.segment_slowdown(corun.key, corun.footprint, beside)
                   for seconds, beside in corun.segments)
        offset = 1.0 if corun.solo_known else math.exp(self.baseline.get(corun.key, 0.0))
        return (wall / solo if solo > 0 else 1.0) * offset


def noise_level(coruns: Iterable[KeyedCoRun]) -> tuple[float, int]:
    """The observation noise in log slowdown, and the repeats that measured it (0: assumed).

    Co-runs of one key beside the same co-runners (keys, footprints and shares of its life) are
    repeats; the pooled standard deviation of their log slowdowns is the noise, clipped to
    :data:`NOISE_RANGE`. With fewer than :data:`MIN_REPLICATE_FREEDOM` repeats beyond the first of
    each, :data:`DEFAULT_NOISE`.
    """
    cells: dict[tuple, list[float]] = defaultdict(list)
    for corun in coruns:
        cells[_cell(corun)].append(math.log(corun.slowdown))
    freedom = sum(len(ys) - 1 for ys in cells.values())
    if freedom < MIN_REPLICATE_FREEDOM:
        return DEFAULT_NOISE, 0
    spread = sum(sum((y - sum(ys) / len(ys)) ** 2 for y in ys) for ys in cells.values())
    low, high = NOISE_RANGE
    return min(max(math.sqrt(spread / freedom), low), high), freedom


def _cell(corun: KeyedCoRun) -> tuple:
    wall = sum(seconds for seconds, _ in corun.segments) or 1.0
    shares: dict[tuple, float] = defaultdict(float)
    for seconds, beside in corun.segments:
        shares[tuple(sorted(beside, key=repr))] += seconds / wall
    return (corun.key, corun.footprint, tuple(sorted(((b, round(s, 3)) for b, s in shares.items()), key=repr)))


def fit_interference(coruns: Sequence[KeyedCoRun], footprint_model: ContentionModel, llc: float, *,
                     noise: float | None = None, bandwidth: bool = False,
                     residuals: bool = True) -> InterferenceModel:
    """Per-key sensitivities and pressures (and bandwidth intensities) fitted around ``footprint_model``
    by ridge least squares.

    Parameters
    ----------
    coruns : sequence of KeyedCoRun
        The observations (none: the footprint model itself).
    footprint_model : ContentionModel
        The host's footprint model (its fit, or the default); held fixed.
    llc : float
        The LLC size in bytes it is relative to.
    noise : float, optional
        Observation noise in log slowdown; default :func:`noise_level` of ``coruns``. It sets the
        shrinkage λ = (noise / PRIOR_SCALE)², and (noise / BANDWIDTH_PRIOR)² for bandwidth.
    bandwidth : bool
        Fit each key's bandwidth intensity w ≥ 0 too (the product term, :mod:`~scalpel_executor.core.interference`).
    residuals : bool
        False: no term at all, only the baselines of keys never seen alone (footprint-only's
        prediction of their records).

    Returns
    -------
    InterferenceModel

    Notes
    -----
    Gauss-Newton on the harmonic prediction (module docstring), each step a ridge solve of the
    normal equations by Cholesky, bandwidth intensities kept ≥ 0 by projection: O(steps · (n · q²
    + P³)) for n co-runs of q parameters each and P parameters (two or three per key, one more per
    key never seen alone). 400 co-runs of 20 keys fit in well under a second.

    Raises
    ------
    ValueError
        A non-positive ``llc`` or a slowdown that is not a finite number > 0.
    """
    check_coruns(coruns, llc, task=lambda corun: f"key {corun.key!r}")
    measured, _ = noise_level(coruns) if noise is None else (noise, 0)
    plain = InterferenceModel(footprint_model, float(llc), noise=measured)
    # Parameters, sorted for determinism: ("s", key) for every task key with co-runners, ("p", key)
    # for every known co-runner key, ("w", key) for both, ("b", key) for every key never seen alone.
    beside_keys = {k for c in coruns for _, b in c.segments for k, _ in b if k is not None}
    task_keys = {c.key for c in coruns if any(b for _, b in c.segments)}
    names = set()
    if residuals:
        names |= {("s", k) for k in task_keys} | {("p", k) for k in beside_keys}
        if bandwidth:
            names |= {("w", k) for k in task_keys | beside_keys}
    names |= {("b", c.key) for c in coruns if not c.solo_known}
    names = sorted(names, key=repr)
    if not names:
        return plain
    index = {name: i for i, name in enumerate(names)}
    scale = {"s": PRIOR_SCALE, "p": PRIOR_SCALE, "w": BANDWIDTH_PRIOR}
    shrinkage = [(measured / scale[role]) ** 2 if role in scale else BASELINE_SHRINKAGE for role, _ in names]
    rows = []  # per co-run: y, its baseline's index or None, [(seconds, footprint log slowdown, {parameter: count}, own w, [co-runners' w])]
    for corun in coruns:
        parts = []
        for seconds, beside in corun.segments:
            if seconds <= 0:
                continue
            features: dict[int, float] = defaultdict(float)
            own, others = None, []
            if beside and residuals:
                features[index[("s", corun.key)]] += 1.0
                for key, _ in beside:
                    if key is not None:
                        features[index[("p", key)]] += 1.0
                if bandwidth:
                    own = index[("w", corun.key)]
                    others = [index[("w", key)] for key, _ in beside if key is not None]
            base = math.log(plain.segment_slowdown(corun.key, corun.footprint, beside))
            parts.append((seconds, base, dict(features), own, others))
        if parts:
            rows.append((math.log(corun.slowdown), None if corun.solo_known else index[("b", corun.key)], parts))
    theta = [BANDWIDTH_START if role == "w" else 0.0 for role, _ in names]
    for i, (role, key) in enumerate(names):
        if role == "b":  # start each baseline at its records' mean, so the first step is small
            ys = [y for y, b, _ in rows if b == i]
            theta[i] = sum(ys) / len(ys) if ys else 0.0
    bounded = [role == "w" for role, _ in names]
    loss = _loss(rows, theta, shrinkage)
    for _ in range(BANDWIDTH_STEPS if bandwidth else GAUSS_NEWTON_STEPS):
        normal = [[0.0] * len(names) for _ in names]
        right = [-lam * t for lam, t in zip(shrinkage, theta)]
        for y, b, parts in rows:
            predicted, gradient = _log_prediction(b, parts, theta)
            for i, gi in gradient.items():
                right[i] += gi * (y - predicted)
                for j, gj in gradient.items():
                    normal[i][j] += gi * gj
        for i, lam in enumerate(shrinkage):
            normal[i][i] += lam
        step = _solve(normal, right)
        for _ in range(20):  # halve a step that overshoots where the clamp at 1x cuts in
            trial = [max(0.0, t + d) if bound else t + d for t, d, bound in zip(theta, step, bounded)]
            trial_loss = _loss(rows, trial, shrinkage)
            if trial_loss <= loss:
                break
            step = [d / 2 for d in step]
        else:
            break
        moved = max(abs(a - b) for a, b in zip(trial, theta))
        theta, loss = trial, trial_loss
        if moved < 1e-10:
            break
    evidence: dict[Hashable, int] = defaultdict(int)
    for corun in coruns:
        for key in {corun.key} | {k for _, b in corun.segments for k, _ in b if k is not None}:
            evidence[key] += 1

    def of(role: str) -> dict:
        return {key: theta[i] for (r, key), i in index.items() if r == role}

    return InterferenceModel(footprint_model, float(llc), of("s"), of("p"), measured, dict(evidence), of("w"), of("b"))


def _log_prediction(baseline: int | None, parts, theta) -> tuple[float, dict[int, float]]:
    """The log slowdown over segments (plus the key's baseline) and its gradient in the parameters:
    the features of the segments not clamped at 1x, weighted by their shares of the solo time."""
    wall = sum(part[0] for part in parts)
    logs = [base + sum(theta[i] * c for i, c in features.items())
            + (theta[own] * sum(theta[j] for j in others) if own is not None else 0.0)
            for _, base, features, own, others in parts]
    solos = [part[0] * math.exp(-max(log, 0.0)) for part, log in zip(parts, logs)]
    solo = sum(solos)
    gradient: dict[int, float] = defaultdict(float)
    for share, log, (_, _, features, own, others) in zip(solos, logs, parts):
        if log >= 0:  # at 0 too: from where the footprint model says 1x, a residual may raise it
            weight = share / solo
            for i, c in features.items():
                gradient[i] += weight * c
            if own is not None:
                gradient[own] += weight * sum(theta[j] for j in others)
                for j in others:
                    gradient[j] += weight * theta[own]
    if baseline is not None:
        gradient[baseline] += 1.0
    return math.log(wall / solo) + (theta[baseline] if baseline is not None else 0.0), gradient


def _loss(rows, theta, shrinkage: Sequence[float]) -> float:
    return (sum((y - _log_prediction(b, parts, theta)[0]) ** 2 for y, b, parts in rows)
            + sum(lam * t * t for lam, t in zip(shrinkage, theta)))


def _solve(matrix: list[list[float]], right: list[float]) -> list[float]:
    """x with matrix · x = right for a symmetric positive definite matrix (Cholesky). O(P³)."""
    n = len(right)
    lower = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1):
            total = matrix[i][j] - sum(lower[i][k] * lower[j][k] for k in range(j))
            lower[i][j] = math.sqrt(total) if i == j else total / lower[j][j]
    y = [0.0] * n
    for i in range(n):
        y[i] = (right[i] - sum(lower[i][k] * y[k] for k in range(i))) / lower[i][i]
    x = [0.0] * n
    for i in reversed(range(n)):
        x[i] = (y[i] - sum(lower[k][i] * x[k] for k in range(i + 1, n))) / lower[i][i]
    return x


@dataclass(frozen=True)
class InterferenceChoice:
    """Which model a host plans with, and why: ``reason`` is a sentence for the run report.

    ``model`` is the per-key model refitted on every record when ``per_key``, else the footprint
    model (an :class:`InterferenceModel` without residuals). The errors are median absolute errors
    of log slowdown on the ``held_out`` newest records, of a per-key model fitted on the
    ``fitted_on`` older ones; None when the test did not run.
    """

    model: InterferenceModel
    per_key: bool
    reason: str
    fitted_on: int = 0
    held_out: int = 0
    footprint_error: float | None = None
    per_key_error: float | None = None
    nearer: int = 0  # held-out records the per-key model predicted nearer than footprint-only (ties left out)
    compared: int = 0

    def to_dict(self) -> dict:
        return {"model": "per-key" if self.per_key else "footprint", "reason": self.reason,
                "fitted_on": self.fitted_on, "held_out": self.held_out, "footprint_error": self.footprint_error,
                "per_key_error": self.per_key_error, "nearer": self.nearer, "compared": self.compared,
                "noise": self.model.noise}


def choose_interference(coruns: Sequence[KeyedCoRun], footprint_model: ContentionModel,
                        llc: float, *, incumbent: bool = False) -> InterferenceChoice:
    """The per-key model where it predicts a host's newer co-runs better than footprint-only, else footprint-only.

    The records are ordered by ``at`` (ties by position); each key's newest :data:`HOLDOUT_FRACTION`
    is held out (:func:`holdout_split`), the rest fit a per-key model, and the held-out records
    score it and footprint-only by the median absolute error of log slowdown, over the held-out records where the two predict differently (by more than
    :data:`AGREEMENT`: where both agree, a record tells neither apart, and a sparse effect, a
    quarter of the pairs, would drown in them). The per-key model is chosen when its error is at
    least :data:`MIN_GAIN` lower *and* it is nearer on more of those records than a fair coin
    gives at :data:`TEST_LEVEL` (one-sided Wilcoxon signed-rank test of the records' gains; a
    gain within :data:`AGREEMENT` is a tie, left out): a model fitted on noise wins about half,
    by about as much as it loses. It is then refitted on every record. Fewer than :data:`MIN_RECORDS` records:
    footprint-only.

    The per-key model tried is the one with bandwidth intensities where, by the same test, it
    beats the one without on the held-out records (the product term must earn its parameters),
    else the one without. A held-out record of a key never seen alone is scored only where the
    older records fitted its baseline (:meth:`InterferenceModel.scores`); footprint-only is given
    the same baselines, fitted without residuals.

    ``incumbent``: the host planned with the per-key model the same test chose at its last refit.
    It then stays unless footprint-only wins that test against it (the same gain, the same
    level): a run planned with per-key residuals keeps apart the pairs they say hurt, so its
    co-runs, the newest and the held-out ones, hardly measure those pairs, and on what is left the
    two models differ by noise. A choice that flipped back on that evidence planned the next run
    with footprints and put the pairs together again (the streams check on a 16-core node,
    docs/results/node-check.md). Where the host changed, footprint-only does win and takes over.
    """
    plain = InterferenceModel(footprint_model, float(llc))
    ordered = [c for _, c in sorted(enumerate(coruns), key=lambda ic: (ic[1].at, ic[0]))]
    if len(ordered) < MIN_RECORDS:
        return InterferenceChoice(plain, False, f"footprint-only: {len(ordered)} co-runs with known keys, "
                                  f"too few to test a per-key model on (it needs {MIN_RECORDS})")
    older, held = holdout_split(ordered)
    baselines = fit_interference(older, footprint_model, llc, residuals=False)
    newer = [c for c in held if baselines.scores(c)]
    observed = [math.log(c.slowdown) for c in newer]

    def predictions(model: InterferenceModel) -> list[float]:
        return [math.log(model.predicted(c)) for c in newer]

    footprint = predictions(baselines)
    per_key, with_bandwidth = predictions(fit_interference(older, footprint_model, llc)), False
    product = predictions(fit_interference(older, footprint_model, llc, bandwidth=True))
    if _duel(product, per_key, observed).wins:
        per_key, with_bandwidth = product, True
    duel = _duel(per_key, footprint, observed)
    scores = {"fitted_on": len(older), "held_out": len(newer), "footprint_error": duel.against_error,
              "per_key_error": duel.error, "nearer": duel.nearer, "compared": duel.compared}
    model_name = "per-key model with bandwidth" if with_bandwidth else "per-key model"
    figures = (f"fitted on the older {len(older)} co-runs, on the {duel.compared} of the newer {len(newer)} "
               f"where the two differ, the {model_name} erred by a median {duel.error:.3f} in log slowdown "
               f"against footprint-only's {duel.against_error:.3f}, nearer on {duel.nearer}")
    if incumbent and not duel.wins:
        back = _duel(footprint, per_key, observed)
        if not back.wins:
            return InterferenceChoice(fit_interference(ordered, footprint_model, llc, bandwidth=with_bandwidth), True,
                                      f"{model_name} kept (refitted on all {len(ordered)} co-runs), as the last "
                                      f"refit chose it: {figures}; footprint-only did not beat it beyond chance "
                                      f"(p = {back.chance:.2f})", **scores)
        return InterferenceChoice(plain, False, f"footprint-only: {figures}; it predicted them better than the "
                                  f"{model_name} the last refit chose, beyond chance (p = {back.chance:.2f})", **scores)
    if not duel.gains:
        return InterferenceChoice(plain, False, f"footprint-only: {figures}; too few or contradictory "
                                  f"observations to plan with per-key residuals", **scores)
    if duel.chance > TEST_LEVEL:
        return InterferenceChoice(plain, False, f"footprint-only: {figures}, which chance gives (p = "
                                  f"{duel.chance:.2f}); too few observations", **scores)
    return InterferenceChoice(fit_interference(ordered, footprint_model, llc, bandwidth=with_bandwidth), True,
                              f"{model_name} (refitted on all {len(ordered)} co-runs): {figures}", **scores)


def holdout_split(ordered: Sequence[KeyedCoRun]) -> tuple[list[KeyedCoRun], list[KeyedCoRun]]:
    """``ordered`` (by time) split into the records that fit and those held out: each key's newest
    :data:`HOLDOUT_FRACTION` of its records (rounded; at least the newest record of all).

    Per key, not the newest records of all: a workflow run again in the order it ran before ends
    with the same kinds, and the newest records of all were then one kind's tail, often a kind that
    hurts nobody, on which both models agree. Under planted contention a loop whose second run
    ended in six compute tasks held out only compute-beside-compute co-runs, and refused the
    per-key model with no record to tell the two apart (one loop in three).

    >>> runs = [KeyedCoRun(key, 1.0, (), 1.0, at) for at, key in enumerate("aaaaaaaaaabbbb")]
    >>> older, newer = holdout_split(runs)
    >>> [(c.key, c.at) for c in newer]  # a's newest 3 of 10, b's newest 1 of 4
    [('a', 7), ('a', 8), ('a', 9), ('b', 13)]
    """
    by_key: dict[Hashable, list[int]] = {}
    for index, record in enumerate(ordered):
        by_key.setdefault(record.key, []).append(index)
    held = {index for indices in by_key.values()
            for index in indices[len(indices) - round(HOLDOUT_FRACTION * len(indices)):]}
    held = held or {len(ordered) - 1}
    return ([c for i, c in enumerate(ordered) if i not in held], [c for i, c in enumerate(ordered) if i in held])


@dataclass(frozen=True)
class _Duel:
    """Two models' held-out log errors on the records where their predictions differ (by more than
    :data:`AGREEMENT`): the records both predict alike are no evidence either way."""

    error: float  # the challenger's median error there (0 where none differ)
    against_error: float  # the incumbent's
    nearer: int  # records the challenger predicted nearer
    compared: int
    chance: float = 1.0  # the signed-rank test's p: a challenger no better gaining at least this much

    @property
    def gains(self) -> bool:
        return self.compared > 0 and self.error <= (1 - MIN_GAIN) * self.against_error

    @property
    def wins(self) -> bool:
        return self.gains and self.chance <= TEST_LEVEL


def _duel(challenger: Sequence[float], incumbent: Sequence[float], observed: Sequence[float]) -> _Duel:
    differ = [(abs(c - y), abs(i - y)) for c, i, y in zip(challenger, incumbent, observed) if abs(c - i) > AGREEMENT]
    if not differ:
        return _Duel(0.0, 0.0, 0, 0)
    return _Duel(_median([c for c, _ in differ]), _median([i for _, i in differ]), sum(c < i for c, i in differ),
                 len(differ), _signed_rank_test([i - c for c, i in differ]))


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _signed_rank_test(gains: Sequence[float]) -> float:
    """P(a rank sum of positive gains at least the observed one) when each gain's sign is a fair
    coin: the one-sided Wilcoxon signed-rank test. Gains within :data:`AGREEMENT` of 0 are ties,
    left out; equal magnitudes share their mean rank. Exact up to :data:`EXACT_RANKS` gains (a
    count over rank sums, O(n³)), else the normal approximation. 1 for none.

    >>> round(_signed_rank_test([0.5, 0.4, 0.3, 0.2, 0.1]), 4)  # all five nearer: 1 in 2^5
    0.0312
    >>> much = [0.7, 0.6, 0.5, 0.4, 0.3, 0.25, 0.2, -0.02, -0.03, -0.04, -0.05]  # nearer by much, behind by little
    >>> round(_signed_rank_test(much), 3)  # a sign test: 7 of 11, p = 0.27
    0.021
    >>> _signed_rank_test([0.005, -0.004])
    1.0
    """
    told = sorted((g for g in gains if abs(g) > AGREEMENT), key=abs)
    if not told:
        return 1.0
    doubled = [0] * len(told)  # twice each mean rank: whole numbers
    start = 0
    while start < len(told):
        end = start
        while end + 1 < len(told) and abs(told[end + 1]) == abs(told[start]):
            end += 1
        for i in range(start, end + 1):
            doubled[i] = start + end + 2
        start = end + 1
    observed = sum(r for r, g in zip(doubled, told) if g > 0)
    if len(told) > EXACT_RANKS:
        mean, sd = sum(doubled) / 2, math.sqrt(sum(r * r for r in doubled)) / 2
        return 0.5 * math.erfc((observed - 1 - mean) / sd / math.sqrt(2))  # continuity: half a rank, doubled
    counts = {0: 1}
    for r in doubled:
        grown = dict(counts)
        for total, n in counts.items():
            grown[total + r] = grown.get(total + r, 0) + n
        counts = grown
    return sum(n for total, n in counts.items() if total >= observed) / 2 ** len(told)


#: How an exploring choice's reason begins (a refit explores once in a row: the run after it shows
#: whether the keys could be paired with others at all).
EXPLORING = "exploring"
#: The bandwidth intensity told, to explore, to every other key caught in the coverage trap
#: (:func:`exploration`): two such tasks together are planned as 1.28x (e^(0.5²)), beside any other
#: key as 1x, so the plan pairs unlike keys where the footprint model is indifferent.
EXPLORE_INTENSITY = 0.5
#: A key never seen alone is caught when at least this share of its co-run seconds ran beside its
#: own key only.
TRAPPED_SHARE = 0.9


def exploration(coruns: Iterable, solo: Mapping[str, float]) -> tuple[dict[Hashable, Terms], str | None]:
    """Terms that make the next plan pair unlike keys, and why, where the host's stored co-runs
    (as :func:`coruns_from_history` takes them, with the keys' solo times ``solo``) cannot tell
    what the keys cost each other; else no terms and None.

    **The coverage trap.** A key never seen alone (a host whose cores are always busy) is fitted
    with a free baseline; when its co-runs all ran beside its own key (a workflow lists its streams
    first, and a footprint-only plan runs them in that order), whatever that pair costs is in the
    baseline: the per-key model predicts what footprint-only predicts, to the last record ("on the 0
    of the newer 10 where the two differ"), footprint-only is kept, the next plan is the same, and
    no later run can tell more. SLITS calls it the coverage problem: a pairing the policy never
    makes is never observed. So where two or more keys are caught (never alone, at least
    :data:`TRAPPED_SHARE` of their co-run seconds beside their own key only), every other one of
    them (by key) is told a bandwidth intensity :data:`EXPLORE_INTENSITY`: the next plan keeps
    those apart from each other and pairs them with the rest, and its co-runs tell the fit what
    the self pairs cost. Once they have, no key is caught and this gives nothing. A key whose tasks
    cannot be paired with others (they run by themselves, before anything else is submitted) stays
    caught, so the refit explores once in a row (``host_model.interference_of``).

    >>> from types import SimpleNamespace
    >>> alike = [SimpleNamespace(key=k, wall=1.0, segments=((1.0, (2e6,)),), corunner_keys=((k,),)) for k in "abc"]
    >>> terms, reason = exploration(alike, {})
    >>> sorted((k, t.bandwidth) for k, t in terms.items()), reason.split(":")[0]
    ([('a', 0.5), ('b', 0.0), ('c', 0.5)], 'exploring')
    """
    beside: dict[Hashable, float] = defaultdict(float)
    own: dict[Hashable, float] = defaultdict(float)
    for corun in coruns:
        if solo.get(corun.key, 0) > 0:
            continue
        for seconds, others in _keyed_segments(corun):
            if others:
                beside[corun.key] += seconds
                if all(k == corun.key for k, _ in others):
                    own[corun.key] += seconds
    caught = sorted((k for k, total in beside.items() if total > 0 and own[k] >= TRAPPED_SHARE * total), key=repr)
    if len(caught) < 2:
        return {}, None
    return ({key: Terms(0.0, 0.0, EXPLORE_INTENSITY if i % 2 == 0 else 0.0) for i, key in enumerate(caught)},
            f"{EXPLORING}: {len(caught)} keys never seen alone ran only beside their own key, so no co-run tells "
            f"what they cost each other or the rest; this run pairs them with unlike keys (every other one "
            f"told a bandwidth intensity of {EXPLORE_INTENSITY:g})")


def coruns_from_history(coruns: Iterable, solo: Mapping[str, float]) -> list[KeyedCoRun]:
    """The host's stored co-runs (``learning.host_model.RawCoRun``: key, footprint, wall, segments of
    co-runners' footprints, the co-runners' keys aligned with them; oldest first) as
    :class:`KeyedCoRun`, with ``at`` their position.

    A co-run stored without its co-runners' keys (``corunner_keys`` None: a store written before
    they were kept) has co-runner keys None: it teaches sensitivities, not pressures. A co-run
    whose key has no solo time is kept with ``solo_known`` False, over the median wall of that
    key's co-runs (the fit gives the key a baseline); a key never seen alone whose co-runs all ran
    beside the same co-runners is left out (its baseline would absorb all it tells).
    """
    coruns = [c for c in coruns if c.wall > 0]
    reference = _references(coruns, solo)
    out = []
    for i, c in enumerate(coruns):
        if solo.get(c.key, 0) > 0:
            out.append(KeyedCoRun(c.key, c.footprint, _keyed_segments(c), c.wall / solo[c.key], at=float(i)))
        elif c.key in reference:
            out.append(KeyedCoRun(c.key, c.footprint, _keyed_segments(c), c.wall / reference[c.key], at=float(i),
                                  solo_known=False))
    return out


def _references(coruns: Sequence, solo: Mapping[str, float]) -> dict[str, float]:
    """The reference time of each key never seen alone (no ``solo`` time): the median wall of its
    co-runs, where they ran beside more than one set of co-runners (:func:`coruns_from_history`)."""
    unknown: dict[str, list] = defaultdict(list)
    for c in coruns:
        if not solo.get(c.key, 0) > 0:
            unknown[c.key].append(c)
    return {key: _median([c.wall for c in rows]) for key, rows in unknown.items()
            if len({_cell(KeyedCoRun(key, c.footprint, _keyed_segments(c), 1.0)) for c in rows}) > 1}


def solo_times(model: InterferenceModel, coruns: Iterable, solo: Mapping[str, float]) -> dict[str, float]:
    """Seconds alone of each key ``model`` has terms for, as the fit on the host's history
    (``coruns``, ``solo``: as :func:`coruns_from_history` takes them) implies: the key's measured
    solo time, or for a key never seen alone its co-runs' reference time times its fitted baseline
    (:attr:`InterferenceModel.baseline`, the log of its solo time over that reference; the key's own
    sensitivity, which that baseline absorbs, included). Keys with neither are left out.

    A task told its key's terms is planned with this time (``learning.host_model.HostInterference.solo``):
    the terms slow a solo time, while the mean of the key's walls already holds what its co-runners
    cost it, which the plan would then count twice (docs/interference.md, "Solo times").

    >>> from scalpel_executor.core.contention import ContentionModel
    >>> model = InterferenceModel(ContentionModel(), 2.0**25, pressure={"a": 0.1, "b": 0.2}, baseline={"b": -0.5})
    >>> class Raw:  # learning.host_model.RawCoRun's fields that matter here
    ...     def __init__(self, key, wall, beside):
    ...         self.key, self.footprint, self.wall = key, 0.0, wall
    ...         self.segments, self.corunner_keys = ((wall, (0.0,)),), ((beside,),)
    >>> times = solo_times(model, [Raw("b", 3.0, "a"), Raw("b", 3.0, "c"), Raw("a", 1.2, "b")], {"a": 1.0})
    >>> {key: round(seconds, 3) for key, seconds in times.items()}  # b: 3.0 · exp(-0.5)
    {'a': 1.0, 'b': 1.82}
    """
    reference = _references([c for c in coruns if c.wall > 0], solo)
    out = {}
    for key in model.keys:
        if solo.get(key, 0) > 0:
            out[key] = float(solo[key])
        elif key in reference and key in model.baseline:
            out[key] = reference[key] * math.exp(model.baseline[key])
    return out


def _keyed_segments(corun) -> tuple[tuple[float, Neighbours], ...]:
    keys = getattr(corun, "corunner_keys", None)
    if keys is None:
        keys = [(None,) * len(others) for _, others in corun.segments]
    return tuple((seconds, tuple(zip(names, others))) for (seconds, others), names in zip(corun.segments, keys))


def planted_coruns(footprints: Mapping[Hashable, float], sensitivity: Mapping[Hashable, float],
                   pressure: Mapping[Hashable, float], footprint_model: ContentionModel, llc: float, count: int,
                   seed: int, *, cores: int = 4, noise: float = 0.2, solo_share: float = 0.2,
                   bandwidth: Mapping[Hashable, float] | None = None) -> list[KeyedCoRun]:
    """``count`` co-runs generated by a per-key truth, for tests and the hold-out benchmark.

    Each draws its task key and 1 to ``cores`` − 1 co-runners uniformly (with repetition); with
    probability ``solo_share`` the first third of its life ran alone. Its slowdown is the truth's
    prediction times exp(N(0, ``noise``)); ``at`` is its position. ``bandwidth``: the keys'
    bandwidth intensities in the truth (none: 0). Seeded: the same arguments give the same co-runs.
    """
    rng = random.Random(seed)
    keys = sorted(footprints, key=repr)
    truth = InterferenceModel(footprint_model, float(llc), dict(sensitivity), dict(pressure),
                              bandwidth=dict(bandwidth or {}))
    out = []
    for at in range(count):
        key = rng.choice(keys)
        beside = tuple((k, footprints[k]) for k in (rng.choice(keys) for _ in range(rng.randint(1, cores - 1))))
        segments = ((1.0, ()), (2.0, beside)) if rng.random() < solo_share else ((1.0, beside),)
        corun = KeyedCoRun(key, footprints[key], segments, 1.0, at=float(at))
        out.append(KeyedCoRun(key, footprints[key], segments, truth.predicted(corun) * math.exp(rng.gauss(0.0, noise)),
                              at=float(at)))
    return out
