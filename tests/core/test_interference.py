"""Per-key sensitivities and pressures around the footprint model, and the hold-out that decides
whether a host plans with them (core.interference)."""

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.contention_fit import CoRun, predicted_slowdown
from scalpel_executor.core.interference import Terms, corun_slowdowns
from scalpel_executor.core.interference_fit import (DEFAULT_NOISE, InterferenceModel, KeyedCoRun, choose_interference,
                                                    coruns_from_history, exploration, fit_interference, noise_level,
                                                    planted_coruns, solo_times)
from scalpel_executor.learning.host_model import RawCoRun

MiB = 2**20
LLC = 32 * MiB
FOOTPRINT = ContentionModel()
KEYS = [f"k{i}" for i in range(8)]


def planted_truth(seed, low=-0.5, high=0.8):
    """Eight keys of footprints 1-48 MiB, each with a sensitivity and a pressure drawn from [low, high]."""
    rng = random.Random(seed)
    footprints = {k: rng.choice([1, 4, 8, 16, 24, 48]) * MiB for k in KEYS}
    sensitivity = {k: rng.uniform(low, high) for k in KEYS}
    pressure = {k: rng.uniform(low, high) for k in KEYS}
    return footprints, sensitivity, pressure


def log_errors(model, coruns):
    return sorted(abs(math.log(model.predicted(c)) - math.log(c.slowdown)) for c in coruns)


def median(values):
    values = sorted(values)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


segments = st.lists(st.tuples(st.floats(0.01, 5.0),
                              st.lists(st.tuples(st.sampled_from(KEYS + [None]), st.floats(0.0, 100 * MiB)),
                                       max_size=4).map(tuple)), min_size=1, max_size=3).map(tuple)


@given(st.sampled_from(KEYS), st.floats(0.0, 100 * MiB), segments, st.floats(0.05, 2.0), st.floats(0.0, 3.0))
@settings(max_examples=60, deadline=None)
def test_without_records_it_predicts_exactly_the_footprint_model(key, footprint, life, rho, sigma):
    footprint_model = ContentionModel(rho, sigma)
    model = fit_interference([], footprint_model, LLC)
    corun = KeyedCoRun(key, footprint, life, 1.0)
    plain = CoRun(footprint, tuple((s, tuple(f for _, f in beside)) for s, beside in life), 1.0)
    assert model.predicted(corun) == predicted_slowdown(footprint_model, plain, LLC)
    group = [footprint, *(f for _, f in life[0][1])]
    assert model.slowdowns([key, *(k for k, _ in life[0][1])], group) == footprint_model.slowdowns(
        group, [sigma] * len(group), LLC)


def test_keys_it_has_no_record_of_keep_the_footprint_model():
    footprints, sensitivity, pressure = planted_truth(0)
    model = fit_interference(planted_coruns(footprints, sensitivity, pressure, FOOTPRINT, LLC, 100, 0), FOOTPRINT, LLC)
    group = [30 * MiB, 20 * MiB]
    assert model.slowdowns(["never", "seen"], group) == FOOTPRINT.slowdowns(group, [1.0, 1.0], LLC)


def test_a_small_streaming_task_is_represented_where_the_footprint_model_sees_nothing():
    # Both fit in the cache twice over, so the footprint model predicts 1x for each.
    coruns = [KeyedCoRun("lookup", MiB, ((1.0, (("stream", MiB),)),), 1.4 * math.exp(0.05 * ((t % 5) - 2)), at=t)
              for t in range(40)]
    coruns += [KeyedCoRun("lookup", MiB, ((1.0, (("lookup", MiB),)),), math.exp(0.05 * ((t % 5) - 2)), at=t)
               for t in range(40)]
    model = fit_interference(coruns, FOOTPRINT, LLC)
    assert FOOTPRINT.slowdowns([MiB, MiB], [1.0, 1.0], LLC) == [1.0, 1.0]
    beside_stream, beside_lookup = model.slowdowns(["lookup", "stream"], [MiB, MiB])[0], \
        model.slowdowns(["lookup", "lookup"], [MiB, MiB])[0]
    assert beside_stream == pytest.approx(1.4, rel=0.06)
    assert beside_lookup == pytest.approx(1.0, abs=0.05)
    # Pairs tell only s_lookup + p_b (module docstring): the stream presses log 1.4 harder than a lookup.
    assert model.pressure["stream"] - model.pressure["lookup"] == pytest.approx(math.log(1.4), rel=0.1)


@given(st.integers(0, 10_000))
@settings(max_examples=8, deadline=None, derandomize=True)
def test_planted_residuals_are_recovered_and_halve_the_held_out_error_where_the_truth_departs(seed):
    footprints, sensitivity, pressure = planted_truth(seed)
    coruns = planted_coruns(footprints, sensitivity, pressure, FOOTPRINT, LLC, 300, seed, noise=0.2)
    older, newer = coruns[:210], coruns[210:]  # time-ordered: fitted on the older 70%, scored on the newer 30%
    model = fit_interference(older, FOOTPRINT, LLC)
    for key in KEYS:
        for truth, fitted in ((sensitivity[key], model.sensitivity[key]), (pressure[key], model.pressure[key])):
            if abs(truth) >= 0.25:
                assert (fitted > 0) == (truth > 0), (key, truth, fitted)
    plain, truth = InterferenceModel(FOOTPRINT, LLC), InterferenceModel(FOOTPRINT, LLC, sensitivity, pressure)
    departing = [c for c in newer if abs(math.log(truth.predicted(c) / plain.predicted(c))) >= 0.2]
    assert len(departing) >= 20
    assert median(log_errors(model, departing)) <= 0.5 * median(log_errors(plain, departing))


@given(st.integers(0, 10_000))
@settings(max_examples=6, deadline=None, derandomize=True)
def test_where_the_truth_is_the_footprint_model_the_fit_costs_at_most_2_percent(seed):
    footprints, _, _ = planted_truth(seed)
    coruns = planted_coruns(footprints, {}, {}, FOOTPRINT, LLC, 1000, seed, noise=0.2)
    model = fit_interference(coruns[:700], FOOTPRINT, LLC)
    plain = InterferenceModel(FOOTPRINT, LLC)
    assert median(log_errors(model, coruns[700:])) <= median(log_errors(plain, coruns[700:])) + 0.02


def test_a_key_seen_once_moves_less_than_one_seen_fifty_times():
    rng = random.Random(3)
    background = [KeyedCoRun("z", 8 * MiB, ((1.0, (("z", 8 * MiB),)),), math.exp(rng.gauss(0, 0.2)), at=t)
                  for t in range(100)]
    suffers = math.exp(0.5)  # both keys truly suffer 1.65x beside z, where the footprint model says 1x
    once = [KeyedCoRun("once", 8 * MiB, ((1.0, (("z", 8 * MiB),)),), suffers, at=100)]
    often = [KeyedCoRun("often", 8 * MiB, ((1.0, (("z", 8 * MiB),)),), suffers * math.exp(rng.gauss(0, 0.2)), at=t)
             for t in range(50)]
    model = fit_interference(background + once + often, FOOTPRINT, LLC)
    moved = {key: math.log(model.slowdowns([key, "z"], [8 * MiB, 8 * MiB])[0]) for key in ("once", "often")}
    assert 0 < moved["once"] < moved["often"]
    assert 0 < model.sensitivity["once"] < 0.5 * model.sensitivity["often"]  # the rest is z's pressure, shared
    assert moved["often"] == pytest.approx(0.5, abs=0.12)


def test_repeated_co_runs_measure_the_noise_and_set_the_shrinkage():
    rng = random.Random(5)
    repeats = [KeyedCoRun(key, MiB, ((1.0, ((other, MiB),)),), math.exp(rng.gauss(0, 0.1)), at=t)
               for t in range(20) for key in ("a", "b") for other in ("a", "b")]
    noise, freedom = noise_level(repeats)
    assert freedom == 76 and noise == pytest.approx(0.1, rel=0.25)
    assert noise_level(repeats[:3]) == (DEFAULT_NOISE, 0)  # distinct co-runs tell no noise
    assert fit_interference(repeats, FOOTPRINT, LLC).noise == noise


@given(st.integers(0, 10_000))
@settings(max_examples=6, deadline=None, derandomize=True)
def test_the_acceptance_test_refuses_a_model_fitted_on_noise(seed):
    footprints, _, _ = planted_truth(seed)
    choice = choose_interference(planted_coruns(footprints, {}, {}, FOOTPRINT, LLC, 300, seed), FOOTPRINT, LLC)
    assert not choice.per_key
    assert choice.reason.startswith(f"footprint-only: fitted on the older {choice.fitted_on} co-runs")
    assert 200 <= choice.fitted_on <= 220  # each key's newest 30% held out, rounded per key
    assert choice.model.sensitivity == {} and choice.model.pressure == {}


@given(st.integers(0, 10_000))
@settings(max_examples=4, deadline=None, derandomize=True)
def test_the_acceptance_test_takes_the_per_key_model_where_it_predicts_better(seed):
    footprints, sensitivity, pressure = planted_truth(seed)
    coruns = planted_coruns(footprints, sensitivity, pressure, FOOTPRINT, LLC, 300, seed)
    choice = choose_interference(coruns, FOOTPRINT, LLC)
    assert choice.per_key and choice.reason.startswith("per-key model (refitted on all 300 co-runs)")
    assert choice.fitted_on + choice.held_out == 300 and 80 <= choice.held_out <= 100  # 30% of each key's
    assert choice.per_key_error < 0.9 * choice.footprint_error
    assert choice.model == fit_interference(coruns, FOOTPRINT, LLC)


def test_too_few_or_contradictory_records_leave_the_footprint_model():
    footprints, sensitivity, pressure = planted_truth(1)
    few = choose_interference(planted_coruns(footprints, sensitivity, pressure, FOOTPRINT, LLC, 20, 1), FOOTPRINT, LLC)
    assert not few.per_key and "too few to test" in few.reason
    # The host changed: what the older records teach is reversed in the newer ones.
    older = planted_coruns(footprints, sensitivity, pressure, FOOTPRINT, LLC, 210, 1)
    flipped = planted_coruns(footprints, {k: -v for k, v in sensitivity.items()},
                             {k: -v for k, v in pressure.items()}, FOOTPRINT, LLC, 90, 2)
    changed = older + [KeyedCoRun(c.key, c.footprint, c.segments, c.slowdown, at=c.at + 1000) for c in flipped]
    choice = choose_interference(changed, FOOTPRINT, LLC)
    assert not choice.per_key and "contradictory" in choice.reason
    assert choice.per_key_error > choice.footprint_error


@given(st.integers(0, 10_000))
@settings(max_examples=8, deadline=None, derandomize=True)
def test_a_per_key_choice_stays_until_footprint_only_wins_the_test_against_it(seed):
    # Records that say nothing beyond footprints: a fresh choice refuses the per-key model; one the
    # last refit chose stays unless footprint-only now predicts better beyond chance.
    footprints, _, _ = planted_truth(seed)
    coruns = planted_coruns(footprints, {}, {}, FOOTPRINT, LLC, 300, seed)
    fresh = choose_interference(coruns, FOOTPRINT, LLC)
    held = choose_interference(coruns, FOOTPRINT, LLC, incumbent=True)
    assert not fresh.per_key
    assert (held.footprint_error, held.per_key_error, held.compared) == (fresh.footprint_error, fresh.per_key_error,
                                                                          fresh.compared)
    if held.per_key:
        assert held.reason.startswith("per-key model") and "kept (refitted on all 300 co-runs), as the last refit " \
            "chose it" in held.reason and "footprint-only did not beat it beyond chance" in held.reason
        assert held.model in (fit_interference(coruns, FOOTPRINT, LLC),
                              fit_interference(coruns, FOOTPRINT, LLC, bandwidth=True))
    else:  # footprint-only won the same test the per-key model must win: 10% lower error, p <= 0.05
        assert "better than the per-key model" in held.reason and "the last refit chose, beyond chance" in held.reason
        assert held.footprint_error <= 0.9 * held.per_key_error and held.model.sensitivity == {}


def test_an_incumbent_per_key_choice_mostly_stays_on_noise_and_goes_where_the_host_changed():
    kept = 0
    for seed in range(6):
        footprints, _, _ = planted_truth(seed)
        kept += choose_interference(planted_coruns(footprints, {}, {}, FOOTPRINT, LLC, 300, seed), FOOTPRINT, LLC,
                                    incumbent=True).per_key
    assert kept >= 4  # footprint-only beat it on 1 of these 6 (seed 3)
    footprints, sensitivity, pressure = planted_truth(1)
    older = planted_coruns(footprints, sensitivity, pressure, FOOTPRINT, LLC, 210, 1)
    flipped = planted_coruns(footprints, {k: -v for k, v in sensitivity.items()},
                             {k: -v for k, v in pressure.items()}, FOOTPRINT, LLC, 90, 2)
    changed = older + [KeyedCoRun(c.key, c.footprint, c.segments, c.slowdown, at=c.at + 1000) for c in flipped]
    choice = choose_interference(changed, FOOTPRINT, LLC, incumbent=True)
    assert not choice.per_key and "better than the per-key model the last refit chose" in choice.reason


@given(st.integers(0, 10_000))
@settings(max_examples=4, deadline=None, derandomize=True)
def test_an_incumbent_changes_nothing_where_the_per_key_model_wins_anyway(seed):
    footprints, sensitivity, pressure = planted_truth(seed)
    coruns = planted_coruns(footprints, sensitivity, pressure, FOOTPRINT, LLC, 300, seed)
    assert choose_interference(coruns, FOOTPRINT, LLC, incumbent=True) == choose_interference(coruns, FOOTPRINT, LLC)


def test_the_hold_out_keeps_the_newest_records_whatever_their_order():
    footprints, sensitivity, pressure = planted_truth(2)
    coruns = planted_coruns(footprints, sensitivity, pressure, FOOTPRINT, LLC, 120, 2)
    assert choose_interference(coruns, FOOTPRINT, LLC) == choose_interference(coruns[::-1], FOOTPRINT, LLC)


@given(st.integers(0, 10_000))
@settings(max_examples=5, deadline=None)
def test_fit_and_choice_are_deterministic(seed):
    footprints, sensitivity, pressure = planted_truth(seed)
    first = planted_coruns(footprints, sensitivity, pressure, FOOTPRINT, LLC, 80, seed)
    second = planted_coruns(footprints, sensitivity, pressure, FOOTPRINT, LLC, 80, seed)
    assert first == second
    assert fit_interference(first, FOOTPRINT, LLC) == fit_interference(second, FOOTPRINT, LLC)
    assert choose_interference(first, FOOTPRINT, LLC) == choose_interference(second, FOOTPRINT, LLC)


def test_stored_host_records_teach_sensitivities_only():
    stored = [RawCoRun("fft", 2 * MiB, 1.3, ((1.0, (2 * MiB,)),)) for _ in range(30)]
    stored += [RawCoRun("never-alone", 2 * MiB, 9.0, ((1.0, (2 * MiB,)),))]
    coruns = coruns_from_history(stored, {"fft": 1.0})
    assert len(coruns) == 30 and [c.at for c in coruns[:2]] == [0.0, 1.0]
    assert coruns[0].segments == ((1.0, ((None, 2 * MiB),)),) and coruns[0].slowdown == pytest.approx(1.3)
    model = fit_interference(coruns, FOOTPRINT, LLC)
    assert model.pressure == {} and model.sensitivity["fft"] == pytest.approx(math.log(1.3), rel=0.1)


def test_a_slowdown_that_is_not_a_positive_number_is_named():
    with pytest.raises(ValueError, match=r"slowdown must be a finite number > 0 .* got -1.0 for key 'fft'"):
        fit_interference([KeyedCoRun("fft", MiB, ((1.0, (("a", MiB),)),), -1.0)], FOOTPRINT, LLC)
    with pytest.raises(ValueError, match="llc must be a positive number of bytes, got 0"):
        fit_interference([], FOOTPRINT, 0)


# -- bandwidth intensities and keys never seen alone -----------------------------------------------

def streaming_world(seed, count=300):
    """A 4-core domain where two keys stream (bandwidth intensity 0.6: beside one another 0.36 in log
    slowdown) and three do not: a product of intensities, not a sum of a sensitivity and pressures."""
    footprints = {"stream-a": 2 * MiB, "stream-b": 3 * MiB, "fft": 1 * MiB, "hash": 2 * MiB, "sort": 1 * MiB}
    bandwidth = {"stream-a": 0.6, "stream-b": 0.6}
    return planted_coruns(footprints, {}, {}, FOOTPRINT, LLC, count, seed, noise=0.05, bandwidth=bandwidth)


def test_bandwidth_terms_add_the_product_of_intensities_and_zero_changes_nothing():
    footprints = [MiB, 10 * MiB, 20 * MiB]
    plain = corun_slowdowns(FOOTPRINT, footprints, [1.0] * 3, LLC, [(0.2, 0.1), None, (0.0, 0.3)])
    zero = corun_slowdowns(FOOTPRINT, footprints, [1.0] * 3, LLC, [Terms(0.2, 0.1, 0.0), None, Terms(0.0, 0.3, 0.0)])
    assert zero == plain
    both = corun_slowdowns(FOOTPRINT, footprints, [1.0] * 3, LLC, [Terms(0.0, 0.0, 0.4), Terms(0.0, 0.0, 0.0),
                                                                   Terms(0.0, 0.0, 0.5)])
    base = FOOTPRINT.slowdowns(footprints, [1.0] * 3, LLC)
    assert both == pytest.approx([base[0] * math.exp(0.2), base[1], base[2] * math.exp(0.2)])


def test_the_bandwidth_fit_recovers_the_intensities_of_streaming_keys():
    model = fit_interference(streaming_world(0), FOOTPRINT, LLC, bandwidth=True)
    assert model.bandwidth["stream-a"] == pytest.approx(0.6, abs=0.15)
    assert model.bandwidth["stream-b"] == pytest.approx(0.6, abs=0.15)
    assert model.slowdowns(["stream-a", "stream-b"], [2 * MiB, 3 * MiB])[0] == pytest.approx(math.exp(0.36), rel=0.06)
    assert model.slowdowns(["fft", "stream-a"], [MiB, 2 * MiB])[0] == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize("seed", [0, 5, 1234])
def test_where_streams_slow_each_other_the_choice_keeps_them_apart_and_spares_the_rest(seed):
    """Whichever per-key form the hold-out takes (the product term must earn its parameters; the sum
    with its clamp at 1x often reproduces the pairs as well), two streams are predicted to slow
    each other and a stream beside an fft is not."""
    choice = choose_interference(streaming_world(seed), FOOTPRINT, LLC)
    assert choice.per_key, choice.reason
    model = choice.model
    assert model.slowdowns(["stream-a", "stream-b"], [2 * MiB, 3 * MiB])[0] == pytest.approx(math.exp(0.36), rel=0.06)
    assert model.slowdowns(["stream-a", "fft"], [2 * MiB, MiB])[0] == pytest.approx(1.0, abs=0.05)


@given(st.integers(0, 10_000))
@settings(max_examples=3, deadline=None, derandomize=True)
def test_where_the_truth_is_additive_the_choice_keeps_the_model_without_bandwidth(seed):
    footprints, sensitivity, pressure = planted_truth(seed)
    choice = choose_interference(planted_coruns(footprints, sensitivity, pressure, FOOTPRINT, LLC, 300, seed),
                                 FOOTPRINT, LLC)
    assert choice.per_key and choice.reason.startswith("per-key model (refitted")
    assert choice.model.bandwidth == {}


def test_a_key_never_seen_alone_is_fitted_with_a_baseline_and_its_pressure_is_learned():
    """The stream never ran alone: its records have no solo time, but an fft that did shows what the
    stream inflicts, and the stream's own records, beside different co-runners, what it suffers
    relative to itself."""
    rng = random.Random(3)
    stored = []
    for i in range(120):
        if i % 2:  # the fft, seen alone too (solo 1.0), beside the stream: 1.35x
            stored.append(RawCoRun("fft", MiB, 1.35 * math.exp(rng.gauss(0, 0.05)), ((1.0, (2 * MiB,)),),
                                   corunner_keys=(("stream",),)))
        else:  # the stream (solo 4.0, never measured) beside the fft 1.0x, beside another stream 1.5x
            other, factor = ("fft", 1.0) if i % 4 else ("stream", 1.5)
            stored.append(RawCoRun("stream", 2 * MiB, 4.0 * factor * math.exp(rng.gauss(0, 0.05)),
                                   ((4.0, (MiB if other == "fft" else 2 * MiB,)),), corunner_keys=((other,),)))
    coruns = coruns_from_history(stored, {"fft": 1.0})
    assert len(coruns) == 120 and sum(not c.solo_known for c in coruns) == 60
    choice = choose_interference(coruns, FOOTPRINT, LLC)
    assert choice.per_key, choice.reason
    model = choice.model
    assert "stream" in model.baseline and "fft" not in model.baseline
    assert model.slowdowns(["fft", "stream"], [MiB, 2 * MiB])[0] == pytest.approx(1.35, rel=0.1)
    assert model.slowdowns(["stream", "stream"], [2 * MiB, 2 * MiB])[0] > model.slowdowns(["stream", "fft"],
                                                                                             [2 * MiB, MiB])[0]
    # Its baseline only scores its records: no Task is told it.
    assert model.terms("stream") is not None and len(model.terms("stream")) == 3


def test_a_key_never_seen_alone_is_planned_with_the_solo_time_its_fit_implies_not_its_walls_mean():
    """The stream of the world above never ran alone (its solo time is 4.0 s) and its walls average
    5 s; told its terms, a task planned with its walls' mean would be slowed twice. The fit's
    baseline gives back the time its terms slow: with it they predict its walls beside either
    co-runner."""
    rng = random.Random(3)
    stored = []
    for i in range(120):
        if i % 2:
            stored.append(RawCoRun("fft", MiB, 1.35 * math.exp(rng.gauss(0, 0.05)), ((1.0, (2 * MiB,)),),
                                   corunner_keys=(("stream",),)))
        else:
            other, factor = ("fft", 1.0) if i % 4 else ("stream", 1.5)
            stored.append(RawCoRun("stream", 2 * MiB, 4.0 * factor * math.exp(rng.gauss(0, 0.05)),
                                   ((4.0, (MiB if other == "fft" else 2 * MiB,)),), corunner_keys=((other,),)))
    model = choose_interference(coruns_from_history(stored, {"fft": 1.0}), FOOTPRINT, LLC).model
    solo = solo_times(model, stored, {"fft": 1.0})
    assert solo["fft"] == 1.0  # measured alone: its own solo time
    walls = [c.wall for c in stored if c.key == "stream"]
    assert sum(walls) / len(walls) == pytest.approx(5.0, rel=0.05)
    assert solo["stream"] * model.slowdowns(["stream", "fft"], [2 * MiB, MiB])[0] == pytest.approx(4.0, rel=0.05)
    assert solo["stream"] * model.slowdowns(["stream", "stream"], [2 * MiB, 2 * MiB])[0] == pytest.approx(6.0, rel=0.05)
    # A key with terms but neither a solo time nor a baseline (its records all beside one kind of
    # co-runner were left out) is left out: its tasks keep their run-time estimate.
    assert set(solo) == {"fft", "stream"}
    assert solo_times(model, [], {}) == {}


def test_a_key_never_seen_alone_beside_one_kind_of_co_runner_only_is_left_out():
    stored = [RawCoRun("fft", MiB, 1.2, ((1.0, (2 * MiB,)),), corunner_keys=(("lonely",),)) for _ in range(30)]
    stored += [RawCoRun("lonely", 2 * MiB, 3.0, ((3.0, (MiB,)),), corunner_keys=(("fft",),)) for _ in range(5)]
    coruns = coruns_from_history(stored, {"fft": 1.0})
    assert len(coruns) == 30 and all(c.key == "fft" for c in coruns)


def trapped_history(runs, kinds=("compute", "stream", "sensitive"), seed=0):
    """A 2-core host that is always busy, each run pairing every kind with its own kind only (a
    footprint-only plan of a workflow listed kind by kind): a stream beside a stream 2.2x, the rest
    1.0x, timer scatter 1%. Never alone: no key has a solo time."""
    rng, raw = random.Random(seed), []
    for _ in range(runs):
        for kind in kinds:
            for _ in range(6):
                wall = (2.2 if kind == "stream" else 1.0) * rng.lognormvariate(0, 0.01)
                raw.append(RawCoRun(kind, MiB * rng.uniform(1, 1.1), wall, ((wall, (MiB * rng.uniform(1, 1.1),)),),
                                    ((kind,),)))
    return raw


def test_keys_only_ever_beside_their_own_kind_teach_nothing_and_are_explored():
    # The coverage trap: a stream slows a stream 2.2x, but every key's baseline absorbs what its
    # own pair costs, so the per-key model predicts what footprint-only does on every record.
    raw = trapped_history(3)
    choice = choose_interference(coruns_from_history(raw, {}), ContentionModel(), 56 * MiB)
    assert not choice.per_key and choice.compared == 0 and "on the 0 of the newer" in choice.reason
    terms, reason = exploration(raw, {})
    assert reason.startswith("exploring: 3 keys never seen alone ran only beside their own key")
    assert {k: t.bandwidth for k, t in terms.items()} == {"compute": 0.5, "sensitive": 0.0, "stream": 0.5}
    # Told that, a plan keeps compute and stream apart from their own kind (1.28x) and beside the rest 1x.
    pair = [corun_slowdowns(ContentionModel(), [MiB, MiB], [1.0, 1.0], 56 * MiB, [terms[a], terms[b]])[0]
            for a, b in (("stream", "stream"), ("stream", "sensitive"), ("compute", "compute"))]
    assert pair == pytest.approx([math.exp(0.25), 1.0, math.exp(0.25)])


def test_no_exploration_once_keys_were_seen_beside_others_or_alone():
    raw = trapped_history(2)
    met = [RawCoRun(a, MiB, 1.1, ((1.1, (MiB,)),), ((b,),)) for a, b in (("stream", "compute"), ("compute", "stream"))]
    assert exploration(raw + met * 20, {}) == ({}, None)  # one key left caught: nothing to pair it with
    assert exploration(raw, {"stream": 1.0, "compute": 1.0}) == ({}, None)  # one key left caught
    assert exploration(trapped_history(1, kinds=("stream",)), {}) == ({}, None)  # one key: nothing to pair it with
