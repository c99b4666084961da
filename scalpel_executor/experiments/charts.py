"""The experiments' charts, written as PNG files: nothing here measures or decides anything."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display, and no GUI toolkit to load

import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
from matplotlib import cm, colors  # noqa: E402

from scalpel_executor.core.units import format_size  # noqa: E402
from scalpel_executor.experiments.plans import PEERS, REFERENCE  # noqa: E402


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


def gantt(results: Sequence, llc: int, domains: list[list[int]], path: Path) -> Path:
    """Draw the median run of each executor (the demo's ``RunResult`` objects): tasks per core over
    time, coloured by footprint, and below each the summed running footprint per domain against the LLC."""
    chosen: dict = {}
    for name in dict.fromkeys(r.executor for r in results):
        runs = sorted((r for r in results if r.executor == name), key=lambda r: r.makespan)
        chosen[name] = runs[len(runs) // 2]
    return draw_gantt({f"{name}: makespan {run.makespan:.1f} s (median run)": run.tasks for name, run in chosen.items()},
                      llc, domains, path, clock="seconds since the batch was submitted")


#: The colour scale's least span, as a ratio of its largest footprint to its smallest: a batch of
#: tasks within 1 MiB of each other is one colour, not the whole palette.
COLOUR_SPAN = 16.0
#: Points a character of a bar's label takes at its font size (7 pt), to tell whether it fits its bar.
LABEL_CHARACTER = 4.6
FIGURE_WIDTH = 11.0  # inches
DPI = 110


def footprint_scale(footprints: Sequence[float], llc: float | None) -> colors.LogNorm:
    """The colour scale of footprints in MiB: from 1/64 of the LLC to twice it when the LLC is known
    (so a colour says how a task compares with the cache), else the footprints' own range, widened
    to at least :data:`COLOUR_SPAN` around its middle.

    >>> scale = footprint_scale([9 * 2**20, 10 * 2**20], None)
    >>> round(scale.vmax / scale.vmin, 1), scale.vmin < 9 < 10 < scale.vmax
    (16.0, True)
    """
    if llc:
        return colors.LogNorm(vmin=llc / 2**20 / 64, vmax=llc / 2**20 * 2, clip=True)
    mib = [max(f / 2**20, 1 / 1024) for f in footprints] or [1.0]
    low, high = min(mib), max(mib)
    if high / low < COLOUR_SPAN:
        middle, half = (low * high) ** 0.5, COLOUR_SPAN ** 0.5
        low, high = middle / half, middle * half
    return colors.LogNorm(vmin=low, vmax=high, clip=True)


def bar_label(row: dict, seconds: float, horizon: float) -> str | None:
    """What a bar of ``seconds`` on an axis of ``horizon`` seconds says: its task's label (``label``,
    else the demo's ``case``), cut to the characters that fit inside the bar; None when fewer than
    three would (labels never spill over a neighbour)."""
    text = str(row.get("label") or row.get("case") or row.get("kernel") or "")
    room = int(seconds / horizon * FIGURE_WIDTH * 0.82 * 72 / LABEL_CHARACTER)  # the axes take ~82% of the width
    if not text or room < 3:
        return None
    return text if len(text) <= room else text[:room - 1] + "…"


def draw_gantt(runs: dict[str, Sequence[dict]], llc: float | None, domains: list[list[int]], path: Path | str, *,
               clock: str) -> Path | str:
    """Draw one panel per run, titled by its key: its tasks (rows of ``cpu``, ``start``, ``end``,
    ``footprint`` bytes and a ``label`` or ``case`` naming it; a task of several cores also lists
    them in ``cpus``, and is drawn on each) per core over time, each bar named where its name fits
    and coloured by footprint in MiB (:func:`footprint_scale`), and below it the summed running
    footprint per domain (CPU lists; a task's counted once) against ``llc`` (None: unknown, no
    line). ``clock`` names the time axis."""
    cpus = sorted({cpu for d in domains for cpu in d}
                  | {cpu for rows in runs.values() for row in rows for cpu in row.get("cpus") or [row["cpu"]]})
    norm = footprint_scale([row["footprint"] for rows in runs.values() for row in rows], llc)
    cmap = matplotlib.colormaps["viridis"]
    horizon = max(row["end"] for rows in runs.values() for row in rows) * 1.02
    figure, axes = plt.subplots(2 * len(runs), 1, figsize=(FIGURE_WIDTH, 2.4 * len(runs) * 2), layout="constrained",
                                gridspec_kw={"height_ratios": [max(len(cpus), 1), 1.4] * len(runs)},
                                squeeze=False)
    for index, (title, rows) in enumerate(runs.items()):
        lanes, load = axes[2 * index][0], axes[2 * index + 1][0]
        for row in rows:
            shade = norm(max(row["footprint"] / 2**20, 1 / 1024))
            label = bar_label(row, row["end"] - row["start"], horizon)
            for lane in (cpus.index(cpu) for cpu in row.get("cpus") or [row["cpu"]]):
                lanes.barh(lane, row["end"] - row["start"], left=row["start"], height=0.8,
                           color=cmap(shade), edgecolor="black", linewidth=0.5)
                if label is not None:
                    lanes.text(row["start"] + (row["end"] - row["start"]) / 2, lane, label, ha="center",
                               va="center", fontsize=7, clip_on=True, color="white" if shade < 0.6 else "black")
        lanes.set_yticks(range(len(cpus)), [f"CPU {c}" for c in cpus])
        lanes.set_xlim(0, horizon)
        lanes.invert_yaxis()
        lanes.set_title(title, loc="left", fontsize=10)
        for domain_index, domain in enumerate(domains):
            events = sorted({0.0, horizon} | {row[k] for row in rows for k in ("start", "end")})
            level = [sum(row["footprint"] for row in rows if row["cpu"] in domain and row["start"] <= t < row["end"])
                     for t in events]
            load.step(events, [v / 2**20 for v in level], where="post", label=f"domain {domain_index} running footprint")
        if llc:
            load.axhline(llc / 2**20, color="red", linestyle="--", linewidth=1, label=f"LLC {format_size(llc)}")
        load.set_xlim(0, horizon)
        load.set_ylabel("MiB", fontsize=8)
        load.legend(fontsize=7, loc="upper right")
        load.set_xlabel(clock, fontsize=8)
    figure.colorbar(cm.ScalarMappable(norm=norm, cmap=cmap), ax=[row[0] for row in axes], label="task footprint (MiB)",
                    fraction=0.025, pad=0.01)
    figure.suptitle("Which task ran on which core when (bars: task and app, colour: footprint); below each: the "
                    "domain's summed running footprint against its LLC", fontsize=10)
    figure.savefig(path, dpi=DPI)
    plt.close(figure)
    return path


def bench_chart(rows: Sequence[dict], path: Path, reference: str = REFERENCE) -> Path:
    """Ratio to the reference (with its 95% interval) per mix and peer, > 1 is faster: work mixes
    on a linear axis, the no-op mixes (where the spread is tenfold) on a log axis beside them."""
    mixes = list(dict.fromkeys(row["mix"] for row in rows))
    panels = [[m for m in mixes if not m.startswith("noop")], [m for m in mixes if m.startswith("noop")]]
    panels = [panel for panel in panels if panel]
    peers = [p for p in PEERS if any(row["peer"] == p for row in rows)]
    figure, axes = plt.subplots(1, len(panels), figsize=(4 + 1.5 * len(mixes), 5), layout="constrained",
                                squeeze=False, gridspec_kw={"width_ratios": [len(p) for p in panels]})
    width = 0.8 / max(len(peers), 1)
    cmap = matplotlib.colormaps["tab10"]
    for axis, panel in zip(axes[0], panels):
        for k, peer in enumerate(peers):
            xs, ys, lows, highs = [], [], [], []
            for i, mix in enumerate(panel):
                row = next((r for r in rows if r["mix"] == mix and r["peer"] == peer and "vs_reference" in r), None)
                if row:
                    xs.append(i - 0.4 + width * (k + 0.5))
                    ys.append(row["vs_reference"])
                    lows.append(max(row["vs_reference"] - row["ci_low"], 0.0))
                    highs.append(max(row["ci_high"] - row["vs_reference"], 0.0))
            axis.bar(xs, ys, width, yerr=[lows, highs], capsize=2, label=peer, color=cmap(k % 10),
                     edgecolor="black", linewidth=0.4)
        axis.axhline(1.0, color="black", linewidth=0.8)
        axis.set_xticks(range(len(panel)), panel, rotation=20)
        if panel[0].startswith("noop"):
            axis.set_yscale("log")
            axis.set_title("per-task overhead (log scale)", fontsize=10)
        else:
            values = [r["ci_low"] for r in rows if r["mix"] in panel and "ci_low" in r] + \
                     [r["ci_high"] for r in rows if r["mix"] in panel and "ci_high" in r]
            axis.set_ylim(max(0.0, min(values) - 0.05), max(values) + 0.05)
            axis.set_title(f"work mixes: makespan ratio to {reference}", fontsize=10)
            axis.set_ylabel(f"median makespan of {reference} / peer's (> 1: faster)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, fontsize=8, ncol=min(len(peers), 6), loc="outside lower center")
    figure.suptitle("bars: paired bootstrap 95% interval over repetitions", fontsize=9)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
