"""A Montage mosaic pipeline as Parsl apps, on synthetic sky tiles (MontagePy + astropy, offline).

A :class:`SkyPlan` (pure: tile grid, TAN WCS per tile, a star catalogue at fixed sky positions,
one background offset per tile, all drawn from one seed) is turned into a mosaic by the Montage
steps below, each a Parsl ``python_app`` with no fixed ``executors=``, so the pipeline runs under
whatever Parsl configuration the caller loaded. Futures carry the data dependencies; the one place
the submitting thread waits is the overlap table, because the width of the ``mDiffFit`` fan-out is
only known once ``mOverlaps`` has run::

    SkyPlan ─> make_tile ×N ──> raw/tile_NNN.fits ──> mImgtbl[raw] ──> mMakeHdr ── template.hdr
                     │                                                      │
                     └────────────────────> mProject ×N <───────────────────┘
                                               │ projected/tile_NNN.fits (+ _area)
                                               v
                              mImgtbl[projected] ──> mOverlaps ── diffs.tbl, the pair list
                                               │        │   (the single wait: .result() here)
                                               │        v
                                               │   mDiffFit ×P (two projected tiles + template)
                                               │        │ fit dicts
                                               │        v
                                               │   fit_table ── fits.tbl (MontagePy has no mConcatFit)
                                               v        v
                                             mBgModel ── corrections.tbl
                                                  │
                        mBackground ×N (projected tile + its correction) ── corrected/
                                                  │
                              mImgtbl[corrected] ──> mAdd ── mosaic.fits ──> mViewer ── mosaic.png

Every call into MontagePy and astropy happens inside an app body, so it runs in the workers.
:class:`MosaicRun` records each submitted task with its stage and the tasks whose futures it
consumed: :meth:`MosaicRun.dag` is that record as a ``networkx.DiGraph``. :func:`check_background`
reads the outputs back and measures whether the injected offsets were removed.

Without MontagePy or astropy, :func:`require_montage` raises :class:`MontageUnavailable`, which
says what to install.
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import json
import logging
import math
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
from parsl import python_app

logger = logging.getLogger(__name__)

__all__ = [
    "STAGES",
    "BackgroundCheck",
    "DagSummary",
    "MontageStepFailed",
    "MontageUnavailable",
    "MosaicPaths",
    "MosaicRun",
    "PipelineTask",
    "SkyPlan",
    "check_background",
    "dag_summary",
    "draw_dag",
    "grid_shape",
    "mosaic_pipeline",
    "read_montage_table",
    "render_tile",
    "require_montage",
    "write_fit_table",
]

#: The pipeline's stages, in the order data flows through them.
STAGES = (
    "make_tile",
    "mImgtbl",
    "mMakeHdr",
    "mProject",
    "mOverlaps",
    "mDiffFit",
    "fit_table",
    "mBgModel",
    "mBackground",
    "mAdd",
    "mViewer",
)

# scalpel-executor is not on the package index: its "montage" extra installs from a checkout.
INSTALL_HINT = 'python3 -m pip install -e ".[montage]" in a scalpel-executor checkout (or pip install MontagePy astropy)'


class MontageUnavailable(ImportError):
    """MontagePy or astropy cannot be imported; the message says what to install."""


class MontageStepFailed(RuntimeError):
    """A MontagePy call returned an error status; the message names the step, its input and why."""


def require_montage() -> None:
    """Import MontagePy and astropy, or raise :class:`MontageUnavailable` naming what is missing.

    Call it before loading Parsl, so a missing package is one clear line, not a failed task.
    """
    missing = []
    for module in ("MontagePy.main", "astropy.io.fits", "astropy.wcs"):
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module.split(".")[0])
    if missing:
        names = ", ".join(dict.fromkeys(missing))
        raise MontageUnavailable(
            f"the Montage pipeline needs MontagePy and astropy (missing: {names}): {INSTALL_HINT}"
        )


def _montage_function(name: str) -> Callable[..., dict[str, Any]]:
    """``MontagePy.main.<name>``, imported where it is called (in a worker)."""
    try:
        from MontagePy import main as montage
    except ImportError as error:
        raise MontageUnavailable(
            f"the Montage pipeline needs MontagePy and astropy (missing: MontagePy): {INSTALL_HINT}"
        ) from error
    return getattr(montage, name)


def _checked(step: str, subject: str, result: dict[str, Any]) -> dict[str, Any]:
    """Return a MontagePy result dict, or raise :class:`MontageStepFailed` if its status is not 0."""
    if str(result.get("status")) != "0":
        message = result.get("msg", "")
        if isinstance(message, bytes):
            message = message.decode(errors="replace")
        raise MontageStepFailed(f"{step} failed on {subject}: {message or result}")
    return result


# --------------------------------------------------------------------------------------------
# The synthetic sky: pure and deterministic from a seed.
# --------------------------------------------------------------------------------------------


def grid_shape(n_tiles: int) -> tuple[int, int]:
    """Rows and columns of the squarest grid holding ``n_tiles`` tiles (the last row may be short).

    >>> grid_shape(16), grid_shape(17), grid_shape(2)
    ((4, 4), (4, 5), (1, 2))
    """
    if isinstance(n_tiles, bool) or not isinstance(n_tiles, int) or n_tiles < 1:
        raise ValueError(f"n_tiles must be a positive integer, got {n_tiles!r}")
    cols = math.isqrt(n_tiles - 1) + 1  # ceil(sqrt(n))
    rows = -(-n_tiles // cols)
    return rows, cols


def check_tile_count(n_tiles: object) -> int:
    """``n_tiles`` if a mosaic can be made of that many tiles (an integer >= 2), else ValueError.

    The one rule for a tile count: :class:`SkyPlan` applies it, and so does the example's
    ``--tiles``.
    """
    if isinstance(n_tiles, bool) or not isinstance(n_tiles, int) or n_tiles < 2:
        raise ValueError(f"n_tiles must be an integer >= 2 (a mosaic needs overlapping tiles), got {n_tiles!r}")
    return n_tiles


@dataclass(frozen=True)
class SkyPlan:
    """Where the synthetic tiles lie and what they hold, all derived from ``seed``.

    Tiles sit on a row-major grid in one tangent plane around ``center``; each has its own TAN
    projection centred on itself (so ``mProject`` really reprojects), ``overlap`` of its width
    shared with each neighbour. Stars are Gaussian PSFs at fixed sky positions, so they agree
    between tiles; each tile adds Gaussian noise and its own background offset, uniform in
    ``[-offset_range, offset_range]``, on top of ``sky_level``.
    """

    n_tiles: int
    seed: int = 0
    tile_pixels: int = 256
    overlap: float = 0.15
    pixel_scale_arcsec: float = 1.0
    center: tuple[float, float] = (180.0, 30.0)
    sky_level: float = 100.0
    noise_sigma: float = 2.0
    offset_range: float = 50.0
    star_density: float = 0.003  # stars per square pixel
    psf_sigma: float = 1.5  # pixels

    def __post_init__(self) -> None:
        check_tile_count(self.n_tiles)
        if not isinstance(self.tile_pixels, int) or self.tile_pixels < 32:
            raise ValueError(f"tile_pixels must be an integer >= 32, got {self.tile_pixels!r}")
        if not 0.05 <= self.overlap < 0.5:
            raise ValueError(f"overlap must be a fraction in [0.05, 0.5), got {self.overlap!r}")
        for name in ("pixel_scale_arcsec", "noise_sigma", "offset_range", "star_density", "psf_sigma"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        object.__setattr__(self, "center", tuple(float(c) for c in self.center))

    @property
    def grid(self) -> tuple[int, int]:
        """(rows, columns) of the tile grid."""
        return grid_shape(self.n_tiles)

    @property
    def pixel_scale(self) -> float:
        """Degrees per pixel."""
        return self.pixel_scale_arcsec / 3600.0

    @property
    def step_pixels(self) -> float:
        """Distance between neighbouring tile centres, in pixels."""
        return self.tile_pixels * (1.0 - self.overlap)

    def tile_name(self, index: int) -> str:
        """File name of tile ``index`` (the same in the raw, projected and corrected directories)."""
        return f"tile_{index:03d}.fits"

    def background_offsets(self) -> np.ndarray:
        """The injected background offset of every tile, in tile order."""
        rng = np.random.default_rng([self.seed, 2])
        return rng.uniform(-self.offset_range, self.offset_range, self.n_tiles)

    def tile_offset_pixels(self, index: int) -> tuple[float, float]:
        """Centre of tile ``index`` in the field's tangent plane, in pixels from the field centre."""
        rows, cols = self.grid
        row, col = divmod(index, cols)
        return (col - (cols - 1) / 2) * self.step_pixels, (row - (rows - 1) / 2) * self.step_pixels

    def field_wcs(self):
        """The TAN WCS of the whole field (tangent point ``center``, pixel 0,0 at the centre)."""
        from astropy.wcs import WCS

        wcs = WCS(naxis=2)
        wcs.wcs.ctype = ["RA---TAN", "DEC--TAN"]
        wcs.wcs.crval = list(self.center)
        wcs.wcs.crpix = [0.0, 0.0]
        wcs.wcs.cdelt = [-self.pixel_scale, self.pixel_scale]
        return wcs

    def tile_wcs(self, index: int):
        """The TAN WCS of tile ``index``: tangent point at the tile's centre, north up, east left."""
        from astropy.wcs import WCS

        x, y = self.tile_offset_pixels(index)
        (ra, dec), = self.field_wcs().wcs_pix2world([[x, y]], 0)
        wcs = WCS(naxis=2)
        wcs.wcs.ctype = ["RA---TAN", "DEC--TAN"]
        wcs.wcs.crval = [float(ra), float(dec)]
        wcs.wcs.crpix = [(self.tile_pixels + 1) / 2] * 2
        wcs.wcs.cdelt = [-self.pixel_scale, self.pixel_scale]
        wcs.wcs.cunit = ["deg", "deg"]
        wcs.wcs.radesys = "ICRS"
        wcs.wcs.equinox = 2000.0
        return wcs

    def star_catalogue(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ra, dec, flux) of every star in the field, plus a margin; deterministic from ``seed``."""
        rows, cols = self.grid
        margin = 4 * self.psf_sigma + 2
        half_width = ((cols - 1) * self.step_pixels + self.tile_pixels) / 2 + margin
        half_height = ((rows - 1) * self.step_pixels + self.tile_pixels) / 2 + margin
        rng = np.random.default_rng([self.seed, 3])
        count = round(self.star_density * 4 * half_width * half_height)
        x = rng.uniform(-half_width, half_width, count)
        y = rng.uniform(-half_height, half_height, count)
        flux = rng.lognormal(mean=math.log(1500.0), sigma=0.7, size=count)
        ra, dec = self.field_wcs().wcs_pix2world(x, y, 0)
        return ra, dec, flux

    def to_json(self) -> str:
        """The plan as JSON (what :meth:`from_json` reads back)."""
        return json.dumps(dataclasses.asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> SkyPlan:
        """The plan :meth:`to_json` wrote."""
        values = json.loads(text)
        values["center"] = tuple(values["center"])
        return cls(**values)


def render_tile(plan: SkyPlan, index: int):
    """The pixels (float32) and FITS header of tile ``index``: sky + offset + stars + noise.

    The header carries the tile's TAN WCS and, for the record, ``BGOFFSET`` (its injected offset).
    """
    if not 0 <= index < plan.n_tiles:
        raise IndexError(f"tile index must be in [0, {plan.n_tiles}), got {index!r}")
    wcs = plan.tile_wcs(index)
    size = plan.tile_pixels
    offset = float(plan.background_offsets()[index])
    rng = np.random.default_rng([plan.seed, 1, index])
    image = plan.sky_level + offset + rng.normal(0.0, plan.noise_sigma, (size, size))

    ra, dec, flux = plan.star_catalogue()
    x, y = wcs.wcs_world2pix(ra, dec, 0)
    radius = math.ceil(5 * plan.psf_sigma)
    inside = (x > -radius) & (x < size + radius) & (y > -radius) & (y < size + radius)
    norm = 1.0 / (2 * math.pi * plan.psf_sigma**2)
    for xs, ys, fs in zip(x[inside], y[inside], flux[inside]):
        x0, x1 = max(0, int(xs) - radius), min(size, int(xs) + radius + 1)
        y0, y1 = max(0, int(ys) - radius), min(size, int(ys) + radius + 1)
        if x0 >= x1 or y0 >= y1:
            continue
        yy, xx = np.mgrid[y0:y1, x0:x1]
        image[y0:y1, x0:x1] += fs * norm * np.exp(-((xx - xs) ** 2 + (yy - ys) ** 2) / (2 * plan.psf_sigma**2))

    header = wcs.to_header()
    header["BUNIT"] = ("counts", "synthetic")
    header["TILEIDX"] = (index, "index of this tile in the plan")
    header["BGOFFSET"] = (offset, "injected background offset")
    return image.astype(np.float32), header


# --------------------------------------------------------------------------------------------
# Montage's ASCII tables.
# --------------------------------------------------------------------------------------------


def read_montage_table(path: str | os.PathLike) -> list[dict[str, str]]:
    """The rows of a Montage (IPAC-style) ASCII table as dicts of column name to text.

    The first ``|``-delimited line names the columns, and its bars mark where each column's text
    lies (values may hold spaces, such as ``11h 59m 51.57s``; empty ones read as ``""``); the last
    column runs to the end of the line, since long file names overflow it. Type lines and ``\\``
    keyword lines are skipped.
    """
    names: list[str] | None = None
    bars: list[int] = []
    rows = []
    with open(path) as table:
        for line in table:
            line = line.rstrip("\n")
            if line.startswith("\\") or not line.strip():
                continue
            if line.startswith("|"):
                if names is None:
                    bars = [i for i, char in enumerate(line) if char == "|"]
                    names = [line[a + 1:b].strip() for a, b in itertools.pairwise(bars)]
                continue
            if names is None:
                raise ValueError(f"{path}: a data line comes before the column names: {line!r}")
            edges = bars[:-1] + [len(line)]
            rows.append({name: line[a:b].strip() for name, a, b in zip(names, edges, edges[1:])})
    return rows


_FIT_COLUMNS = (
    ("plus", "%9d"), ("minus", "%9d"), ("a", "%16.5e"), ("b", "%16.5e"), ("c", "%16.5e"),
    ("crpix1", "%14.2f"), ("crpix2", "%14.2f"), ("xmin", "%10d"), ("xmax", "%10d"), ("ymin", "%10d"),
    ("ymax", "%10d"), ("xcenter", "%13.2f"), ("ycenter", "%13.2f"), ("npixel", "%13.0f"),
    ("rms", "%16.5e"), ("boxx", "%16.1f"), ("boxy", "%16.1f"), ("boxwidth", "%16.1f"),
    ("boxheight", "%16.1f"), ("boxang", "%16.1f"),
)


def write_fit_table(fits: Sequence[dict[str, Any]], path: str | os.PathLike) -> None:
    """Write ``mDiffFit`` results as the fit table ``mBgModel`` reads (what mDiffFitExec writes).

    Each dict holds ``plus`` and ``minus`` (the two images' ``cntr`` in the projected image table)
    and ``mDiffFit``'s returned fields ``a`` ... ``boxang``.
    """
    # Montage reads a column between the header's bars: each value sits under its name.
    header = "|" + "|".join(name.rjust(len(fmt % 0)) for name, fmt in _FIT_COLUMNS) + "|\n"
    lines = [header]
    for fit in fits:
        missing = [name for name, _ in _FIT_COLUMNS if name not in fit]
        if missing:
            raise ValueError(f"fit for pair {fit.get('plus')}-{fit.get('minus')} lacks {missing}: is it an mDiffFit result?")
        values = [fmt % (int(fit[name]) if fmt.endswith("d") else float(fit[name])) for name, fmt in _FIT_COLUMNS]
        lines.append(" " + " ".join(values) + " \n")
    Path(path).write_text("".join(lines))


# --------------------------------------------------------------------------------------------
# The apps. Arguments that are futures are data dependencies; ``inputs`` lists the others.
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Submitting the pipeline and recording its DAG.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MosaicPaths:
    """Where a run writes: stage directories, Montage's tables, the mosaic and its PNG."""

    out_dir: Path

    @property
    def raw(self) -> Path:
        return self.out_dir / "raw"

    @property
    def projected(self) -> Path:
        return self.out_dir / "projected"

    @property
    def corrected(self) -> Path:
        return self.out_dir / "corrected"

    @property
    def diffs(self) -> Path:
        return self.out_dir / "diffs"

    @property
    def mosaic(self) -> Path:
        return self.out_dir / "mosaic.fits"

    @property
    def png(self) -> Path:
        return self.out_dir / "mosaic.png"

    @property
    def plan(self) -> Path:
        return self.out_dir / "plan.json"

    def table(self, name: str) -> Path:
        """Path of Montage table ``name`` (``images``, ``template``, ``pimages``, ``diffs``, ...)."""
        suffix = ".hdr" if name == "template" else ".tbl"
        return self.out_dir / f"{name}{suffix}"

    def prepare(self) -> None:
        """Create the stage directories, removing FITS files a previous run left in them.

        ``mImgtbl`` lists whole directories, so a stale tile would join this run's mosaic.
        """
        for directory in (self.raw, self.projected, self.corrected, self.diffs):
            directory.mkdir(parents=True, exist_ok=True)
            stale = list(directory.glob("*.fits"))
            if stale:
                logger.info("removing %d FITS files a previous run left in %s", len(stale), directory)
            for path in stale:
                path.unlink()
        for path in (self.mosaic, self.out_dir / "mosaic_area.fits", self.png):
            path.unlink(missing_ok=True)


@dataclass
class PipelineTask:
    """One submitted task: its DAG node name, stage, future, and the tasks it consumes."""

    name: str
    stage: str
    future: Future
    depends: tuple[str, ...]


ProgressCallback = Callable[[str, int, int], None]


@dataclass
class MosaicRun:
    """A submitted mosaic pipeline: its tasks, output paths and progress.

    ``progress(stage, done, total)`` is called from whichever thread completes a task (Parsl's
    callback threads) each time a task of ``stage`` ends, successfully or not.
    """

    plan: SkyPlan
    paths: MosaicPaths
    progress: ProgressCallback | None = None
    tasks: dict[str, PipelineTask] = field(default_factory=dict)
    _names: dict[int, str] = field(default_factory=dict, repr=False)
    _submitted: dict[str, int] = field(default_factory=dict, repr=False)
    _done: dict[str, int] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _submit_stage(self, stage: str, calls: Sequence[tuple[str, Any, tuple, dict]]) -> list[Future]:
        """Submit ``(name, app, args, kwargs)`` calls of one stage, then watch their completion.

        Watching starts after the whole call list is submitted, so a report's ``total`` counts all
        of it (a stage submitted in several parts, like ``mImgtbl``, grows part by part).
        """
        futures = []
        for name, app, args, kwargs in calls:
            consumed = [f for f in list(args) + list(kwargs.get("inputs", ())) if isinstance(f, Future)]
            depends = tuple(dict.fromkeys(self._names[id(f)] for f in consumed if id(f) in self._names))
            future = app(*args, **kwargs)
            self.tasks[name] = PipelineTask(name, stage, future, depends)
            self._names[id(future)] = name
            futures.append(future)
        with self._lock:
            self._submitted[stage] = self._submitted.get(stage, 0) + len(futures)
        for future in futures:
            future.add_done_callback(lambda _f, stage=stage: self._task_ended(stage))
        return futures

    def _task_ended(self, stage: str) -> None:
        with self._lock:
            self._done[stage] = done = self._done.get(stage, 0) + 1
            total = self._submitted[stage]
        if self.progress is not None:
            self.progress(stage, done, total)

    def stage_counts(self) -> dict[str, tuple[int, int]]:
        """``{stage: (ended, submitted)}`` in pipeline order."""
        with self._lock:
            return {stage: (self._done.get(stage, 0), self._submitted[stage])
                    for stage in STAGES if stage in self._submitted}

    def dag(self) -> nx.DiGraph:
        """The pipeline as a DAG: one node per task (attribute ``stage``), an edge per consumed future."""
        graph = nx.DiGraph()
        for task in self.tasks.values():
            graph.add_node(task.name, stage=task.stage)
        for task in self.tasks.values():
            graph.add_edges_from((source, task.name) for source in task.depends)
        return graph

    def root_failure(self) -> BaseException | None:
        """The first task exception that is not a failed dependency, or None."""
        from parsl.dataflow.errors import DependencyError

        for task in self.tasks.values():
            if task.future.done() and task.future.exception() is not None:
                error = task.future.exception()
                if not isinstance(error, DependencyError):
                    return error
        return None

    def result(self, future: Future, timeout: float | None = None) -> Any:
        """``future.result()``, but a failure raises the task exception that caused it."""
        try:
            return future.result(timeout=timeout)
        except Exception:
            cause = self.root_failure()
            if cause is not None:
                raise cause from None
            raise

    def wait(self, timeout: float | None = None) -> MosaicPaths:
        """Block until the PNG is written; on failure raise the task exception that caused it."""
        self.result(self.tasks["mViewer"].future, timeout)
        return self.paths


def mosaic_pipeline(plan: SkyPlan, out_dir: str | os.PathLike,
                    progress: ProgressCallback | None = None, projector: str = "mProject") -> MosaicRun:
    """Submit the whole Montage pipeline for ``plan`` to the loaded Parsl DFK; write under ``out_dir``.

    Parameters
    ----------
    plan : SkyPlan
        The synthetic sky to mosaic.
    out_dir : path
        Output directory. Its ``raw``, ``projected``, ``corrected`` and ``diffs`` subdirectories
        are this pipeline's: FITS files left there by a previous run are removed.
    progress : callable, optional
        ``progress(stage, done, total)``, called as tasks end (see :class:`MosaicRun`).
    projector : "mProject" or "mProjectPP"
        The reprojection of the ``mProject`` stage: Montage's general ``mProject`` (default) or its
        TAN-to-TAN fast path ``mProjectPP``.

    Returns
    -------
    MosaicRun
        Every task submitted; ``run.wait()`` blocks until ``mosaic.png`` is written.

    Notes
    -----
    Everything is chained through futures except one wait: this function blocks on the
    ``mOverlaps`` future (``.result()``, a single wait, not a join_app), because the number of
    ``mDiffFit`` tasks is the number of overlapping pairs it finds. By then every ``mProject`` has
    finished anyway, since ``mOverlaps`` needs all of them, so no parallelism is lost. Tasks:
    N ``make_tile`` + N ``mProject`` + P ``mDiffFit`` + N ``mBackground`` + 9 single-task steps.
    """
    if projector not in ("mProject", "mProjectPP"):
        raise ValueError(f'projector must be "mProject" or "mProjectPP", got {projector!r}')
    paths = MosaicPaths(Path(out_dir).resolve())
    paths.out_dir.mkdir(parents=True, exist_ok=True)
    paths.prepare()
    paths.plan.write_text(plan.to_json())
    run = MosaicRun(plan, paths, progress)

    def table(name: str) -> str:
        return str(paths.table(name))

    names = [plan.tile_name(i) for i in range(plan.n_tiles)]

    tiles = run._submit_stage("make_tile", [
        (f"make_tile[{i}]", make_tile, (plan, i, str(paths.raw / names[i])), {}) for i in range(plan.n_tiles)])
    raw_table, = run._submit_stage("mImgtbl", [
        ("mImgtbl[raw]", image_table, (str(paths.raw), table("images")), {"inputs": tiles})])
    template, = run._submit_stage("mMakeHdr", [
        ("mMakeHdr", make_header, (raw_table, table("template")), {})])
    projected = run._submit_stage("mProject", [
        (f"mProject[{i}]", project, (tiles[i], template, str(paths.projected / names[i]), projector), {})
        for i in range(plan.n_tiles)])
    projected_table, = run._submit_stage("mImgtbl", [
        ("mImgtbl[projected]", image_table, (str(paths.projected), table("pimages")), {"inputs": projected})])
    overlaps, = run._submit_stage("mOverlaps", [
        ("mOverlaps", find_overlaps, (projected_table, table("diffs")), {})])

    pairs = run.result(overlaps)  # the single wait: the fan-out width is the number of pairs
    logger.info("%d tiles overlap in %d pairs", plan.n_tiles, len(pairs))
    tile_of = {name: i for i, name in enumerate(names)}

    def projected_tile(path: str) -> Future:
        return projected[tile_of[os.path.basename(path)]]

    fits = run._submit_stage("mDiffFit", [
        (f"mDiffFit[{pair['cntr1']},{pair['cntr2']}]", diff_fit,
         (projected_tile(pair["plus"]), projected_tile(pair["minus"]), template,
          str(paths.diffs / pair["diff"]), int(pair["cntr1"]), int(pair["cntr2"])),
         {"inputs": [overlaps]})
        for pair in pairs])
    fit_summary, = run._submit_stage("fit_table", [
        ("fit_table", fit_table, (table("fits"),), {"inputs": fits})])
    corrections, = run._submit_stage("mBgModel", [
        ("mBgModel", background_model, (projected_table, table("fits"), table("corrections")),
         {"inputs": [fit_summary]})])
    corrected = run._submit_stage("mBackground", [
        (f"mBackground[{i}]", subtract_background,
         (projected[i], projected_table, corrections, str(paths.corrected / names[i])), {})
        for i in range(plan.n_tiles)])
    corrected_table, = run._submit_stage("mImgtbl", [
        ("mImgtbl[corrected]", image_table, (str(paths.corrected), table("cimages")), {"inputs": corrected})])
    mosaic, = run._submit_stage("mAdd", [
        ("mAdd", coadd, (corrected_table, template, str(paths.corrected), str(paths.mosaic)),
         {"inputs": corrected})])
    run._submit_stage("mViewer", [("mViewer", render_png, (mosaic, str(paths.png)), {})])
    return run


# --------------------------------------------------------------------------------------------
# Looking at the DAG.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DagSummary:
    """Size and shape of a pipeline DAG."""

    nodes_per_stage: dict[str, int]
    nodes: int
    edges: int
    critical_path: tuple[str, ...]  # the task names along a longest path

    @property
    def critical_path_tasks(self) -> int:
        """Tasks on the longest dependency chain (no schedule can be shorter than these in a row)."""
        return len(self.critical_path)


def dag_summary(graph: nx.DiGraph) -> DagSummary:
    """Nodes per stage (pipeline order), edge count and a longest dependency chain of ``graph``."""
    if not nx.is_directed_acyclic_graph(graph):
        raise ValueError("the pipeline graph has a cycle; every edge must follow a consumed future")
    counts: dict[str, int] = {}
    for _, stage in graph.nodes(data="stage"):
        counts[stage] = counts.get(stage, 0) + 1
    ordered = {stage: counts[stage] for stage in STAGES if stage in counts}
    ordered.update({stage: n for stage, n in counts.items() if stage not in ordered})
    return DagSummary(ordered, graph.number_of_nodes(), graph.number_of_edges(),
                      tuple(nx.dag_longest_path(graph)))


def draw_dag(graph: nx.DiGraph, path: str | os.PathLike) -> Path:
    """Draw ``graph`` layer by layer (topological generations), coloured by stage, into a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    graph = graph.copy()  # the layer numbers below are for drawing only
    for layer, nodes in enumerate(nx.topological_generations(graph)):
        for node in nodes:
            graph.nodes[node]["layer"] = layer
    position = nx.multipartite_layout(graph, subset_key="layer")
    stages = [stage for stage in STAGES if any(s == stage for _, s in graph.nodes(data="stage"))]
    colours = plt.get_cmap("tab20")
    figure, axes = plt.subplots(figsize=(12, 7))
    for k, stage in enumerate(stages):
        nodes = [n for n, s in graph.nodes(data="stage") if s == stage]
        nx.draw_networkx_nodes(graph, position, nodelist=nodes, node_size=40, node_color=[colours(k)],
                               label=f"{stage} ({len(nodes)})", ax=axes)
    nx.draw_networkx_edges(graph, position, width=0.3, alpha=0.4, arrows=False, ax=axes)
    axes.legend(loc="upper left", fontsize=8, frameon=False)
    axes.set_title(f"Montage pipeline DAG: {graph.number_of_nodes()} tasks, {graph.number_of_edges()} edges")
    axes.set_axis_off()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return Path(path)


# --------------------------------------------------------------------------------------------
# Did it work? The background check.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BackgroundCheck:
    """Per-tile sky levels before and after background correction, and the mosaic's state.

    ``sky_before[i]`` / ``sky_after[i]`` are the median of projected / corrected tile ``i``;
    ranges are max − min over tiles. ``offset_error`` is the largest difference between the
    correction applied to a tile (``sky_before − sky_after``, mean removed) and its injected offset
    (mean removed): Montage can only level tiles relative to each other.
    """

    injected_offsets: tuple[float, ...]
    sky_before: tuple[float, ...]
    sky_after: tuple[float, ...]
    injected_range: float
    range_before: float
    range_after: float
    offset_error: float
    mosaic_shape: tuple[int, int]
    mosaic_finite_fraction: float
    png_bytes: int
    tolerance: float

    @property
    def residual_fraction(self) -> float:
        """``range_after / injected_range``: what is left of the injected spread."""
        return self.range_after / self.injected_range

    @property
    def passed(self) -> bool:
        """Offsets removed to within ``tolerance`` of their spread; mosaic and PNG hold data."""
        return (self.residual_fraction <= self.tolerance and self.mosaic_finite_fraction > 0.5
                and self.png_bytes > 0)

    def as_dict(self) -> dict[str, Any]:
        """The figures as plain JSON-ready values, with ``residual_fraction`` and ``passed``."""
        values = dataclasses.asdict(self)
        values.update(residual_fraction=self.residual_fraction, passed=self.passed)
        return values


def _median_sky(path: Path) -> float:
    from astropy.io import fits

    data = fits.getdata(path)
    finite = data[np.isfinite(data)]
    if finite.size == 0:
        raise MontageStepFailed(f"{path} holds no finite pixels; did its step fail?")
    return float(np.median(finite))


def check_background(out_dir: str | os.PathLike, tolerance: float = 0.05) -> BackgroundCheck:
    """Measure, from a finished run's files, whether the injected background offsets were removed.

    Reads ``plan.json``, every projected and corrected tile, the mosaic and the PNG under
    ``out_dir``. ``tolerance`` is the largest acceptable ``range_after / injected_range``.
    """
    require_montage()
    from astropy.io import fits

    paths = MosaicPaths(Path(out_dir))
    if not paths.plan.exists():
        raise FileNotFoundError(f"{paths.plan} not found: is {out_dir} the output directory of a mosaic run?")
    plan = SkyPlan.from_json(paths.plan.read_text())
    names = [plan.tile_name(i) for i in range(plan.n_tiles)]
    before = np.array([_median_sky(paths.projected / name) for name in names])
    after = np.array([_median_sky(paths.corrected / name) for name in names])
    injected = plan.background_offsets()
    applied = before - after
    offset_error = float(np.max(np.abs((applied - applied.mean()) - (injected - injected.mean()))))
    mosaic = fits.getdata(paths.mosaic)
    return BackgroundCheck(
        injected_offsets=tuple(float(v) for v in injected),
        sky_before=tuple(float(v) for v in before),
        sky_after=tuple(float(v) for v in after),
        injected_range=float(np.ptp(injected)),
        range_before=float(np.ptp(before)),
        range_after=float(np.ptp(after)),
        offset_error=offset_error,
        mosaic_shape=tuple(int(n) for n in mosaic.shape),
        mosaic_finite_fraction=float(np.isfinite(mosaic).mean()),
        png_bytes=paths.png.stat().st_size if paths.png.exists() else 0,
        tolerance=tolerance,
    )
