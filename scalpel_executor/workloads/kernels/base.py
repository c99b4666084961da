"""The kernel record, the error a failed check raises, and helpers every kernel family uses."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

State = dict[str, np.ndarray]
ArraySpec = dict[str, tuple[tuple[int, ...], str]]


class KernelCheckError(RuntimeError):
    """A kernel's result failed its check; ``kernel`` names it and ``mismatch`` says how."""

    def __init__(self, kernel: str, mismatch: str) -> None:
        super().__init__(kernel, mismatch)  # both in args, so the error pickles across processes
        self.kernel = kernel
        self.mismatch = mismatch

    def __str__(self) -> str:
        return (f"kernel {self.kernel!r} computed a wrong result: {self.mismatch}; "
                "its implementation in the scalpel_executor.workloads.kernels package is broken")


@dataclass(frozen=True)
class Kernel:
    """One kernel: how to allocate, fill, run and check it, and what a step costs.

    ``arrays(size)`` declares every array (name -> (shape, dtype)); ``init`` fills them;
    ``run(state, steps)`` computes and returns the output array; ``naive(state, steps)`` is the
    plain-loop reference used on a tiny instance; ``verify(state, output, steps)`` returns a
    description of what is wrong with a real result, or None. ``work(size)`` counts elementary
    operations per step and ``calls(size)`` the numpy calls made per step by Python loops; the
    rate table turns them into seconds.
    """

    name: str
    description: str
    arrays: Callable[[int], ArraySpec]
    init: Callable[[State, np.random.Generator], None]
    run: Callable[[State, int], np.ndarray]
    naive: Callable[[State, int], np.ndarray]
    verify: Callable[[State, np.ndarray, int], str | None]
    work: Callable[[int], float]
    calls: Callable[[int], float]
    min_size: int = 4
    check_size: int = 8
    check_steps: int = 3

    def footprint_bytes(self, size: int) -> int:
        """Summed bytes of the arrays the kernel keeps live at ``size``. O(number of arrays)."""
        return sum(math.prod(shape) * np.dtype(dtype).itemsize for shape, dtype in self.arrays(size).values())

    def allocate(self, size: int, seed: int) -> State:
        """The kernel's arrays at ``size``, filled from ``seed``."""
        state = {name: np.empty(shape, dtype) for name, (shape, dtype) in self.arrays(size).items()}
        self.init(state, np.random.default_rng(seed))
        return state


# ----------------------------------------------------------------------------------------------
# Helpers shared by the kernels


def _square(n: int, names: Iterable[str], dtype: str = "float64") -> ArraySpec:
    return {name: ((n, n), dtype) for name in names}


def _vectors(n: int, names: Iterable[str], dtype: str = "float64") -> ArraySpec:
    return {name: ((n,), dtype) for name in names}


def _mismatch(got: np.ndarray, expected: np.ndarray, what: str, rtol: float = 1e-8) -> str | None:
    """Describe how ``got`` differs from ``expected`` beyond ``rtol`` of its largest entry, or None."""
    got = np.asarray(got, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    if not np.all(np.isfinite(got)):
        return f"{what}: {int(np.count_nonzero(~np.isfinite(got)))} entries are not finite"
    scale = max(float(np.max(np.abs(expected), initial=0.0)), 1e-300)
    error = float(np.max(np.abs(got - expected), initial=0.0))
    if error > rtol * scale:
        return f"{what}: largest difference {error:.3g} exceeds {rtol:g} x {scale:.3g}"
    return None


def _within(values: np.ndarray, low: float, high: float, what: str) -> str | None:
    """None if every value is finite and in [low, high], else what breaks that."""
    lowest, highest = float(np.min(values)), float(np.max(values))
    if not (np.isfinite(lowest) and np.isfinite(highest)) or lowest < low or highest > high:
        return f"{what}: values span [{lowest:.6g}, {highest:.6g}], outside [{low:g}, {high:g}]"
    return None


def _uniform(state: State, rng: np.random.Generator, names: Iterable[str]) -> None:
    for name in names:
        state[name][...] = rng.random(state[name].shape)
