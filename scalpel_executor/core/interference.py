"""Per-key interference: what a task's key suffers and inflicts beyond what its footprint says.

This module is the formula the planners and the simulator compute on the hot path (:class:`Terms`,
:func:`corun_slowdowns`); the fit of the terms to co-runs, the hold-out that chooses them over
footprint-only and the co-runs a host's history gives are in
:mod:`scalpel_executor.core.interference_fit`, as the footprint model's fit is in
:mod:`~scalpel_executor.core.contention_fit` beside :mod:`~scalpel_executor.core.contention`.

**The model.** The footprint model (:mod:`scalpel_executor.core.contention`, with the host's ρ, σ)
sees a task only through its footprint. Two kinds of task defeat it: one that streams through
memory with a small reused set (it suffers and inflicts bandwidth contention, Feliu et al., while
its footprint says it fits) and one whose large footprint is blocked for cache (gemm: the model
expects it to suffer, and it does not). So every profile key k carries two residuals in log
slowdown, a *sensitivity* s_k and a *pressure* p_k, and task a beside the set B predicts

    log S(a, B) = log S_footprint(f_a, f_B) + s_a · [B non-empty] + Σ_{b ∈ B} p_b      (B ≠ ∅)
    log S(a, ∅) = 0

clamped at log S ≥ 0 (a task never runs faster beside others, as in the footprint model).
The residuals apply whenever a co-runner is present, also where the footprint model predicts 1:
a small streaming task is a key with a large p (and s). Pressure is a *sum* over co-runners
because bandwidth demands add (Feliu's schedulers sum them against the available bandwidth), and
sensitivity is paid once per co-run state because it is a property of the victim. This is the
first-order part of a factorization machine (SLITS, Eq. 1, w_i x_i with one feature per key and
role) on top of a physical model in place of the global bias; no parameter belongs to a pair.

**Bandwidth: a rank-one product.** Sums cannot say "these two hurt each other and nobody else":
in a schedule that pairs every task, Σ (s_a + p_b) over the pairs is the same whichever pairs
form, so only the clamp lets additive terms prefer a pairing. So each key may also carry an
intensity w_k ≥ 0, and

    log S(a, B) += w_a · Σ_{b ∈ B} w_b

(Feliu: what a task suffers from bandwidth is its dependence on it times the others' demand; the
symmetric rank-one case of SLITS's ⟨v_a, v_b⟩).

References: J. Feliu et al., "Cache-hierarchy contention aware scheduling in CMPs", IEEE TPDS
25(3), 2014; W. Jin, X. Peng, "SLITS: Sparsity-Lightened Intelligent Thread Scheduling", 2023.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from scalpel_executor.core.contention import ContentionModel

__all__ = ["Terms", "corun_slowdowns"]


class Terms(NamedTuple):
    """A key's residuals in log slowdown (``Task.interference``): what it suffers beside any
    co-runner, what it inflicts on each, and its bandwidth intensity (the product of two tasks'
    intensities is added to each one's log slowdown). ``Terms(s, p)`` has no bandwidth term."""

    sensitivity: float
    pressure: float
    bandwidth: float = 0.0


def corun_slowdowns(model: ContentionModel, footprints: Sequence[float], sensitivities: Sequence[float],
                    llc: float, terms: Sequence[Terms | None]) -> list[float]:
    """Slowdown (≥ 1) of each of the tasks co-running on one domain: the footprint model's times
    exp(s_i + Σ_{j≠i} p_j + w_i Σ_{j≠i} w_j) (module docstring), ``terms[i]`` = (s_i, p_i[, w_i])
    (:class:`Terms`), None for none.

    The one place the formula is computed: the fit's
    :class:`~scalpel_executor.core.interference_fit.InterferenceModel`, the default policy's
    evaluator (:class:`~scalpel_executor.core.orders.FcfsEvaluator`), the admission rule
    (:func:`~scalpel_executor.core.admission.slowdown_increase`) and the simulator's truth all call
    it. Every term None: exactly ``model.slowdowns``. An infinite ``llc`` (unknown) predicts no
    contention at all, as the footprint model does. O(n) for n tasks.

    >>> MiB = 2**20
    >>> [round(x, 2) for x in corun_slowdowns(ContentionModel(), [MiB, MiB], [1.0, 1.0], 32 * MiB, [(0.1, 0.0), (0.0, 0.3)])]
    [1.49, 1.0]
    >>> streams = [Terms(0.0, 0.0, 0.6)] * 2  # two streams: each 0.6 · 0.6 beside the other
    >>> [round(x, 2) for x in corun_slowdowns(ContentionModel(), [MiB, MiB], [1.0, 1.0], 32 * MiB, streams)]
    [1.43, 1.43]
    >>> [round(x, 2) for x in corun_slowdowns(ContentionModel(), [MiB, MiB], [1.0, 1.0], 32 * MiB, [streams[0], None])]
    [1.0, 1.0]
    """
    factors = model.slowdowns(footprints, sensitivities, llc)
    if len(factors) < 2 or all(t is None for t in terms) or not math.isfinite(llc):
        return factors
    told = [_NONE if t is None else Terms(*t) for t in terms]
    pressure, bandwidth = sum(t.pressure for t in told), sum(t.bandwidth for t in told)
    out = []
    for factor, own in zip(factors, told):
        extra = own.sensitivity + pressure - own.pressure + own.bandwidth * (bandwidth - own.bandwidth)
        out.append(factor if extra == 0 else max(1.0, factor * math.exp(extra)))
    return out


_NONE = Terms(0.0, 0.0, 0.0)
