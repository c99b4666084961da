"""Hints and sizes: what ``parse_hints``, ``parse_walltime`` and ``parse_size`` accept and how they refuse."""

from fractions import Fraction

import numpy as np
import pytest
from parsl.executors.errors import InvalidResourceSpecification

from scalpel_executor.learning.hints import InvalidHint, parse_hints, parse_walltime
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
