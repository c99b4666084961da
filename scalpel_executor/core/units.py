"""Byte sizes as users write them: ``24MiB``, ``12MB``, ``512K``, ``1.5 GiB`` or plain numbers.

Cache sizes are binary by convention (Linux's sysfs writes ``32768K`` for 32 MiB, vendors say
"12 MB" for 12 MiB), so ``K``/``KB``/``KiB`` all mean 1024 bytes here, and so on for M, G and T.
"""

from __future__ import annotations

import math
import numbers
import re

# A number, then nothing, "B", or a prefix K/M/G/T alone or followed by "B" or "iB". A stray "i"
# ("12i", "12 iB", "12Mi") or any other letter does not parse.
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(?:([KMGT])(?:I?B)?|B)?\s*$", re.IGNORECASE)
_POWERS = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4}


def show(value: object, limit: int = 40) -> str:
    """``repr(value)``, shortened in the middle when longer than ``limit`` (e.g. ``10**400``)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:16]}...{text[-8:]} ({len(text)} characters)"


def _wrong(what: str, value: object, why: str = "") -> ValueError:
    return ValueError(f"{what} must be a non-negative number of bytes or a size like \"24MiB\", got {show(value)}{why}")


def parse_size(value: object, *, what: str = "size") -> int:
    """Return ``value`` as a whole number of bytes.

    Parameters
    ----------
    value : a real number (int, float, numpy scalar; not bool) or str
        A non-negative number of bytes, or a string such as ``"24MiB"``, ``"12MB"``, ``"512K"``,
        ``"1.5GiB"``: a number, then nothing, ``B``, or K/M/G/T alone or followed by ``B`` or
        ``iB``. Suffixes are binary (see the module docstring) and case-insensitive.
    what : str
        Names the value in error messages, e.g. ``"footprint for key 'footprint'"``.

    Raises
    ------
    ValueError
        For negative, NaN or infinite numbers, numbers too large for a float, booleans and
        unparseable strings (``"12i"``, ``"12 iB"``, ``"lots"``); the message names the bad value.

    Examples
    --------
    >>> parse_size("24MiB")
    25165824
    >>> parse_size("512K")
    524288
    >>> parse_size(4096)
    4096
    """
    if isinstance(value, str):
        match = _SIZE.match(value)
        if not match:
            raise _wrong(what, value, "; units are B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB")
        number, prefix = match.groups()
        size = float(number) * 1024 ** _POWERS[(prefix or "").upper()]
        if not math.isfinite(size):
            raise _wrong(what, value, ", which is too large")
        return int(round(size))
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # numpy scalars are numbers.Real
        raise _wrong(what, value, f" of type {type(value).__name__}")
    if value < 0:
        raise _wrong(what, value)
    try:
        number = float(value)
    except OverflowError:  # an int beyond a float, e.g. 10**400
        raise _wrong(what, value, ", which is too large") from None
    if math.isnan(number) or math.isinf(number):
        raise _wrong(what, value)
    return int(value) if isinstance(value, numbers.Integral) else int(round(number))


def parse_mebibytes(value: object, *, what: str = "memory") -> float:
    """Bytes of a memory figure as TaskVine and Work Queue write one: a number is MiB, a string a
    size (:func:`parse_size`). ValueError names ``what`` and the value.

    >>> parse_mebibytes(1000) == 1000 * 2**20, parse_mebibytes("4GiB") == 4 * 2**30
    (True, True)
    """
    wrong = ValueError(f"{what} must be a number of MiB >= 0 or a size such as '4GiB', got {show(value)}")
    if isinstance(value, str):
        try:
            return float(parse_size(value, what=what))
        except ValueError:  # parse_size speaks of bytes, which a bare number here is not
            raise wrong from None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
        raise wrong
    return float(value) * 2**20


def format_size(n_bytes: float) -> str:
    """Render bytes for people: ``format_size(25165824) == '24.0 MiB'``."""
    n = float(n_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")
