"""The run report: one record per finished task, and the per-task rows, spans and file made of them.

:class:`~scalpel_executor.runtime.driver.executor.ScalpelExecutor` appends a :class:`TaskRecord` for
each task it completes (``records``); ``run_report()`` counts them and lists them with
:func:`build_report`, ``shutdown()`` writes the report with :func:`save_report`, and its host
learning (:mod:`~scalpel_executor.runtime.driver.host_learning`) hands :func:`task_spans` to this host's
contention fit (:mod:`scalpel_executor.learning.host_model`).
The fields are documented in docs/executor.md.

Read back, a report explains its run: :func:`over_cache_coruns` finds, from the rows alone, when
tasks whose footprints together overflow their domain's LLC ran at once and which start made each
such co-run; :func:`run_summary` says the run in one sentence (logged at cleanup, printed first by
``scalpel report``, which lists the rows and the co-runs' seconds per task).
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scalpel_executor.core.admission import ACCEPTED_CORUNS, PLANNED
from scalpel_executor.learning.critical_path import describe as describe_tail
from scalpel_executor.core.units import format_size
from scalpel_executor.learning.host_model import TaskSpan
from scalpel_executor.learning.keys import MAIN_GUARD
from scalpel_executor.runtime.logs import summary_logger
from scalpel_executor.runtime.driver.driver_pin import pin_words
from scalpel_executor.runtime.driver.model_point import model_point, model_words
from scalpel_executor.runtime.driver.summary_words import learned_words, sentence, source_words, width_words

if TYPE_CHECKING:  # annotations only: `scalpel report` reads reports without the estimator's imports
    from scalpel_executor.core.domains import Topology
    from scalpel_executor.learning.estimates import Estimator

logger = logging.getLogger(__name__)

__all__ = ["TaskRecord", "task_rows", "task_spans", "measure_waits", "mixed_keys", "describe_mixed", "build_report",
           "save_report", "write_report",
           "OverCache", "corun_footprint", "row_span", "over_cache_coruns", "seconds_covered", "run_summary"]


@dataclass(kw_only=True, slots=True)
class TaskRecord:
    """What happened to one task: where it ran (slot, LLC domain, CPU), when, and its estimates.

    Built by keyword only, so a new field is its declaration here and one keyword where the
    executor completes a task. Built once per task on the thread that delivers results, so not
    frozen: a frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``
    (5.8 us a record, 2.1 this way); nothing changes a record once it is built."""

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
    tail: float = 0.0  # seconds of work the scheduler was told wait for its result (Task.tail)
    tail_source: str | None = None  # where that came from: graph | learned (learning.critical_path); None: none
    submitted: float | None = None  # time.monotonic() when Parsl handed it to the executor (its inputs ready)
    parsl_id: int | None = None  # its task id in Parsl's graph (Parsl's log and monitoring); None: the graph unseen


def task_rows(records: Iterable[TaskRecord]) -> list[dict]:
    """The report's ``tasks``: one JSON-ready row per task, in task id order.

    ``started`` and ``finished`` are seconds since the run's first task started (``started`` None:
    it never did); ``waited`` the seconds from its submit (Parsl hands a task over once its inputs
    are ready) to its start, None if it never started; ``memory_mib`` is the memory the task counted against the node, in MiB as the
    ``memory`` hint reads."""
    records = list(records)
    origin = min((record.started for record in records if record.started is not None), default=None)

    def since(moment: float | None) -> float | None:
        return None if moment is None or origin is None else round(moment - origin, 6)

    return [
        {
            "task_id": record.task_id, "parsl_task_id": record.parsl_id, "profile_key": record.profile_key,
            "ok": record.ok,
            "priority": record.priority,
            "slot": record.slot, "domain": record.domain, "cpu": record.cpu,
            "estimated_footprint": record.footprint, "footprint_source": record.footprint_source,
            "estimated_runtime": record.runtime, "runtime_source": record.runtime_source,
            "runtime_spread": record.runtime_spread,
            "measured": record.measured, "measured_runtime": record.stats.get("wall"),
            "measured_footprint": record.stats.get("footprint"),
            "admission": record.stats.get("admission"),
            "tail": record.tail, "tail_source": record.tail_source,
            "critical_path": describe_tail(record.tail, record.tail_source),
            "measure_wait": record.stats.get("measure_wait", 0.0),
            "started": since(record.started), "finished": since(record.finished),
            "waited": None if record.started is None or record.submitted is None
            else max(0.0, record.started - record.submitted),
            "cores": record.cores, "memory_mib": record.memory / 2**20, "gpus": record.gpus,
            "cpus": record.stats.get("cpus") or (None if record.cpu is None else [record.cpu]),
            "devices": record.stats.get("devices") or [],
            "scheduled_footprint": record.stats.get("scheduled_footprint"),
            "width": record.stats.get("width"), "width_reason": record.stats.get("width_reason"),  # malleable tasks
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
    Cold calls (``stats["cold"]``: modules imported while they ran) are left out.
    """
    seen: dict[str, tuple[list[float], list[float]]] = {}
    for record in records:
        if not record.ok or not record.profile_key or record.stats.get("cold"):
            continue  # a worker's first call of an app also paid for its imports: not a size the key hides
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


def write_report(path: str, report: dict) -> str | None:
    """Write ``report`` as JSON to ``path`` (mode 0600); None, or why it could not be (one warning)."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as stream:
            json.dump(report, stream, indent=1)
    except OSError as error:
        logger.warning("could not write the run report %s: %s", path, error)
        return f"{type(error).__name__}: {error.strerror or error}"
    return None


def build_report(label: str, policy: str, topology: Topology, estimator: Estimator | None, hints_off: Mapping,
                 records: Sequence[TaskRecord], contention_model: dict, critical_path: dict, cut_short: int = 0,
                 shut_down_by: str | None = None, driver_pin: dict | None = None, rejected: int = 0,
                 script: str | None = None) -> dict:
    """The run report of ``records``: where every finished task ran and where its estimates came from (JSON-ready).

    ``contention_model`` and ``critical_path`` are passed in as their sections, made by the
    executor's host learning and tails; ``estimator`` is None before the executor starts.
    ``tasks_cut_short`` counts the failed tasks that were still running or waiting when the
    executor shut down (``cut_short``: failed with ExecutorShutdown); ``tasks_rejected`` the submits
    that raised and so never became tasks (``rejected``: a bad hint, a task no node fits, a call
    that does not serialize; Parsl failed each with its error); ``shut_down_by`` names the
    exception the script was ending with when it shut the executor down (a Ctrl-C, an error), or None.
    ``driver_pin`` says where the driver's Parsl threads were put on one CPU (``pin_driver``):
    ``mode`` (``busy``: while they were busy; ``run``: from start to shutdown), ``cpu``, ``engaged``
    (how many times) and ``seconds`` (how long, all told; None for ``run``); None where they were not.

    ``sources`` counts tasks per source of each estimate (``hint``, ``learned`` earlier in
    this run, ``store`` from earlier runs, ``shape`` and ``app`` for a key new but its shape
    key or app known, ``prior`` for keys never seen before); ``priors``
    lists the keys that started with the prior; ``script`` names the module run as ``__main__``
    (:func:`script_module`, read by the caller while the script runs), which the closing
    sentence's advice imports; ``tasks_measured`` counts the tasks the probe was asked to measure
    and ``drifts`` the unmeasured tasks whose run time made their key due for one (the executor's
    ``sampling``); ``hints_off`` counts, per
    hint, the tasks whose ``footprint`` or ``runtime`` hint was more than twice or under half
    what they measured (:class:`~scalpel_executor.learning.hints.HintAudit`); ``admission``
    counts the tasks by why they started where they did (:mod:`scalpel_executor.core.admission`:
    ``fits``, ``kept-apart``, ``co-run: ...``; ``planned`` under a policy that is not checked at
    dispatch); ``measure_waits`` counts the waits of a free core for a running task's first
    measurement (:data:`~scalpel_executor.core.admission.MEASURE_WAIT`) that ended in a start,
    and their seconds (each row's ``measure_wait``); ``contention_model`` says which model the plan used (``planned_with``), where
    it came from (``source``: ``given``, ``fitted on this host``, ``default``), this host's fit
    (``fitted``: rho, sigma, the co-runs it rests on; before shutdown a preview with this run's
    co-runs, after it the fit as stored, without them: shutdown stores them, ``coruns_stored``,
    and a detached process refits, ``refit_in_background``), what it predicts for this run's two largest footprints together
    (``two_largest``) and whether tasks were also told their profile key's per-key residuals
    (``interference``: ``planned_with`` ``per-key interference`` or ``footprint``; ``reason``, the
    host's last refit's sentence, which says when its co-runs were too few or contradictory; ``keys``
    with terms, ``tasks`` told them; :mod:`~scalpel_executor.core.interference`, docs/interference.md); ``critical_path`` whether Parsl's task graph was seen (``graph_seen``), how
    many tasks were told a tail from it or from earlier runs (``tails_told``: ``graph``, ``learned``)
    and how many keys and apps this run's tails were stored for (``tails_stored``; ``graph_forgotten``,
    present once a long run's graph let its oldest ended tasks go, how many;
    :mod:`~scalpel_executor.learning.critical_path`); ``mixed_keys`` names the profile keys whose tasks measured four or more
    times apart (:func:`~scalpel_executor.runtime.driver.report.mixed_keys`); ``tasks`` has one row
    per task, its ``priority`` the user's hint; ``model`` the point of comparison, these tasks
    replayed through the simulator in submission order and under ``policy``
    (:func:`~scalpel_executor.runtime.driver.model_point.model_point`, model figures).
    """
    store = estimator.store if estimator is not None else None
    report = {
        "executor": label,
        "policy": policy,
        "topology": topology.to_dict(),
        "profile_store": None if store is None else {
            "path": str(store.path) if store.path else ":memory:",
            "persistent": store.persistent,
            "problem": store.problem,
        },
        "tasks_finished": len(records),
        "tasks_failed": sum(not record.ok for record in records),
        "tasks_cut_short": cut_short,
        "tasks_rejected": rejected,
        "shut_down_by": shut_down_by,
        "driver_pin": driver_pin,
        "tasks_measured": sum(record.measured for record in records),
        "drifts": estimator.drifts if estimator is not None else 0,
        "hints_off": hints_off,
        "admission": dict(Counter(record.stats.get("admission") or "none" for record in records)),
        "measure_waits": measure_waits(records),
        "contention_model": contention_model,
        "critical_path": critical_path,
        "sources": {
            "footprint": dict(Counter(record.footprint_source for record in records)),
            "runtime": dict(Counter(record.runtime_source for record in records)),
        },
        "priors": sorted(estimator.priors) if estimator is not None else [],
        "script": script,
        "mixed_keys": mixed_keys(records),
        "tasks": task_rows(records),
    }
    try:
        report["model"] = model_point(report)
    except Exception as error:  # noqa: BLE001 - a point of comparison never costs the report
        logger.warning("the run's tasks could not be replayed through the model: %s", error)
        report["model"] = {"tasks": len(records), "submission_order": None, "policy": None, "achieved": None,
                           "skipped": f"{type(error).__name__}: {error}"}
    return report


def script_module() -> str | None:
    """What ``scalpel profile run`` imports for an app of ``__main__``, typed where this process
    started: the module it runs as its ``__main__`` (``fit`` for ``python fit.py``, ``lab.fit`` for
    ``python -m lab.fit``), or the script's path where it is not in the current directory
    (``runs/fit.py`` for ``python runs/fit.py``); None in a notebook, a REPL or ``python -c``,
    and for a script with no ``if __name__ == "__main__":``, whose import would run its workflow
    (``scalpel profile run`` refuses it; ``measure_app`` serves)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None:
        return None if spec.name.endswith("__main__") else spec.name
    path = getattr(main, "__file__", None)
    if not isinstance(path, str) or not path.endswith(".py"):
        return None
    name = os.path.basename(path)[:-3]
    try:
        with open(path, encoding="utf-8", errors="replace") as script:
            guarded = MAIN_GUARD.search(script.read()) is not None
    except OSError:
        guarded = False
    if not (name.isidentifier() and guarded):
        return None
    return name if os.path.dirname(os.path.abspath(path)) == os.getcwd() else os.path.relpath(path)


def save_report(report: dict, run_dir: str, label: str) -> None:
    """Write ``report`` next to Parsl's logs (``<run_dir>/scalpel-<label>-report.json``, mode 0600),
    warn of each of its mixed keys, and log the run in a sentence (:func:`run_summary`)."""
    for entry in report["mixed_keys"]:
        logger.warning("profile key %s holds tasks of different sizes (%s): its estimates fit none of them; "
                       "pass the size as an argument of its own, or give these tasks a profile_key hint",
                       entry["profile_key"], describe_mixed(entry))
    path = os.path.join(run_dir, f"scalpel-{label}-report.json")
    problem = write_report(path, report)
    shown = os.path.relpath(path)
    summary_logger().info("%s", run_summary(report, path if shown.startswith("..") else shown, unwritten=problem))


def corun_footprint(row: Mapping) -> float:
    """The bytes a report row's task held in its LLC: its measured footprint, else the footprint the
    scheduler started it with, else the one estimated at submit (as :func:`task_spans` takes it)."""
    return float(row.get("measured_footprint") or row.get("scheduled_footprint") or row.get("estimated_footprint") or 0.0)


def row_span(row: Mapping) -> tuple[float, float] | None:
    """When a report row's task ran, in the rows' seconds: from ``started`` for its measured wall
    time, else to ``finished`` (None: it never started). ``finished`` is when its result reached the
    executor, after the worker's core had taken its next task: it would overlap that one."""
    if row.get("started") is None:
        return None
    wall = row.get("measured_runtime")
    if isinstance(wall, (int, float)) and math.isfinite(wall) and wall >= 0:
        return row["started"], row["started"] + wall
    return row["started"], row["finished"]


@dataclass(frozen=True)
class OverCache:
    """A stretch of a run during which the same tasks, two or more, ran at once on one LLC domain
    and their footprints (:func:`corun_footprint`) together exceeded its LLC."""

    domain: int
    start: float  # seconds since the run's first task started, as the rows' ``started``
    end: float
    tasks: tuple[int, ...]  # task ids, in the order they started
    reason: str | None  # the admission reason of the last of them to start: the start that made this co-run


def over_cache_coruns(report: Mapping) -> list[OverCache]:
    """Every stretch of ``report``'s run during which tasks overflowing their domain's LLC ran together.

    A row runs on its ``domain`` for its :func:`row_span`; a domain whose ``llc_size`` the
    report's ``topology`` does not give is skipped, as are rows that never started. The stretches
    of one domain do not overlap; they are in domain, then time, order.

    Notes
    -----
    One sweep over the rows' starts and ends per domain: O(n log n + n k) for n rows and at most k
    tasks running at once on a domain. The rows do not name a node, so a report of provider mode,
    whose domains are numbered per node, counts tasks of different nodes' same-numbered domains
    as running together.

    >>> rows = [{"task_id": 1, "domain": 0, "started": 0.0, "finished": 2.0, "measured_footprint": 20e6, "admission": "fits"},
    ...         {"task_id": 2, "domain": 0, "started": 1.0, "finished": 3.0, "measured_footprint": 20e6,
    ...          "admission": "co-run: nothing fits"}]
    >>> over_cache_coruns({"topology": {"domains": [{"index": 0, "llc_size": 32e6}]}, "tasks": rows})
    [OverCache(domain=0, start=1.0, end=2.0, tasks=(1, 2), reason='co-run: nothing fits')]
    """
    llc = {domain["index"]: domain.get("llc_size") for domain in report["topology"]["domains"]}
    by_domain: dict[int, list[tuple[Mapping, tuple[float, float]]]] = {}
    for row in report["tasks"]:
        span = row_span(row)
        if span is not None and llc.get(row.get("domain")):
            by_domain.setdefault(row["domain"], []).append((row, span))
    stretches: list[OverCache] = []
    for domain in sorted(by_domain):
        rows = [row for row, _ in by_domain[domain]]
        # an end sorts before a start at the same moment: tasks that merely touch never ran together
        events = sorted([(start, 1, index) for index, (_, (start, _)) in enumerate(by_domain[domain])]
                        + [(end, 0, index) for index, (_, (_, end)) in enumerate(by_domain[domain])])
        running: dict[int, Mapping] = {}
        held = 0.0
        for (moment, starts, index), following in zip(events, [*events[1:], None]):
            row = rows[index]
            if starts:
                running[index] = row
                held += corun_footprint(row)
            elif running.pop(index, None) is not None:
                held -= corun_footprint(row)
            if following is None or following[0] <= moment or len(running) < 2 or held <= llc[domain]:
                continue
            order = sorted(running.values(), key=lambda r: (r["started"], r["task_id"]))
            tasks = tuple(r["task_id"] for r in order)
            last = stretches[-1] if stretches else None
            if last is not None and last.domain == domain and last.tasks == tasks and last.end == moment:
                stretches[-1] = OverCache(domain, last.start, following[0], tasks, last.reason)
            else:
                stretches.append(OverCache(domain, moment, following[0], tasks, order[-1].get("admission")))
    return stretches


def seconds_covered(stretches: Iterable[OverCache]) -> float:
    """The seconds during which at least one of ``stretches`` lasted: overlaps on different domains
    count once.

    >>> seconds_covered([OverCache(0, 0.0, 2.0, (1, 2), None), OverCache(1, 1.0, 3.0, (3, 4), None)])
    3.0
    """
    covered, reached = 0.0, -math.inf
    for stretch in sorted(stretches, key=lambda stretch: stretch.start):
        if stretch.end > reached:
            covered += stretch.end - max(stretch.start, reached)
            reached = stretch.end
    return covered


def run_summary(report: Mapping, path: str | None, *, unwritten: str | None = None) -> str:
    """``report``'s run in one sentence, for a terminal and the log: the tasks and the machine, how
    long tasks overflowing their LLC ran together and how much of that the admission rule accepted
    knowingly (:data:`~scalpel_executor.core.admission.ACCEPTED_CORUNS`: the co-run's last start
    carried such a reason), where the estimates came from, how long the driver's threads were on
    one CPU (``driver_pin``), and, with ``path``, where the report is and the command that explains it;
    past :data:`~scalpel_executor.runtime.driver.summary_words.SUMMARY_WIDTH` characters, a clause per line.

    The seconds are those of :func:`seconds_covered` over :func:`over_cache_coruns`.

    >>> row = {"domain": 0, "measured_footprint": 20e6}
    >>> report = {"executor": "scalpel", "policy": "scalpel", "tasks_finished": 3, "tasks_failed": 1,
    ...           "topology": {"total_cores": 2, "domains": [{"index": 0, "llc_size": 32e6}]},
    ...           "sources": {"footprint": {"store": 2, "prior": 1}, "runtime": {"prior": 1, "store": 2}},
    ...           "tasks": [{**row, "task_id": 1, "started": 0.0, "finished": 2.0, "admission": "fits"},
    ...                     {**row, "task_id": 2, "started": 1.5, "finished": 3.0, "admission": "co-run: nothing fits"},
    ...                     {**row, "task_id": 3, "started": 2.5, "finished": 4.0, "admission": "fits"}]}
    >>> print(run_summary(report, "runinfo/007/scalpel-scalpel-report.json"))
    scalpel: 3 tasks (1 failed) on 2 cores in 1 LLC domain; co-runs over the LLC lasted 1.00 s,
    0.50 s of it accepted at admission; estimates: 2 from the profile store, 1 guessed;
    report: runinfo/007/scalpel-scalpel-report.json (scalpel report runinfo/007)
    """
    topology = report["topology"]
    domains = len(topology["domains"])
    tasks, failed, cut_short = report["tasks_finished"], report["tasks_failed"], report.get("tasks_cut_short", 0)
    ended_by = report.get("shut_down_by")  # an exception the script was ending with: no advice applies
    failures = f"{failed} failed" + (
        "" if not cut_short else
        f", {cut_short} of them unfinished when {ended_by} ended the script" if ended_by else
        f", {cut_short} of them unfinished when the executor shut down: wait for results before dfk.cleanup() or "
        f"the end of `with parsl.load()`")
    if rejected := report.get("tasks_rejected", 0):  # never tasks: Parsl failed each with its error
        failures += f"; {rejected} more refused at submit, each future holding why"
    parts = [f"{report['executor']}: {tasks} task{'s' if tasks != 1 else ''} ({failures}) on "
             f"{topology['total_cores']} cores in {domains} LLC domain{'s' if domains != 1 else ''}",
             _corun_words(report), source_words(report["sources"])]
    if "profile_store" in report:  # a report from before the clause has no store section
        parts.append(learned_words(report))
    widths = width_words(report)
    if widths:
        parts.append(widths)
    replayed = model_words(report.get("model"), report["policy"])
    if replayed:
        parts.append(replayed)
    pinned = pin_words(report.get("driver_pin"))
    if pinned:
        parts.append(pinned)
    not_learned = (report.get("contention_model") or {}).get("not_learned")
    if not_learned:
        parts.append(f"this run taught the host's contention fit nothing: {not_learned}")
    if path is not None and unwritten is not None:
        parts.append(f"the run report could not be written to {path} ({unwritten})")
    elif path is not None:
        parts.append(f"report: {path} (scalpel report {os.path.dirname(path) or path})")
    return sentence(parts)


def _corun_words(report: Mapping) -> str:
    if not any(domain.get("llc_size") for domain in report["topology"]["domains"]):
        return "LLC size unknown, co-runs over it not counted"
    stretches = over_cache_coruns(report)
    if not stretches:
        return "no co-runs over the LLC"
    together = f"co-runs over the LLC lasted {seconds_covered(stretches):.2f} s"
    if all(stretch.reason == PLANNED for stretch in stretches):
        return f"{together} (policy {report['policy']} does not check starts against what runs)"
    accepted = seconds_covered(stretch for stretch in stretches if stretch.reason in ACCEPTED_CORUNS)
    return f"{together}, {accepted:.2f} s of it accepted at admission"
