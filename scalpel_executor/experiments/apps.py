"""What the experiments run inside every executor's workers: the task bodies and the BLAS cap.

Workers unpickle these functions by reference, so loading this module is what a worker pays
before its first task: it brings numpy and the kernels, and the warm-up task is what pays for
it. Nothing here imports Parsl, so a plain process pool's workers stay free of it.
"""

from __future__ import annotations

import os
import shlex
import time
import zlib

from scalpel_executor.host.blas import THREAD_ENV_VARS, limit_blas_threads
from scalpel_executor.workloads.kernels import run_kernel

#: The environment that starts a worker with one BLAS thread (HTEX's worker_init exports it).
ONE_THREAD_ENV = {name: "1" for name in THREAD_ENV_VARS}


def one_blas_thread() -> None:
    """Cap BLAS at one thread here and in every process this one starts: a task is one core's work."""
    os.environ.update(ONE_THREAD_ENV)
    limit_blas_threads(1)


def timed_kernel(kernel: str, size: int, steps: int, seed: int = 0, parsl_resource_specification=None) -> dict:
    """Run one kernel case and report when and where it ran, so every executor is measured alike."""
    started = time.time()
    result = run_kernel(kernel, size, steps, seed=seed)
    finished = time.time()
    try:
        with open("/proc/self/stat") as stream:
            cpu = int(stream.read().rsplit(")", 1)[1].split()[36])  # field 39: CPU last run on
    except (OSError, ValueError, IndexError):
        cpu = -1
    affinity = sorted(os.sched_getaffinity(0))
    return {**result, "started": started, "finished": finished, "cpu": affinity[0] if len(affinity) == 1 else cpu,
            "pid": os.getpid()}


def seeded_step(kernel: str, size: int, steps: int, seed: int, parsl_resource_specification=None) -> dict:
    """A workflow's first step: a kernel case from a seed; its result (a dict) feeds the next step."""
    return timed_kernel(kernel, size, steps, seed)


def step_after(upstream: dict, kernel: str, size: int, steps: int, parsl_resource_specification=None) -> dict:
    """A later step of a workflow, seeded by what the step before computed (its checksum): it
    really needs that result, so it can only start once the upstream task has ended."""
    return timed_kernel(kernel, size, steps, seed=zlib.crc32(repr(upstream["checksum"]).encode()))


def record_line(result: dict, outputs=(), stdout=None, stderr=None, parsl_resource_specification=None) -> str:
    """A workflow's ``bash_app`` step: the shell writes one line per member (case, checksum,
    seconds) to its output file, which the reduce reads."""
    line = f"{result['name']}-n{result['size']}x{result['steps']} {result['checksum']!r} {result['seconds']:.6f}"
    return f"echo {shlex.quote(line)} > {shlex.quote(outputs[0].filepath)}"


def reduce_lines(inputs=(), parsl_resource_specification=None) -> dict:
    """A workflow's reduce over its members' files (``inputs=``, Parsl ``File`` objects)."""
    rows = [open(file.filepath).read().split() for file in inputs]
    return {"members": len(rows), "cases": sorted(row[0] for row in rows),
            "seconds": sum(float(row[2]) for row in rows), "checksum": sum(float(row[1]) for row in rows)}


def warm_up(parsl_resource_specification=None) -> int:
    """Nothing but being unpickled (which loads numpy and the kernels); says which worker ran it."""
    return os.getpid()


def noop(parsl_resource_specification=None) -> int:
    """The no-op task: what an executor costs per task when the task costs nothing."""
    return 0
