"""Irregular access: a sparse matrix-vector product with random column indices (ELLPACK layout).

Its gathers land at random in a vector that is most of its footprint, so it is the kernel most
sensitive to a co-runner that shares its cache.
"""

from __future__ import annotations

import math

import numpy as np

from scalpel_executor.workloads.kernels.base import ArraySpec, Kernel, State, _mismatch

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


#: The irregular-access kernels.
IRREGULAR: tuple[Kernel, ...] = (
    Kernel("spmv", "sparse matrix-vector product, random column indices", _spmv_arrays, _spmv_init, _spmv_run,
           _spmv_naive, _spmv_verify, work=lambda n: 3.0 * _spmv_shape(n)[1], calls=lambda n: 3.0,
           min_size=_SPMV_ROWS_PER_X, check_size=4 * _SPMV_ROWS_PER_X, check_steps=2),
)
