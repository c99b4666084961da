"""The run report: one record per finished task, and the per-task rows, spans and file made of them.

:class:`~scalpel_executor.runtime.executor.ScalpelExecutor` appends a :class:`TaskRecord` for
each task it completes (``records``); ``run_report()`` counts them and lists them with
:func:`task_rows`, ``shutdown()`` writes the report with :func:`write_report` and hands
:func:`task_spans` to this host's contention fit (:mod:`scalpel_executor.learning.host_model`).
The fields are documented in docs/executor.md.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass

from scalpel_executor.core.units import format_size
from scalpel_executor.learning.host_model import TaskSpan

logger = logging.getLogger(__name__)

__all__ = ["TaskRecord", "task_rows", "task_spans", "measure_waits", "mixed_keys", "describe_mixed", "write_report"]


@dataclass(frozen=True)
class TaskRecord:
    """What happened to one task: where it ran (slot, LLC domain, CPU), when, and its estimates."""

    task_id: int
    slot: int | None  # None: it never started (shutdown)
    domain: int | None
    cpu: int | None
    started: float | None  # time.monotonic() when it was sent to its worker
    finished: float
    footprint: float  # the estimates the scheduler used
    runtime: float
    ok: bool  # False for a task exception, a worker death or a shutdown
    stats: dict  # measured in the worker: wall / cpu seconds, peak RSS, footprint (probe)
    profile_key: str = ""
    footprint_source: str = "prior"  # hint | learned | store | shape | app | prior (learning.estimates.SOURCES)
    runtime_source: str = "prior"
    intensity: float | None = None  # the LLC miss rate the scheduler was told (`di` ranks by it)
    measured: bool = False  # sent to be measured by the probe (learning.sampling decided)
    runtime_spread: float = 0.0  # how far the run-time estimate may be off, relative (the key's std / mean)
    priority: float | None = None  # the user's priority hint (lower first, as in HTEX); None: none given
    cores: int = 1  # what it held while it ran (Task.cores, Task.memory in bytes, Task.gpus)
    memory: float = 0.0
    gpus: int = 0


def task_rows(records: Iterable[TaskRecord]) -> list[dict]:
    """The report's ``tasks``: one JSON-ready row per task, in task id order.

    ``started`` and ``finished`` are seconds since the run's first task started (``started`` None:
    it never did); ``memory_mib`` is the memory the task counted against the node, in MiB as the
    ``memory`` hint reads."""
    records = list(records)
    origin = min((record.started for record in records if record.started is not None), default=None)

    def since(moment: float | None) -> float | None:
        return None if moment is None or origin is None else round(moment - origin, 6)

    return [
        {
            "task_id": record.task_id, "profile_key": record.profile_key, "ok": record.ok,
            "priority": record.priority,
            "slot": record.slot, "domain": record.domain, "cpu": record.cpu,
            "estimated_footprint": record.footprint, "footprint_source": record.footprint_source,
            "estimated_runtime": record.runtime, "runtime_source": record.runtime_source,
            "runtime_spread": record.runtime_spread,
            "measured": record.measured, "measured_runtime": record.stats.get("wall"),
            "measured_footprint": record.stats.get("footprint"),
            "admission": record.stats.get("admission"),
            "measure_wait": record.stats.get("measure_wait", 0.0),
            "started": since(record.started), "finished": since(record.finished),
            "cores": record.cores, "memory_mib": record.memory / 2**20, "gpus": record.gpus,
            "cpus": record.stats.get("cpus") or (None if record.cpu is None else [record.cpu]),
            "devices": record.stats.get("devices") or [],
            "scheduled_footprint": record.stats.get("scheduled_footprint"),
        }
        for record in sorted(records, key=lambda record: record.task_id)
    ]


def measure_waits(records: Iterable[TaskRecord]) -> dict:
    """How often a free core idled for a running task's first measurement before a start, and for
    how long in all: ``{"count": n, "seconds": s}`` (the rows' ``measure_wait``)."""
    waits = [record.stats["measure_wait"] for record in records if record.stats.get("measure_wait")]
    return {"count": len(waits), "seconds": round(sum(waits), 6)}


#: A key whose tasks measured this many times apart, in footprint or in run time, holds tasks of
#: different sizes: its estimates mean little for any one of them.
MIXED_RATIO = 4.0
#: ... when the larger figure matters at all (a footprint, a run time below these is noise).
MIXED_FOOTPRINT, MIXED_RUNTIME = 8 * 2**20, 1.0


def mixed_keys(records: Iterable[TaskRecord]) -> list[dict]:
    """The profile keys whose finished tasks measured at least :data:`MIXED_RATIO` apart in
    footprint or run time: calls the key cannot tell apart (a size inside a dict argument, a file's
    contents) that differ in what they hold or how long they run. One entry per key, largest spread
    first, with the figures a user needs to split it (``profile_key=``, or the size as an argument).
    """
    seen: dict[str, tuple[list[float], list[float]]] = {}
    for record in records:
        if not record.ok or not record.profile_key:
            continue
        footprints, walls = seen.setdefault(record.profile_key, ([], []))
        footprint, wall = record.stats.get("footprint"), record.stats.get("wall")
        if isinstance(footprint, (int, float)) and footprint > 0:
            footprints.append(float(footprint))
        if isinstance(wall, (int, float)) and wall > 0:
            walls.append(float(wall))
    mixed = []
    for key, (footprints, walls) in seen.items():
        footprint_apart = len(footprints) > 1 and max(footprints) >= MIXED_FOOTPRINT \
            and max(footprints) >= MIXED_RATIO * min(footprints)
        runtime_apart = len(walls) > 1 and max(walls) >= MIXED_RUNTIME and max(walls) >= MIXED_RATIO * min(walls)
        if footprint_apart or runtime_apart:
            mixed.append({"profile_key": key, "tasks": max(len(footprints), len(walls)),
                          "footprint": [min(footprints), max(footprints)] if footprints else None,
                          "runtime": [min(walls), max(walls)] if walls else None})
    spread = lambda entry: max(b / a for a, b in filter(None, (entry["footprint"], entry["runtime"])))  # noqa: E731
    return sorted(mixed, key=spread, reverse=True)


def describe_mixed(entry: dict) -> str:
    """``entry`` of :func:`mixed_keys` in words: "7 tasks, 4.0 MiB to 320.0 MiB, 0.21 s to 15.3 s"."""
    parts = [f"{entry['tasks']} tasks"]
    if entry["footprint"]:
        parts.append(" to ".join(format_size(value) for value in entry["footprint"]))
    if entry["runtime"]:
        parts.append(" to ".join(f"{value:.3g} s" for value in entry["runtime"]))
    return ", ".join(parts)


def task_spans(records: Iterable[TaskRecord]) -> list[TaskSpan]:
    """The finished tasks that ran, as the host's fit sees them (local mode: one clock, one host)."""
    spans = []
    for record in records:
        if record.domain is None or record.started is None:
            continue
        wall = record.stats.get("wall")
        wall = float(wall) if isinstance(wall, (int, float)) and math.isfinite(wall) and wall >= 0 else None
        footprint = record.stats.get("footprint") or record.stats.get("scheduled_footprint") or record.footprint
        spans.append(TaskSpan(record.profile_key, record.domain, record.started,
                              record.started + wall if wall is not None else record.finished, wall,
                              float(footprint), record.ok))
    return spans


def write_report(path: str, report: dict) -> None:
    """Write ``report`` as JSON to ``path`` (mode 0600); a failure is one warning."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as stream:
            json.dump(report, stream, indent=1)
    except OSError as error:
        logger.warning("could not write the run report %s: %s", path, error)
        return
    logger.info("run report %s: %d tasks; footprint sources %s; run time sources %s", path,
                report["tasks_finished"], report["sources"]["footprint"], report["sources"]["runtime"])
