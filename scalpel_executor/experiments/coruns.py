"""Co-runs measured: tasks started together, each pinned to a core of its own, each timed over its
own steps while the others keep running (``benchmarks/corun.py``, ``benchmarks/interference_holdout.py``).

::

    parent ── one process per task, from a forkserver with the kernels imported (process_context)
      task k: pinned to cpus[k], one BLAS thread, its data made, one warm step ──> barrier
        all at once: its steps timed (CPU and wall) ──> finished[k] set
        ──> steps on, untimed, until every task has finished: none is timed beside a partner that stopped
        ──> (k, (CPU seconds, wall seconds)) on the results queue; (k, None) from a task that failed

A task is (kernel, size, steps): a suite kernel (:data:`~scalpel_executor.workloads.kernels.KERNELS`)
at ``size``, or :data:`STREAM`.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from scalpel_executor.workloads.kernels import KERNELS, limit_blas_threads

#: Not a suite kernel: ``a += b`` over two arrays of ``size`` doubles (interference_holdout.py's span
#: several LLCs: a task that streams through memory and reuses nothing).
STREAM = "stream"
#: Seconds a child waits for its partners at the barrier, and the parent for every result: a
#: measurement that takes longer has hung.
BARRIER_TIMEOUT, RESULTS_TIMEOUT = 600, 1200


def process_context() -> multiprocessing.context.BaseContext:
    """The context co-run processes start from: a forkserver with the kernels and numpy imported,
    so each measurement's children start at once rather than after their imports."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["scalpel_executor.workloads.kernels", "numpy"])
    return context


@contextlib.contextmanager
def pinned_to(cpu: int) -> Iterator[None]:
    """This process on ``cpu`` alone for the block: steps are calibrated on the core they are timed on."""
    parent_cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, parent_cpus)


def stepper(kernel: str, size: int, seed: int) -> Callable[[], object]:
    """One step of the task as a callable, its data allocated and filled."""
    if kernel == STREAM:
        rng = np.random.default_rng(seed)
        a, b = rng.random(size), rng.random(size)
        return lambda: np.add(a, b, out=a)
    run = KERNELS[kernel].run
    state = KERNELS[kernel].allocate(size, seed)
    return lambda: run(state, 1)


def footprint_bytes(kernel: str, size: int) -> int:
    """The bytes of the task's data: a suite kernel's arrays, or the stream's two."""
    return 2 * 8 * size if kernel == STREAM else KERNELS[kernel].footprint_bytes(size)


def measure_together(context, tasks: Sequence[tuple[str, int, int]], cpus: Sequence[int],
                     seed: int) -> list[tuple[float, float]]:
    """Run ``tasks`` at once, task k pinned to ``cpus[k]``; each one's (CPU, wall) seconds over its
    steps. RuntimeError naming the tasks when a child fails (its traceback is on stderr)."""
    barrier = context.Barrier(len(tasks))
    finished = [context.Event() for _ in tasks]
    results = context.Queue()
    children = [context.Process(target=_child, args=(*task, cpu, seed, barrier, finished, index, results))
                for index, (task, cpu) in enumerate(zip(tasks, cpus))]
    for child in children:
        child.start()
    seconds = dict(results.get(timeout=RESULTS_TIMEOUT) for _ in children)
    for child in children:
        child.join()
    if any(child.exitcode != 0 for child in children) or None in seconds.values():
        names = [f"{kernel}-n{size}x{steps}" for kernel, size, steps in tasks]
        raise RuntimeError(f"a measurement of {names} failed: child exit codes "
                           f"{[child.exitcode for child in children]} (its traceback is above)")
    return [seconds[index] for index in range(len(tasks))]


def _child(kernel: str, size: int, steps: int, cpu: int, seed: int, barrier, finished, index: int,
           results) -> None:
    """One pinned task of a measurement; puts (index, (CPU seconds, wall seconds) of its own steps)
    on ``results``."""
    seconds = None
    try:
        os.sched_setaffinity(0, {cpu})
        limit_blas_threads(1)
        step = stepper(kernel, size, seed)
        step()  # warm: pages mapped, code paths taken
        barrier.wait(timeout=BARRIER_TIMEOUT)
        start, start_cpu = time.perf_counter(), time.process_time()
        for _ in range(steps):
            step()
        seconds = (time.process_time() - start_cpu, time.perf_counter() - start)
        finished[index].set()
        while not all(event.is_set() for event in finished):  # stay a co-runner until the others end
            step()
    except BaseException:  # a failed child must neither hold its partner at the barrier ...
        barrier.abort()
        raise
    finally:  # ... nor keep it running, nor leave the parent waiting
        finished[index].set()
        results.put((index, seconds))
