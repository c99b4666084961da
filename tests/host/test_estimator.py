"""The estimator: the time-weighted percentile that turns a task's windows into its footprint."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalpel_executor.host.probe import weighted_percentile
from scalpel_executor.host.probe.estimator import ENDED_BEFORE_FIRST_WINDOW, summarize


@given(st.lists(st.tuples(st.integers(0, 10**9), st.floats(0.001, 10.0)), min_size=1, max_size=30),
       st.floats(0.01, 1.0))
def test_weighted_percentile_is_a_value_monotone_in_q_and_the_max_at_one(pairs, q):
    values, weights = [v for v, _ in pairs], [w for _, w in pairs]
    result = weighted_percentile(values, weights, q)
    assert result in values
    assert result <= weighted_percentile(values, weights, min(1.0, q + 0.1))
    assert weighted_percentile(values, weights, 1.0) == max(values)
    share = sum(w for v, w in pairs if v <= result) / sum(weights)
    assert share >= q * (1 - 1e-9)


@pytest.mark.parametrize("values, weights, q", [([], [], 0.5), ([1.0], [1.0, 2.0], 0.5), ([1.0], [1.0], 0.0)])
def test_weighted_percentile_names_bad_arguments(values, weights, q):
    with pytest.raises(ValueError):
        weighted_percentile(values, weights, q)


def test_a_task_with_no_window_is_said_to_end_before_the_first_close_only_when_it_did():
    short, late = summarize([], wall=0.0421), summarize([], wall=0.1267)
    assert short.footprint is None and late.footprint is None
    assert short.footprint_source == f"{ENDED_BEFORE_FIRST_WINDOW} 42.1 ms, before its first window closed at 100 ms"
    # it outlived the close (the window was not yet delivered): no "after 126.7 ms, before ... 100 ms"
    assert late.footprint_source.startswith(f"{ENDED_BEFORE_FIRST_WINDOW} 126.7 ms, ")
    assert "closed at" not in late.footprint_source and "due to close at 100 ms" in late.footprint_source
