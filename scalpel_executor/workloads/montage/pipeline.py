"""Submitting the pipeline: output paths, one task per step chained by futures, and the DAG as submitted."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

from scalpel_executor.workloads.montage.apps import (
    background_model,
    coadd,
    diff_fit,
    find_overlaps,
    fit_table,
    image_table,
    make_header,
    make_tile,
    project,
    render_png,
    subtract_background,
)
from scalpel_executor.workloads.montage.sky import SkyPlan

logger = logging.getLogger(__name__)


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
