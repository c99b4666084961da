"""Who ran beside whom, and ρ, σ fitted to it (core.contention_fit)."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.contention_fit import (CoRun, co_runner_segments, fit_contention, load_model,
                                                  predicted_slowdown)
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
