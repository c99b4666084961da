"""Who ran beside whom, and ρ, σ fitted to it (core.contention_fit)."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.contention_fit import (CoRun, co_runner_segments, fit_contention, load_model,
                                                  observations, predicted_slowdown)
from scalpel_executor.core.simulate import SimTask, simulate

MiB = 2**20


def simulated_coruns(truth, llc, seed, tasks=24, cores=4):
    """The co-runs of a batch simulated under ``truth``: each task's segments and its slowdown."""
    rng = random.Random(seed)
    batch = [SimTask(f"t{i}", rng.uniform(0.5, 2.0), rng.choice([2, 8, 16, 24, 32, 48, 64, 96]) * MiB)
             for i in range(tasks)]
    records = simulate(batch, [list(range(cores))], llc, "fifo", model=truth).records
    lives = co_runner_segments([(r.domain, r.start, r.end) for r in records])
    return [CoRun(r.footprint, tuple((s, tuple(records[j].footprint for j in others)) for s, others in life),
                  r.slowdown) for r, life in zip(records, lives) if any(others for _, others in life)]


def test_each_task_gets_the_segments_of_its_life_with_its_co_runners():
    spans = [(0, 0.0, 3.0), (0, 1.0, 2.0), (0, 1.5, 4.0), (1, 0.0, 4.0), (0, 5.0, 6.0)]
    assert co_runner_segments(spans) == [
        [(1.0, ()), (0.5, (1,)), (0.5, (1, 2)), (1.0, (2,))],
        [(0.5, (0,)), (0.5, (0, 2))],
        [(0.5, (0, 1)), (1.0, (0,)), (1.0, ())],
        [(4.0, ())],  # another domain: nobody beside it
        [(1.0, ())],
    ]
    assert co_runner_segments([(0, 1.0, 1.0)]) == [[]]  # an empty interval ran beside nobody


@given(st.integers(0, 10_000), st.floats(0.05, 2.0), st.floats(0.0, 3.0))
@settings(max_examples=20, deadline=None)
def test_the_time_weighted_prediction_is_exact_for_runs_the_model_generated(seed, rho, sigma):
    truth, llc = ContentionModel(rho, sigma), 64 * MiB
    for corun in simulated_coruns(truth, llc, seed, tasks=10, cores=3):
        assert predicted_slowdown(truth, corun, llc) == pytest.approx(corun.slowdown, rel=1e-9)


@given(st.floats(0.05, 1.5), st.floats(0.3, 3.0), st.sampled_from([32 * MiB, 64 * MiB, 480 * MiB]))
@settings(max_examples=12, deadline=None, derandomize=True)  # some draws leave rho and sigma trading off
def test_the_fit_recovers_rho_and_sigma_from_runs_the_model_generated(rho, sigma, llc):
    truth = ContentionModel(rho, sigma)
    coruns = simulated_coruns(truth, llc, 1) + simulated_coruns(truth, llc, 2)
    if not any(predicted_slowdown(truth, c, llc) > 1.01 for c in coruns):
        return  # nothing exceeded the cache: ρ is not told by these runs
    model, error = fit_contention(coruns, llc)
    assert error < 1e-3
    if rho * llc < 8 * MiB:
        return  # every task overflows the cache alone: ρ and σ trade off, only the slowdowns are told
    assert model.capacity_fraction == pytest.approx(rho, rel=0.02)
    assert model.sensitivity == pytest.approx(sigma, rel=0.02)


def test_the_grid_reaches_a_sysfs_llc_ten_times_too_large():
    truth, llc = ContentionModel(0.1, 0.9), 480 * MiB  # 48 MiB really shared, 480 MiB stated
    model, _ = fit_contention(simulated_coruns(truth, llc, 3), llc)
    assert model.capacity_fraction == pytest.approx(0.1, rel=0.02)


def test_runs_that_never_exceed_the_cache_keep_the_default_sensitivity():
    corun = CoRun(1 * MiB, ((1.0, (1 * MiB,)),), 1.0)
    model, error = fit_contention([corun], 64 * MiB, rhos=[0.5])
    assert model == ContentionModel(0.5, 1.0) and error == 0.0


@pytest.mark.parametrize("coruns, llc, message", [
    ([], 64 * MiB, "at least one measured co-run"),
    ([CoRun(1.0, ((1.0, (1.0,)),), 1.0)], 0, "llc must be a positive number of bytes, got 0"),
    ([CoRun(1.0, ((1.0, (1.0,)),), float("nan"))], 64 * MiB, "slowdown must be a finite number > 0"),
])
def test_what_cannot_be_fitted_is_named(coruns, llc, message):
    with pytest.raises(ValueError, match=message):
        fit_contention(coruns, llc)


def test_a_calibration_document_becomes_a_model():
    assert load_model({"capacity_fraction": 0.9, "sensitivity": 0.2}) == ContentionModel(0.9, 0.2)


KEY_FOOTPRINTS = [8 * MiB, 20 * MiB, 28 * MiB, 48 * MiB, 96 * MiB]
CO_RUNNER_FOOTPRINTS = [16 * MiB, 24 * MiB, 32 * MiB, 64 * MiB]


@given(st.floats(0.05, 1.5), st.floats(0.3, 3.0), st.sampled_from([32 * MiB, 64 * MiB, 480 * MiB]),
       st.lists(st.tuples(st.sampled_from(KEY_FOOTPRINTS), st.floats(0.2, 20.0),
                          st.lists(st.sampled_from(CO_RUNNER_FOOTPRINTS), min_size=1, max_size=3)),
                min_size=1, max_size=4))
@settings(max_examples=40, deadline=None)
def test_the_fit_recovers_slowdowns_of_keys_whose_solo_time_it_never_saw(rho, sigma, llc, keys):
    """Each key runs beside a small task and beside larger ones; its solo time is hidden from the
    fit, which sees wall times only. What such runs tell is each key's slowdowns relative to one
    another (beside a large task over beside a small one): the level is shared with the unknown
    solo time, and some draws fit exactly at a small ρ and large σ that call every pair dearer."""
    truth = ContentionModel(rho, sigma)
    coruns, keys_pairs = [], []
    for name, (footprint, solo, partners) in enumerate(keys):
        pairs = [CoRun(footprint, ((1.0, (partner,)),), 1.0) for partner in [MiB / 4, *partners]]
        keys_pairs.append(pairs)
        coruns += [CoRun(footprint, p.segments, solo * predicted_slowdown(truth, p, llc), baseline=name) for p in pairs]
    model, error = fit_contention(coruns, llc)
    assert error < 5e-3  # the optimizer stops near its tolerance: 0.00101 at rho 0.13, sigma 1, three keys
    for small, *pairs in keys_pairs:
        for pair in pairs:
            fitted = predicted_slowdown(model, pair, llc) / predicted_slowdown(model, small, llc)
            assert fitted == pytest.approx(predicted_slowdown(truth, pair, llc) / predicted_slowdown(truth, small, llc),
                                           rel=0.02)


def test_a_key_beside_the_same_co_runners_every_time_tells_nothing():
    truth, llc = ContentionModel(0.1, 0.9), 480 * MiB
    measured = simulated_coruns(truth, llc, 3)
    alike = [CoRun(28 * MiB, ((0.5, (32 * MiB,)), (0.5, ())), wall, baseline="lookup") for wall in (2.1, 2.6, 2.3)]
    assert observations(measured + alike) == observations(measured) == len(measured)
    model, _ = fit_contention(measured + alike, llc)
    reference, _ = fit_contention(measured, llc)
    assert model.capacity_fraction == pytest.approx(reference.capacity_fraction, rel=1e-6)
    assert model.sensitivity == pytest.approx(reference.sensitivity, rel=1e-6)
    # Beside two different co-runners the key's co-runs count, less one for its solo time.
    differing = [*alike, CoRun(28 * MiB, ((1.0, (MiB,)),), 1.9, baseline="lookup")]
    assert observations(differing) == 3


def test_an_unmeasured_solo_time_needs_the_log_fit():
    corun = CoRun(1.0, ((1.0, (1.0,)),), 1.0, baseline="lookup")
    with pytest.raises(ValueError, match="baseline 'lookup'.*pass log=True"):
        fit_contention([corun], 64 * MiB, log=False)
