"""The benchmark's run loop: every peer through every mix, interleaved and repeated, and its record.

See :mod:`scalpel_executor.experiments.bench` for the whole method.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from scalpel_executor.core.units import format_size
from scalpel_executor.experiments.apps import noop, one_blas_thread
from scalpel_executor.experiments.bench.mixes import Mix, MixRun, build_mixes
from scalpel_executor.experiments.bench.pyperf_suites import write_pyperf
from scalpel_executor.experiments.bench.stats import summarise
from scalpel_executor.experiments.charts import bench_chart
from scalpel_executor.experiments.bench.verdict import bench_verdicts, machine_words, running_in_vm
from scalpel_executor.experiments.harness import (OtherWork, fresh_store, run_kernels, run_workflow, solo_pass,
                                                  start_peer)
from scalpel_executor.experiments.plans import REFERENCE, BenchPlan
from scalpel_executor.experiments.mix_sizing import machine_fingerprint, machine_llc
from scalpel_executor.experiments.solo_times import SoloTimes, kept_step_seconds, plan_solo, run_solo
from scalpel_executor.host.sysfs import detect_topology
from scalpel_executor.learning.store import default_path
from scalpel_executor.workloads.montage import SkyPlan, mosaic_pipeline, require_montage

logger = logging.getLogger(__name__)


def runs_mix(peer: str, mix: Mix) -> bool:
    """Whether ``peer`` takes part in ``mix``: the oracle only where a mix has a best order, and
    the Montage and workflow DAGs only under Parsl (they chain apps through futures)."""
    if peer == "oracle":
        return mix.oracle is not None
    if mix.kind in ("montage", "workflow"):
        return peer != "processpool"
    return True


#: Seconds one mix may take on one peer before it counts as failed.
MIX_TIMEOUT = 1800.0


def run_mix(submitter, peer: str, mix: Mix, repeat: int, out: Path, timeout: float = MIX_TIMEOUT,
            cores: int | None = None) -> MixRun:
    """Run one mix on a started peer; a failure is recorded, not raised, so the other runs survive.
    The run keeps the other work per core on the host during it (``cores``: this machine's, by
    default ``os.cpu_count()``)."""
    run = MixRun(peer, mix.name, repeat, None)
    other = OtherWork(submitter, cores or os.cpu_count() or 1)
    other.start()
    try:
        if mix.kind == "kernels":
            cases = mix.oracle if peer == "oracle" else mix.cases
            run.makespan, run.tasks = run_kernels(submitter, cases, timeout=timeout,
                                                  widths=mix.widths if peer != "oracle" else ())
        elif mix.kind == "throughput":
            app = submitter.app(noop)
            started = time.monotonic()
            futures = [app() for _ in range(mix.count)]
            for future in futures:
                future.result(timeout=timeout)
            run.makespan = time.monotonic() - started
        elif mix.kind == "latency":
            app = submitter.app(noop)
            started = time.monotonic()
            for _ in range(mix.count):
                sent = time.perf_counter()
                app().result(timeout=timeout)
                run.latencies.append(time.perf_counter() - sent)
            run.makespan = time.monotonic() - started
        elif mix.kind == "workflow":
            run.makespan, run.tasks = run_workflow(submitter, mix.members, out / "workflow" / peer.replace(":", "-"),
                                                   seed=repeat, timeout=timeout)
        elif mix.kind == "montage":
            started = time.monotonic()
            mosaic_pipeline(SkyPlan(mix.count, seed=repeat), out / "montage" / peer.replace(":", "-")).wait(timeout)
            run.makespan = time.monotonic() - started
    except Exception as error:  # noqa: BLE001 - recorded with its type, reported in the summary
        run.error = f"{type(error).__name__}: {error}"
        run.makespan = None
        logger.warning("%s on %s, repeat %d failed: %s", mix.name, peer, repeat + 1, run.error)
    run.other_work_per_core = other.stop()
    return run


def run_bench(plan: BenchPlan, *, out: Path, llc_override=None, model=None, timeout: float = MIX_TIMEOUT,
              stream: TextIO = sys.stderr, printer: Callable[[str], None] = print,
              solo_store: str | Path | None = None, fresh_solo: bool = False) -> dict:
    """Run the benchmark ``plan`` describes (see :mod:`scalpel_executor.experiments.bench`);
    returns the JSON record, also written to ``<out>/bench.json`` after every repetition, so an
    interrupted run keeps what it measured. ``model`` is the contention model the oracle order is
    searched with and the ``scalpel`` policy plans with. ``solo_store``: the file whose tables keep
    this machine's solo times (default: the profile store's); ``fresh_solo``: run every distinct
    case alone again, and time the steps again, instead of reusing them. Raises
    ``MontageUnavailable`` before anything runs when a montage mix cannot."""
    if "montage" in plan.mixes:
        require_montage()
    topology = detect_topology()
    cores = len(topology.cpus)
    llc, llc_note = machine_llc(topology, llc_override)
    machine = machine_fingerprint(topology)
    kept = SoloTimes(solo_store if solo_store is not None else default_path())
    one_blas_thread()
    store = fresh_store(out)
    run_dir = str(out / "runinfo")
    printer(f"machine: {cores} cores in {len(topology.domains)} LLC domain(s), LLC {format_size(llc)} ({llc_note})")
    built = build_mixes(plan, llc, cores, model=model, step_seconds=kept_step_seconds(kept, machine, fresh_solo))
    for mix in built:
        printer(f"mix {mix.name:<16} {mix.tasks:>5} {'tiles' if mix.kind == 'montage' else 'tasks'}  {mix.note}")
    kernel_cases = list(dict.fromkeys(c for mix in built if mix.kind == "kernels" for c in mix.cases))
    peers, repeats = plan.peers, plan.repeats
    solo_record: dict | None = None
    solo: dict[str, list[float]] = {}
    if kernel_cases:  # once for every repetition: solo times say nothing of the peers
        solo_plan = plan_solo(kernel_cases, kept, machine, fresh=fresh_solo)
        printer(f"solo pass: {len(solo_plan.todo)} of {len(solo_plan.cases)} distinct kernel cases to run alone "
                f"({len(solo_plan.known)} already measured on this machine)")
        done = run_solo(solo_plan, kept, store, lambda todo: solo_pass(
            todo, run_dir, store, topology.cpus[0], stream, f"solo, 1 core ({len(todo)} cases)"))
        solo = {case.name: [done.seconds_of(case)] for case in kernel_cases}
        solo_record = done.to_dict()
    kept.close()
    runs: list[MixRun] = []
    record: dict = {}
    started = time.monotonic()
    for repeat in range(repeats):
        order = list(peers[repeat % len(peers):]) + list(peers[:repeat % len(peers)])
        for peer in order:
            todo = [mix for mix in built if runs_mix(peer, mix)]
            if not todo:
                continue
            try:
                submitter = start_peer(peer, cores, topology, run_dir, store, model)
            except Exception as error:  # noqa: BLE001 - a peer that cannot start is reported, the rest run
                message = f"{type(error).__name__}: {error}"
                logger.warning("%s did not start: %s", peer, message)
                runs.extend(MixRun(peer, mix.name, repeat, None, error=f"did not start: {message}") for mix in todo)
                continue
            try:
                for mix in todo:
                    run = run_mix(submitter, peer, mix, repeat, out, timeout, cores)
                    runs.append(run)
                    shown = "failed" if run.makespan is None else f"{run.makespan:8.3f} s"
                    stream.write(f"  [{repeat + 1}/{repeats}] {peer:<22} {mix.name:<16} {shown}   "
                                 f"({time.monotonic() - started:6.0f} s elapsed)\n")
                    stream.flush()
            finally:
                submitter.close()
        record = _record(plan, built, runs, solo, cores, llc, llc_note, topology)
        record["machine"]["fingerprint"], record["solo_pass"] = machine, solo_record
        (out / "bench.json").write_text(json.dumps(record, indent=1))
    record["files"] = {"json": str(out / "bench.json")}
    pyperf_paths = write_pyperf(runs, out / "pyperf", {"machine_cores": cores, "llc_bytes": llc})
    record["files"]["pyperf"] = {peer: str(p) for peer, p in pyperf_paths.items()}
    if any("vs_reference" in row for row in record["summary"]):
        record["files"]["png"] = str(bench_chart(record["summary"], out / "bench.png"))
    (out / "bench.json").write_text(json.dumps(record, indent=1))
    return record


def _record(plan: BenchPlan, built, runs, solo, cores, llc, llc_note, topology) -> dict:
    in_vm = running_in_vm()
    words = machine_words(cores, len(topology.domains), llc, in_vm)
    summary = summarise(runs, built, solo, cores, resamples=plan.resamples)
    return {
        "format": "scalpel-bench/1",
        "machine": {"cores": cores, "domains": [d.cpus for d in topology.domains], "llc": llc, "llc_note": llc_note,
                    "load_average": os.getloadavg(), "in_vm": in_vm, "words": words},
        "config": {"repeats": plan.repeats, "seed": plan.seed, "scale": plan.scale, "reference": REFERENCE},
        "mixes": [{"name": m.name, "kind": m.kind, "tasks": m.tasks, "note": m.note,
                   "cases": [{"case": c.name, "kernel": c.kernel, "size": c.size, "steps": c.steps,
                              "footprint": c.footprint_bytes} for c in m.cases],
                   "oracle": [c.name for c in m.oracle] if m.oracle else None,
                   "oracle_method": m.oracle_method or None} for m in built],
        "solo": solo,
        "summary": summary,
        "verdicts": bench_verdicts(summary, words, [vars(r) for r in runs], REFERENCE),
        "runs": [vars(r) for r in runs],
    }
