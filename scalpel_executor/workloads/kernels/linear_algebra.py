"""Linear algebra: gemm, 2mm, 3mm, syrk, syr2k, trisolv, covariance, correlation, doitgen.

Each step recomputes or accumulates a matrix product with BLAS into a preallocated buffer; the real
result is checked with Freivalds' test (compare M x with a chain of matrix-vector products for a
random x), O(n^2) against the step's O(n^3).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np

from scalpel_executor.workloads.kernels.base import (
    ArraySpec,
    Kernel,
    State,
    _mismatch,
    _square,
    _uniform,
    _vectors,
    _within,
)

ALPHA = 1.5
BETA = 0.5  # below 1, so that C <- alpha A B + beta C stays bounded over many steps


def _geometric(steps: int) -> float:
    """1 + BETA + ... + BETA**(steps-1): how often alpha P has been added into C."""
    return (1 - BETA ** steps) / (1 - BETA)


def _accumulate(c: np.ndarray, product: np.ndarray) -> None:
    """One step of C <- alpha P + beta C in place, ``product`` (P) scaled in place on the way."""
    product *= ALPHA
    c *= BETA
    c += product


def _naive_accumulated(c0: np.ndarray, product: np.ndarray, steps: int) -> np.ndarray:
    """C after ``steps`` of C <- alpha P + beta C from ``c0``, one step at a time: the naive twin of
    :func:`_accumulate`."""
    c = c0.copy()
    for _ in range(steps):
        c = BETA * c + ALPHA * product
    return c


def _accumulated_x(product_x: np.ndarray, c0x: np.ndarray, steps: int) -> np.ndarray:
    """C x after ``steps`` of C <- alpha P + beta C, in closed form from P x and C0 x:
    alpha (1 + beta + ... + beta^(steps-1)) P x + beta^steps C0 x."""
    return ALPHA * _geometric(steps) * product_x + BETA ** steps * c0x


def _naive_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    n, m = a.shape[0], b.shape[1]
    out = np.zeros((n, m))
    for i in range(n):
        for j in range(m):
            out[i, j] = sum(a[i, k] * b[k, j] for k in range(a.shape[1]))
    return out


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


def _no_calls(size: int) -> float:
    return 0.0


def _gemm_arrays(n: int) -> ArraySpec:
    return _square(n, "ABCT") | _vectors(n, ("x", "c0x"))


_gemm_init = _checked_init("ABC", "C")


def _gemm_run(s: State, steps: int) -> np.ndarray:
    a, b, c, t = s["A"], s["B"], s["C"], s["T"]
    for _ in range(steps):
        np.matmul(a, b, out=t)
        _accumulate(c, t)
    return c


def _gemm_naive(s: State, steps: int) -> np.ndarray:
    return _naive_accumulated(s["C"], _naive_matmul(s["A"], s["B"]), steps)


def _gemm_verify(s: State, c: np.ndarray, steps: int) -> str | None:
    x = s["x"]
    expected = _accumulated_x(s["A"] @ (s["B"] @ x), s["c0x"], steps)
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
    expected = _accumulated_x(s["A"] @ (s["B"] @ (s["C"] @ x)), s["d0x"], steps)
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
        _accumulate(c, t)
    return c


def _syrk_naive(s: State, steps: int) -> np.ndarray:
    return _naive_accumulated(s["C"], _naive_matmul(s["A"], s["A"].T), steps)


def _syrk_verify(s: State, c: np.ndarray, steps: int) -> str | None:
    x = s["x"]
    expected = _accumulated_x(s["A"] @ (s["A"].T @ x), s["c0x"], steps)
    return _mismatch(c @ x, expected, "C x against A (A^T x)")


def _syr2k_arrays(n: int) -> ArraySpec:
    return _square(n, "ABCTU") | _vectors(n, ("x", "c0x"))


def _syr2k_run(s: State, steps: int) -> np.ndarray:
    a, b, c, t, u = s["A"], s["B"], s["C"], s["T"], s["U"]
    for _ in range(steps):
        np.matmul(a, b.T, out=t)
        np.add(t, t.T, out=u)  # B A^T = (A B^T)^T
        _accumulate(c, u)
    return c


def _syr2k_naive(s: State, steps: int) -> np.ndarray:
    update = _naive_matmul(s["A"], s["B"].T) + _naive_matmul(s["B"], s["A"].T)
    return _naive_accumulated(s["C"], update, steps)


def _syr2k_verify(s: State, c: np.ndarray, steps: int) -> str | None:
    a, b, x = s["A"], s["B"], s["x"]
    expected = _accumulated_x(a @ (b.T @ x) + b @ (a.T @ x), s["c0x"], steps)
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


#: The linear-algebra kernels, in the registry's order.
LINEAR_ALGEBRA: tuple[Kernel, ...] = (
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
)
