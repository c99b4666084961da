"""A user's streaming workflow, as plain functions: raw frames normalised by streaming passes
over arrays that reuse nothing, samples scored by small FFTs whose data stays in a core's own L2,
and a reduce.

A ``normalise`` is bound by memory bandwidth, which its footprint does not show: two of 12 MiB
slow each other on a 2-core EPYC VM whose 32 MiB L3 holds both. A ``score`` is bound by compute.
``benchmarks/streaming_mix.py`` puts both pairs, stream beside stream and stream beside score,
before the executor's learned per-key interference model, and measures what each pair costs on
the host at hand.

Each function does a fixed amount of work and returns a dict stamped as
:mod:`~scalpel_executor.workloads.lookups`' are (``name``, ``t0``, ``t1``: ``time.time()``,
``cpu``). Parsl is not imported here.
"""

from __future__ import annotations

import time

from scalpel_executor.workloads.lookups import _stamp

__all__ = ["collect", "normalise", "score"]

#: Signals per ``score`` call: 8 x n doubles in, 8 x (n/2 + 1) complex out; 130 KiB at n = 1024.
SIGNALS = 8


def normalise(seed: int, mib: int, passes: int, parsl_resource_specification=None) -> dict:
    """Normalise a raw frame: ``passes`` times ``a += b`` over two seeded float64 arrays of
    ``mib / 2`` MiB each (``np.add(a, b, out=a)``). Its working set is ``mib`` MiB, swept end
    to end every pass and reused only a pass later: the task is bound by memory bandwidth."""
    import numpy as np

    t0 = time.time()
    rng = np.random.default_rng(seed)
    a, b = rng.random((mib << 19) // 8), rng.random((mib << 19) // 8)
    for _ in range(passes):
        np.add(a, b, out=a)
    return _stamp(f"normalise-{seed}", t0, seed=seed, mib=mib, level=float(a[::4096].mean()))


def score(seed: int, n: int, repeats: int, parsl_resource_specification=None) -> dict:
    """Score a sample: ``repeats`` power spectra of :data:`SIGNALS` seeded signals of ``n``
    samples each. At n = 1024 its data (about 130 KiB) stays in a core's own L2: the task is
    bound by compute and barely feels a neighbour's memory traffic."""
    import numpy as np

    t0 = time.time()
    signals = np.random.default_rng(seed).standard_normal((SIGNALS, n))
    peak = 0.0
    for _ in range(repeats):
        power = np.abs(np.fft.rfft(signals, axis=1)) ** 2
        peak = max(peak, float(power.max()))
        signals[:, 0] += 1e-3
    return _stamp(f"score-{seed}", t0, seed=seed, peak=peak)


def collect(*results: dict, parsl_resource_specification=None) -> dict:
    """The workflow's reduce over the normalised frames' and the scores' dicts: how many of each."""
    t0 = time.time()
    names = sorted(result["name"] for result in results)
    return _stamp("collect", t0, members=len(names),
                  normalised=sum(name.startswith("normalise-") for name in names),
                  scored=sum(name.startswith("score-") for name in names))
