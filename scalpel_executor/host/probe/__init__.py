"""The measurement probe: a task's working set, memory peaks and run time, from its real run.

See :mod:`scalpel_executor.host.probe.sampler` for how it works.
"""

from scalpel_executor.host.probe.sampler import (
    FIRST_WINDOW,
    MAX_WINDOW,
    PERCENTILE,
    REFERENCED_PAGES,
    SAMPLER_START_TIMEOUT,
    SETTLE,
    WINDOW_GROWTH,
    Capabilities,
    LLCCounters,
    MemorySample,
    Probe,
    ProbeReport,
    Sampler,
    Window,
    descendants,
    detect_capabilities,
    smaps_totals,
    summarize,
    weighted_percentile,
    window_schedule,
)

__all__ = [
    "FIRST_WINDOW", "MAX_WINDOW", "PERCENTILE", "REFERENCED_PAGES", "SAMPLER_START_TIMEOUT", "SETTLE",
    "WINDOW_GROWTH", "Capabilities", "LLCCounters", "MemorySample", "Probe", "ProbeReport", "Sampler", "Window",
    "descendants", "detect_capabilities", "smaps_totals", "summarize", "weighted_percentile", "window_schedule",
]
