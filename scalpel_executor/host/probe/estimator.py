"""The estimator: one task's sampling windows in, its :class:`ProbeReport` out.

Runs in the worker. The sampler process (:mod:`~scalpel_executor.host.probe.sampler`) sends a
``Window`` per closed window; when the task ends, the worker's probe hands the windows it drained
to :func:`summarize` and adds the wall time, CPU and LLC counts it took itself.

**Why the time-weighted 75th percentile** over windows: weighting by length lets a long steady
window outvote a short one still holding start-up, and keeps a phase that fills a quarter of the
run visible. The maximum would report a one-off initialisation (a 64 MiB array filled once, then
8 MiB reused: max 29 MiB, this estimator 8.3 MiB); it is reported too, as ``footprint_max``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from scalpel_executor.host.probe.sampler import FIRST_WINDOW, SETTLE, Window

PERCENTILE = 0.75  # time-weighted percentile of the window footprints that is reported
REFERENCED_PAGES = "referenced-pages"


def weighted_percentile(values: Sequence[float], weights: Sequence[float], q: float = PERCENTILE) -> float:
    """The smallest value whose share of the total weight at or below it is at least ``q``.

    Parameters
    ----------
    values, weights : sequences of float of the same length, weights positive
    q : float in (0, 1]

    Returns
    -------
    float

    Example
    -------
    >>> weighted_percentile([72.0, 8.0, 8.0], [0.02, 0.16, 1.0], 0.75)
    8.0
    >>> weighted_percentile([4.0, 24.0], [0.5, 0.5], 0.75)
    24.0

    Notes
    -----
    O(n log n).
    """
    if not values or len(values) != len(weights):
        raise ValueError(f"need as many weights as values (at least one), got {len(values)} values "
                         f"and {len(weights)} weights")
    if not 0 < q <= 1:
        raise ValueError(f"the percentile must be in (0, 1], got {q!r}")
    pairs = sorted(zip(values, weights))
    threshold = q * sum(weights) * (1 - 1e-12)
    running = 0.0
    for value, weight in pairs:
        running += weight
        if running >= threshold:
            return value
    return pairs[-1][0]



@dataclass
class ProbeReport:
    """What the probe measured over one task. Numbers and strings only (see :meth:`to_dict`)."""

    footprint: float | None  # bytes: time-weighted 75th percentile of the windows' referenced data
    footprint_source: str  # "referenced-pages" or "unavailable: <reason>"
    windows: int  # sampling windows completed during the task
    footprint_max: float | None = None  # bytes: the largest window
    peak_rss: int | None = None  # bytes, worker plus descendants, highest at a window's close
    peak_uss: int | None = None
    wall: float = 0.0  # seconds
    cpu: float = 0.0  # seconds of CPU: this process and its reaped children
    probe_cpu: float = 0.0  # seconds of CPU the sampler spent on this task's windows
    llc_references: int | None = None
    llc_misses: int | None = None
    processes: int = 1  # most processes measured in one window (worker plus descendants)

    def to_dict(self) -> dict:
        return asdict(self)



#: How ``footprint_source`` begins for a task that ended before its first window closed: too short
#: to hold the cache long enough to matter, which the estimator records as a footprint of 0 while
#: the task's key has measured none (:meth:`~scalpel_executor.learning.estimates.Estimator.observe`).
ENDED_BEFORE_FIRST_WINDOW = "unavailable: the task ended after"


def summarize(windows: Sequence[Window], wall: float, percentile: float = PERCENTILE,
              first_close: float = SETTLE + FIRST_WINDOW) -> ProbeReport:
    """Turn one task's windows into its report (footprint, peaks, sampling cost).

    Parameters
    ----------
    windows : sequence of Window
        The task's completed windows, in order.
    wall : float
        The task's wall time in seconds (for the reason when there is no window).
    percentile : float
    first_close : float
        Seconds from the task's start to the first window's close, named in the reason when the
        task ended before it.

    Returns
    -------
    ProbeReport
        ``footprint`` is the time-weighted ``percentile`` of the windows' referenced data;
        ``footprint_max`` the largest window.
        ``wall``, ``cpu`` and the LLC fields are left for the caller.

    Example
    -------
    >>> from scalpel_executor.host.probe.sampler import MemorySample
    >>> start_up, steady = MemorySample(30 << 20, 90 << 20, 80 << 20), MemorySample(8 << 20, 90 << 20, 80 << 20)
    >>> windows = [Window(1, 0.08, start_up, 1, 0.004), Window(1, 0.96, steady, 1, 0.004)]
    >>> report = summarize(windows, wall=0.5)
    >>> report.footprint / 2**20, report.footprint_max / 2**20, report.peak_rss / 2**20
    (8.0, 30.0, 90.0)

    Notes
    -----
    O(n log n) in the windows.
    """
    report = ProbeReport(None, "", len(windows), wall=wall, probe_cpu=sum(w.cost for w in windows))
    if not windows:
        # a task that outlived the first window's close (the sampler, on a busy core, had not yet
        # delivered it) is not said to have ended before it: "after 126.7 ms, before ... 100 ms"
        close = f"{first_close * 1e3:.0f} ms"
        report.footprint_source = f"{ENDED_BEFORE_FIRST_WINDOW} {wall * 1e3:.1f} ms, " + (
            f"before its first window closed at {close}" if wall < first_close
            else f"before its first window, due to close at {close}, reached the worker")
        return report
    data = [w.memory.referenced_data for w in windows]
    report.footprint = float(weighted_percentile(data, [w.length for w in windows], percentile))
    report.footprint_max = float(max(data))
    report.footprint_source = REFERENCED_PAGES
    report.peak_rss = max(w.memory.rss for w in windows)
    report.peak_uss = max(w.memory.uss for w in windows)
    report.processes = max(w.processes for w in windows)
    return report
