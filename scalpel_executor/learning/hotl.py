"""Average footprint of a memory-access trace (Scalpel eq. 2) in linear time, and its window (eq. 3).

The footprint of a window is the number of distinct items accessed in it. Scalpel's cache locality
of a task is the *average* footprint over all windows of length ``l`` (eq. 2), with ``l`` the
equal share of the last-level cache in data items (eq. 3). Sliding every window costs O(n·l);
the HOTL theory of Xiang et al. gives every window length at once from three histograms:

    fp(w) = m − [Σ_i (f_i − w)·[f_i > w] + Σ_i (l_i − w)·[l_i > w] + Σ_{t>w} (t − w)·rt(t)] / (n − w + 1)

for a trace of length n with m distinct items, first access times f_i (1-based), reverse last
access times l_i = n + 1 − last_i, and the reuse-time histogram rt(t) (t = distance between two
consecutive accesses of one item). All three bracketed sums have the form Σ_{v>w} (v − w)·h(v) over
one merged histogram h, which suffix sums of h(v) and v·h(v) give for every w in O(n).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np


def _item_ids(trace: Sequence[Hashable] | np.ndarray) -> np.ndarray:
    """Map a trace of arbitrary hashable items to dense integer ids 0..m-1 (one pass, a dict)."""
    if isinstance(trace, np.ndarray) and trace.dtype.kind in "iu":
        return np.unique(trace, return_inverse=True)[1].reshape(-1)
    ids: dict[Hashable, int] = {}
    return np.fromiter((ids.setdefault(item, len(ids)) for item in trace), dtype=np.int64, count=len(trace))


def footprint_curve(trace: Sequence[Hashable] | np.ndarray) -> np.ndarray:
    """Average footprint for every window length of ``trace``.

    Parameters
    ----------
    trace : sequence of hashable items, or an integer numpy array
        The access trace, e.g. cache-block addresses in access order.

    Returns
    -------
    numpy.ndarray of float, length n + 1
        ``curve[w]`` is fp(w), the footprint averaged over all n − w + 1 windows of length w;
        ``curve[0] == 0`` and ``curve[n] == m``, the number of distinct items.

    Examples
    --------
    >>> curve = footprint_curve("baab")
    >>> float(curve[2]) == 5 / 3
    True

    Notes
    -----
    O(n) after the items are numbered (a dict for general items, a sort for integer arrays),
    with the HOTL formula in the module docstring.

    References
    ----------
    X. Xiang, B. Bao, C. Ding, Y. Gao, "Linear-time modeling of program working set in shared
    cache", PACT 2011; Xiang et al., "HOTL: a higher order theory of locality", ASPLOS 2013.
    Scalpel (TC 2024), eq. (2).
    """
    n = len(trace)
    if n == 0:
        return np.zeros(1)
    ids = _item_ids(trace)
    m = int(ids.max()) + 1
    times = np.arange(1, n + 1, dtype=np.int64)

    first = np.full(m, n + 1, dtype=np.int64)
    np.minimum.at(first, ids, times)
    last = np.zeros(m, dtype=np.int64)
    np.maximum.at(last, ids, times)
    reverse_last = n + 1 - last

    # Reuse times: consecutive accesses of one item, found by a stable sort on the item id.
    order = np.argsort(ids, kind="stable")
    same_item = ids[order][1:] == ids[order][:-1]
    reuse = (times[order][1:] - times[order][:-1])[same_item]

    hist = np.bincount(first, minlength=n + 2)[: n + 2].astype(np.float64)
    hist += np.bincount(reverse_last, minlength=n + 2)[: n + 2]
    hist += np.bincount(reuse, minlength=n + 2)[: n + 2]

    values = np.arange(n + 2, dtype=np.float64)
    # tail_count[w] = Σ_{v>w} h(v), tail_weight[w] = Σ_{v>w} v·h(v)
    tail_count = np.concatenate([np.cumsum(hist[::-1])[::-1][1:], [0.0]])
    tail_weight = np.concatenate([np.cumsum((values * hist)[::-1])[::-1][1:], [0.0]])

    w = np.arange(n + 1, dtype=np.float64)
    excess = tail_weight[: n + 1] - w * tail_count[: n + 1]
    curve = m - excess / (n - w + 1)
    curve[0] = 0.0
    return curve


def average_footprint(trace: Sequence[Hashable] | np.ndarray, window: int) -> float:
    """fp(l) of Scalpel eq. (2): the footprint averaged over all windows of length ``window``.

    Parameters
    ----------
    trace : sequence of hashable items, or an integer numpy array
    window : int
        Window length l, 1 ≤ l. A window longer than the trace is clipped to the trace length
        (the only window is then the whole trace).

    Examples
    --------
    >>> round(average_footprint("baab", 2), 4)
    1.6667

    Notes
    -----
    O(n); see :func:`footprint_curve`.
    """
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
        raise ValueError(f"window must be a positive whole number of accesses, got {window!r}")
    if len(trace) == 0:
        return 0.0
    curve = footprint_curve(trace)
    return float(curve[min(int(window), len(trace))])


def window_length(llc_size: int, element_size: int, cores: int) -> int:
    """Window length l of Scalpel eq. (3): the equal share of the LLC per core, in data items.

    ``l = LLCSize / (sizeof(DataType) × C)``, at least 1.

    Examples
    --------
    >>> window_length(12 * 2**20, 8, 4)  # Xeon E5620: 12 MiB L3, doubles, 4 cores per L3
    393216
    """
    for name, value in (("llc_size", llc_size), ("element_size", element_size), ("cores", cores)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive whole number, got {value!r}")
    return max(1, int(llc_size) // (int(element_size) * int(cores)))
