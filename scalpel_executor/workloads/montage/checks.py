"""Looking at a run: the DAG's size and shape, a drawing of it, and whether the offsets were removed."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from scalpel_executor.workloads.montage.pipeline import STAGES, MosaicPaths
from scalpel_executor.workloads.montage.sky import SkyPlan
from scalpel_executor.workloads.montage.toolkit import MontageStepFailed, require_montage


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
