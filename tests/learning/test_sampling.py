"""The sampling rule: which tasks of a profile key the probe measures (first N, every k-th, after a drift)."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalpel_executor.learning.estimates import Estimator
from scalpel_executor.learning.hints import Hints
from scalpel_executor.learning.sampling import DRIFT_FLOOR, MeasurePlan, Sampling, drifted


def decisions(sampling, tasks, key="k"):
    plan = MeasurePlan(sampling)
    return [plan.decide(key) for _ in range(tasks)]


def test_the_defaults_measure_the_first_three_then_one_in_twenty():
    measured = [i for i, m in enumerate(decisions(Sampling(), 100)) if m]
    assert measured == [0, 1, 2, 22, 42, 62, 82]


def test_every_one_measures_every_task_and_every_zero_only_the_first():
    assert all(decisions(Sampling(measure_first=0, measure_every=1), 30))
    assert decisions(Sampling(measure_first=2, measure_every=0), 30) == [True, True] + [False] * 28
    assert not any(decisions(Sampling(measure_first=0, measure_every=0), 30))


@given(first=st.integers(0, 10), every=st.integers(0, 10), tasks=st.integers(0, 200))
def test_first_n_then_exactly_every_kth(first, every, tasks):
    measured = [i for i, m in enumerate(decisions(Sampling(first, every), tasks)) if m]
    expected = list(range(min(first, tasks)))
    if every:
        expected += list(range(first + every - 1, tasks, every))
    assert measured == expected


@given(first=st.integers(0, 5), every=st.integers(1, 30), tasks=st.integers(1, 500))
def test_the_measured_share_is_bounded_by_first_plus_one_in_every(first, every, tasks):
    share = sum(decisions(Sampling(first, every), tasks)) / tasks
    assert share <= (min(first, tasks) + tasks / every) / tasks


def test_keys_are_counted_apart():
    plan = MeasurePlan(Sampling(measure_first=1, measure_every=0))
    assert [plan.decide("a"), plan.decide("b"), plan.decide("a"), plan.decide("b")] == [True, True, False, False]
    assert plan.measured("a") == plan.measured("b") == 1 and plan.measured("never") == 0


def test_a_drift_measures_the_next_task_once_and_restarts_the_count():
    plan = MeasurePlan(Sampling(measure_first=1, measure_every=5, remeasure_drift=2.0))
    assert [plan.decide("k") for _ in range(3)] == [True, False, False]
    assert not plan.observe_runtime("k", 1.9, 1.0)  # within the factor
    assert plan.decide("k") is False
    assert plan.observe_runtime("k", 2.5, 1.0)
    assert plan.decide("k") is True  # due
    # the drift's measurement restarts the one-in-five count: four unmeasured, then the fifth
    assert [plan.decide("k") for _ in range(5)] == [False, False, False, False, True]


@given(wall=st.floats(1e-6, 1e6), learned=st.floats(1e-6, 1e6), factor=st.floats(1.000001, 1e3),
       looser=st.floats(1.0, 10.0))
def test_drift_is_symmetric_and_a_looser_factor_never_drifts_more(wall, learned, factor, looser):
    assert drifted(wall, learned, factor) == drifted(learned, wall, factor)  # twice as long, or half
    if drifted(wall, learned, factor * looser):
        assert drifted(wall, learned, factor)
    if max(wall, learned) < DRIFT_FLOOR:
        assert not drifted(wall, learned, factor)  # milliseconds of jitter are no drift


def test_no_drift_without_a_learned_run_time_or_a_factor():
    assert not drifted(100.0, None, 2.0)
    assert not drifted(100.0, 0.0, 2.0)
    assert not drifted(100.0, 1.0, None)
    assert not drifted(100.0, 1.0, math.inf)
    plan = MeasurePlan(Sampling(measure_first=0, measure_every=0, remeasure_drift=None))
    assert not plan.observe_runtime("k", 100.0, 1.0) and not plan.decide("k")


@pytest.mark.parametrize("kwargs, message", [
    ({"measure_first": -1}, "measure_first must be a whole number of tasks >= 0, got -1"),
    ({"measure_every": 2.5}, "measure_every must be a whole number of tasks >= 0, got 2.5"),
    ({"measure_every": True}, "measure_every must be a whole number of tasks >= 0, got True"),
    ({"remeasure_drift": 1.0}, "remeasure_drift must be a factor > 1"),
    ({"remeasure_drift": 0.5}, "got 0.5"),
    ({"remeasure_drift": math.nan}, "got nan"),
    ({"learn_cold": "no"}, "learn_cold must be True or False, got 'no'"),
])
def test_bad_settings_name_the_value(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Sampling(**kwargs)


# -- through the estimator ------------------------------------------------------------------------


def _app(x):
    return x


def test_the_estimator_decides_per_key_and_learns_run_time_from_unmeasured_tasks():
    estimator = Estimator(None, 0.0, 1.0, sampling=Sampling(measure_first=2, measure_every=0))
    estimates = [estimator.estimate(_app, (1,), {}, Hints(profile_key="k")) for _ in range(4)]
    assert [e.measure for e in estimates] == [True, True, False, False]
    estimator.observe(estimates[0], {"wall": 0.5, "footprint": 8e6})
    estimator.observe(estimates[2], {"wall": 0.7, "footprint": None})  # unmeasured: wall time only
    after = estimator.estimate(_app, (1,), {}, Hints(profile_key="k"))
    assert after.footprint == 8e6 and after.runtime == pytest.approx(0.3 * 0.7 + 0.7 * 0.5)


@pytest.mark.parametrize("learn_cold", [True, False])
def test_a_cold_call_teaches_its_key_unless_the_rule_says_not(tmp_path, learn_cold):
    """A worker's first call of an app (it imported modules) timed its imports too: ``profile run`` stores none."""
    from scalpel_executor.learning.store import ProfileStore

    store = ProfileStore(tmp_path / "p.sqlite")
    estimator = Estimator(store, 0.0, 1.0, sampling=Sampling(measure_every=1, learn_cold=learn_cold))
    for wall, cold in ((0.5, True), (0.01, False), (0.012, False)):
        estimator.observe(estimator.estimate(_app, (1,), {}, Hints(profile_key="k")),
                          {"wall": wall, "footprint": 4e6 if cold else 1e6, "cold": cold})
    after = estimator.estimate(_app, (1,), {}, Hints(profile_key="k"))
    estimator.flush()
    stored = store.get("k")
    if learn_cold:
        assert stored.runs == 3 and after.runtime > 0.1 and after.footprint > 1e6
    else:
        assert stored.runs == 2 and stored.runtime_mean == pytest.approx(0.011)
        assert after.runtime == pytest.approx(0.3 * 0.012 + 0.7 * 0.01) and after.footprint == 1e6
    store.close()


def test_hinted_tasks_follow_the_same_rule():
    estimator = Estimator(None, 0.0, 1.0, sampling=Sampling(measure_first=1, measure_every=0))
    hints = Hints(footprint=1e6, runtime=1.0, profile_key="h")
    assert [estimator.estimate(_app, (1,), {}, hints).measure for _ in range(3)] == [True, False, False]


def test_without_sampling_nothing_is_measured():
    estimator = Estimator(None, 0.0, 1.0)
    assert not any(estimator.estimate(_app, (1,), {}, Hints(profile_key="k")).measure for _ in range(5))


def test_an_unmeasured_task_that_drifts_makes_the_next_one_measured():
    estimator = Estimator(None, 0.0, 1.0, sampling=Sampling(measure_first=1, measure_every=0, remeasure_drift=2.0))

    def run(wall):
        estimate = estimator.estimate(_app, (1,), {}, Hints(profile_key="k"))
        estimator.observe(estimate, {"wall": wall})
        return estimate.measure

    assert [run(1.0), run(1.1), run(0.9)] == [True, False, False]
    assert estimator.drifts == 0
    assert run(3.0) is False  # unmeasured, three times the learned run time ...
    assert estimator.drifts == 1
    assert run(3.0) is True  # ... so the next one is measured
    assert estimator.drifts == 1  # a measured task is no drift: its own measurement answers it
