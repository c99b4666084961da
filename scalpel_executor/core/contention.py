"""The contention model: how much tasks co-running on one LLC domain slow each other down.

Each task i has a footprint f_i (bytes) and a sensitivity σ_i ≥ 0. The tasks running at one
moment on one LLC domain share its effective capacity L = ρ · LLC max-min fairly (water-filling):
a task whose footprint is below the equal share keeps all of it, and what it leaves is split among
the larger ones. This mirrors LRU, under which a small, often reused working set stays cached next
to a large streaming one. With capacity c a task misses the fraction m(f, c) = max(0, 1 − c / f)
of its accesses; with share c_i it progresses at rate 1 / slowdown with

    slowdown_i = 1 + σ_i · (m(f_i, c_i) − m(f_i, L))      (= 1 when Σ f_j ≤ L)

so a task slows down as the summed footprint of its co-runners exceeds the cache, more the more
of its own data fitted when alone, and never runs faster than alone. The defaults ρ = 0.5, σ = 1
reproduce pairs measured on a 2-core machine with a 32 MiB L3 (two 20 MiB random-gather tasks:
1.4× each, model 1.40×; two 12 MiB: 1.34×, model 1.33×; 20 MiB next to 0.25 MiB: 1.04×, model
1.01×). The model overstates pairs that each overflow the cache alone (two 28 MiB: 1.08× measured,
1.29× modelled), because such tasks are already memory-bound when alone. ``scalpel calibrate``
fits ρ and σ to co-runs measured on the machine at hand.

>>> model = ContentionModel()
>>> [round(x, 2) for x in model.slowdowns([20 * 2**20, 20 * 2**20], [1.0, 1.0], 32 * 2**20)]
[1.4, 1.4]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ContentionModel"]


@dataclass(frozen=True)
class ContentionModel:
    """See the module docstring. ``capacity_fraction`` is ρ, ``sensitivity`` the default σ."""

    capacity_fraction: float = 0.5
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        if not (self.capacity_fraction > 0):
            raise ValueError(f"capacity_fraction must be > 0, got {self.capacity_fraction!r}")
        if not (self.sensitivity >= 0):
            raise ValueError(f"sensitivity must be ≥ 0, got {self.sensitivity!r}")

    def slowdowns(self, footprints: Sequence[float], sensitivities: Sequence[float], llc_size: float) -> list[float]:
        """Slowdown factor (≥ 1) of each of the tasks co-running on one domain."""
        capacity = self.capacity_fraction * llc_size
        if sum(footprints) <= capacity:
            return [1.0] * len(footprints)
        shares = [0.0] * len(footprints)
        left, remaining = capacity, len(footprints)
        for i in sorted(range(len(footprints)), key=footprints.__getitem__):  # water-filling
            shares[i] = min(footprints[i], left / remaining)
            left -= shares[i]
            remaining -= 1
        return [
            1.0 + sigma * (_miss(f, share) - _miss(f, capacity))
            for f, share, sigma in zip(footprints, shares, sensitivities)
        ]


def _miss(footprint: float, capacity: float) -> float:
    """Fraction of accesses that miss when ``footprint`` bytes get ``capacity`` bytes of cache."""
    return max(0.0, 1.0 - capacity / footprint) if footprint > 0 else 0.0
