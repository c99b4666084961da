"""Sizing: the problem size for a footprint, and the steps for a run time (rate table or one timed run)."""

from __future__ import annotations

import logging
import math
import time

from scalpel_executor.host.blas import limit_blas_threads
from scalpel_executor.workloads.kernels.base import Kernel, State
from scalpel_executor.workloads.kernels.registry import KERNELS, get_kernel

logger = logging.getLogger(__name__)


def size_for_footprint(name: str, target_bytes: float, *, at_least: bool = False) -> int:
    """The problem size whose footprint is closest to ``target_bytes`` from one side.

    Parameters
    ----------
    name : str
        A kernel name.
    target_bytes : float
        The footprint wanted, in bytes.
    at_least : bool
        False: the largest size whose footprint is at most the target (the kernel's smallest size
        if even that is larger). True: the smallest size whose footprint is at least the target.

    Returns
    -------
    int

    Notes
    -----
    Footprints grow with size, so this is a bisection: O(log size) footprint evaluations.
    """
    kernel = get_kernel(name)
    low = kernel.min_size
    if kernel.footprint_bytes(low) >= target_bytes:
        return low
    high = low * 2
    while kernel.footprint_bytes(high) < target_bytes:
        high *= 2
    while high - low > 1:  # invariant: footprint(low) < target <= footprint(high)
        middle = (low + high) // 2
        if kernel.footprint_bytes(middle) < target_bytes:
            low = middle
        else:
            high = middle
    if at_least or kernel.footprint_bytes(high) == target_bytes:
        return high
    return low


#: Seconds per numpy call made from a Python loop (trisolv, seidel-2d, adi, nussinov); each
#: kernel's ``calls(size)`` counts in these units, fitted to its measured small-size time.
CALL_SECONDS = 1.5e-6

#: Per kernel, two (footprint bytes, seconds per unit of ``Kernel.work``) points, measured on one
#: core of the development machine (2 cores, 32 MiB L3, shared with other work) in CPU time,
#: median of three runs, at footprints near 1 MiB and 48 MiB (less where one step would outlast
#: 2 s: nussinov); in between, the rate is interpolated in log footprint, outside it is held. Use
#: scale_to_seconds() where a closer figure matters.
RATES: dict[str, tuple[tuple[float, float], tuple[float, float]]] = {
    "gemm": ((1039680, 2.39e-11), (50260336, 1.71e-11)),
    "2mm": ((1039584, 2.53e-11), (50249760, 1.82e-11)),
    "3mm": ((1036864, 2.35e-11), (50228880, 1.72e-11)),
    "syrk": ((1041664, 2.96e-11), (50274568, 1.97e-11)),
    "syr2k": ((1039416, 2.89e-11), (50283576, 1.94e-11)),
    "trisolv": ((1048344, 7.96e-10), (50320504, 1.04e-09)),
    "covariance": ((1044480, 3.15e-11), (50324832, 2e-11)),
    "correlation": ((1043328, 4.51e-11), (50286144, 2.22e-11)),
    "doitgen": ((973440, 3.1e-11), (50135232, 3.28e-11)),
    "jacobi-2d": ((1048576, 1.12e-09), (50296464, 2.19e-09)),
    "heat-2d": ((1048576, 1.08e-09), (50296464, 1.93e-09)),
    "seidel-2d": ((1045456, 1.27e-09), (50300448, 1.51e-09)),
    "fdtd-2d": ((1048352, 8.02e-10), (50320512, 1.35e-09)),
    "adi": ((1048352, 1.03e-09), (50320512, 3.74e-09)),
    "floyd-warshall": ((1044480, 6.15e-10), (50324832, 1.25e-09)),
    "nussinov": ((1046136, 4.59e-10), (21832440, 4.85e-10)),
    "spmv": ((1048576, 1.54e-09), (50331648, 7.14e-09)),
}


def step_seconds(name: str, size: int, rates: dict | None = None) -> float:
    """Predicted seconds of one step of kernel ``name`` at ``size``, from a rate table.

    Notes
    -----
    ``unit(footprint) * work(size) + CALL_SECONDS * calls(size)``; O(1).
    """
    kernel = get_kernel(name)
    table = RATES if rates is None else rates
    try:
        (fp_low, unit_low), (fp_high, unit_high) = table[name]
    except KeyError:
        raise ValueError(f"no rate for kernel {name!r} in the rate table; give rates with an entry for it") from None
    footprint = kernel.footprint_bytes(size)
    if fp_high <= fp_low or footprint <= fp_low:
        unit = unit_low
    elif footprint >= fp_high:
        unit = unit_high
    else:
        where = math.log(footprint / fp_low) / math.log(fp_high / fp_low)
        unit = math.exp((1 - where) * math.log(unit_low) + where * math.log(unit_high))
    return unit * kernel.work(size) + CALL_SECONDS * kernel.calls(size)


def _time_steps(kernel: Kernel, state: State, probe_seconds: float) -> float:
    """CPU seconds per step: one untimed warm-up step (caches and TLB are cold after allocation),
    then enough timed steps to fill ``probe_seconds``, at least one.

    The calling thread's CPU time, not wall time: on a shared machine a probe also waits for a
    core, which says nothing about how long the kernel needs one. (BLAS runs on this thread.)"""
    start = time.thread_time()
    kernel.run(state, 1)
    warm_up = time.thread_time() - start
    steps = max(1, min(10_000, math.ceil(probe_seconds / max(warm_up, 1e-6))))
    start = time.thread_time()
    kernel.run(state, steps)
    return (time.thread_time() - start) / steps


def steps_for_seconds(kernel: str, size: int, target_seconds: float, *, probe_seconds: float | None = None,
                      seed: int = 0) -> int:
    """Steps of ``kernel`` at ``size`` that make a solo run last about ``target_seconds`` here,
    timed on this machine (:func:`scalpel_executor.workloads.kernels.cases.scale_to_seconds` for a case).

    ``probe_seconds``: time spent measuring, default min(0.5, target / 4), and at least one step;
    ``seed`` seeds the probe's data. Runs the kernel in this process, on one BLAS thread.
    """
    if not (target_seconds > 0) or math.isinf(target_seconds):
        raise ValueError(f"target_seconds must be a positive number of seconds, got {target_seconds!r}")
    probe = min(0.5, target_seconds / 4) if probe_seconds is None else probe_seconds
    timed = KERNELS[kernel]
    limit_blas_threads(1)
    per_step = _time_steps(timed, timed.allocate(size, seed), probe)
    steps = max(1, round(target_seconds / per_step))
    logger.debug("calibrated %s: %.4g s per step, %d steps for %.3g s", kernel, per_step, steps, target_seconds)
    return steps
