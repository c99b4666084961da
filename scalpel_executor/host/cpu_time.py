"""CPU time: the whole host's, from ``/proc/stat``, and this process tree's, from ``os.times``.

The host contention fit learns only from runs during which other work left the cores to the
executor (:func:`scalpel_executor.learning.host_model.busy_reason`). A load average cannot tell
whose work made it: a workflow whose tasks each run ten threads drove it to 13 on 2 cores, and
every run of it was judged busy and taught nothing. So the executor samples, at start and at
shutdown, the CPU seconds the host spent working and those of its own process tree, and what is
left is other work::

    other work per core = (Δ host busy − Δ own) / (Δ wall · cores)

*Own* is this process and every descendant it has waited for (``os.times``' children fields:
the node manager once shut down and reaped, and through it its workers and the programs their
tasks ran). *Host busy* is user, system, interrupt and steal time: steal is CPU a hypervisor gave
other guests, which a shared VM's tasks wait for too. Niced time is left out: a niced process (the
executor's own background refit among them) gives way to the run's tasks.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CpuSample", "other_work_per_core", "sample_cpu"]

# /proc/stat's "cpu" line: user nice system idle iowait irq softirq steal guest guest_nice (USER_HZ).
_BUSY_FIELDS = (0, 2, 5, 6, 7)  # user, system, irq, softirq, steal (guest time is inside user)


@dataclass(frozen=True)
class CpuSample:
    """One reading: ``at`` (monotonic seconds), ``busy`` (the host's CPU seconds at work since boot,
    None where unreadable) and ``own`` (this process tree's CPU seconds)."""

    at: float
    busy: float | None
    own: float


def sample_cpu(stat_path: str | os.PathLike = "/proc/stat") -> CpuSample:
    """The host's and this process tree's CPU time now; ``stat_path`` is replaced by tests."""
    times = os.times()
    own = times.user + times.system + times.children_user + times.children_system
    try:
        first = Path(stat_path).read_text().split("\n", 1)[0].split()
        ticks = [float(value) for value in first[1:]] if first and first[0] == "cpu" else []
        busy = sum(ticks[i] for i in _BUSY_FIELDS if i < len(ticks)) / os.sysconf("SC_CLK_TCK") if ticks else None
    except (OSError, ValueError):
        busy = None
    return CpuSample(time.monotonic(), busy, own)


def other_work_per_core(start: CpuSample, end: CpuSample, cores: int) -> float | None:
    """CPU seconds per second per core that processes outside this tree used between the two
    samples; None where the host's time is unknown or no time passed."""
    wall = end.at - start.at
    if start.busy is None or end.busy is None or wall <= 0 or cores <= 0:
        return None
    return max(0.0, (end.busy - start.busy) - (end.own - start.own)) / (wall * cores)
