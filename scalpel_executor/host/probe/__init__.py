"""The measurement probe: a task's working set, memory peaks and run time, from its real run.

Scalpel groups tasks by memory footprint. Without hardware counters (virtual machines, locked-down
``perf_event_paranoid``) the footprint comes from the kernel's page-referenced bits: writing ``1`` to
``/proc/PID/clear_refs`` clears them, and after a window of run time ``/proc/PID/smaps`` reports,
per mapping, how many bytes were touched since (``Referenced:``). That is the task's working set
over the window, sampled while the task runs, with no pre-run.

Moving parts (one probe and one sampler process per worker; the sampler lives as long as the probe)::

    worker (Probe)                                   sampler: python -I -S sampler.py --sampler
    ──────────────                                   (child of the worker: same CPUs, same
                                                      process group, exits at EOF)
    Probe() ── spawn, socket pair (SOCK_SEQPACKET) ──>  <── "ready"
    start() ── ("start", generation) ──────────────>  select(socket, 20 ms): the task settles
    fn(*args, **kwargs) runs                          clear_refs(worker + descendants)   window 0 opens
                                                      select(socket, window_k): 80 ms, then 0.96 s,
                                                        then 1 s each
                                                      read smaps of worker + descendants,
                                                      clear_refs                         window k+1 opens
                                         <──────────  ("window", generation, length, referenced
                                                        data, RSS, USS, processes, CPU it cost)
    stop() ── ("end", generation) ─────────────────>  stops waiting; a sample in flight is sent late
       └─ drains the windows already sent (never waits) and drops stale ones by generation
       └─> ProbeReport: footprint = time-weighted 75th percentile of the windows

``start`` and ``stop`` cost a send and a non-blocking drain; a task that ends before its first
window closes (100 ms) reports ``footprint=None`` with the reason, and so does the window in
flight when a task ends: it is never waited for. LLC counters (where a ``cpu`` PMU exists) are
opened in the worker with ``inherit`` and read by ``start``/``stop`` themselves.

The modules, left side of the drawing to right:

* :mod:`~scalpel_executor.host.probe.worker_side` — :class:`Probe`, the worker's side.
* :mod:`~scalpel_executor.host.probe.capabilities` — what the kernel offers, checked once.
* :mod:`~scalpel_executor.host.probe.counters` — LLC references and misses through ``perf_event_open``.
* :mod:`~scalpel_executor.host.probe.estimator` — windows to a :class:`ProbeReport`.
* :mod:`~scalpel_executor.host.probe.sampler` — the sampler process and all it runs: smaps parsing,
  the descendant scan, the window schedule and the wire. It is started by file path in isolated
  mode, so it imports only the standard library; the measurements behind the sampling design
  (a process rather than a thread, what counts, the window schedule) are in its docstring.

Everything a probe returns is numbers and strings; every failure becomes a ``None`` and a reason,
never an exception in the task.
"""

from scalpel_executor.host.probe.capabilities import Capabilities, detect_capabilities
from scalpel_executor.host.probe.counters import LLCCounters
from scalpel_executor.host.probe.estimator import (
    PERCENTILE,
    REFERENCED_PAGES,
    ProbeReport,
    summarize,
    weighted_percentile,
)
from scalpel_executor.host.probe.worker_side import SAMPLER_START_TIMEOUT, Probe
from scalpel_executor.host.probe.sampler import (
    FIRST_WINDOW,
    MAX_WINDOW,
    SETTLE,
    WINDOW_GROWTH,
    MemorySample,
    Sampler,
    Window,
    descendants,
    smaps_totals,
    window_schedule,
)

__all__ = [
    "FIRST_WINDOW", "MAX_WINDOW", "PERCENTILE", "REFERENCED_PAGES", "SAMPLER_START_TIMEOUT", "SETTLE",
    "WINDOW_GROWTH", "Capabilities", "LLCCounters", "MemorySample", "Probe", "ProbeReport", "Sampler", "Window",
    "descendants", "detect_capabilities", "smaps_totals", "summarize", "weighted_percentile", "window_schedule",
]
