"""Compute kernels modelled on Polybench, with footprint and run time set apart.

A *case* is ``KernelCase(kernel, size, steps)``: the problem ``size`` fixes which arrays the kernel
keeps live, hence its memory footprint; ``steps`` (time steps, pivot rounds or repetitions) fixes
how long it runs. The moving parts::

    suite(llc_bytes, cores) / contention_mix(...)        pure: no clock, no process
        footprint targets (fractions of the LLC) ─> size_for_footprint ─> size
        RATES (seconds per unit of work, measured once) ─> steps for a target run time
        └─> [KernelCase(kernel, size, steps), ...]
                │   calibrate(case, target_seconds): one short timed run rescales steps
                v
    run_kernel(name, size, steps, seed, check)           the task body, e.g. a Parsl python_app
        KERNELS[name].arrays(size) ─> allocate ─> init(rng) ─> run(state, steps) ─> output
        check: run and a naive loop version agree on a tiny instance, and
               verify(state, output) holds on the real result (Freivalds' test, a maximum
               principle, a conserved sum, ...) ─> KernelCheckError otherwise
        └─> {"name", "size", "steps", "footprint_bytes", "seconds", "cpu_seconds", "checksum"}

``footprint_bytes`` is the summed size of every array the kernel allocates, scratch buffers
included: the kernels write into preallocated buffers (``out=``) so that numpy creates no hidden
array of the problem's size while they run. Every step touches all of it, so this is also the
working set a step cycles through.

Linear-algebra kernels run on one BLAS thread (a task is one core's work); stencils and dynamic
programs are vectorised with numpy where the dependences allow and loop in Python only along the
dimension that carries a dependence (trisolv's rows, adi's sweeps, seidel-2d's wavefronts,
nussinov's diagonals).

The irregular kernel ``spmv`` (gathers at random column indices into a vector that is most of
its footprint) is the most sensitive to a co-runner: on a 2-core machine with a 32 MiB L3, two
random-gather tasks of 20 MiB each run about 1.4x slower together than alone.
``benchmarks/corun.py`` measures such pairs for any cases.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import logging
import math
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

log = logging.getLogger("scalpel_executor.workloads.kernels")

State = dict[str, np.ndarray]
ArraySpec = dict[str, tuple[tuple[int, ...], str]]

ALPHA = 1.5
BETA = 0.5  # below 1, so that C <- alpha A B + beta C stays bounded over many steps


class KernelCheckError(RuntimeError):
    """A kernel's result failed its check; ``kernel`` names it and ``mismatch`` says how."""

    def __init__(self, kernel: str, mismatch: str) -> None:
        super().__init__(kernel, mismatch)  # both in args, so the error pickles across processes
        self.kernel = kernel
        self.mismatch = mismatch

    def __str__(self) -> str:
        return (f"kernel {self.kernel!r} computed a wrong result: {self.mismatch}; "
                "its implementation in scalpel_executor/workloads/kernels.py is broken")


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


def _geometric(steps: int) -> float:
    """1 + BETA + ... + BETA**(steps-1): how often alpha*A*B has been added into C."""
    return (1 - BETA ** steps) / (1 - BETA)


def _naive_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    n, m = a.shape[0], b.shape[1]
    out = np.zeros((n, m))
    for i in range(n):
        for j in range(m):
            out[i, j] = sum(a[i, k] * b[k, j] for k in range(a.shape[1]))
    return out


def _uniform(state: State, rng: np.random.Generator, names: Iterable[str]) -> None:
    for name in names:
        state[name][...] = rng.random(state[name].shape)


def _checked_init(inputs: Iterable[str], accumulator: str | None = None) -> Callable[[State, np.random.Generator], None]:
    """The init of a kernel checked by Freivalds' test: ``inputs`` uniform in [0, 1), the check
    vector ``x`` uniform in [-1, 1), and, for a kernel that accumulates into ``accumulator``, that
    matrix's initial product with ``x``, kept as ``<accumulator, lower case>0x``."""
    inputs = tuple(inputs)

    def init(s: State, rng: np.random.Generator) -> None:
        _uniform(s, rng, inputs)
        s["x"][...] = rng.uniform(-1, 1, s["x"].shape)
        if accumulator is not None:
            np.matmul(s[accumulator], s["x"], out=s[f"{accumulator.lower()}0x"])

    return init


# ----------------------------------------------------------------------------------------------
# Linear algebra: gemm, 2mm, 3mm, syrk, syr2k, trisolv, covariance, correlation, doitgen.
# Each step recomputes or accumulates a matrix product with BLAS into a preallocated buffer;
# the real result is checked with Freivalds' test (compare M x with a chain of matrix-vector
# products for a random x), O(n^2) against the step's O(n^3).


def _gemm_arrays(n: int) -> ArraySpec:
    return _square(n, "ABCT") | _vectors(n, ("x", "c0x"))


_gemm_init = _checked_init("ABC", "C")


def _gemm_run(s: State, steps: int) -> np.ndarray:
    a, b, c, t = s["A"], s["B"], s["C"], s["T"]
    for _ in range(steps):
        np.matmul(a, b, out=t)
        t *= ALPHA
        c *= BETA
        c += t
    return c


def _gemm_naive(s: State, steps: int) -> np.ndarray:
    c = s["C"].copy()
    ab = _naive_matmul(s["A"], s["B"])
    for _ in range(steps):
        c = BETA * c + ALPHA * ab
    return c


def _gemm_verify(s: State, c: np.ndarray, steps: int) -> str | None:
    x = s["x"]
    expected = ALPHA * _geometric(steps) * (s["A"] @ (s["B"] @ x)) + BETA ** steps * s["c0x"]
    return _mismatch(c @ x, expected, "C x against alpha (1 + beta + ...) A (B x) + beta^steps C0 x")


def _mm2_arrays(n: int) -> ArraySpec:
    return _square(n, "ABCDTU") | _vectors(n, ("x", "d0x"))


_mm2_init = _checked_init("ABCD", "D")


def _mm2_run(s: State, steps: int) -> np.ndarray:
    for _ in range(steps):
        np.matmul(s["A"], s["B"], out=s["T"])
        s["T"] *= ALPHA
        np.matmul(s["T"], s["C"], out=s["U"])
        s["D"] *= BETA
        s["D"] += s["U"]
    return s["D"]


def _mm2_naive(s: State, steps: int) -> np.ndarray:
    d = s["D"].copy()
    abc = _naive_matmul(ALPHA * _naive_matmul(s["A"], s["B"]), s["C"])
    for _ in range(steps):
        d = BETA * d + abc
    return d


def _mm2_verify(s: State, d: np.ndarray, steps: int) -> str | None:
    x = s["x"]
    expected = ALPHA * _geometric(steps) * (s["A"] @ (s["B"] @ (s["C"] @ x))) + BETA ** steps * s["d0x"]
    return _mismatch(d @ x, expected, "D x against the matrix-vector chain")


def _mm3_arrays(n: int) -> ArraySpec:
    return _square(n, "ABCDEFG") | _vectors(n, "x")


_mm3_init = _checked_init("ABCD")


def _mm3_run(s: State, steps: int) -> np.ndarray:
    for _ in range(steps):
        np.matmul(s["A"], s["B"], out=s["E"])
        np.matmul(s["C"], s["D"], out=s["F"])
        np.matmul(s["E"], s["F"], out=s["G"])
    return s["G"]


def _mm3_naive(s: State, steps: int) -> np.ndarray:
    return _naive_matmul(_naive_matmul(s["A"], s["B"]), _naive_matmul(s["C"], s["D"]))


def _mm3_verify(s: State, g: np.ndarray, steps: int) -> str | None:
    x = s["x"]
    return _mismatch(g @ x, s["A"] @ (s["B"] @ (s["C"] @ (s["D"] @ x))), "G x against A (B (C (D x)))")


def _syrk_arrays(n: int) -> ArraySpec:
    return _square(n, "ACT") | _vectors(n, ("x", "c0x"))


_syrk_init = _checked_init("AC", "C")


def _syrk_run(s: State, steps: int) -> np.ndarray:
    a, c, t = s["A"], s["C"], s["T"]
    for _ in range(steps):
        np.matmul(a, a.T, out=t)
        t *= ALPHA
        c *= BETA
        c += t
    return c


def _syrk_naive(s: State, steps: int) -> np.ndarray:
    c = s["C"].copy()
    aat = _naive_matmul(s["A"], s["A"].T)
    for _ in range(steps):
        c = BETA * c + ALPHA * aat
    return c


def _syrk_verify(s: State, c: np.ndarray, steps: int) -> str | None:
    x = s["x"]
    expected = ALPHA * _geometric(steps) * (s["A"] @ (s["A"].T @ x)) + BETA ** steps * s["c0x"]
    return _mismatch(c @ x, expected, "C x against A (A^T x)")


def _syr2k_arrays(n: int) -> ArraySpec:
    return _square(n, "ABCTU") | _vectors(n, ("x", "c0x"))


def _syr2k_run(s: State, steps: int) -> np.ndarray:
    a, b, c, t, u = s["A"], s["B"], s["C"], s["T"], s["U"]
    for _ in range(steps):
        np.matmul(a, b.T, out=t)
        np.add(t, t.T, out=u)  # B A^T = (A B^T)^T
        u *= ALPHA
        c *= BETA
        c += u
    return c


def _syr2k_naive(s: State, steps: int) -> np.ndarray:
    c = s["C"].copy()
    update = _naive_matmul(s["A"], s["B"].T) + _naive_matmul(s["B"], s["A"].T)
    for _ in range(steps):
        c = BETA * c + ALPHA * update
    return c


def _syr2k_verify(s: State, c: np.ndarray, steps: int) -> str | None:
    a, b, x = s["A"], s["B"], s["x"]
    expected = ALPHA * _geometric(steps) * (a @ (b.T @ x) + b @ (a.T @ x)) + BETA ** steps * s["c0x"]
    return _mismatch(c @ x, expected, "C x against A (B^T x) + B (A^T x)")


def _trisolv_arrays(n: int) -> ArraySpec:
    return _square(n, "L") | _vectors(n, "bx")


def _trisolv_init(s: State, rng: np.random.Generator) -> None:
    n = s["L"].shape[0]
    lower = s["L"]
    lower[...] = rng.random((n, n)) / n  # off-diagonal row sums below 1 ...
    lower[np.triu_indices(n, 1)] = 0.0
    lower[np.diag_indices(n)] = 1.0 + rng.random(n)  # ... under a diagonal of at least 1: well conditioned
    s["b"][...] = rng.uniform(-1, 1, n)


def _trisolv_run(s: State, steps: int) -> np.ndarray:
    lower, b, x = s["L"], s["b"], s["x"]
    for _ in range(steps):
        for i in range(len(x)):  # forward substitution: row i needs x[:i]
            x[i] = (b[i] - lower[i, :i] @ x[:i]) / lower[i, i]
    return x


def _trisolv_naive(s: State, steps: int) -> np.ndarray:
    lower, b = s["L"], s["b"]
    x = np.zeros(len(b))
    for i in range(len(b)):
        x[i] = (b[i] - sum(lower[i, j] * x[j] for j in range(i))) / lower[i, i]
    return x


def _trisolv_verify(s: State, x: np.ndarray, steps: int) -> str | None:
    return _mismatch(s["L"] @ x, s["b"], "residual of L x = b", rtol=1e-10)


def _covariance_arrays(n: int) -> ArraySpec:
    return _square(n, ("data", "cov")) | _vectors(n, ("mean", "x"))


_covariance_init = _checked_init(("data",))


def _covariance_run(s: State, steps: int) -> np.ndarray:
    data, cov, mean = s["data"], s["cov"], s["mean"]
    for _ in range(steps):
        np.mean(data, axis=0, out=mean)
        data -= mean  # centring centred data is a no-op, so steps repeat the same work
        np.matmul(data.T, data, out=cov)
        cov /= data.shape[0] - 1
    return cov


def _covariance_naive(s: State, steps: int) -> np.ndarray:
    data = s["data"]
    n, m = data.shape
    mean = [sum(data[i, j] for i in range(n)) / n for j in range(m)]
    cov = np.zeros((m, m))
    for j1 in range(m):
        for j2 in range(m):
            cov[j1, j2] = sum((data[i, j1] - mean[j1]) * (data[i, j2] - mean[j2]) for i in range(n)) / (n - 1)
    return cov


def _covariance_verify(s: State, cov: np.ndarray, steps: int) -> str | None:
    data, x = s["data"], s["x"]
    column_means = data.mean(axis=0)
    if float(np.max(np.abs(column_means))) > 1e-9:
        return f"data columns are not centred: largest column mean {float(np.max(np.abs(column_means))):.3g}"
    return _mismatch(cov @ x, data.T @ (data @ x) / (data.shape[0] - 1), "cov x against data^T (data x) / (n - 1)")


_CORRELATION_EPS = 0.1  # Polybench's floor under a standard deviation


def _correlation_arrays(n: int) -> ArraySpec:
    return _square(n, ("data", "Z", "corr")) | _vectors(n, ("mean", "std", "x"))


def _correlation_run(s: State, steps: int) -> np.ndarray:
    data, z, corr, mean, std = s["data"], s["Z"], s["corr"], s["mean"], s["std"]
    n = data.shape[0]
    for _ in range(steps):
        np.mean(data, axis=0, out=mean)
        np.subtract(data, mean, out=z)
        np.einsum("ij,ij->j", z, z, out=std)
        std /= n
        np.sqrt(std, out=std)
        std[std <= _CORRELATION_EPS] = 1.0
        std *= math.sqrt(n)
        z /= std
        np.matmul(z.T, z, out=corr)
        np.fill_diagonal(corr, 1.0)
    return corr


def _correlation_naive(s: State, steps: int) -> np.ndarray:
    data = s["data"]
    n, m = data.shape
    mean = [sum(data[i, j] for i in range(n)) / n for j in range(m)]
    std = [math.sqrt(sum((data[i, j] - mean[j]) ** 2 for i in range(n)) / n) for j in range(m)]
    std = [v if v > _CORRELATION_EPS else 1.0 for v in std]
    z = [[(data[i, j] - mean[j]) / (math.sqrt(n) * std[j]) for j in range(m)] for i in range(n)]
    corr = np.eye(m)
    for j1 in range(m):
        for j2 in range(m):
            if j1 != j2:
                corr[j1, j2] = sum(z[i][j1] * z[i][j2] for i in range(n))
    return corr


def _correlation_verify(s: State, corr: np.ndarray, steps: int) -> str | None:
    z, x = s["Z"], s["x"]
    if not np.array_equal(np.diagonal(corr), np.ones(len(corr))):
        return "the diagonal of the correlation matrix is not all ones"
    problem = _within(corr, -1 - 1e-9, 1 + 1e-9, "correlations")
    if problem:
        return problem
    off_diagonal = z.T @ (z @ x) - np.einsum("ij,ij->j", z, z) * x
    return _mismatch(corr @ x - x, off_diagonal, "corr x against Z^T (Z x) off the diagonal")


def _doitgen_arrays(n: int) -> ArraySpec:
    return {"A": ((n, n, n), "float64"), "S": ((n, n, n), "float64"), "C4": ((n, n), "float64"),
            "rowsum": ((n, n), "float64")}


def _doitgen_init(s: State, rng: np.random.Generator) -> None:
    _uniform(s, rng, ("A", "C4"))
    s["C4"] /= s["C4"].sum(axis=1, keepdims=True)  # rows sum to 1: A C4 keeps each A[r, q, :]'s sum
    np.sum(s["A"], axis=2, out=s["rowsum"])


def _doitgen_run(s: State, steps: int) -> np.ndarray:
    n = s["C4"].shape[0]
    for _ in range(steps):
        np.matmul(s["A"].reshape(n * n, n), s["C4"], out=s["S"].reshape(n * n, n))
        s["A"], s["S"] = s["S"], s["A"]
    return s["A"]


def _doitgen_naive(s: State, steps: int) -> np.ndarray:
    a, c4 = s["A"].copy(), s["C4"]
    n = c4.shape[0]
    for _ in range(steps):
        for r in range(n):
            for q in range(n):
                total = [sum(a[r, q, p] * c4[p, j] for p in range(n)) for j in range(n)]
                a[r, q, :] = total
    return a


def _doitgen_verify(s: State, a: np.ndarray, steps: int) -> str | None:
    return _within(a, 0.0, math.inf, "A") or _mismatch(a.sum(axis=2), s["rowsum"], "sums of A[r, q, :]", 1e-9)


# ----------------------------------------------------------------------------------------------
# Stencils: jacobi-2d, heat-2d, seidel-2d, fdtd-2d, adi. The averaging stencils obey a maximum
# principle: data drawn from [0, 1) stays in [0, 1], which checks the real result for free.


def _two_grids(n: int) -> ArraySpec:
    return _square(n, "AB")


def _two_grids_init(s: State, rng: np.random.Generator) -> None:
    _uniform(s, rng, "A")
    s["B"][...] = s["A"]


def _jacobi_half(src: np.ndarray, dst: np.ndarray) -> None:
    inner = dst[1:-1, 1:-1]
    np.add(src[1:-1, 1:-1], src[1:-1, :-2], out=inner)
    np.add(inner, src[1:-1, 2:], out=inner)
    np.add(inner, src[2:, 1:-1], out=inner)
    np.add(inner, src[:-2, 1:-1], out=inner)
    inner *= 0.2


def _ping_pong(half: Callable[[np.ndarray, np.ndarray], None]) -> Callable[[State, int], np.ndarray]:
    """A two-grid stencil's run: each step updates B from A, then A from B."""

    def run(s: State, steps: int) -> np.ndarray:
        for _ in range(steps):
            half(s["A"], s["B"])
            half(s["B"], s["A"])
        return s["A"]

    return run


_jacobi_run = _ping_pong(_jacobi_half)


def _jacobi_naive(s: State, steps: int) -> np.ndarray:
    a, b = s["A"].copy(), s["B"].copy()
    n = len(a)
    for _ in range(steps):
        for src, dst in ((a, b), (b, a)):
            for i in range(1, n - 1):
                for j in range(1, n - 1):
                    dst[i, j] = 0.2 * (src[i, j] + src[i, j - 1] + src[i, j + 1] + src[i + 1, j] + src[i - 1, j])
    return a


def _heat_half(src: np.ndarray, dst: np.ndarray) -> None:
    inner = dst[1:-1, 1:-1]
    np.add(src[:-2, 1:-1], src[2:, 1:-1], out=inner)
    np.add(inner, src[1:-1, :-2], out=inner)
    np.add(inner, src[1:-1, 2:], out=inner)
    inner *= 0.25
    inner += src[1:-1, 1:-1]
    inner *= 0.5  # = src + 0.125 (discrete Laplacian along each axis)


_heat_run = _ping_pong(_heat_half)


def _heat_naive(s: State, steps: int) -> np.ndarray:
    a, b = s["A"].copy(), s["B"].copy()
    n = len(a)
    for _ in range(steps):
        for src, dst in ((a, b), (b, a)):
            for i in range(1, n - 1):
                for j in range(1, n - 1):
                    dst[i, j] = (0.125 * (src[i + 1, j] - 2 * src[i, j] + src[i - 1, j])
                                 + 0.125 * (src[i, j + 1] - 2 * src[i, j] + src[i, j - 1]) + src[i, j])
    return a


def _unit_interval(s: State, out: np.ndarray, steps: int) -> str | None:
    return _within(out, 0.0, 1.0, "grid (a weighted average of data in [0, 1))")


def _seidel_arrays(n: int) -> ArraySpec:
    return _square(n, "A") | _vectors(n, ("acc",))


def _seidel_init(s: State, rng: np.random.Generator) -> None:
    _uniform(s, rng, "A")


def _seidel_run(s: State, steps: int) -> np.ndarray:
    """Gauss-Seidel, 9 points, in place. Point (i, j) reads the new values of row i - 1 and of
    (i, j - 1), so the points with 2 i + j = d depend only on smaller d: each such wavefront is one
    strided slice of the flattened grid (step n - 2), updated at once."""
    grid = s["A"]
    n = grid.shape[0]
    flat = grid.reshape(-1)
    stride = n - 2
    offsets = (-n - 1, -n, -n + 1, -1, 1, n - 1, n, n + 1)
    for _ in range(steps):
        for d in range(3, 3 * (n - 2) + 1):
            i_low = max(1, -((n - 2 - d) // 2))  # ceil((d - (n - 2)) / 2)
            i_high = min(n - 2, (d - 1) // 2)
            count = i_high - i_low + 1
            if count <= 0:
                continue
            start = i_low * n + d - 2 * i_low
            stop = start + (count - 1) * stride + 1
            acc = s["acc"][:count]
            acc[...] = flat[start:stop:stride]
            for offset in offsets:
                np.add(acc, flat[start + offset:stop + offset:stride], out=acc)
            acc /= 9.0
            flat[start:stop:stride] = acc
    return grid


def _seidel_naive(s: State, steps: int) -> np.ndarray:
    a = s["A"].copy()
    n = len(a)
    for _ in range(steps):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                a[i, j] = sum(a[i + di, j + dj] for di in (-1, 0, 1) for dj in (-1, 0, 1)) / 9.0
    return a


def _fdtd_arrays(n: int) -> ArraySpec:
    return _square(n, ("ex", "ey", "hz", "S"))


def _fdtd_init(s: State, rng: np.random.Generator) -> None:
    _uniform(s, rng, ("ex", "ey", "hz"))


def _fdtd_run(s: State, steps: int) -> np.ndarray:
    ex, ey, hz, scratch = s["ex"], s["ey"], s["hz"], s["S"]
    for t in range(steps):
        ey[0, :] = t  # Polybench's source term _fict_[t]
        np.subtract(hz[1:], hz[:-1], out=scratch[1:])
        scratch[1:] *= 0.5
        ey[1:] -= scratch[1:]
        np.subtract(hz[:, 1:], hz[:, :-1], out=scratch[:, 1:])
        scratch[:, 1:] *= 0.5
        ex[:, 1:] -= scratch[:, 1:]
        curl = scratch[:-1, :-1]
        np.subtract(ex[:-1, 1:], ex[:-1, :-1], out=curl)
        curl += ey[1:, :-1]
        curl -= ey[:-1, :-1]
        curl *= 0.7
        hz[:-1, :-1] -= curl
    return hz


def _fdtd_naive(s: State, steps: int) -> np.ndarray:
    ex, ey, hz = s["ex"].copy(), s["ey"].copy(), s["hz"].copy()
    n = len(ex)
    for t in range(steps):
        for j in range(n):
            ey[0, j] = t
        for i in range(1, n):
            for j in range(n):
                ey[i, j] -= 0.5 * (hz[i, j] - hz[i - 1, j])
        for i in range(n):
            for j in range(1, n):
                ex[i, j] -= 0.5 * (hz[i, j] - hz[i, j - 1])
        for i in range(n - 1):
            for j in range(n - 1):
                hz[i, j] -= 0.7 * (ex[i, j + 1] - ex[i, j] + ey[i + 1, j] - ey[i, j])
    return hz


def _finite(s: State, out: np.ndarray, steps: int) -> str | None:
    bad = int(np.count_nonzero(~np.isfinite(out)))
    return f"{bad} entries of the result are not finite" if bad else None


_ADI_DT = 0.02


def _adi_coefficients(n: int) -> tuple[float, float, float, float, float, float]:
    """Polybench's a, b, c (column sweep) and d, e, f (row sweep) for an n x n grid."""
    mul1 = 2.0 * _ADI_DT * n * n
    mul2 = 1.0 * _ADI_DT * n * n
    return -mul1 / 2, 1 + mul1, -mul1 / 2, -mul2 / 2, 1 + mul2, -mul2 / 2


def _adi_arrays(n: int) -> ArraySpec:
    return _square(n, "uvpq")


def _adi_init(s: State, rng: np.random.Generator) -> None:
    _uniform(s, rng, "u")
    for name in "vpq":
        s[name][...] = 0.0


def _adi_run(s: State, steps: int) -> np.ndarray:
    """Alternating-direction implicit sweeps: each tridiagonal solve recurs along j, so the loop
    runs over j and every statement is vectorised over the n - 2 independent lines i."""
    u, v, p, q = s["u"], s["v"], s["p"], s["q"]
    n = u.shape[0]
    a, b, c, d, e, f = _adi_coefficients(n)
    rows = slice(1, n - 1)
    for _ in range(steps):
        v[0, rows] = 1.0
        p[rows, 0] = 0.0
        q[rows, 0] = v[0, rows]
        for j in range(1, n - 1):  # column sweep: u -> v
            denominator = a * p[rows, j - 1] + b
            p[rows, j] = -c / denominator
            q[rows, j] = (-d * u[j, :-2] + (1 + 2 * d) * u[j, 1:-1] - f * u[j, 2:] - a * q[rows, j - 1]) / denominator
        v[n - 1, rows] = 1.0
        for j in range(n - 2, 0, -1):
            v[j, rows] = p[rows, j] * v[j + 1, rows] + q[rows, j]
        u[rows, 0] = 1.0
        p[rows, 0] = 0.0
        q[rows, 0] = u[rows, 0]
        for j in range(1, n - 1):  # row sweep: v -> u
            denominator = d * p[rows, j - 1] + e
            p[rows, j] = -f / denominator
            q[rows, j] = (-a * v[:-2, j] + (1 + 2 * a) * v[1:-1, j] - c * v[2:, j] - d * q[rows, j - 1]) / denominator
        u[rows, n - 1] = 1.0
        for j in range(n - 2, 0, -1):
            u[rows, j] = p[rows, j] * u[rows, j + 1] + q[rows, j]
    return u


def _adi_naive(s: State, steps: int) -> np.ndarray:
    u, v, p, q = (s[name].copy() for name in "uvpq")
    n = len(u)
    a, b, c, d, e, f = _adi_coefficients(n)
    for _ in range(steps):
        for i in range(1, n - 1):
            v[0, i] = 1.0
            p[i, 0] = 0.0
            q[i, 0] = v[0, i]
            for j in range(1, n - 1):
                p[i, j] = -c / (a * p[i, j - 1] + b)
                q[i, j] = ((-d * u[j, i - 1] + (1 + 2 * d) * u[j, i] - f * u[j, i + 1] - a * q[i, j - 1])
                           / (a * p[i, j - 1] + b))
            v[n - 1, i] = 1.0
            for j in range(n - 2, 0, -1):
                v[j, i] = p[i, j] * v[j + 1, i] + q[i, j]
        for i in range(1, n - 1):
            u[i, 0] = 1.0
            p[i, 0] = 0.0
            q[i, 0] = u[i, 0]
            for j in range(1, n - 1):
                p[i, j] = -f / (d * p[i, j - 1] + e)
                q[i, j] = ((-a * v[i - 1, j] + (1 + 2 * a) * v[i, j] - c * v[i + 1, j] - d * q[i, j - 1])
                           / (d * p[i, j - 1] + e))
            u[i, n - 1] = 1.0
            for j in range(n - 2, 0, -1):
                u[i, j] = p[i, j] * u[i, j + 1] + q[i, j]
    return u


# ----------------------------------------------------------------------------------------------
# Dynamic programs: floyd-warshall, nussinov.


def _floyd_arrays(n: int) -> ArraySpec:
    return _square(n, ("path", "T")) | _vectors(n, ("row", "col"))


def _floyd_init(s: State, rng: np.random.Generator) -> None:
    path = s["path"]
    path[...] = rng.integers(1, 100, path.shape)
    np.fill_diagonal(path, 0.0)


def _floyd_run(s: State, steps: int) -> np.ndarray:
    """``steps`` pivot rounds, pivot k = round mod n: n rounds are the whole algorithm, so run time
    is set apart from the n x n footprint."""
    path, t, row, col = s["path"], s["T"], s["row"], s["col"]
    n = path.shape[0]
    for step in range(steps):
        k = step % n
        row[...] = path[k, :]
        col[...] = path[:, k]
        np.add(col[:, None], row[None, :], out=t)
        np.minimum(path, t, out=path)
    return path


def _floyd_naive(s: State, steps: int) -> np.ndarray:
    path = s["path"].copy()
    n = len(path)
    for step in range(steps):
        k = step % n
        for i in range(n):
            for j in range(n):
                path[i, j] = min(path[i, j], path[i, k] + path[k, j])
    return path


def _floyd_verify(s: State, path: np.ndarray, steps: int) -> str | None:
    n = path.shape[0]
    if np.any(np.diagonal(path) != 0) or float(path.min()) < 0:
        return "distances from a vertex to itself must stay 0 and none may be negative"
    if steps >= n:  # all pivots done: the triangle inequality holds on every triple
        i, j, k = np.random.default_rng(n).integers(0, n, (3, 1000))
        broken = int(np.count_nonzero(path[i, j] > path[i, k] + path[k, j]))
        if broken:
            return f"{broken} of 1000 sampled triples break the triangle inequality after all {n} pivots"
    return None


_NUSSINOV_BLOCK = 64  # splits per block in the inner maximisation: bounds the scratch at 64 x n


def _nussinov_arrays(n: int) -> ArraySpec:
    return {"T": ((n, n), "int32"), "seq": ((n,), "int32"), "S": ((min(n, _NUSSINOV_BLOCK), n), "int32"),
            "best": ((n,), "int32"), "match": ((n,), "int32")}


def _nussinov_init(s: State, rng: np.random.Generator) -> None:
    s["seq"][...] = rng.integers(0, 4, s["seq"].shape)  # bases 0..3; i and j pair when they sum to 3


def _nussinov_run(s: State, steps: int) -> np.ndarray:
    """Nussinov's RNA folding score, stored by diagonal: ``T[d, i] = table[i][i + d]``.

    Every cell of diagonal d depends only on shorter diagonals, so a diagonal is one vector; the
    split maximisation max_k table[i][k] + table[k + 1][j] reads T[m, i] + T[d - m - 1, i + m + 1],
    a skewed view of T, taken a block of splits m at a time."""
    table, seq, scratch, best, match = s["T"], s["seq"], s["S"], s["best"], s["match"]
    n = table.shape[0]
    item = table.itemsize
    for _ in range(steps):
        table[...] = 0
        for d in range(1, n):
            cells = n - d
            cur = table[d, :cells]
            np.maximum(table[d - 1, :cells], table[d - 1, 1:cells + 1], out=cur)  # table[i][j-1], table[i+1][j]
            if d >= 2:
                np.add(seq[:cells], seq[d:], out=match[:cells])
                np.equal(match[:cells], 3, out=match[:cells], casting="unsafe")
                match[:cells] += table[d - 2, 1:cells + 1]  # table[i+1][j-1] + pairs(i, j)
                np.maximum(cur, match[:cells], out=cur)
            for m0 in range(1, d, _NUSSINOV_BLOCK):
                m1 = min(d, m0 + _NUSSINOV_BLOCK)
                left = table[m0:m1, :cells]  # table[i][i + m]
                right = np.ndarray((m1 - m0, cells), table.dtype, buffer=table,
                                   offset=((d - m0 - 1) * n + m0 + 1) * item,
                                   strides=((1 - n) * item, item))  # table[i + m + 1][i + d]
                block = scratch[:m1 - m0, :cells]
                np.add(left, right, out=block)
                np.max(block, axis=0, out=best[:cells])
                np.maximum(cur, best[:cells], out=cur)
    return table


def _nussinov_naive(s: State, steps: int) -> np.ndarray:
    seq = s["seq"]
    n = len(seq)
    table = [[0] * n for _ in range(n)]
    for i in range(n - 1, -1, -1):
        for j in range(i + 1, n):
            best = max(table[i][j - 1], table[i + 1][j] if i + 1 < n else 0)
            if i < j - 1:
                best = max(best, table[i + 1][j - 1] + int(seq[i] + seq[j] == 3))
            else:
                best = max(best, table[i + 1][j - 1])
            for k in range(i + 1, j):
                best = max(best, table[i][k] + table[k + 1][j])
            table[i][j] = best
    by_diagonal = np.zeros((n, n), np.int32)
    for d in range(n):
        for i in range(n - d):
            by_diagonal[d, i] = table[i][i + d]
    return by_diagonal


def _nussinov_verify(s: State, table: np.ndarray, steps: int) -> str | None:
    n = table.shape[0]
    inside = (np.arange(n)[:, None] + np.arange(n)[None, :]) < n  # T[d, i] holds a cell when i + d < n
    if np.any((table[1:] < table[:-1]) & inside[1:]):
        return "a longer interval scores less than the interval it contains"
    if int(table[n - 1, 0]) > n // 2:
        return f"score {int(table[n - 1, 0])} exceeds the {n // 2} pairs a sequence of {n} bases can form"
    return None


# ----------------------------------------------------------------------------------------------
# Irregular access: sparse matrix-vector product with random column indices (ELLPACK layout).

_SPMV_ROW = 8  # non-zeros per row
_SPMV_ROWS_PER_X = 32  # rows = n / 32, so the gathers cover x a quarter of its length per product


def _spmv_shape(n: int) -> tuple[int, int]:
    rows = max(1, n // _SPMV_ROWS_PER_X)
    return rows, rows * _SPMV_ROW


def _spmv_arrays(n: int) -> ArraySpec:
    rows, nonzeros = _spmv_shape(n)
    return {"x": ((n,), "float64"), "vals": ((nonzeros,), "float64"), "cols": ((nonzeros,), "intp"),
            "gathered": ((nonzeros,), "float64"), "y": ((rows,), "float64")}


def _spmv_init(s: State, rng: np.random.Generator) -> None:
    s["x"][...] = rng.uniform(-1, 1, s["x"].shape)
    s["vals"][...] = rng.uniform(-1, 1, s["vals"].shape)
    s["cols"][...] = rng.integers(0, len(s["x"]), s["cols"].shape)


def _spmv_run(s: State, steps: int) -> np.ndarray:
    x, vals, cols, gathered, y = s["x"], s["vals"], s["cols"], s["gathered"], s["y"]
    for _ in range(steps):
        np.take(x, cols, out=gathered)  # the random gathers
        gathered *= vals
        np.sum(gathered.reshape(len(y), _SPMV_ROW), axis=1, out=y)
    return y


def _spmv_naive(s: State, steps: int) -> np.ndarray:
    x, vals, cols, y = s["x"], s["vals"], s["cols"], s["y"]
    return np.array([sum(vals[r * _SPMV_ROW + k] * x[cols[r * _SPMV_ROW + k]] for k in range(_SPMV_ROW))
                     for r in range(len(y))])


def _spmv_verify(s: State, y: np.ndarray, steps: int) -> str | None:
    x, vals, cols = s["x"], s["vals"], s["cols"]
    rows = np.random.default_rng(len(y)).integers(0, len(y), 32)
    expected = [math.fsum(float(vals[r * _SPMV_ROW + k]) * float(x[cols[r * _SPMV_ROW + k]]) for k in range(_SPMV_ROW))
                for r in rows]
    return _mismatch(y[rows], expected, "32 sampled rows of y against a scalar sum", 1e-12)


# ----------------------------------------------------------------------------------------------
# The registry


def _no_calls(size: int) -> float:
    return 0.0


KERNELS: dict[str, Kernel] = {k.name: k for k in (
    Kernel("gemm", "C <- alpha A B + beta C", _gemm_arrays, _gemm_init, _gemm_run, _gemm_naive, _gemm_verify,
           work=lambda n: 2.0 * n ** 3, calls=_no_calls),
    Kernel("2mm", "D <- alpha A B C + beta D", _mm2_arrays, _mm2_init, _mm2_run, _mm2_naive, _mm2_verify,
           work=lambda n: 4.0 * n ** 3, calls=_no_calls),
    Kernel("3mm", "G <- (A B) (C D)", _mm3_arrays, _mm3_init, _mm3_run, _mm3_naive, _mm3_verify,
           work=lambda n: 6.0 * n ** 3, calls=_no_calls),
    Kernel("syrk", "C <- alpha A A^T + beta C", _syrk_arrays, _syrk_init,
           _syrk_run, _syrk_naive, _syrk_verify, work=lambda n: 1.0 * n ** 3, calls=_no_calls),
    Kernel("syr2k", "C <- alpha (A B^T + B A^T) + beta C", _syr2k_arrays, _gemm_init, _syr2k_run, _syr2k_naive,
           _syr2k_verify, work=lambda n: 2.0 * n ** 3, calls=_no_calls),
    Kernel("trisolv", "solve L x = b by forward substitution", _trisolv_arrays, _trisolv_init, _trisolv_run,
           _trisolv_naive, _trisolv_verify, work=lambda n: n * n / 2.0, calls=lambda n: 0.8 * n, check_size=12),
    Kernel("covariance", "covariance of n samples of n variables", _covariance_arrays, _covariance_init,
           _covariance_run, _covariance_naive, _covariance_verify, work=lambda n: 1.0 * n ** 3, calls=_no_calls),
    Kernel("correlation", "correlation of n samples of n variables", _correlation_arrays, _covariance_init,
           _correlation_run, _correlation_naive, _correlation_verify, work=lambda n: 1.0 * n ** 3, calls=_no_calls),
    Kernel("doitgen", "A[r, q, :] <- A[r, q, :] C4 (multiresolution analysis)", _doitgen_arrays, _doitgen_init,
           _doitgen_run, _doitgen_naive, _doitgen_verify, work=lambda n: 2.0 * n ** 4, calls=_no_calls, check_size=5),
    Kernel("jacobi-2d", "5-point Jacobi stencil, two grids", _two_grids, _two_grids_init, _jacobi_run,
           _jacobi_naive, _unit_interval, work=lambda n: 10.0 * n * n, calls=lambda n: 12.0),
    Kernel("heat-2d", "explicit heat equation, two grids", _two_grids, _two_grids_init, _heat_run, _heat_naive,
           _unit_interval, work=lambda n: 12.0 * n * n, calls=lambda n: 14.0),
    Kernel("seidel-2d", "9-point Gauss-Seidel in place, by wavefronts", _seidel_arrays, _seidel_init, _seidel_run,
           _seidel_naive, _unit_interval, work=lambda n: 10.0 * n * n, calls=lambda n: 12.0 * n),
    Kernel("fdtd-2d", "2-D finite-difference time-domain", _fdtd_arrays, _fdtd_init, _fdtd_run, _fdtd_naive,
           _finite, work=lambda n: 12.0 * n * n, calls=lambda n: 14.0),
    Kernel("adi", "alternating-direction implicit solver", _adi_arrays, _adi_init, _adi_run, _adi_naive, _finite,
           work=lambda n: 30.0 * n * n, calls=lambda n: 10.0 * n),
    Kernel("floyd-warshall", "all-pairs shortest paths, one pivot per step", _floyd_arrays, _floyd_init,
           _floyd_run, _floyd_naive, _floyd_verify, work=lambda n: 2.0 * n * n, calls=lambda n: 4.0,
           check_size=7, check_steps=9),
    Kernel("nussinov", "RNA folding dynamic program (Nussinov)", _nussinov_arrays, _nussinov_init, _nussinov_run,
           _nussinov_naive, _nussinov_verify, work=lambda n: n ** 3 / 3.0,
           calls=lambda n: 10.0 * n + 3.0 * n * n / (2 * _NUSSINOV_BLOCK), check_size=14, check_steps=2),
    Kernel("spmv", "sparse matrix-vector product, random column indices", _spmv_arrays, _spmv_init, _spmv_run,
           _spmv_naive, _spmv_verify, work=lambda n: 3.0 * _spmv_shape(n)[1], calls=lambda n: 3.0,
           min_size=_SPMV_ROWS_PER_X, check_size=4 * _SPMV_ROWS_PER_X, check_steps=2),
)}


def get_kernel(name: str) -> Kernel:
    """The kernel called ``name``; a ValueError lists the known names otherwise."""
    try:
        return KERNELS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown kernel {name!r}; choose one of {', '.join(KERNELS)}") from None


def _validated(name: str, size: int, steps: int) -> Kernel:
    kernel = get_kernel(name)
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < kernel.min_size:
        raise ValueError(f"kernel {name!r}: size must be an integer >= {kernel.min_size}, got {size!r}")
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"kernel {name!r}: steps must be an integer >= 1, got {steps!r}")
    return kernel


def footprint_bytes(name: str, size: int) -> int:
    """Bytes of every array kernel ``name`` keeps live at problem size ``size``.

    Parameters
    ----------
    name : str
        A key of :data:`KERNELS`.
    size : int
        The problem size n (matrices are n x n; doitgen's tensor n x n x n; spmv's vector has n
        entries).

    Returns
    -------
    int
        The summed ``nbytes`` of the arrays :meth:`Kernel.allocate` creates, scratch included.

    Examples
    --------
    >>> footprint_bytes("jacobi-2d", 1024)  # two 1024 x 1024 grids of float64
    16777216
    """
    return _validated(name, size, 1).footprint_bytes(size)


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


# ----------------------------------------------------------------------------------------------
# Running one case: the task body


@functools.cache
def _blas_thread_setters() -> tuple:
    """``*_set_num_threads`` of the OpenBLAS builds bundled with numpy's wheels, if found."""
    setters = []
    bundled = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "*blas*")
    for path in glob.glob(bundled):
        try:
            library = ctypes.CDLL(path)  # already loaded by numpy: this returns the same library
        except OSError:
            continue
        for symbol in ("openblas_set_num_threads", "openblas_set_num_threads64_",
                       "scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads"):
            setter = getattr(library, symbol, None)
            if setter is not None:
                setters.append(setter)
                break
    if not setters:
        log.debug("no bundled OpenBLAS found; set OPENBLAS_NUM_THREADS=1 to keep BLAS kernels on one core")
    return tuple(setters)


def limit_blas_threads(threads: int = 1) -> None:
    """Make numpy's bundled OpenBLAS use ``threads`` threads: a task is one core's work.

    Notes
    -----
    Works after numpy is imported (environment variables are read only at load time). Other
    BLAS builds are left alone; set ``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS`` for them.
    """
    for setter in _blas_thread_setters():
        setter(int(threads))


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


@dataclass(frozen=True)
class KernelCase:
    """One task of a kernel workload: ``size`` sets its footprint, ``steps`` its run time."""

    kernel: str
    size: int
    steps: int = 1

    def __post_init__(self) -> None:
        _validated(self.kernel, self.size, self.steps)

    @property
    def name(self) -> str:
        """A label such as ``spmv-n1048576x40``."""
        return f"{self.kernel}-n{self.size}x{self.steps}"

    @property
    def footprint_bytes(self) -> int:
        """Bytes of the arrays the case keeps live (:func:`footprint_bytes`)."""
        return KERNELS[self.kernel].footprint_bytes(self.size)

    def estimated_seconds(self, rates: dict | None = None) -> float:
        """Solo run time predicted by the rate table (:data:`RATES` unless given)."""
        return self.steps * step_seconds(self.kernel, self.size, rates)

    def run(self, seed: int = 0, check: bool = True) -> dict:
        """:func:`run_kernel` on this case."""
        return run_kernel(self.kernel, self.size, self.steps, seed, check)


# ----------------------------------------------------------------------------------------------
# Run time: a rate table measured once, and calibration by one short run

#: Seconds per numpy call made from a Python loop (trisolv, seidel-2d, adi, nussinov); each
#: kernel's ``calls(size)`` counts in these units, fitted to its measured small-size time.
CALL_SECONDS = 1.5e-6

#: Per kernel, two (footprint bytes, seconds per unit of ``Kernel.work``) points, measured on one
#: core of the development machine (2 cores, 32 MiB L3, shared with other work) by
#: ``measure_rates()`` in CPU time, median of three runs; in between, the rate is interpolated in
#: log footprint, outside it is held. Use calibrate() where a closer figure matters.
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
        raise ValueError(f"no rate for kernel {name!r} in the rate table; measure one with measure_rates()") from None
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


def calibrate(case: KernelCase, target_seconds: float, *, probe_seconds: float | None = None,
              seed: int = 0) -> KernelCase:
    """``case`` with the steps that make its solo run last about ``target_seconds`` here.

    Parameters
    ----------
    case : KernelCase
        Kernel and size are kept; steps are replaced.
    target_seconds : float
        Wanted solo run time.
    probe_seconds : float, optional
        Time spent measuring; default min(0.5, target / 4), and at least one step.
    seed : int
        Seeds the probe's data.

    Returns
    -------
    KernelCase

    Notes
    -----
    Runs the kernel in this process, on one BLAS thread: call it where the task will run (or on
    an idle core of the same machine). Costs one allocation, one warm-up step and about
    ``probe_seconds``.
    """
    if not (target_seconds > 0) or math.isinf(target_seconds):
        raise ValueError(f"target_seconds must be a positive number of seconds, got {target_seconds!r}")
    probe = min(0.5, target_seconds / 4) if probe_seconds is None else probe_seconds
    kernel = KERNELS[case.kernel]
    limit_blas_threads(1)
    per_step = _time_steps(kernel, kernel.allocate(case.size, seed), probe)
    steps = max(1, round(target_seconds / per_step))
    log.debug("calibrated %s: %.4g s per step, %d steps for %.3g s", case.kernel, per_step, steps, target_seconds)
    return KernelCase(case.kernel, case.size, steps)


def measure_rates(kernels: Sequence[str] | None = None, footprints: tuple[float, float] = (2**20, 48 * 2**20),
                  probe_seconds: float = 0.3, max_step_seconds: float = 2.0) -> dict:
    """Measure a rate table like :data:`RATES` on this machine.

    Parameters
    ----------
    kernels : sequence of str, optional
        Default: all.
    footprints : (float, float)
        The two footprints to measure at. Where one step at the larger would exceed
        ``max_step_seconds`` (predicted from the smaller), the larger is shrunk until it does not.
    probe_seconds : float
        Time spent on each measurement.

    Returns
    -------
    dict
        name -> ((footprint, seconds per work unit), (footprint, seconds per work unit)).

    Notes
    -----
    Runs every kernel twice for about ``probe_seconds``: a minute or so for all kernels.
    """
    limit_blas_threads(1)
    table: dict = {}
    for name in kernels or KERNELS:
        kernel = KERNELS[name]
        points = []
        for footprint in footprints:
            size = size_for_footprint(name, footprint)
            if points:
                while size > kernel.min_size and points[0][1] * kernel.work(size) > max_step_seconds:
                    size = max(kernel.min_size, int(size * 0.9))
            per_step = _time_steps(kernel, kernel.allocate(size, 0), probe_seconds)
            overhead = CALL_SECONDS * kernel.calls(size)
            unit = max(per_step - overhead, 0.1 * per_step) / kernel.work(size)
            points.append((float(kernel.footprint_bytes(size)), unit))
            log.info("rate %s at %d bytes: %.4g s per step, %.4g s per unit", name, points[-1][0], per_step, unit)
        table[name] = (points[0], points[1])
    return table


# ----------------------------------------------------------------------------------------------
# Workloads sized for a cache

#: Solo run time ranges, in seconds, of the cases :func:`suite` builds.
SCALES = {"full": (1.0, 10.0), "bench": (0.4, 2.0), "quick": (0.05, 0.5)}


def _validated_machine(llc_bytes: object, cores: int, scale: str) -> tuple[int, tuple[float, float]]:
    from scalpel_executor.core.units import parse_size

    llc = parse_size(llc_bytes, what="llc_bytes")
    if llc <= 0:
        raise ValueError(f"llc_bytes must be positive, got {llc_bytes!r}")
    if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
        raise ValueError(f"cores must be an integer >= 1 (cores sharing the LLC), got {cores!r}")
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {', '.join(SCALES)}, got {scale!r}")
    return llc, SCALES[scale]


def _case_for(name: str, size: int, seconds: float, longest: float, rates: dict | None) -> KernelCase:
    """A case of ``name`` near ``size`` lasting about ``seconds``; the size shrinks if one step
    alone would outlast ``longest``."""
    kernel = KERNELS[name]
    while size > kernel.min_size and step_seconds(name, size, rates) > longest:
        size = max(kernel.min_size, int(size * 0.95))
    return KernelCase(name, size, max(1, round(seconds / step_seconds(name, size, rates))))


def suite(llc_bytes: object, cores: int, scale: str = "full", seed: int = 0, *,
          kernels: Sequence[str] | None = None, rates: dict | None = None) -> list[KernelCase]:
    """Every kernel at three footprints around an LLC, with solo run times in the scale's range.

    Parameters
    ----------
    llc_bytes : int or str
        Size of one last-level cache, e.g. ``32 * 2**20`` or ``"32MiB"``. Give the real size:
        a VM's sysfs may report its host's.
    cores : int
        Cores sharing that cache; ``llc_bytes / cores`` is a core's share.
    scale : {"full", "quick"}
        Solo run times drawn log-uniformly from 1-10 s ("full") or 0.05-0.5 s ("quick").
    seed : int
        Seeds the run-time draws.
    kernels : sequence of str, optional
        Default: all of :data:`KERNELS`.
    rates : dict, optional
        A rate table (:func:`measure_rates`); default :data:`RATES`, measured on the development
        machine, so run times elsewhere are off by that machine's speed (see :func:`calibrate`).

    Returns
    -------
    list of KernelCase
        Per kernel, in :data:`KERNELS` order: a *small* case (footprint at most a sixteenth of a
        core's share), a *medium* one (about 60% of the LLC: fits alone, not next to another) and
        a *large* one (at least 1.5 x the LLC). A kernel whose single step at that footprint
        would outlast the range gets a smaller size (nussinov and doitgen at the large end).

    Notes
    -----
    Pure: runs nothing. O(kernels x log size).

    Examples
    --------
    >>> cases = suite("32MiB", 2, "quick", kernels=["spmv"])
    >>> [round(case.footprint_bytes / 2**20, 1) for case in cases]
    [1.0, 19.2, 48.0]
    """
    llc, (shortest, longest) = _validated_machine(llc_bytes, cores, scale)
    draw = np.random.default_rng(seed)
    share = llc / cores
    targets = ((share / 16, False), (0.6 * llc, False), (1.5 * llc, True))
    cases: list[KernelCase] = []
    for name in kernels or KERNELS:
        get_kernel(name)
        for footprint, at_least in targets:
            seconds = math.exp(draw.uniform(math.log(shortest), math.log(longest)))
            case = _case_for(name, size_for_footprint(name, footprint, at_least=at_least), seconds, longest, rates)
            if case.size != size_for_footprint(name, footprint, at_least=at_least):
                log.debug("%s: one step above %.3g s at the wanted footprint; size %d instead", name, longest, case.size)
            if all(case.kernel != other.kernel or case.size > other.size for other in cases):
                cases.append(case)  # else a capped size fell back onto a smaller level's
    return cases


def contention_mix(llc_bytes: object, cores: int, tasks: int, *, scale: str = "full", seed: int = 0,
                   kernels: Sequence[str] = ("spmv",), large_fraction: float = 0.6, small_fraction: float = 1 / 16,
                   seconds: float | None = None, rates: dict | None = None) -> list[KernelCase]:
    """A batch where co-scheduling matters: large cases that fit the LLC alone but not together,
    small ones far below a core's share, similar solo run times, in the order that hurts.

    Parameters
    ----------
    llc_bytes, cores, scale, rates
        As for :func:`suite`.
    tasks : int
        Number of cases; ``ceil(tasks / 2)`` large, the rest small.
    seed : int
        Seeds a +-10% jitter of the run times (so they are similar, not equal).
    kernels : sequence of str
        Cycled over the cases; default the irregular ``spmv``, the most contention-sensitive.
    large_fraction : float
        Footprint of a large case as a fraction of the LLC (default 0.6).
    small_fraction : float
        Footprint of a small case as a fraction of a core's share ``llc_bytes / cores``.
    seconds : float, optional
        Solo run time of every case; default the geometric middle of the scale's range.

    Returns
    -------
    list of KernelCase
        All large cases first, then all small ones: the order a user naturally writes, under
        which a first-in-first-out executor co-runs large with large.

    Examples
    --------
    >>> mix = contention_mix("32MiB", 2, 4, scale="quick")
    >>> [round(case.footprint_bytes / 2**20, 1) for case in mix]
    [19.2, 19.2, 1.0, 1.0]
    """
    llc, (shortest, longest) = _validated_machine(llc_bytes, cores, scale)
    if isinstance(tasks, bool) or not isinstance(tasks, int) or tasks < 0:
        raise ValueError(f"tasks must be an integer >= 0, got {tasks!r}")
    if not kernels:
        raise ValueError("kernels must name at least one kernel, e.g. ('spmv',)")
    for fraction, what in ((large_fraction, "large_fraction"), (small_fraction, "small_fraction")):
        if not (0 < fraction < math.inf):
            raise ValueError(f"{what} must be a positive fraction, got {fraction!r}")
    target = math.sqrt(shortest * longest) if seconds is None else seconds
    if not (target > 0) or math.isinf(target):
        raise ValueError(f"seconds must be a positive number, got {seconds!r}")
    jitter = np.random.default_rng(seed).uniform(0.9, 1.1, tasks)
    large = (tasks + 1) // 2
    cases = []
    for index in range(tasks):
        name = kernels[index % len(kernels)]
        footprint = large_fraction * llc if index < large else small_fraction * llc / cores
        size = size_for_footprint(name, footprint)
        cases.append(_case_for(name, size, target * jitter[index], max(longest, target * 1.1), rates))
    return cases
