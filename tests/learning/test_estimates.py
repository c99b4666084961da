"""Intensity (the LLC miss rate) and the run-time spread travel from the store and from measurements to the
scheduler."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.learning.estimates import Estimator
from scalpel_executor.learning.hints import Hints
from scalpel_executor.learning.store import Observation, ProfileStore


def _double(x):
    return 2 * x


def test_the_estimator_reads_a_stored_miss_rate_and_learns_a_measured_one(tmp_path):
    store = ProfileStore(tmp_path / "p.sqlite")
    store.record([Observation("hot", "app", runtime=1.0, footprint=8e6, llc_miss_rate=0.25)])
    estimator = Estimator(store, default_footprint=1.0, default_runtime=1.0)
    assert estimator.estimate(_double, (1,), {}, Hints(profile_key="hot")).intensity == 0.25

    fresh = estimator.estimate(_double, (1,), {}, Hints(profile_key="cold"))
    assert fresh.intensity is None  # never measured: `di` ranks it by footprint
    estimator.observe(fresh, {"wall": 0.1, "footprint": 1e6, "llc_references": 1000, "llc_misses": 400})
    assert estimator.estimate(_double, (1,), {}, Hints(profile_key="cold")).intensity == 0.4
    estimator.observe(fresh, {"wall": 0.1, "footprint": 1e6})  # no counters this time: the rate stays
    assert estimator.estimate(_double, (1,), {}, Hints(profile_key="cold")).intensity == 0.4
    estimator.flush()
    assert store.get("cold").llc_miss_rate == 0.4


def test_the_live_scheduler_is_told_the_stored_miss_rate(tmp_path):
    from scalpel_executor import ScalpelExecutor

    store = ProfileStore(tmp_path / "p.sqlite")
    store.record([Observation(f"k{i}", "app", runtime=0.01, footprint=1e6, llc_miss_rate=rate)
                  for i, rate in enumerate((0.1, 0.7))])
    store.close()
    executor = ScalpelExecutor(profiles=str(tmp_path / "p.sqlite"), policy="di", topology="2x1:8MiB")
    executor.start()
    try:
        futures = [executor.submit(_double, {"profile_key": f"k{i}"}, i) for i in range(2)]
        assert [f.result(timeout=60) for f in futures] == [0, 2]
    finally:
        executor.shutdown()
    assert {r.profile_key: r.intensity for r in executor.records} == {"k0": 0.1, "k1": 0.7}


def test_the_runtime_spread_is_the_keys_std_over_its_mean_from_the_store_and_this_run(tmp_path):
    import statistics

    from scalpel_executor.learning.estimates import ONE_RUN_SPREAD, PRIOR_SPREAD

    store = ProfileStore(tmp_path / "p.sqlite")
    runs = [1.0, 1.2, 0.8, 1.0]
    store.record([Observation("steady", "app", runtime=r) for r in runs])
    store.record([Observation("once", "app", runtime=2.0)])
    estimator = Estimator(store, default_footprint=1.0, default_runtime=1.0)

    def spread(key, **hints):
        return estimator.estimate(_double, (1,), {}, Hints(profile_key=key, **hints)).runtime_spread

    assert spread("steady") == pytest.approx(statistics.stdev(runs) / statistics.mean(runs))
    assert spread("once") == ONE_RUN_SPREAD
    assert spread("never") == PRIOR_SPREAD
    assert spread("steady", runtime=3.0) == 0.0  # the user's figure is taken as exact
    # this run's observations join the store's (Welford over both)
    estimate = estimator.estimate(_double, (1,), {}, Hints(profile_key="once"))
    estimator.observe(estimate, {"wall": 3.0})
    assert spread("once") == pytest.approx(statistics.stdev([2.0, 3.0]) / 2.5)
    fresh = estimator.estimate(_double, (1,), {}, Hints(profile_key="new"))
    for wall in (0.5, 0.7, 0.6):
        estimator.observe(fresh, {"wall": wall})
    estimator.observe(fresh, {"wall": float("nan")})  # ignored, as for the estimate
    assert spread("new") == pytest.approx(statistics.stdev([0.5, 0.7, 0.6]) / 0.6)


def test_the_live_scheduler_is_told_each_tasks_runtime_spread(tmp_path):
    from scalpel_executor import ScalpelExecutor

    for node_manager in (False, True):  # in-process, and through the node manager's Submit
        path = tmp_path / f"p-{node_manager}.sqlite"  # each run learns: a store of its own
        store = ProfileStore(path)
        store.record([Observation("k", "app", runtime=r, footprint=1e6) for r in (0.01, 0.03)])
        store.close()
        executor = ScalpelExecutor(profiles=str(path), topology="2x1:8MiB", node_manager=node_manager)
        executor.start()
        try:
            assert executor.submit(_double, {"profile_key": "k"}, 4).result(timeout=60) == 8
        finally:
            executor.shutdown()
        spreads = [r.runtime_spread for r in executor.records]
        assert spreads == [pytest.approx(0.01414 / 0.02, rel=1e-3)]


def test_a_task_over_before_the_probes_first_window_counts_as_a_footprint_of_zero(tmp_path):
    from scalpel_executor.host.probe.estimator import summarize

    store = ProfileStore(tmp_path / "p.sqlite")
    estimator = Estimator(store, default_footprint=5e6, default_runtime=1.0)
    first = estimator.estimate(_double, (1,), {}, Hints(profile_key="short"))
    assert first.footprint_source == "prior"
    too_short = summarize([], wall=0.02)  # the probe's own report for a 20 ms task
    estimator.observe(first, {"wall": 0.02, "footprint": None, "footprint_source": too_short.footprint_source})
    estimator.flush()
    again = Estimator(store, default_footprint=5e6, default_runtime=1.0)
    second = again.estimate(_double, (1,), {}, Hints(profile_key="short"))
    assert (second.footprint, second.footprint_source) == (0.0, "store")
    # a failed probe is no measurement: nothing is learned from it
    other = estimator.estimate(_double, (1,), {}, Hints(profile_key="broken"))
    estimator.observe(other, {"wall": 2.0, "footprint": None, "footprint_source": "unavailable: probe off"})
    assert estimator.estimate(_double, (1,), {}, Hints(profile_key="broken")).footprint_source == "app"


def test_a_keys_memory_is_the_largest_peak_rss_measured_from_the_store_and_this_run(tmp_path):
    store = ProfileStore(tmp_path / "p.sqlite")
    store.record([Observation("big", "app", runtime=1.0, footprint=8e6, peak_rss=3e9)])
    estimator = Estimator(store, default_footprint=1.0, default_runtime=1.0)
    assert estimator.estimate(_double, (1,), {}, Hints(profile_key="big")).memory == 3e9
    fresh = estimator.estimate(_double, (1,), {}, Hints(profile_key="new"))
    assert fresh.memory is None  # nothing measured: the task declares nothing and counts nothing
    estimator.observe(fresh, {"wall": 0.1, "footprint": 1e6, "peak_rss": 2e9, "max_rss": 9e9})
    estimator.observe(fresh, {"wall": 0.1, "footprint": 1e6, "peak_rss": 1e9})
    assert estimator.estimate(_double, (1,), {}, Hints(profile_key="new")).memory == 2e9  # the probe's, the largest


def test_a_task_too_short_for_the_probe_does_not_average_down_a_measured_footprint(tmp_path):
    from scalpel_executor.host.probe.estimator import ENDED_BEFORE_FIRST_WINDOW

    store = ProfileStore(tmp_path / "p.sqlite")
    estimator = Estimator(store, default_footprint=1.0, default_runtime=1.0)
    short = {"wall": 0.02, "footprint_source": f"{ENDED_BEFORE_FIRST_WINDOW} 20.0 ms, before its first window"}

    def footprint(key):
        return estimator.estimate(_double, (1,), {}, Hints(profile_key=key))

    touch = footprint("touch")
    estimator.observe(touch, {"wall": 0.4, "footprint": 72e6})  # the cold run: imports and all
    for _ in range(2):
        estimator.observe(touch, short)  # warm runs over before the first window
    assert footprint("touch").footprint == 72e6
    quick = footprint("quick")  # a key whose tasks are all short: a footprint of 0, from what it ran
    estimator.observe(quick, short)
    assert (footprint("quick").footprint, footprint("quick").footprint_source) == (0.0, "learned")
    estimator.flush()
    assert store.get("touch").footprint_runs == 1 and store.get("quick").footprint_runs == 1


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.text(max_size=3),
                          st.none(), st.integers(-5, 5)), min_size=1, max_size=6))
def test_a_measurement_that_is_not_a_number_at_least_0_teaches_nothing(odd_values):
    """What a worker reports is taken only where it is a finite number >= 0 (a run time) or a
    number >= 0 (a footprint, a peak RSS): every other value leaves the estimate as the good ones make it."""
    def learned(values):
        estimator = Estimator(None, default_footprint=1.0, default_runtime=1.0)
        estimate = estimator.estimate(_double, (1,), {}, Hints(profile_key="k"))
        for value in values:
            estimator.observe(estimate, {"wall": value, "footprint": value, "peak_rss": value})
        after = estimator.estimate(_double, (1,), {}, Hints(profile_key="k"))
        return after.runtime, after.footprint, after.runtime_spread, after.memory

    def good(value, finite):
        return isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value) \
            and value >= 0 and (math.isfinite(value) or not finite)

    runs = [v for v in odd_values if good(v, finite=True)]
    footprints = [v for v in odd_values if good(v, finite=False)]
    if runs == footprints:  # the same good values, in order, as a clean run of them gives
        assert learned(odd_values) == learned([float(v) for v in runs])
    runtime, _, _, _ = learned(odd_values)
    assert runtime == (1.0 if not runs else runtime) and (not runs or math.isfinite(runtime))


def test_a_keys_estimate_is_handed_out_again_until_what_it_says_changes():
    """A submit keeps its Estimate until its task ends: an unchanged one is the same object, so a
    burst of tasks of one key adds no object per task to the driver's garbage collections."""
    estimator = Estimator(None, default_footprint=1.0, default_runtime=1.0)
    first = estimator.estimate(_double, (1,), {}, Hints(profile_key="k"))
    assert estimator.estimate(_double, (1,), {}, Hints(profile_key="k")) is first
    other = estimator.estimate(_double, (1,), {}, Hints(profile_key="other"))
    assert other is not first and other.key == "other"
    estimator.observe(first, {"wall": 3.0})  # the key learns a run time: a new estimate says so
    learned = estimator.estimate(_double, (1,), {}, Hints(profile_key="k"))
    assert learned is not first and learned.runtime == 3.0 and first.runtime == 1.0
    assert estimator.estimate(_double, (1,), {}, Hints(profile_key="k")) is learned
    hinted = estimator.estimate(_double, (1,), {}, Hints(profile_key="k", runtime=9.0))
    assert hinted.runtime == 9.0 and hinted.runtime_source == "hint"
