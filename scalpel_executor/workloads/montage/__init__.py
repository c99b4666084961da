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

Modules:

- :mod:`~scalpel_executor.workloads.montage.sky` — :class:`SkyPlan`, :func:`render_tile`
- :mod:`~scalpel_executor.workloads.montage.toolkit` — :func:`require_montage`, the errors, Montage's tables
- :mod:`~scalpel_executor.workloads.montage.apps` — the Parsl apps, one per step
- :mod:`~scalpel_executor.workloads.montage.pipeline` — :func:`mosaic_pipeline`, :class:`MosaicRun`
- :mod:`~scalpel_executor.workloads.montage.checks` — :func:`dag_summary`, :func:`draw_dag`, :func:`check_background`
"""

from scalpel_executor.workloads.montage import apps
from scalpel_executor.workloads.montage.checks import BackgroundCheck, DagSummary, check_background, dag_summary, draw_dag
from scalpel_executor.workloads.montage.pipeline import STAGES, MosaicPaths, MosaicRun, PipelineTask, mosaic_pipeline
from scalpel_executor.workloads.montage.sky import SkyPlan, check_tile_count, grid_shape, render_tile
from scalpel_executor.workloads.montage.toolkit import (
    INSTALL_HINT,
    MontageStepFailed,
    MontageUnavailable,
    read_montage_table,
    require_montage,
    write_fit_table,
)

# A task's profile key names its function by module and qualified name: the apps keep the names
# they had before this package was split, so stored profiles still match.
for _app in (apps.make_tile, apps.image_table, apps.make_header, apps.project, apps.find_overlaps, apps.diff_fit,
             apps.fit_table, apps.background_model, apps.subtract_background, apps.coadd, apps.render_png):
    _app.func.__module__ = __name__
del _app

__all__ = [
    "INSTALL_HINT",
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
    "check_tile_count",
    "dag_summary",
    "draw_dag",
    "grid_shape",
    "mosaic_pipeline",
    "read_montage_table",
    "render_tile",
    "require_montage",
    "write_fit_table",
]
