"""A scientist's small workflow, as plain functions: seeded random-access lookups over a table that
fills most of a last-level cache, FFTs of small signals, follow-up steps fed by the lookups'
results (dicts), matrix products, a shell step and a reduce.

Each function does a fixed amount of work (so contention shows as a longer run, not as less work)
and returns a dict with its own wall-clock start and end (``t0``, ``t1``, ``time.time()``) and the
CPU it ended on, so every executor is measured the same way, from the tasks themselves.
``benchmarks/user_workflow.py`` wires them into a Parsl DAG; Parsl is not imported here.
"""

from __future__ import annotations

import time

__all__ = ["lookup", "spectrum", "refine", "product", "summary_line", "reduce_summaries", "cpu_now"]


def cpu_now() -> int:
    """The CPU this process last ran on (field 39 of /proc/self/stat; -1 where there is none)."""
    try:
        with open("/proc/self/stat") as stream:
            return int(stream.read().rsplit(")", 1)[1].split()[36])
    except (OSError, IndexError, ValueError):
        return -1


def _stamp(name: str, t0: float, **fields) -> dict:
    return {"name": name, "t0": t0, "t1": time.time(), "cpu": cpu_now(), **fields}


def lookup(seed: int, mib: int, rounds: int, parsl_resource_specification=None) -> dict:
    """``rounds`` random gathers of 2^20 entries from a table of ``mib`` MiB: a working set the
    size of the table, touched at random, as a hash join or a sparse lookup does."""
    import numpy as np

    t0 = time.time()
    rng = np.random.default_rng(seed)
    table = rng.random((mib << 20) // 8)
    index = rng.integers(0, table.size, 1 << 20)
    total = 0.0
    for _ in range(rounds):
        total += float(table.take(index).sum())
        index = (index * 1103515245 + 12345) % table.size
    return _stamp(f"lookup-{seed}", t0, seed=seed, mib=mib, total=total)


def spectrum(n: int, seed: int, repeats: int, parsl_resource_specification=None) -> dict:
    """The power spectrum of a seeded signal of ``n`` samples, ``repeats`` times: a small, cache-friendly task."""
    import numpy as np

    t0 = time.time()
    signal = np.random.default_rng(seed).standard_normal(n)
    peak = 0.0
    for _ in range(repeats):
        power = np.abs(np.fft.rfft(signal)) ** 2
        peak = max(peak, float(power.max()))
        signal = np.roll(signal, 1)
    return _stamp(f"spectrum-{seed}", t0, peak=peak)


def refine(upstream: dict, n: int, repeats: int, parsl_resource_specification=None) -> dict:
    """A follow-up step that needs a lookup's result: a small computation seeded by its total."""
    import numpy as np

    t0 = time.time()
    rng = np.random.default_rng(int(abs(upstream["total"])) % (2**32))
    values = rng.random(n)
    for _ in range(repeats):
        values = np.sort(values * 1.0001)
    return _stamp(f"refine-{upstream['seed']}", t0, seed=upstream["seed"], median=float(values[n // 2]))


def product(n: int, seed: int, repeats: int, parsl_resource_specification=None) -> dict:
    """``repeats`` products of two seeded n x n matrices (three of them: 24 n^2 bytes)."""
    import numpy as np

    t0 = time.time()
    rng = np.random.default_rng(seed)
    a, b = rng.random((n, n)), rng.random((n, n))
    for _ in range(repeats):
        c = a @ b
        a = c / c.max()
    return _stamp(f"product-{seed}", t0, trace=float(np.trace(a)))


def summary_line(result: dict, outputs=(), stdout=None, stderr=None, parsl_resource_specification=None) -> str:
    """A ``bash_app`` step: the shell writes one line (name, start, end) to its output file."""
    import shlex

    line = f"{result['name']} {result['t0']:.6f} {result['t1']:.6f}"
    return f"echo {shlex.quote(line)} > {shlex.quote(outputs[0].filepath)}"


def reduce_summaries(inputs=(), parsl_resource_specification=None) -> dict:
    """The workflow's reduce over the shell steps' files (``inputs=``, Parsl ``File`` objects)."""
    t0 = time.time()
    rows = [open(file.filepath).read().split() for file in inputs]
    return _stamp("reduce", t0, members=len(rows), names=sorted(row[0] for row in rows))
