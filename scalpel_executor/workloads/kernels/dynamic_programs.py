"""Dynamic programs: floyd-warshall (all-pairs shortest paths) and nussinov (RNA folding)."""

from __future__ import annotations

import numpy as np

from scalpel_executor.workloads.kernels.base import ArraySpec, Kernel, State, _square, _vectors


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


#: The dynamic-programming kernels, in the registry's order.
DYNAMIC_PROGRAMS: tuple[Kernel, ...] = (
    Kernel("floyd-warshall", "all-pairs shortest paths, one pivot per step", _floyd_arrays, _floyd_init,
           _floyd_run, _floyd_naive, _floyd_verify, work=lambda n: 2.0 * n * n, calls=lambda n: 4.0,
           check_size=7, check_steps=9),
    Kernel("nussinov", "RNA folding dynamic program (Nussinov)", _nussinov_arrays, _nussinov_init, _nussinov_run,
           _nussinov_naive, _nussinov_verify, work=lambda n: n ** 3 / 3.0,
           calls=lambda n: 10.0 * n + 3.0 * n * n / (2 * _NUSSINOV_BLOCK), check_size=14, check_steps=2),
)
