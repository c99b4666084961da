"""Capability checks: which measurements this kernel offers the probe, found once per worker.

:class:`~scalpel_executor.host.probe.worker_side.Probe` asks before it starts a sampler:
without a writable ``/proc/PID/clear_refs`` and an ``smaps`` with ``Referenced:`` fields there is
nothing to sample, and every report says why in ``footprint_source``. The checks only look at
files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from scalpel_executor.host.probe.counters import llc_counter_problem


@dataclass(frozen=True)
class Capabilities:
    """What the kernel offers this probe, found once per worker.

    ``referenced_pages`` is None when footprints can be measured, else the reason they cannot;
    ``memory`` likewise for RSS/USS; ``llc_counters`` is None when LLC references and misses can
    be counted, else why not.
    """

    referenced_pages: str | None
    memory: str | None
    llc_counters: str | None


def detect_capabilities(pid: int | None = None, proc_root: str = "/proc",
                        event_source_root: str = "/sys/bus/event_source/devices") -> Capabilities:
    """Find which measurements the kernel offers for process ``pid``.

    Parameters
    ----------
    pid : int, optional
        The process to measure; default this one.
    proc_root : str
        Where procfs is mounted; tests pass a fake tree to simulate missing features.
    event_source_root : str
        The sysfs folder of perf event sources; hardware counters need a ``cpu`` source there.

    Returns
    -------
    Capabilities
        Each field None when available, else a reason such as
        ``"no /proc/42/clear_refs (kernel without CONFIG_PROC_PAGE_MONITOR?)"``.

    Notes
    -----
    Only looks at files: nothing is cleared or counted. O(1).
    """
    pid = os.getpid() if pid is None else pid
    base = os.path.join(proc_root, str(pid))
    referenced = None
    clear_refs = os.path.join(base, "clear_refs")
    smaps = os.path.join(base, "smaps")
    if not os.path.exists(clear_refs):
        referenced = f"no {clear_refs} (kernel without CONFIG_PROC_PAGE_MONITOR?)"
    elif not os.access(clear_refs, os.W_OK):
        referenced = f"{clear_refs} is not writable by uid {os.getuid()}"
    memory = _smaps_problem(smaps)
    referenced = referenced or memory
    return Capabilities(referenced, memory, llc_counter_problem(event_source_root))


def _smaps_problem(path: str) -> str | None:
    try:
        with open(path, "rb") as file:
            head = file.read(4096)
    except OSError as error:
        return f"cannot read {path}: {error.strerror or error}"
    if b"\nRss:" not in head:
        return f"{path} has no Rss: fields (not a smaps file?)"
    if b"\nReferenced:" not in head:
        return f"{path} has no Referenced: fields"
    return None
