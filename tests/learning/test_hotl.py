import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.learning.hotl import average_footprint, footprint_curve, window_length


def brute_force(trace, window):
    windows = [trace[i : i + window] for i in range(len(trace) - window + 1)]
    return sum(len(set(w)) for w in windows) / len(windows)


def test_paper_example_baab():
    assert average_footprint("baab", 2) == pytest.approx(5 / 3)
    assert list(footprint_curve("baab")) == pytest.approx([0, 1, 5 / 3, 2, 2])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 12), min_size=1, max_size=80), st.data())
def test_hotl_matches_sliding_windows(trace, data):
    window = data.draw(st.integers(1, len(trace)))
    assert average_footprint(trace, window) == pytest.approx(brute_force(trace, window))
    assert average_footprint(np.array(trace), window) == pytest.approx(brute_force(trace, window))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from("abcdefg"), min_size=1, max_size=60))
def test_curve_is_monotone_and_ends_at_distinct_count(trace):
    curve = footprint_curve(trace)
    assert curve[-1] == pytest.approx(len(set(trace)))
    assert all(b >= a - 1e-9 for a, b in zip(curve, curve[1:]))


def test_window_longer_than_trace_is_the_whole_trace():
    assert average_footprint("abcab", 50) == 3


def test_streaming_trace_footprint_equals_window():
    trace = list(range(1000))  # no reuse: every window of length w touches w items
    assert average_footprint(trace, 64) == pytest.approx(64)


@pytest.mark.parametrize("window", [0, -1, 1.5, True, "2"])
def test_bad_window_is_rejected(window):
    with pytest.raises(ValueError, match="window"):
        average_footprint("abc", window)


def test_window_length_equation_3():
    assert window_length(12 * 2**20, 8, 4) == 12 * 2**20 // 32
    assert window_length(32 * 2**20, 4, 2) == 4 * 2**20
    assert window_length(100, 64, 4) == 1  # never zero
    with pytest.raises(ValueError, match="cores"):
        window_length(12 * 2**20, 8, 0)
