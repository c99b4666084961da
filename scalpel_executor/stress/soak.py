"""Soak: many short tasks with injected worker crashes, then repeated start/stop cycles.

Two phases, each measured from the driving process::

    phase 1  DataFlowKernel ── ScalpelExecutor ── pinned workers
             N no-op tasks; every CRASH_EVERY-th kills its worker (os._exit, SIGSEGV, SIGKILL in
             turn); retries=0, so exactly N / CRASH_EVERY futures fail with WorkerDied.
             Every SAMPLE_EVERY completions: RSS, open descriptors, threads, child processes.
    phase 2  CYCLES x (ScalpelExecutor.start, a few tasks, shutdown); descriptors, threads and
             child processes after each cycle must equal the figures before the first.

Usage::

    python benchmarks/soak.py                                  # 20,000 tasks, 1% crash, 50 cycles
    python benchmarks/soak.py --tasks 2000 --cycles 10 --json soak.json

``tests/runtime/test_reliability.py`` runs the same functions at a smaller size and asserts the counts.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from concurrent.futures import as_completed

import psutil

CRASH_KINDS = ("exit", "segfault", "sigkill")
SETTLE_SECONDS = 5.0  # how long a start/stop cycle's resources may take to return to the baseline


def process_resources() -> dict:
    """RSS (bytes), open descriptors, threads and live child processes (workers) of this process.

    Only direct children count: a worker's own helpers come and go with it.
    """
    me = psutil.Process()
    children = 0
    for child in me.children():
        try:
            children += child.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            pass
    return {"rss": me.memory_info().rss, "fds": me.num_fds(), "threads": threading.active_count(),
            "children": children}


def soak_task(i: int, crash_every: int, parsl_resource_specification: dict | None = None) -> int:
    """A no-op that, for every ``crash_every``-th index, kills its own worker instead."""
    if crash_every and i % crash_every == 0:
        import ctypes
        import os
        import signal

        kind = ("exit", "segfault", "sigkill")[(i // crash_every) % 3]
        if kind == "exit":
            os._exit(7)
        if kind == "segfault":
            ctypes.string_at(0)
        os.kill(os.getpid(), signal.SIGKILL)
    return i


def run_tasks(n_tasks: int, crash_every: int = 100, sample_every: int = 2000, run_dir: str | None = None,
              log=print) -> dict:
    """Phase 1: run ``n_tasks`` through Parsl and a ScalpelExecutor; return counts and samples."""
    from parsl import python_app
    from parsl.config import Config
    from parsl.dataflow.dflow import DataFlowKernel

    from scalpel_executor import ScalpelExecutor, WorkerDied

    run_dir = run_dir or tempfile.mkdtemp(prefix="scalpel-soak-")
    executor = ScalpelExecutor(label="soak", profiles=False)
    dfk = DataFlowKernel(Config(executors=[executor], run_dir=run_dir, retries=0, initialize_logging=False))
    app = python_app(soak_task, data_flow_kernel=dfk, executors=["soak"])
    try:
        node = executor.pool
        node.wait_started(60)  # the DFK's start returns before the workers: the soak counts them
        slots = len(node.slot_cpus_map)
        started_pids = sorted(node.worker_pids)
        before = process_resources()
        samples = [{"done": 0, **before}]
        log(f"{'done':>8} {'RSS MiB':>8} {'fds':>5} {'threads':>7} {'children':>8}")
        log(f"{0:>8} {before['rss'] / 2**20:>8.1f} {before['fds']:>5} {before['threads']:>7} {before['children']:>8}")
        start = time.monotonic()
        futures = [app(i, crash_every) for i in range(n_tasks)]
        ok = died = other = 0
        for done, future in enumerate(as_completed(futures), 1):
            error = future.exception()
            if error is None:
                ok += 1
            elif isinstance(error, WorkerDied):
                died += 1
            else:
                other += 1
                log(f"unexpected failure: {error!r}")
            if done % sample_every == 0 or done == n_tasks:
                sample = {"done": done, **process_resources()}
                samples.append(sample)
                log(f"{done:>8} {sample['rss'] / 2**20:>8.1f} {sample['fds']:>5} {sample['threads']:>7} "
                    f"{sample['children']:>8}")
        elapsed = time.monotonic() - start
        deadline = time.monotonic() + 60  # replacements still importing once the last task ended
        while (len(node.worker_pids) != slots or len(node.respawn_seconds) < node.respawns) \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        settled = process_resources()  # every replacement ready: no spawn in flight
        respawn = sorted(node.respawn_seconds)
        report = {
            "tasks": n_tasks, "crashes_injected": len(range(0, n_tasks, crash_every)) if crash_every else 0,
            "succeeded": ok, "worker_died": died, "other_failures": other,
            "pending": sum(not f.done() for f in futures),
            "workers_at_start": len(started_pids), "workers_at_end": len(node.worker_pids),
            "respawns": node.respawns,
            "respawn_median_s": respawn[len(respawn) // 2] if respawn else None,
            "respawn_max_s": respawn[-1] if respawn else None,
            "seconds": elapsed, "tasks_per_second": n_tasks / elapsed,
            "records_kept": len(executor.records),
            "samples": samples, "before": before, "settled": settled,
        }
        pids = node.worker_pids
    finally:
        dfk.cleanup()
    report["workers_left_after_cleanup"] = len([p for p in pids if psutil.pid_exists(p)])
    return report


def _noop(x):
    return x


def _settled(baseline: dict, within: float = SETTLE_SECONDS) -> dict:
    """:func:`process_resources` once its descriptors, threads and children are back to ``baseline``,
    or as they are after ``within`` seconds: a daemon thread of the run just shut down may still be
    returning when ``shutdown()`` does (under load, one such thread was counted as a leak); a leak
    stays above the baseline and is reported so."""
    deadline = time.monotonic() + within
    while True:
        now = process_resources()
        back = all(now[k] <= baseline[k] for k in ("fds", "threads", "children"))
        if back or time.monotonic() >= deadline:
            return now
        time.sleep(0.05)


def run_cycles(n_cycles: int, tasks_per_cycle: int = 20, log=print) -> dict:
    """Phase 2: start, use and shut down a ScalpelExecutor ``n_cycles`` times; return resources."""
    from scalpel_executor import ScalpelExecutor

    def one_cycle() -> list[int]:
        executor = ScalpelExecutor(label="cycle", profiles=False)
        executor.start()
        try:
            executor.pool.wait_started(60)
            pids = executor.pool.worker_pids
            futures = [executor.submit(_noop, {}, i) for i in range(tasks_per_cycle)]
            assert [f.result(timeout=60) for f in futures] == list(range(tasks_per_cycle))
        finally:
            executor.shutdown()
        return pids

    one_cycle()  # first use loads Parsl's serializer and friends: not a leak
    baseline = process_resources()
    after = []
    survivors = 0
    for _ in range(n_cycles):
        pids = one_cycle()
        survivors += len([p for p in pids if psutil.pid_exists(p)])
        after.append(_settled(baseline))
    last = after[-1] if after else baseline
    log(f"{n_cycles} start/stop cycles: fds {baseline['fds']} -> {last['fds']} (max {max(a['fds'] for a in after or [baseline])}), "
        f"threads {baseline['threads']} -> {last['threads']}, children {baseline['children']} -> {last['children']}, "
        f"RSS {baseline['rss'] / 2**20:.1f} -> {last['rss'] / 2**20:.1f} MiB, workers surviving shutdown: {survivors}")
    return {"cycles": n_cycles, "baseline": baseline, "after": after, "workers_surviving_shutdown": survivors}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20000)
    parser.add_argument("--crash-every", type=int, default=100, help="every N-th task kills its worker (100 = 1%%)")
    parser.add_argument("--sample-every", type=int, default=2000)
    parser.add_argument("--cycles", type=int, default=50)
    parser.add_argument("--json", help="write the full report to this file")
    args = parser.parse_args(argv)
    if args.tasks < 1 or args.crash_every < 0 or args.sample_every < 1 or args.cycles < 0:
        parser.error("--tasks and --sample-every must be >= 1, --crash-every and --cycles >= 0")

    tasks = run_tasks(args.tasks, args.crash_every, args.sample_every)
    rss = [s["rss"] for s in tasks["samples"]]
    fds = [s["fds"] for s in tasks["samples"]]
    print(f"\n{tasks['tasks']} tasks in {tasks['seconds']:.1f} s ({tasks['tasks_per_second']:.0f}/s): "
          f"{tasks['succeeded']} succeeded, {tasks['worker_died']} failed with WorkerDied "
          f"({tasks['crashes_injected']} crashes injected), {tasks['other_failures']} other failures, "
          f"{tasks['pending']} pending")
    print(f"workers {tasks['workers_at_start']} at start, {tasks['workers_at_end']} at end, "
          f"{tasks['workers_left_after_cleanup']} left after cleanup; {tasks['respawns']} respawns, "
          f"median {tasks['respawn_median_s']:.2f} s, max {tasks['respawn_max_s']:.2f} s"
          if tasks["respawns"] else "no respawns")
    print(f"RSS {min(rss) / 2**20:.1f}-{max(rss) / 2**20:.1f} MiB, fds {min(fds)}-{max(fds)} "
          f"(a sample may catch a replacement mid-spawn); settled: fds {tasks['before']['fds']} -> "
          f"{tasks['settled']['fds']}, threads {tasks['before']['threads']} -> {tasks['settled']['threads']}; "
          f"executor.records holds {tasks['records_kept']}")
    cycles = run_cycles(args.cycles)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"args": vars(args), "tasks": tasks, "cycles": cycles}, handle, indent=1)
    lost = tasks["tasks"] - tasks["succeeded"] - tasks["worker_died"] - tasks["other_failures"]
    healthy = (tasks["worker_died"] == tasks["crashes_injected"] and tasks["other_failures"] == 0 and lost == 0
               and tasks["pending"] == 0 and tasks["workers_at_end"] == tasks["workers_at_start"]
               and tasks["workers_left_after_cleanup"] == 0 and cycles["workers_surviving_shutdown"] == 0
               and tasks["settled"]["fds"] == tasks["before"]["fds"]
               and all(a["fds"] == cycles["baseline"]["fds"] and a["children"] == 0 for a in cycles["after"]))
    print("results lost: 0" if lost == 0 else f"results lost: {lost}")
    print("OK" if healthy else "FAILED")
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
