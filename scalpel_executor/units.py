"""Byte sizes as users write them: ``24MiB``, ``12MB``, ``512K``, ``1.5 GiB`` or plain numbers.

Cache sizes are binary by convention (Linux's sysfs writes ``32768K`` for 32 MiB, vendors say
"12 MB" for 12 MiB), so ``K``/``KB``/``KiB`` all mean 1024 bytes here, and so on for M, G and T.
"""

from __future__ import annotations

import math
import re

_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([KMGT]?)(I?B?)\s*$", re.IGNORECASE)
_POWERS = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4}


def parse_size(value: object, *, what: str = "size") -> int:
    """Return ``value`` as a whole number of bytes.

    Parameters
    ----------
    value : int, float or str
        A non-negative number of bytes, or a string such as ``"24MiB"``, ``"12MB"``, ``"512K"``,
        ``"1.5GiB"``. Suffixes are binary (see the module docstring) and case-insensitive.
    what : str
        Names the value in error messages, e.g. ``"footprint for key 'footprint'"``.

    Raises
    ------
    ValueError
        For negative, NaN or infinite numbers, booleans and unparseable strings; the message
        names the bad value.

    Examples
    --------
    >>> parse_size("24MiB")
    25165824
    >>> parse_size("512K")
    524288
    >>> parse_size(4096)
    4096
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(
            f"{what} must be a non-negative number of bytes or a size like \"24MiB\", "
            f"got {value!r} of type {type(value).__name__}"
        )
    if isinstance(value, str):
        match = _SIZE.match(value)
        if not match:
            raise ValueError(
                f"{what} must be a non-negative number of bytes or a size like \"24MiB\", "
                f"got {value!r}"
            )
        number, prefix, _ = match.groups()
        return int(round(float(number) * 1024 ** _POWERS[prefix.upper()]))
    if math.isnan(value) or math.isinf(value) or value < 0:
        raise ValueError(
            f"{what} must be a non-negative number of bytes or a size like \"24MiB\", got {value!r}"
        )
    return int(round(value))


def format_size(n_bytes: float) -> str:
    """Render bytes for people: ``format_size(25165824) == '24.0 MiB'``."""
    n = float(n_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")
