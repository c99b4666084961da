"""Stencils: jacobi-2d, heat-2d, seidel-2d, fdtd-2d, adi.

The averaging stencils obey a maximum principle: data drawn from [0, 1) stays in [0, 1], which
checks the real result for free.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from scalpel_executor.workloads.kernels.base import ArraySpec, Kernel, State, _square, _uniform, _vectors, _within


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


def _ping_pong_naive(point: Callable[[np.ndarray, int, int], float]) -> Callable[[State, int], np.ndarray]:
    """A two-grid stencil's plain-loop reference: ``point(src, i, j)`` is the new value at (i, j)."""

    def naive(s: State, steps: int) -> np.ndarray:
        a, b = s["A"].copy(), s["B"].copy()
        n = len(a)
        for _ in range(steps):
            for src, dst in ((a, b), (b, a)):
                for i in range(1, n - 1):
                    for j in range(1, n - 1):
                        dst[i, j] = point(src, i, j)
        return a

    return naive


def _jacobi_point(src: np.ndarray, i: int, j: int) -> float:
    return 0.2 * (src[i, j] + src[i, j - 1] + src[i, j + 1] + src[i + 1, j] + src[i - 1, j])


_jacobi_run = _ping_pong(_jacobi_half)
_jacobi_naive = _ping_pong_naive(_jacobi_point)


def _heat_half(src: np.ndarray, dst: np.ndarray) -> None:
    inner = dst[1:-1, 1:-1]
    np.add(src[:-2, 1:-1], src[2:, 1:-1], out=inner)
    np.add(inner, src[1:-1, :-2], out=inner)
    np.add(inner, src[1:-1, 2:], out=inner)
    inner *= 0.25
    inner += src[1:-1, 1:-1]
    inner *= 0.5  # = src + 0.125 (discrete Laplacian along each axis)


def _heat_point(src: np.ndarray, i: int, j: int) -> float:
    return (0.125 * (src[i + 1, j] - 2 * src[i, j] + src[i - 1, j])
            + 0.125 * (src[i, j + 1] - 2 * src[i, j] + src[i, j - 1]) + src[i, j])


_heat_run = _ping_pong(_heat_half)
_heat_naive = _ping_pong_naive(_heat_point)


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


#: The stencil kernels, in the registry's order.
STENCILS: tuple[Kernel, ...] = (
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
)
