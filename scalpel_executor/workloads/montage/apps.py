"""The pipeline's steps as Parsl apps, one per Montage call (and the tile maker and fit table).

Arguments that are futures are data dependencies; ``inputs`` lists the others. No app names
``executors=``, so the pipeline runs under whatever Parsl configuration the caller loaded.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from parsl import python_app

from scalpel_executor.workloads.montage.sky import SkyPlan, render_tile
from scalpel_executor.workloads.montage.toolkit import (
    MontageStepFailed,
    _checked,
    _montage_function,
    read_montage_table,
    write_fit_table,
)


@python_app
def make_tile(plan: SkyPlan, index: int, path: str) -> str:
    """Write synthetic tile ``index`` of ``plan`` to ``path`` (FITS); return the path."""
    from astropy.io import fits

    image, header = render_tile(plan, index)
    fits.PrimaryHDU(image, header=header).writeto(path, overwrite=True)
    return path


@python_app
def image_table(directory: str, table: str, inputs: Sequence[Any] = ()) -> str:
    """mImgtbl: the metadata table of the FITS images in ``directory``; return the table path."""
    mImgtbl = _montage_function("mImgtbl")
    _checked("mImgtbl", directory, mImgtbl(directory, table))
    return table


@python_app
def make_header(images_table: str, template: str) -> str:
    """mMakeHdr: the mosaic's header bounding every image in ``images_table``; return its path."""
    mMakeHdr = _montage_function("mMakeHdr")
    _checked("mMakeHdr", images_table, mMakeHdr(images_table, template))
    return template


@python_app
def project(raw_tile: str, template: str, projected_tile: str, projector: str = "mProject") -> str:
    """mProject: reproject one tile onto the mosaic's header (writes the ``_area`` image too).

    ``projector="mProjectPP"`` uses Montage's plane-to-plane fast path instead (TAN to TAN only;
    about fifteen times faster on these tiles).
    """
    reproject = _montage_function(projector)
    _checked(projector, raw_tile, reproject(raw_tile, projected_tile, template))
    return projected_tile


@python_app
def find_overlaps(projected_table: str, diffs_table: str) -> list[dict[str, str]]:
    """mOverlaps: the overlapping pairs of projected images, as rows of ``diffs_table``.

    Each row holds ``cntr1``, ``cntr2`` (image ids in ``projected_table``), ``plus``, ``minus``
    (file names) and ``diff`` (a name for the difference image).
    """
    mOverlaps = _montage_function("mOverlaps")
    _checked("mOverlaps", projected_table, mOverlaps(projected_table, diffs_table))
    return read_montage_table(diffs_table)


@python_app
def diff_fit(plus_tile: str, minus_tile: str, template: str, diff_image: str,
             plus: int, minus: int, inputs: Sequence[Any] = ()) -> dict[str, Any]:
    """mDiffFit: fit a plane to the difference of two overlapping projected tiles.

    Returns mDiffFit's fields with ``plus`` and ``minus`` (the images' ids) added; ``ok`` is
    False when the fit failed (an overlap too thin to fit, as mDiffFitExec tolerates), with ``msg``.
    """
    mDiffFit = _montage_function("mDiffFit")
    result = dict(mDiffFit(plus_tile, minus_tile, diff_image, template))
    result.update(plus=plus, minus=minus, ok=str(result.get("status")) == "0")
    if isinstance(result.get("msg"), bytes):
        result["msg"] = result["msg"].decode(errors="replace")
    return result


@python_app
def fit_table(fits_table: str, inputs: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """Write the fit table from the ``mDiffFit`` results in ``inputs`` (MontagePy has no mConcatFit).

    Failed fits are left out, as mDiffFitExec does; returns the path and the counts.
    """
    fits = [fit for fit in inputs if fit["ok"]]
    failed = [(fit["plus"], fit["minus"], fit.get("msg", "")) for fit in inputs if not fit["ok"]]
    if not fits:
        raise MontageStepFailed(f"every mDiffFit failed, so there is nothing to model: {failed[:5]}")
    write_fit_table(fits, fits_table)
    return {"path": fits_table, "fits": len(fits), "failed": failed}


@python_app
def background_model(projected_table: str, fits_table: str, corrections_table: str,
                     inputs: Sequence[Any] = ()) -> str:
    """mBgModel: one plane correction per image that best levels all the overlaps."""
    mBgModel = _montage_function("mBgModel")
    _checked("mBgModel", fits_table, mBgModel(projected_table, fits_table, corrections_table))
    return corrections_table


@python_app
def subtract_background(projected_tile: str, projected_table: str, corrections_table: str,
                        corrected_tile: str) -> str:
    """mBackground: subtract this tile's correction plane (none listed: a zero plane, as mBgExec)."""
    name = os.path.basename(projected_tile)
    ids = [row["cntr"] for row in read_montage_table(projected_table) if os.path.basename(row["fname"]) == name]
    if not ids:
        raise MontageStepFailed(f"mBackground: {name} is not in {projected_table}; was it projected?")
    planes = {row["id"]: row for row in read_montage_table(corrections_table)}
    plane = planes.get(ids[0], {"a": 0.0, "b": 0.0, "c": 0.0})
    mBackground = _montage_function("mBackground")
    _checked("mBackground", projected_tile, mBackground(
        projected_tile, corrected_tile, float(plane["a"]), float(plane["b"]), float(plane["c"])))
    return corrected_tile


@python_app
def coadd(corrected_table: str, template: str, corrected_dir: str, mosaic: str,
          inputs: Sequence[Any] = ()) -> str:
    """mAdd: co-add the corrected tiles, weighted by their area images, into the mosaic."""
    mAdd = _montage_function("mAdd")
    _checked("mAdd", corrected_table, mAdd(corrected_dir, corrected_table, template, mosaic))
    return mosaic


@python_app
def render_png(mosaic: str, png: str) -> str:
    """mViewer: a grayscale PNG of the mosaic (log-Gaussian stretch from -1 sigma to the maximum)."""
    mViewer = _montage_function("mViewer")
    command = {
        "image_type": "png",
        "gray_file": {"fits_file": mosaic, "color_table": 0, "stretch_min": "-1s",
                      "stretch_max": "max", "stretch_mode": "gaussian-log"},
    }
    _checked("mViewer", mosaic, mViewer(json.dumps(command), png, mode=1))
    return png
