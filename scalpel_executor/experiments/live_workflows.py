"""A user's workflow run live under HTEX and Scalpel, measured from its tasks' own stamps
(``benchmarks/user_workflow.py``, ``benchmarks/streaming_mix.py``).

::

    live_machine        the host's one LLC domain as the runs plan with it; live_arguments, the
                        command-line options every live workflow takes (--repeats, --llc, --out)
    pinned_seconds      tasks started together in plain forked processes, each pinned to its CPU:
                        what a pair costs on this host this minute, with no executor in between
    calibrated_rounds   the rounds that make a task last about so many seconds alone here
    run_order           a repetition's runs: HTEX before Scalpel's in even repetitions, after in odd
    live_run            one run under a peer (harness.start_peer): the tasks' dicts, and Scalpel's
                        run report
    wait_for_refit      until the detached host refit a Scalpel run's cleanup started has finished,
                        so the next run on the store plans with what this one taught
    kind_medians        a figure's median per kind of run; finish, the summary printed and the
                        record written where --out says
    run_record          a run's figures: makespan, the large tasks' co-run seconds beside their floor
                        (corun_seconds, corun_floor_seconds: pure, on the stamps), and Scalpel's
                        admission reasons, footprint sources, task rows and contention model

A task's dict carries ``name`` (``"<family>-<seed>"``), ``t0`` and ``t1`` (``time.time()``), as
:mod:`~scalpel_executor.workloads.lookups` and :mod:`~scalpel_executor.workloads.streams` stamp them.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import os
import statistics
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from scalpel_executor.core.domains import Topology
from scalpel_executor.experiments.bench.stats import bootstrap_ratio
from scalpel_executor.experiments.harness import start_peer
from scalpel_executor.experiments.mix_sizing import machine_llc
from scalpel_executor.experiments.records import write_record
from scalpel_executor.host.sysfs import detect_topology
from scalpel_executor.learning.host_model import HostModelStore, host_id

#: The run report's per-task fields a run's record keeps.
ROW_FIELDS = ("task_id", "profile_key", "admission", "measured_footprint", "scheduled_footprint", "footprint_source",
              "estimated_runtime", "runtime_spread")


def family(result: Mapping) -> str:
    """The task's family: ``"lookup"`` for ``"lookup-3"``."""
    return result["name"].split("-")[0]


def corun_seconds(results: Sequence[Mapping], large: Collection[str]) -> float:
    """Summed time during which two tasks of the families ``large`` ran at once (the pairwise
    overlaps of their spans).

    >>> corun_seconds([{"name": "a-0", "t0": 0.0, "t1": 2.0}, {"name": "a-1", "t0": 1.0, "t1": 3.0}], {"a"})
    1.0
    """
    spans = [r for r in results if family(r) in large]
    return sum(max(0.0, min(a["t1"], b["t1"]) - max(a["t0"], b["t0"])) for a, b in itertools.combinations(spans, 2))


def corun_floor_seconds(results: Sequence[Mapping], large: Collection[str], cores: int) -> float | None:
    """The least co-run of the ``large`` families any schedule of these tasks (their own durations
    in this run) could have on 2 cores without idling a core while work waits: the large seconds
    that the other tasks cannot accompany run in pairs, max(0, (L - S) / 2). Dependencies
    ignored, so a lower bound; None on more cores (pairwise overlaps of P > 2 tasks bound
    differently).

    >>> corun_floor_seconds([{"name": "a-0", "t0": 0.0, "t1": 5.0}, {"name": "b-0", "t0": 0.0, "t1": 1.0}], {"a"}, 2)
    2.0
    """
    if cores != 2:
        return None
    large_seconds = sum(r["t1"] - r["t0"] for r in results if family(r) in large)
    other_seconds = sum(r["t1"] - r["t0"] for r in results if family(r) not in large)
    return max(0.0, (large_seconds - other_seconds) / 2)


def live_arguments(parser: argparse.ArgumentParser, repeats: int) -> None:
    """The options every live workflow takes: ``--repeats`` (default ``repeats``), ``--llc``, ``--out``."""
    parser.add_argument("--repeats", type=int, default=repeats)
    parser.add_argument("--llc", help="LLC per domain the executor plans with (default: sysfs, or 56 MiB in a VM)")
    parser.add_argument("--out", default=None, help="write the record (JSON) into this folder")


def live_machine(parser: argparse.ArgumentParser, llc: str | None) -> tuple[Topology, str]:
    """This host's one LLC domain of 2 or more cores, as the runs plan with it (its LLC from sysfs,
    or :func:`~scalpel_executor.experiments.mix_sizing.machine_llc`'s assumption in a VM, or
    ``llc``), and where its LLC size came from. On a host of several domains or one core, the
    script's ``parser`` says so and exits (status 2)."""
    detected = detect_topology()
    size, note = machine_llc(detected, llc)
    cpus = detected.domains[0].cpus
    if len(detected.domains) != 1 or len(cpus) < 2:
        parser.error(f"this script is for one LLC domain of at least 2 cores; this host has "
                     f"{len(detected.domains)} domains, the first of {len(cpus)} cores")
    return Topology.from_cpu_lists([cpus], llc_size=size), note


def _pinned(index: int, cpu: int, task: Callable, args: tuple, results) -> None:
    os.sched_setaffinity(0, {cpu})
    start = time.perf_counter()
    task(*args)
    results.put((index, time.perf_counter() - start))


def pinned_seconds(runs: Sequence[tuple[int, Callable, tuple]]) -> list[float]:
    """Wall seconds of each ``(cpu, task, args)``, all started together, each ``task(*args)`` in a
    forked process pinned to its ``cpu``; in the order given."""
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    workers = [context.Process(target=_pinned, args=(i, cpu, task, args, results))
               for i, (cpu, task, args) in enumerate(runs)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return [seconds for _, seconds in sorted(results.get() for _ in workers)]


def calibrated_rounds(seconds_of: Callable[[int], float], seconds: float, *, probe: int = 4,
                      most: int = 1 << 24) -> int:
    """The rounds that make a task last about ``seconds`` alone: ``seconds_of(rounds)`` timed at
    one round and at ``probe`` rounds, doubled until those take a quarter of ``seconds`` more
    than one does, and a line drawn through both (the task's setup, then a time per round).
    A short round (a streaming pass of a few milliseconds) is then timed over many of them,
    not lost in the setup's noise. ``most``: the rounds probed at most."""
    once = min(seconds_of(1) for _ in range(2))
    took = min(seconds_of(probe) for _ in range(2))
    while took - once < seconds / 4 and probe < most:
        probe *= 2
        took = min(seconds_of(probe) for _ in range(2))
    per_round = max(1e-6, (took - once) / (probe - 1))
    setup = max(0.0, once - per_round)
    return max(2, round((seconds - setup) / per_round))


def run_order(htex: Sequence, scalpel: Sequence, repeat: int) -> list:
    """A repetition's runs in order: HTEX's before Scalpel's in even repetitions, after them in
    odd ones, so neither side always runs first on a host whose load drifts."""
    return [*htex, *scalpel] if repeat % 2 == 0 else [*scalpel, *htex]


def live_run(peer: str, cores: int, topology: Topology, run_dir: str, store: str,
             workflow: Callable) -> tuple[list[dict], dict | None]:
    """``workflow(submitter)`` (the tasks' dicts) on ``peer``'s executor, started and warmed up on
    ``cores`` workers, and for a Scalpel peer its run report, read before the executor closes."""
    submitter = start_peer(peer, cores, topology, run_dir, store)
    try:
        results = workflow(submitter)
        report = submitter.executor.run_report() if peer.startswith("scalpel") else None
    finally:
        submitter.close()
    return results, report


def wait_for_refit(store: str, topology: Topology, timeout: float, *, poll: float = 0.5) -> float | None:
    """Seconds until the host's fit in ``store`` is no longer stale (the detached refit that a
    Scalpel run's cleanup starts has stored what the run taught), or None after ``timeout``."""
    models, host = HostModelStore(store), host_id(topology)
    started = time.monotonic()
    try:
        while models.stale(host):
            if time.monotonic() - started > timeout:
                return None
            time.sleep(poll)
    finally:
        models.close()
    return time.monotonic() - started


def run_record(results: Sequence[dict], report: Mapping | None, cores: int, large: Collection[str],
               what: str) -> dict:
    """A run's figures: ``makespan`` (first task start to last end), ``<what>_corun_seconds`` of
    the ``large`` families beside ``corun_floor_seconds``, the tasks' dicts, and from Scalpel's run
    ``report`` its ``admission`` reasons, footprint ``sources``, ``profile_keys``, the tasks'
    :data:`ROW_FIELDS` (``report_tasks``) and ``contention_model``."""
    record = {"makespan": max(r["t1"] for r in results) - min(r["t0"] for r in results),
              f"{what}_corun_seconds": corun_seconds(results, large),
              "corun_floor_seconds": corun_floor_seconds(results, large, cores), "tasks": list(results)}
    if report is not None:
        record.update(admission=report["admission"], sources=report["sources"],
                      profile_keys=len({t["profile_key"] for t in report["tasks"]}),
                      report_tasks=[{name: t.get(name) for name in ROW_FIELDS} for t in report["tasks"]],
                      contention_model=report.get("contention_model"))
    return record


def run_line(kind: str, record: Mapping, what: str, together: str) -> str:
    """A run's progress line: its makespan, the large tasks' co-run (``together``, e.g. "large
    tasks together") beside its floor, and for Scalpel its admission reasons and footprint sources."""
    floor = record["corun_floor_seconds"]
    return (f"  {kind:8s} makespan {record['makespan']:6.2f} s, {together} {record[f'{what}_corun_seconds']:5.2f} s"
            + (f" (floor {floor:4.2f} s)" if floor is not None else "")
            + (f", admission {record['admission']}, footprints {record['sources']['footprint']}"
               if "admission" in record else ""))


def makespan_ratios(runs: Sequence[Mapping], kinds: Sequence[str], reference: str = "htex") -> dict:
    """``htex_over_scalpel_<kind>`` per kind: the median ``reference`` makespan over the kind's,
    with its paired bootstrap interval (``ratio``, ``low``, ``high``; > 1: Scalpel faster)."""
    makespans = {kind: [r["makespan"] for r in runs if r["kind"] == kind] for kind in (reference, *kinds)}
    ratios = {}
    for kind in kinds:
        ratio, low, high = bootstrap_ratio(makespans[reference], makespans[kind])
        ratios[f"{reference}_over_scalpel_{kind}"] = {"ratio": ratio, "low": low, "high": high}
    return ratios


def kind_medians(runs: Sequence[Mapping], kinds: Sequence[str], figure: str) -> dict:
    """The median of ``figure`` over the runs of each kind; None for a kind where a run has none
    (the co-run floor on more than 2 cores)."""
    medians = {}
    for kind in kinds:
        values = [r[figure] for r in runs if r["kind"] == kind]
        medians[kind] = None if any(v is None for v in values) else statistics.median(values)
    return medians


def finish(args: argparse.Namespace, summary: Mapping, pairs: Sequence, runs: Sequence, name: str) -> None:
    """Print ``summary`` as JSON, and with ``--out`` write the record (``args``, ``summary``, ``pairs``,
    ``runs``) to ``<out>/<name>``."""
    print(json.dumps(summary, indent=1))
    if args.out:
        write_record({"args": vars(args), "summary": summary, "pairs": pairs, "runs": runs}, Path(args.out) / name)
