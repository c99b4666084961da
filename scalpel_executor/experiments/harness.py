"""Running kernel batches on an executor, the same way for the demo and the benchmark.

::

    start_peer(peer)   the executor a peer names (Parsl's HTEX or thread pool, a process pool,
                       ScalpelExecutor per policy), each worker warmed up before anything is timed
    run_kernels        submit a whole batch at once, wait for all; makespan from first submit to
                       last result, and a row per task (where and when it ran)
    run_workflow       the same for a DAG: every step submitted at once, each taking its upstream
                       futures as arguments (Parsl's DFK holds a step until they are done)
    solo_pass          every distinct case alone on one pinned core, one at a time, through
                       ScalpelExecutor, so the profile store learns the footprints and the caller
                       gets solo times (which cases: experiments.solo_times, kept per machine)
    fresh_store        an empty profile store for one run
    OtherWork          around one timed run: the host's CPU time less the executor under test's
                       (this process and its descendants, and the processes a Parsl provider
                       launched, which are not: LocalProvider's worker pools are reparented), as
                       CPU seconds per second per core, the figure the executor itself judges a
                       host busy by (learning.host_model.BUSY_OTHERS)

Every peer runs the task bodies of :mod:`~scalpel_executor.experiments.apps` with one BLAS thread.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

import parsl
from parsl import bash_app, python_app
from parsl.config import Config
from parsl.data_provider.files import File
from parsl.executors import HighThroughputExecutor, ThreadPoolExecutor
from parsl.providers import LocalProvider
import psutil
from tqdm import tqdm

from scalpel_executor.core.batching import Batching
from scalpel_executor.core.domains import Topology
from scalpel_executor.host.cpu_time import CpuSample, other_work_per_core, sample_cpu
from scalpel_executor.experiments.apps import (
    ONE_THREAD_ENV,
    one_blas_thread,
    record_line,
    reduce_lines,
    seeded_step,
    step_after,
    timed_kernel,
    warm_up,
)
from scalpel_executor.runtime.driver.executor import ScalpelExecutor
from scalpel_executor.workloads.kernels import KernelCase

#: Seconds a warm-up task may take: a worker's first one imports numpy and the kernels.
WARM_UP_TIMEOUT = 300.0
_BAR = "  {desc:<22} {bar:24} {n_fmt:>3}/{total_fmt} tasks {elapsed_s:6.1f} s"
_BAR_CHARS = "░█"


class Progress:
    """A progress bar on a terminal; anywhere else (a log file, a pipe) only the finished line."""

    def __init__(self, label: str, total: int, stream: TextIO) -> None:
        self.label, self.total, self.stream, self.done = label, total, stream, 0
        self.started = time.monotonic()
        live = hasattr(stream, "isatty") and stream.isatty()
        self.bar = tqdm(total=total, desc=label, file=stream, bar_format=_BAR, ascii=_BAR_CHARS, disable=not live)

    def update(self) -> None:
        self.done += 1
        self.bar.update()

    def close(self) -> None:
        if not self.bar.disable:
            self.bar.close()
        elif self.done == self.total:
            self.stream.write(tqdm.format_meter(self.done, self.total, time.monotonic() - self.started,
                                                prefix=self.label, bar_format=_BAR, ascii=_BAR_CHARS) + "\n")
            self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def fresh_store(out: Path) -> str:
    """``<out>/profiles.sqlite``, emptied (with its WAL files): each run learns from its own solo pass."""
    out.mkdir(parents=True, exist_ok=True)
    store = out / "profiles.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(str(store) + suffix).unlink(missing_ok=True)
    return str(store)


class ParslSubmitter:
    """A loaded Parsl DFK with one executor; ``app`` wraps a function as a python_app on it."""

    def __init__(self, executor, run_dir: str) -> None:
        self.executor = executor
        self.dfk = parsl.load(Config(executors=[executor], run_dir=run_dir, strategy="none", initialize_logging=True))

    def app(self, function: Callable) -> Callable:
        return python_app(function, executors=[self.executor.label])

    def bash_app(self, function: Callable) -> Callable:
        return bash_app(function, executors=[self.executor.label])

    def close(self) -> None:
        try:
            self.dfk.cleanup()
        finally:
            parsl.clear()


class PoolSubmitter:
    """``concurrent.futures.ProcessPoolExecutor`` with the submit interface of :class:`ParslSubmitter`."""

    executor = None

    def __init__(self, cores: int) -> None:
        self.pool = concurrent.futures.ProcessPoolExecutor(
            max_workers=cores, mp_context=multiprocessing.get_context("forkserver"), initializer=one_blas_thread)

    def app(self, function: Callable) -> Callable:
        return lambda *args: self.pool.submit(function, *args)

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def parsl_executor(peer: str, cores: int, topology: Topology, store: str, model=None):
    """The Parsl executor a peer names, on ``cores`` workers: ``htex-<cpu_affinity>``, ``threads``,
    ``scalpel:<policy>``, ``scalpel-inprocess`` (the default policy, its pool in this process), or
    ``oracle`` (Scalpel's pinned workers, submission order)."""
    label = peer.replace(":", "-").replace("+", "-")
    if peer.startswith("htex-"):
        exports = " ".join(f"export {name}={value};" for name, value in ONE_THREAD_ENV.items())
        return HighThroughputExecutor(
            label=label, cpu_affinity=peer.split("-", 1)[1], max_workers_per_node=cores,
            provider=LocalProvider(init_blocks=1, min_blocks=1, max_blocks=1, worker_init=exports))
    if peer == "threads":
        return ThreadPoolExecutor(label=label, max_threads=cores)
    if peer == "scalpel-inprocess":
        return ScalpelExecutor(label=label, profiles=store, topology=topology, contention_model=model,
                               node_manager=False)
    if peer == "oracle" or peer.startswith("scalpel:"):
        policy = "fifo" if peer == "oracle" else peer.split(":", 1)[1]
        return ScalpelExecutor(label=label, policy=policy, profiles=store, topology=topology, contention_model=model)
    raise ValueError(f"unknown peer {peer!r}; name htex-<cpu_affinity>, threads, processpool, scalpel:<policy> "
                     "or oracle")


def start_peer(peer: str, cores: int, topology: Topology, run_dir: str, store: str, model=None):
    """The started, warmed-up submitter of ``peer``; the caller closes it."""
    if peer == "processpool":
        submitter = PoolSubmitter(cores)
    else:
        submitter = ParslSubmitter(parsl_executor(peer, cores, topology, store, model), run_dir)
    return warmed(submitter, cores)


def warmed(submitter, workers: int):
    """``submitter`` once ``workers`` of its workers have run a warm-up task; closed, and the error
    raised, if that fails."""
    try:
        warm_every_worker(submitter, workers)
    except BaseException:
        submitter.close()
        raise
    return submitter


def executor_roots(submitter) -> list[int]:
    """The processes whose trees hold the executor under test's work: this one (the driver, and
    through its descendants HTEX's interchange and Scalpel's node manager and workers) and each
    process a Parsl provider launched (LocalProvider's worker pool leaves this tree: it is started
    in the background by a shell that exits)."""
    provider = getattr(getattr(submitter, "executor", None), "provider", None)
    launched = [job.get("remote_pid") for job in getattr(provider, "resources", {}).values()]
    return [os.getpid()] + [pid for pid in launched if isinstance(pid, int)]


def tree_cpu_seconds(roots: Sequence[int]) -> dict[tuple[int, float], float]:
    """CPU seconds per process (keyed by pid and start time) in the trees of ``roots``, each with
    the children it has reaped, so a task's finished subprocess counts once, in its parent."""
    seen: dict[tuple[int, float], float] = {}
    for root in roots:
        try:
            top = psutil.Process(root)
            tree = [top] + top.children(recursive=True)
        except psutil.Error:
            continue
        for process in tree:
            try:
                with process.oneshot():
                    times = process.cpu_times()
                    key = (process.pid, process.create_time())
            except psutil.Error:
                continue
            seen[key] = times.user + times.system + times.children_user + times.children_system
    return seen


class OtherWork:
    """Other work per core during one timed run of the executor ``submitter`` holds: ``start()``
    before it, ``stop()`` after it, which returns the figure (None where the host's CPU time is
    unreadable). A process of the executor that ends between the two samples and is not reaped
    by another takes its CPU time with it, which counts as other work: the error leans to busy."""

    def __init__(self, submitter, cores: int) -> None:
        self.roots, self.cores = executor_roots(submitter), cores
        self.first: CpuSample | None = None
        self.first_tree: dict[tuple[int, float], float] = {}

    def start(self) -> None:
        self.first_tree, self.first = tree_cpu_seconds(self.roots), sample_cpu()

    def stop(self) -> float | None:
        last, last_tree = sample_cpu(), tree_cpu_seconds(self.roots)
        own = sum(seconds - self.first_tree.get(key, 0.0) for key, seconds in last_tree.items())
        return other_work_per_core(CpuSample(self.first.at, self.first.busy, 0.0),
                                   CpuSample(last.at, last.busy, own), self.cores)


def warm_every_worker(submitter, workers: int) -> None:
    """Warm-up tasks until ``workers`` distinct workers have run one (a pool may route to one worker)."""
    warm = submitter.app(warm_up)
    pids: set[int] = set()
    for _ in range(20):
        pids |= {f.result(timeout=WARM_UP_TIMEOUT) for f in [warm() for _ in range(workers * 2)]}
        if len(pids) >= workers:
            break


def run_kernels(submitter, cases: Sequence[KernelCase], *, timeout: float,
                progress: Progress | None = None, widths: Sequence[int] = ()) -> tuple[float, list[dict]]:
    """Submit every case at once and wait for all: the makespan (first submit to last result) and a
    row per case: where it ran, when (seconds since the submit) and for how long. Raises the
    first failure. ``widths``: the cores each case asks for, told to a ScalpelExecutor as its
    ``cores`` hint (other executors take no per-task cores: they are told nothing)."""
    app = submitter.app(timed_kernel)
    hinted = widths and isinstance(getattr(submitter, "executor", None), ScalpelExecutor)
    started, wall_zero = time.monotonic(), time.time()
    futures = [app(case.kernel, case.size, case.steps, parsl_resource_specification={"cores": widths[i]})
               if hinted else app(case.kernel, case.size, case.steps) for i, case in enumerate(cases)]
    for future in concurrent.futures.as_completed(futures, timeout=timeout):
        future.result()
        if progress is not None:
            progress.update()
    makespan = time.monotonic() - started
    return makespan, [_task_row(case, future.result(), wall_zero) for case, future in zip(cases, futures)]


def _task_row(case: KernelCase, ran: dict, wall_zero: float) -> dict:
    """Where and when a kernel task ran (seconds since ``wall_zero``), from its timed result."""
    return {"case": case.name, "kernel": case.kernel, "footprint": case.footprint_bytes, "cpu": ran["cpu"],
            "start": ran["started"] - wall_zero, "end": ran["finished"] - wall_zero, "seconds": ran["seconds"]}


def run_workflow(submitter: ParslSubmitter, members: Sequence[Sequence[KernelCase]], out: Path, *, seed: int,
                 timeout: float) -> tuple[float, list[dict]]:
    """Run a DAG written as a user writes one: per member, a seeded first step, then each later
    kernel step taking the previous step's result (a dict) as its argument, a ``bash_app`` that
    writes the member's line to a file, and one reduce over those files (``inputs=``). Everything
    is submitted at once, futures as arguments, so Parsl's DFK releases each step when its inputs
    are done. Returns the makespan (first submit to the reduce's result) and a row per kernel
    step as :func:`run_kernels` gives. Raises the first failure.
    """
    first, after = submitter.app(seeded_step), submitter.app(step_after)
    record, reduce = submitter.bash_app(record_line), submitter.app(reduce_lines)
    out.mkdir(parents=True, exist_ok=True)
    started, wall_zero = time.monotonic(), time.time()
    steps, lines = [], []
    for member, cases in enumerate(members):
        result = first(cases[0].kernel, cases[0].size, cases[0].steps, seed + member)
        steps.append((cases[0], result))
        for case in cases[1:]:
            result = after(result, case.kernel, case.size, case.steps)
            steps.append((case, result))
        lines.append(record(result, outputs=[File(str(out / f"member-{member:03d}.txt"))]))
    summary = reduce(inputs=[line.outputs[0] for line in lines]).result(timeout=timeout)
    makespan = time.monotonic() - started
    if summary["members"] != len(members):
        raise RuntimeError(f"the reduce read {summary['members']} member files of {len(members)}")
    return makespan, [_task_row(case, future.result(), wall_zero) for case, future in steps]


def solo_pass(cases: Sequence[KernelCase], run_dir: str, store: str, cpu: int, stream: TextIO,
              label: str) -> dict[str, float]:
    """Every distinct case alone on core ``cpu``, through Scalpel with the probe: solo seconds per
    case name; the footprints the probe measured go to ``store``."""
    submitter = ParslSubmitter(ScalpelExecutor(label="solo", profiles=store, topology=[[cpu]],
                                               batching=Batching(window=0.0)),
                               run_dir)
    solo: dict[str, float] = {}
    try:
        warm_every_worker(submitter, 1)
        app = submitter.app(timed_kernel)
        distinct = list(dict.fromkeys(cases))
        with Progress(label, len(distinct), stream) as progress:
            for case in distinct:
                solo[case.name] = app(case.kernel, case.size, case.steps).result()["seconds"]
                progress.update()
    finally:
        submitter.close()
    return solo
