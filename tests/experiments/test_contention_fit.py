"""Fitting the contention model to co-runs, and predicting bench mixes with it (``scalpel calibrate``)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.core.simulate import ContentionModel
from scalpel_executor.experiments import contention_fit

MiB = 2**20


@given(st.floats(0.2, 2.0), st.floats(0.1, 3.0))
@settings(max_examples=25, deadline=None)
def test_the_fit_reproduces_pairs_that_a_model_generated(rho, sigma):
    llc = 56 * MiB
    truth = ContentionModel(rho, sigma)
    sizes = [1 * MiB, 8 * MiB, 16 * MiB, 24 * MiB, 34 * MiB, 48 * MiB, 64 * MiB, 96 * MiB]
    pairs = [contention_fit.PairObservation(str(a), str(b), a, b, truth.slowdowns([a, b], [sigma] * 2, llc)[0])
             for a in sizes for b in sizes]
    fit = contention_fit.fit_model(pairs, llc)
    assert fit.rms_error < 0.01  # the grid is coarse in rho; the slowdowns it predicts are not


def test_calibration_documents_are_checked():
    with pytest.raises(ValueError, match="co-run document"):
        contention_fit.pairs_from_corun({"cases": []})
    with pytest.raises(ValueError, match="calibration document"):
        contention_fit.load_model({"rho": 1})
    with pytest.raises(ValueError, match="bench record"):
        contention_fit.predict_bench({"format": "other"}, ContentionModel())
    with pytest.raises(ValueError, match="at least one"):
        contention_fit.fit_model([], 56 * MiB)


@pytest.mark.parametrize("document, message", [
    ([], "not a co-run document: it needs 'cases' and 'slowdown'"),
    ({"cases": "ab", "slowdown": []}, "'cases' must be a list of objects"),
    ({"cases": [{"label": "a"}], "slowdown": [[1.0]]}, "case #0 (a) has no footprint_bytes"),
    ({"cases": [{"label": "a", "footprint_bytes": -1}], "slowdown": [[1.0]]}, "footprint_bytes of case #0 (a) must be"),
    ({"cases": [{"label": "a", "footprint_bytes": 1}], "slowdown": [["1.2"]]}, "must be a finite number > 0, got '1.2'"),
    ({"cases": [{"label": "a", "footprint_bytes": 1}], "slowdown": [[True]]}, "must be a finite number > 0, got True"),
    ({"cases": [{"label": "a", "footprint_bytes": 1}], "slowdown": [1.0]}, "'slowdown' must be a 1 x 1 matrix"),
])
def test_a_malformed_corun_document_is_one_value_error_saying_what_is_wrong(document, message):
    with pytest.raises(ValueError) as error:
        contention_fit.pairs_from_corun(document)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_corun_case_may_give_its_footprint_as_a_size():
    pairs = contention_fit.pairs_from_corun({"cases": [{"label": "a", "footprint_bytes": "4MiB"}], "slowdown": [[1.0]]})
    assert pairs == [contention_fit.PairObservation("a", "a", 4 * MiB, 4 * MiB, 1.0)]


@pytest.mark.parametrize("document, message", [
    ({"capacity_fraction": "0.5", "sensitivity": 1}, "capacity_fraction must be a finite number"),
    ({"capacity_fraction": 0.5, "sensitivity": float("nan")}, "sensitivity must be a finite number"),
    ({"capacity_fraction": True, "sensitivity": 1}, "capacity_fraction must be a finite number"),
    ([0.5, 1], "not a calibration document"),
])
def test_a_malformed_calibration_is_a_value_error(document, message):
    with pytest.raises(ValueError, match=message):
        contention_fit.load_model(document)


@pytest.mark.parametrize("bench_record, message", [
    ({"format": "scalpel-bench/1"}, "a field 'machine' is missing"),
    ({"format": "scalpel-bench/1", "machine": [], "solo": {}, "mixes": [], "summary": []}, "wrong type"),
    ({"format": "scalpel-bench/1", "machine": {"llc": 1, "domains": [[0]]}, "solo": {}, "mixes": [],
      "summary": [{"mix": "x"}]}, "names a mix that 'mixes' lacks"),
])
def test_a_malformed_bench_record_is_a_value_error(bench_record, message):
    with pytest.raises(ValueError, match=message):
        contention_fit.predict_bench(bench_record, ContentionModel())


def test_the_summary_of_predictions_counts_those_within_15_percent():
    rows = [contention_fit.Prediction("m", "p", "fifo", 1.0, predicted, 0.5) for predicted in (1.1, 0.8, 1.0)]
    summary = contention_fit.summarise_predictions(rows)
    assert summary["within_15_percent"] == 2 and summary["max_abs_error"] == pytest.approx(0.2)
