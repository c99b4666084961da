"""Running one case, the body of a task: check the kernel, allocate, time the run, verify the result."""

from __future__ import annotations

import time

import numpy as np

from scalpel_executor.host.blas import limit_blas_threads
from scalpel_executor.workloads.kernels.base import KernelCheckError, _mismatch
from scalpel_executor.workloads.kernels.registry import _validated, get_kernel


def check_kernel(name: str, seed: int = 0) -> None:
    """Run kernel ``name`` and its plain-loop reference on a tiny instance; they must agree.

    Raises
    ------
    KernelCheckError
        Naming the kernel and the largest difference.

    Notes
    -----
    Sizes of 5 to 128 and two or three steps keep this under about 0.1 s for every kernel.
    """
    kernel = get_kernel(name)
    state = kernel.allocate(kernel.check_size, seed)
    reference = kernel.naive({key: value.copy() for key, value in state.items()}, kernel.check_steps)
    result = kernel.run(state, kernel.check_steps)
    problem = _mismatch(result, reference, f"size {kernel.check_size}, {kernel.check_steps} steps: "
                        "vectorised result against the plain-loop reference", rtol=1e-9)
    if problem:
        raise KernelCheckError(name, problem)


def run_kernel(name: str, size: int, steps: int = 1, seed: int = 0, check: bool = True) -> dict:
    """Run one kernel case and report what it did: the body of a task.

    Parameters
    ----------
    name : str
        A key of :data:`KERNELS`.
    size : int
        Problem size; sets the footprint (:func:`footprint_bytes`).
    steps : int
        Time steps, pivot rounds or repetitions; sets the run time.
    seed : int
        Seeds the input data; the same arguments give the same checksum.
    check : bool
        Check the kernel against its plain-loop reference on a tiny instance, and its real result
        against an invariant (Freivalds' test, a maximum principle, a conserved sum, ...).

    Returns
    -------
    dict
        ``name``, ``size``, ``steps``, ``footprint_bytes``, ``seconds`` (wall time of the kernel
        alone, without allocation and checks), ``cpu_seconds`` (the same span in CPU time of the
        calling thread, which excludes waiting for a core) and ``checksum`` (sum of the output):
        plain numbers and strings, so the result crosses any process boundary.

    Raises
    ------
    ValueError
        For an unknown kernel, a size below the kernel's smallest or steps below 1.
    KernelCheckError
        When a check fails.

    Notes
    -----
    Module-level and importable, so it pickles by reference: ``python_app(run_kernel)`` or
    ``executor.submit(run_kernel, "spmv", 1 << 20, 50)`` both work.
    """
    kernel = _validated(name, size, steps)
    limit_blas_threads(1)
    if check:
        check_kernel(name, seed)
    state = kernel.allocate(size, seed)
    start, start_cpu = time.perf_counter(), time.thread_time()
    output = kernel.run(state, steps)
    seconds, cpu_seconds = time.perf_counter() - start, time.thread_time() - start_cpu
    if check:
        problem = kernel.verify(state, output, steps)
        if problem:
            raise KernelCheckError(name, f"size {size}, {steps} steps: {problem}")
    return {"name": name, "size": int(size), "steps": int(steps), "footprint_bytes": kernel.footprint_bytes(size),
            "seconds": seconds, "cpu_seconds": cpu_seconds, "checksum": float(np.sum(output, dtype=np.float64))}
