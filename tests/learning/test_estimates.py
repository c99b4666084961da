"""Intensity (the LLC miss rate) travels from the store and from measurements to the scheduler."""

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
