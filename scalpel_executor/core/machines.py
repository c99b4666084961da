"""Named machines for the simulator: a topology spec, a contention model and one line saying what it is.

``scalpel simulate --machine NAME`` and ``benchmarks/archive/policy_study.py`` take their machines from
:data:`MACHINES`, so a machine is described once:

=========  ===================================  ==============================================
name       topology                             contention model
=========  ===================================  ==============================================
paper      2 x 4 cores, 12 MiB L3 per domain    package default (ρ 0.5, σ 1): not measured
wide       8 x 8 cores, 32 MiB L3 per domain    package default (ρ 0.5, σ 1): not measured
epyc       16 x 8 cores, 32 MiB L3 per CCD      package default (ρ 0.5, σ 1): not measured
xeon16     1 x 16 cores, 300 MiB shared L3      fitted to a measured co-run surface (below)
=========  ===================================  ==============================================

* ``paper``: the Scalpel paper's server (Section VI), two Intel Xeon E5620 at 2.40 GHz, each 4
  cores sharing a 12 MB L3.
* ``wide``: a two-socket server with 8 LLC domains of 8 cores. 32 MiB per domain is 4 MiB of L3
  per core, what current server parts give (an EPYC CCD: 32 MiB for 8 cores), and the size
  ``benchmarks/scale.py`` and ``benchmarks/archive/policy_study.py`` have always used for this machine,
  so their results stay comparable.
* ``epyc``: an AMD EPYC-like machine, 2 sockets x 8 CCDs x 8 cores with 32 MiB L3 per CCD:
  many small LLC domains.
* ``xeon16``: a 16-core KVM guest on an Intel Xeon whose sysfs shows one 300 MiB L3 shared by
  all CPUs. Its model is fitted (:func:`fit_k_copies`) to the slowdown of k = 2, 4, 8, 16
  identical pinned copies of the spmv kernel at 2-128 MiB footprints
  (``docs/data/xeon16-spmv-corun-surface.json``, 24 points), by::

      python benchmarks/archive/policy_study.py fit-xeon16

  which gives ρ = 0.6395, σ = 1.2538 with an rms error of 0.2042 over the 24 points (largest
  0.48, the 2 copies at 64 MiB: 1.48× measured, 1.00× modelled). The package default
  (ρ 0.5, σ 1) scores 0.2195 on the same points: the surface is noisy (single repeats vary by
  10-15% on that guest, and it shares its L3 with other tenants), so the fit is a modest gain.

Core module: data and arithmetic only. Reading the surface's file is the caller's job; this
module takes its ``slowdown`` table as a mapping.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.contention_fit import CoRun, fit_contention
from scalpel_executor.core.domains import Topology

__all__ = [
    "MACHINES", "Machine", "XEON16_FIT_RMS", "fit_k_copies", "k_copies_points", "k_copies_rms", "k_copies_slowdown",
]

MiB = 2 ** 20

# From `python benchmarks/archive/policy_study.py fit-xeon16` on docs/data/xeon16-spmv-corun-surface.json
# (tests/core/test_machines.py refits and checks these constants against it).
XEON16_RHO = 0.6395
XEON16_SIGMA = 1.2538
#: rms error (in slowdown, e.g. 0.2 = 0.2×) of the xeon16 model over the surface's 24 points.
XEON16_FIT_RMS = 0.2042


@dataclass(frozen=True)
class Machine:
    """A named simulated machine: ``spec`` for :meth:`Topology.from_spec`, its contention model."""

    name: str
    spec: str
    model: ContentionModel
    description: str

    def topology(self) -> Topology:
        return Topology.from_spec(self.spec)


_DEFAULT = ContentionModel()

#: Every preset by name, in the order help texts list them.
MACHINES: dict[str, Machine] = {
    machine.name: machine
    for machine in (
        Machine("paper", "2x4:12MiB", _DEFAULT,
                "the Scalpel paper's 2-socket Xeon E5620: 2 LLC domains x 4 cores, 12 MiB L3 each; "
                "default model (rho 0.5, sigma 1)"),
        Machine("wide", "8x8:32MiB", _DEFAULT,
                "8 LLC domains x 8 cores, 32 MiB L3 each (4 MiB per core); default model (rho 0.5, sigma 1)"),
        Machine("epyc", "16x8:32MiB", _DEFAULT,
                "EPYC-like, 2 sockets x 8 CCDs: 16 LLC domains x 8 cores, 32 MiB L3 per CCD; "
                "default model (rho 0.5, sigma 1)"),
        Machine("xeon16", "1x16:300MiB", ContentionModel(XEON16_RHO, XEON16_SIGMA),
                f"16 cores sharing one 300 MiB L3; model fitted to measured k-copies co-runs: "
                f"rho {XEON16_RHO}, sigma {XEON16_SIGMA}, rms error {XEON16_FIT_RMS} over 24 points"),
    )
}


# --------------------------------------------------------------------------------------------
# Fitting a model to k identical co-running copies


def k_copies_points(slowdown: Mapping[str, Mapping[str, float]]) -> list[tuple[float, int, float]]:
    """(footprint bytes, copies, measured slowdown) for every k >= 2 of a surface's ``slowdown`` table.

    The table maps footprint in MiB → copies → slowdown, as JSON keys (strings); k = 1 is the
    reference (always 1.0) and carries no information for a fit.
    """
    return [(float(f) * MiB, int(k), float(v)) for f, row in slowdown.items() for k, v in row.items() if int(k) >= 2]


def k_copies_slowdown(model: ContentionModel, footprint: float, copies: int, llc: float) -> float:
    """The slowdown ``model`` predicts for each of ``copies`` identical tasks sharing one LLC."""
    return model.slowdowns([footprint] * copies, [model.sensitivity] * copies, llc)[0]


def k_copies_rms(model: ContentionModel, points, llc: float) -> float:
    """Root-mean-square error of ``model`` over (footprint, copies, slowdown) ``points``."""
    return math.sqrt(sum((k_copies_slowdown(model, f, k, llc) - v) ** 2 for f, k, v in points) / len(points))


def fit_k_copies(points, llc: float, *, max_sensitivity: float = 8.0) -> tuple[ContentionModel, float]:
    """ρ, σ fitted to (footprint, copies, slowdown) ``points`` on one ``llc``-byte LLC; the model and its rms.

    :func:`~scalpel_executor.core.contention_fit.fit_contention` on the slowdowns, each point one
    co-run of a footprint beside k - 1 copies of itself: ρ on its geometric grid, refined twice
    between the best point's neighbours; for each ρ, σ in closed form, since the predicted excess
    slowdown is σ times the excess at σ = 1.
    """
    if not points:
        raise ValueError("no co-run points with 2 or more copies to fit; the surface's slowdown table is empty")
    coruns = [CoRun(f, ((1.0, (f,) * (k - 1)),), v) for f, k, v in points]
    model, _ = fit_contention(coruns, llc, log=False, max_sensitivity=max_sensitivity)
    return model, k_copies_rms(model, points, llc)
