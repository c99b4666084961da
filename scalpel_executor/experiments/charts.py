"""The experiments' charts, written as PNG files: nothing here measures or decides anything."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")  # files only: no display, and no GUI toolkit to load

import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)


def calibration_chart(fit, predictions: Sequence, path: str) -> None:
    """Measured against modelled pair slowdowns (left) and, with ``predictions``, measured against
    simulated mix makespans (right); ``fit`` and ``predictions`` as ``scalpel calibrate`` makes them."""
    figure, (pairs, mixes) = plt.subplots(1, 2, figsize=(11, 4.6), layout="constrained")
    measured = [r[2] for r in fit.residuals]
    modelled = [r[3] for r in fit.residuals]
    pairs.scatter(measured, modelled, s=14)
    low, high = min(measured + modelled + [1.0]) * 0.97, max(measured + modelled) * 1.03
    pairs.plot([low, high], [low, high], color="black", linewidth=0.8)
    pairs.set_xlabel("measured slowdown next to a co-runner")
    pairs.set_ylabel("fitted model")
    pairs.set_title(f"pairs: rho={fit.model.capacity_fraction:.2f}, sigma={fit.model.sensitivity:.2f}, "
                    f"rms {fit.rms_error:.3f}", fontsize=10)
    if predictions:
        xs = [p.measured for p in predictions]
        ys = [p.predicted for p in predictions]
        mixes.scatter(xs, ys, s=14)
        top = max(xs + ys) * 1.05
        mixes.plot([0, top], [0, top], color="black", linewidth=0.8)
        mixes.fill_between([0, top], [0, 0.85 * top], [0, 1.15 * top], color="grey", alpha=0.2, label="within 15%")
        mixes.legend(fontsize=8)
    mixes.set_xlabel("measured median makespan (s)")
    mixes.set_ylabel("simulated with the fitted model (s)")
    mixes.set_title("held-out mixes, every peer and policy", fontsize=10)
    figure.savefig(path, dpi=110)
    plt.close(figure)
