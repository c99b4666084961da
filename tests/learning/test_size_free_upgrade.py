"""A store written before an app declared size-free arguments: the keys its calls split into by seed
are the history of the new key, read without a lock and written once, counted once in the app."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalpel_executor.learning.estimates import Estimator
from scalpel_executor.learning.hints import Hints, app_hints
from scalpel_executor.learning.keys import SIZE_FREE, app_name, profile_key
from scalpel_executor.learning.migrate import size_free_match
from scalpel_executor.learning.store import Observation, ProfileStore


def fft_peak(n, seed):
    return n


tokens = st.sampled_from(["~512", "~108", "~128", "n<16", "str", "f8[~1024x3]", "fast", "{a:num,b:str}"])


@given(st.lists(tokens, min_size=1, max_size=5), st.data())
def test_a_key_stands_for_exactly_the_old_keys_that_differ_only_where_it_has_a_star(parts, data):
    free = data.draw(st.sets(st.integers(0, len(parts) - 1), min_size=1))
    new = f"lab.f({','.join(SIZE_FREE if i in free else part for i, part in enumerate(parts))})"
    assert size_free_match(new, f"lab.f({','.join(parts)})")
    changed = data.draw(st.integers(0, len(parts) - 1))
    other = [("~4096" if part != "~4096" else "~8") if i == changed else part for i, part in enumerate(parts)]
    assert size_free_match(new, f"lab.f({','.join(other)})") == (changed in free)
    assert not size_free_match(new, f"lab.g({','.join(parts)})")  # another app
    assert not size_free_match(new, f"lab.f({','.join(parts + ['~8'])})")  # another arity
    assert not size_free_match(f"lab.f({','.join(parts)})", f"lab.f({','.join(parts)})")  # nothing size-free


def test_the_new_key_reads_the_merged_history_and_its_first_record_keeps_it(tmp_path):
    store = ProfileStore(tmp_path / "p.sqlite")
    store.record([Observation("lab.fft_peak(~512,~108)", "lab.fft_peak", runtime=1.0, footprint=4e6)] * 3
                 + [Observation("lab.fft_peak(~512,~128)", "lab.fft_peak", runtime=3.0, footprint=4e6)] * 3
                 + [Observation("lab.fft_peak(~4096,~108)", "lab.fft_peak", runtime=20.0)] * 2)
    new = "lab.fft_peak(~512,*)"
    adopted = store.adoptable(new)
    assert (adopted.key, adopted.runs, adopted.runtime_mean) == (new, 6, 2.0)  # not the other size
    assert store.get(new) is None and store.app_profile("lab.fft_peak").runs == 8  # reading wrote nothing
    assert store.adoptable("lab.fft_peak(~512,~108)") is None  # a key without `*` adopts nothing

    store.record([Observation(new, "lab.fft_peak", runtime=2.0)])
    kept = store.get(new)
    assert (kept.runs, kept.runtime_mean) == (7, 2.0)
    assert store.get("lab.fft_peak(~512,~108)").refines == new  # the old keys stay, refining it
    assert store.app_profile("lab.fft_peak").runs == 9  # each run counted once
    store.record([Observation(new, "lab.fft_peak", runtime=2.0)])  # adopted once, not again
    assert store.get(new).runs == 8
    store.close()


def test_a_declared_seed_starts_from_the_split_keys_history_not_the_prior(tmp_path):
    def peak(n, seed):
        return n

    before = {profile_key(peak, (512, seed)) for seed in (100, 110, 125)}
    assert len(before) == 2  # the split a user would not make
    store = ProfileStore(tmp_path / "p.sqlite")
    store.record([Observation(key, app_name(peak), runtime=1.5, footprint=6e6) for key in sorted(before)] * 2)

    app_hints(size_free=("seed",))(peak)
    estimator = Estimator(store, default_footprint=1.0, default_runtime=99.0)
    estimate = estimator.estimate(peak, (512, 101), {}, Hints())
    assert estimate.key.endswith("(~512,*)")
    assert estimate.runtime == pytest.approx(1.5) and (estimate.runtime_source, estimate.footprint_source) == ("store", "store")
    store.close()
