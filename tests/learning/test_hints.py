"""Hints and sizes: what ``parse_hints``, ``parse_walltime`` and ``parse_size`` accept and how they refuse."""

import logging
import math
from fractions import Fraction

import numpy as np
import pytest
from parsl.executors.errors import InvalidResourceSpecification

from scalpel_executor.learning import hints as hints_module
from scalpel_executor.learning.hints import (OTHER_EXECUTORS_KEYS, HintAudit, Hints, InvalidHint, parse_hints,
                                             parse_walltime, scheduling_priority)
from scalpel_executor.core.units import parse_size

MiB = 2**20


@pytest.mark.parametrize("text, size", [
    ("24MiB", 24 * MiB), ("12MB", 12 * MiB), ("512K", 512 * 1024), ("1.5 GiB", 3 * 2**29), ("32768K", 32 * MiB),
    ("7B", 7), ("7", 7), (" 2 kib ", 2048), ("1T", 2**40), ("2TB", 2**41), (".5M", MiB // 2),
])
def test_sizes_as_documented_parse(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["12i", "12 iB", "12Mi", "12 i", "12iB", "12 MiBs", "12 KiBB", "12X", "12 bytes"])
def test_stray_letters_in_a_size_are_refused_by_value(text):
    with pytest.raises(ValueError, match=rf"footprint must be a non-negative number of bytes or a size like \"24MiB\", "
                                         rf"got {text!r}; units are B, K/KB/KiB"):
        parse_size(text, what="footprint")


@pytest.mark.parametrize("value, size", [
    (np.int64(5), 5), (np.int32(7), 7), (np.uint8(9), 9), (np.float32(5.5), 6), (np.float64(2.0), 2),
    (Fraction(7, 2), 4), (10**20, 10**20),
])
def test_numpy_scalars_and_other_reals_are_sizes(value, size):
    result = parse_size(value)
    assert result == size and type(result) is int


@pytest.mark.parametrize("value, shown", [(np.bool_(True), "of type bool"), (True, "got True of type bool"),
                                          (np.float32("nan"), "got np.float32(nan)"), (np.int64(-1), "got np.int64(-1)"),
                                          (10**400, "(401 characters), which is too large"),
                                          ("9" * 400 + "G", "which is too large")],
                         ids=["np.bool_", "bool", "float32-nan", "int64-negative", "10**400", "400-digit-string"])
def test_sizes_that_are_not_sizes_are_refused_by_value(value, shown):
    with pytest.raises(ValueError, match="must be a non-negative number of bytes") as error:
        parse_size(value)
    assert shown in str(error.value)


def test_hints_take_numpy_scalars():
    hints = parse_hints({"footprint": np.int64(5 * MiB), "runtime": np.float32(1.5), "priority": np.int16(3)})
    assert (hints.footprint, hints.runtime, hints.priority) == (5 * MiB, 1.5, 3.0)
    assert all(type(v) is float for v in (hints.footprint, hints.runtime, hints.priority))
    assert parse_hints({"footprint": np.float32(4096.0)}).footprint == 4096.0
    assert parse_walltime({"walltime": np.int64(30)}) == 30.0


@pytest.mark.parametrize("key, message", [
    ("footprint", "key 'footprint': footprint must be a non-negative number of bytes or a size like \"24MiB\", got "
                  "1000000000000000...00000000 (401 characters), which is too large"),
    ("runtime", "key 'runtime': must be a finite number, got 1000000000000000...00000000 (401 characters)"),
    ("priority", "key 'priority': must be a finite number, got 1000000000000000...00000000 (401 characters)"),
])
def test_a_hint_too_large_for_a_float_is_a_value_error_naming_the_key(key, message):
    with pytest.raises(ValueError) as error:
        parse_hints({key: 10**400})
    assert isinstance(error.value, InvalidResourceSpecification) and isinstance(error.value, InvalidHint)
    assert message in str(error.value)
    with pytest.raises(ValueError, match="walltime must be a positive number of seconds"):
        parse_walltime({"walltime": 10**400})


@pytest.mark.parametrize("text", ["12i", "12 iB"])
def test_a_footprint_hint_with_a_stray_letter_is_refused(text):
    with pytest.raises(InvalidResourceSpecification, match=rf"key 'footprint': .*got {text!r}"):
        parse_hints({"footprint": text})


# -- keys: as HTEX refuses what it does not know, naming the nearest known key ----------------------


@pytest.mark.parametrize("key, nearest", [("Footprint", "footprint"), ("priorty", "priority"),
                                          ("run_time", "runtime"), ("profilekey", "profile_key"), ("core", "cores"),
                                          ("cpus", "cores"), ("ncpus", "cores"), ("mem", "memory"), ("num_gpus", "gpus")])
def test_a_misspelt_key_is_refused_with_the_nearest_known_key(key, nearest):
    with pytest.raises(InvalidResourceSpecification) as error:
        parse_hints({key: 1, "footprint": "1MiB"} if key != "Footprint" else {key: "24MiB"})
    assert isinstance(error.value, InvalidHint) and error.value.invalid_keys == {key}
    assert f"unknown resource specification key {key!r} (did you mean {nearest!r}?)" in str(error.value)
    assert "fix or remove the key" in str(error.value)


def test_a_key_like_none_is_refused_with_the_keys_there_are():
    with pytest.raises(InvalidHint) as error:
        parse_hints({"banana": 1, 7: 2})
    message = str(error.value)
    assert error.value.invalid_keys == {"banana", 7}
    assert "key 'banana', 7;" in message and "did you mean" not in message
    assert "reads footprint, runtime, priority, profile_key, cores, memory, gpus, max_cores, and accepts disk, " in message


@pytest.fixture
def fresh_warnings(monkeypatch, caplog):
    monkeypatch.setattr(hints_module, "_warned", set())  # once per process: start this test afresh
    caplog.set_level(logging.WARNING, logger="scalpel_executor")
    return caplog


def test_keys_of_other_executors_are_accepted_with_one_warning_each(fresh_warnings):
    specification = {key: 1 for key in OTHER_EXECUTORS_KEYS}
    assert OTHER_EXECUTORS_KEYS == ("disk", "running_time_min", "category", "exec_mode")
    for _ in range(3):
        assert parse_hints({**specification, "runtime": 2}) == Hints(runtime=2.0)
    messages = [record.getMessage() for record in fresh_warnings.records]
    assert len(messages) == len(OTHER_EXECUTORS_KEYS)
    for key in OTHER_EXECUTORS_KEYS:
        assert sum(f"key {key!r} (of Parsl's TaskVine and Work Queue executors) is not used by "
                   f"ScalpelExecutor" in message for message in messages) == 1


def test_an_unknown_key_beside_a_foreign_one_is_refused_before_any_warning(fresh_warnings):
    with pytest.raises(InvalidHint, match="'gpu' \\(did you mean 'gpus'\\?\\)"):
        parse_hints({"disk": 1, "gpu": 1})
    assert not fresh_warnings.records


# -- priority: lower first, as in HTEX ------------------------------------------------------------


def test_priority_is_kept_as_the_user_wrote_it():
    assert parse_hints({"priority": 2}).priority == 2.0
    assert parse_hints({"footprint": 1}).priority is None and parse_hints(None).priority is None


def test_the_scheduler_priority_puts_lower_user_values_first_and_none_last():
    users = [3, None, -1.5, 0, 10, 1]
    # the scheduler core runs higher Task.priority first
    by_scheduler = sorted(users, key=scheduling_priority, reverse=True)
    assert by_scheduler == [-1.5, 0, 1, 3, 10, None]  # HTEX: lower first, a task without one after all
    assert scheduling_priority(None) == -math.inf
    assert math.copysign(1.0, scheduling_priority(0)) == 1.0  # 0, not -0.0


# -- hints far off their measurements --------------------------------------------------------------

MEASURED = {"wall": 1.0, "footprint": 8 * MiB}


@pytest.mark.parametrize("hints, off", [
    (Hints(footprint=8 * MiB, runtime=1.0), []),
    (Hints(footprint=4.1 * MiB, runtime=1.9), []),  # within 2x either way
    (Hints(footprint=3 * MiB), ["footprint"]), (Hints(footprint=20 * MiB), ["footprint"]),
    (Hints(runtime=0.4), ["runtime"]), (Hints(runtime=2.5), ["runtime"]),
    (Hints(footprint=0, runtime=0), ["footprint", "runtime"]),  # 0 is a claim too
    (Hints(priority=1), []),
])
def test_hints_more_than_twice_off_are_counted(hints, off):
    audit = HintAudit()
    assert audit.observe("k", hints, MEASURED) == off
    assert audit.counts == {name: 1 for name in off}


@pytest.mark.parametrize("hints, stats", [
    (Hints(footprint=64 * MiB), {"wall": 1.0}),  # not measured by the probe: nothing to judge by
    (Hints(footprint=0.1 * MiB), {"footprint": 0.9 * MiB}),  # both under the probe's 1 MiB of noise
    (Hints(runtime=0.001), {"wall": 0.05}),  # both under 0.1 s: scheduling jitter
    (Hints(runtime=1.0), {"wall": float("nan")}), (Hints(runtime=1.0), {"wall": None}),
])
def test_hints_are_not_judged_on_noise_or_missing_measurements(hints, stats):
    assert HintAudit().observe("k", hints, stats) == []


def test_a_hint_off_is_logged_once_per_profile_key_and_counted_every_time(caplog):
    audit = HintAudit()
    with caplog.at_level(logging.WARNING, logger="scalpel_executor"):
        for key in ("a", "a", "b"):
            audit.observe(key, Hints(footprint=1 * MiB, runtime=10.0), MEASURED)
    assert audit.counts == {"footprint": 3, "runtime": 3}
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 4  # (a, footprint), (a, runtime), (b, footprint), (b, runtime)
    assert "the footprint hint 1.0 MiB of a is more than 2x off the 8.0 MiB its task measured" in messages[0]
    assert "the runtime hint 10 s of a is more than 2x off the 1 s its task measured" in messages[1]


# -- cores, memory, gpus: as TaskVine and Work Queue read them ---------------------------------------


def test_resources_are_read_in_taskvine_units():
    hints = parse_hints({"cores": 2, "memory": 1000, "gpus": 1})
    assert (hints.cores, hints.memory, hints.gpus) == (2, 1000 * 2**20, 1)
    assert parse_hints({"memory": "4GiB"}).memory == 4 * 2**30
    assert parse_hints({"cores": 2.0}).cores == 2
    assert parse_hints({}).cores is None and parse_hints({"gpus": 0}).gpus == 0


@pytest.mark.parametrize("spec, words", [
    ({"cores": 0}, "'cores': must be a whole number >= 1, got 0"),
    ({"cores": 1.5}, "'cores': must be a whole number >= 1, got 1.5"),
    ({"cores": True}, "'cores': must be a whole number >= 1"),
    ({"gpus": -1}, "'gpus': must be a whole number >= 0, got -1"),
    ({"memory": -5}, "'memory': must be a number of MiB >= 0"),
    ({"memory": "lots"}, "'memory'"),
    ({"cores": 4, "max_cores": 2}, "'max_cores': must be at least 'cores' (4), got 2: a malleable task runs on "
                                   "'cores' to 'max_cores' cores; raise max_cores or lower cores"),
    ({"max_cores": 0}, "'max_cores': must be a whole number >= 1, got 0"),
    ({"max_cores": 2.5}, "'max_cores': must be a whole number >= 1, got 2.5"),
    ({"max_cores": "8"}, "'max_cores': must be a whole number >= 1, got '8'"),
])
def test_bad_resources_name_the_key_and_the_value(spec, words):
    with pytest.raises(InvalidHint) as error:
        parse_hints(spec)
    assert words in str(error.value)


@pytest.mark.parametrize("value", ["lots", "12i", -5])
def test_a_bad_memory_hint_says_a_number_is_mebibytes(value):
    with pytest.raises(InvalidResourceSpecification, match=r"key 'memory'.*must be a number of MiB >= 0 or a size such as '4GiB'"):
        parse_hints({"memory": value})


def test_a_malleable_task_is_a_range_of_cores_and_a_fixed_cores_keeps_its_meaning():
    assert parse_hints({"cores": 1, "max_cores": 8}) == Hints(cores=1, max_cores=8)
    assert parse_hints({"max_cores": 4}) == Hints(max_cores=4)  # cores then defaults (1, or cores_per_task)
    assert parse_hints({"cores": 2}).max_cores is None  # exactly two cores, as before
    assert parse_hints({"max_cores": 8.0}).max_cores == 8


def test_an_app_marks_itself_malleable_once_and_a_call_may_narrow_it():
    from scalpel_executor.learning.hints import app_hints
    from scalpel_executor.learning.keys import declared

    @app_hints(max_cores=8)
    def product(n):
        return n

    specification = declared(product)["specification"]
    assert parse_hints(None, specification).max_cores == 8
    assert parse_hints({"max_cores": 2}, specification).max_cores == 2
    with pytest.raises(InvalidHint, match="'max_cores': must be at least 'cores' \\(4\\), got 2"):
        app_hints(cores=4, max_cores=2)
    # a range split between the decorator and the call: the error says which gave each
    with pytest.raises(InvalidHint, match=r"got 8 \(max_cores from the app's @app_hints, cores from this call's "):
        parse_hints({"cores": 12}, specification)
    with pytest.raises(InvalidHint, match=r"got 2 \(cores from the app's @app_hints, max_cores from this call's "):
        parse_hints({"max_cores": 2}, declared(app_hints(cores=4)(product))["specification"])
    with pytest.raises(InvalidHint, match=r"got 2: a malleable"):  # both from the call: nothing to say
        parse_hints({"cores": 4, "max_cores": 2}, specification)


def test_app_hints_are_checked_at_decoration_and_a_call_s_own_specification_wins():
    from scalpel_executor.learning.hints import app_hints
    from scalpel_executor.learning.keys import declared

    @app_hints(footprint="24MiB", runtime=3.0, size_free=["seed"])
    def simulate(n, seed):
        return n

    assert simulate(4, 1) == 4  # the function itself, unchanged
    specification = declared(simulate)["specification"]
    assert parse_hints(None, specification) == Hints(footprint=24 * 2**20, runtime=3.0)
    assert parse_hints({"runtime": 1.0}, specification) == Hints(footprint=24 * 2**20, runtime=1.0)
    with pytest.raises(InvalidHint, match="'footprnt' \\(did you mean 'footprint'\\?\\)"):
        app_hints(footprnt="1MiB")
    with pytest.raises(InvalidHint, match="key 'runtime': must be a number"):
        app_hints(runtime="soon")
    with pytest.raises(InvalidHint, match="size_free must name the app's arguments.*got 3"):
        app_hints(size_free=(3,))
    with pytest.raises(InvalidHint, match="resource specification must be a dict"):
        parse_hints(["footprint"], specification)  # the call's own bad specification is named, not hidden


def test_a_task_that_asks_for_nothing_shares_one_hints_object():
    """Hints are frozen, and a submit keeps its task's until the task ends: a specification that asks
    for nothing is read as one shared instance, not one object per task."""
    assert parse_hints(None) is parse_hints({}) is hints_module.NO_HINTS
    assert hints_module.NO_HINTS == Hints()
    assert parse_hints({"cores": 2}) is not hints_module.NO_HINTS
