"""CPU lists in Linux's syntax (``"0-3,8"``): the one parser and printer every module uses.

Pure: no I/O. Errors name the bad text, what is wrong with it, and how to write it right.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterable

__all__ = ["parse_cpu_list", "format_cpu_list", "cpu_id", "cpu_set"]

# Linux's NR_CPUS tops out at 8192; anything far beyond that is a typo such as "0-4000000000",
# which would otherwise try to build a multi-gigabyte set.
_MAX_CPU_ID = (1 << 20) - 1
_CPU_RANGE = re.compile(r"^([0-9]+)(?:-([0-9]+))?$")



def cpu_id(value: object, *, where: str) -> int:
    """Return ``value`` as a CPU id, or raise ValueError saying ``where`` it came from."""
    # bool is an int subclass, but True as a CPU id is always a mistake.
    if isinstance(value, bool):
        raise ValueError(f"{where}: {value!r} is not a CPU id; CPU ids are integers such as 0 or 7")
    try:
        cpu = operator.index(value)  # accepts int and numpy integers, refuses 3.0 and "3"
    except TypeError:
        raise ValueError(
            f"{where}: {value!r} is not a CPU id; CPU ids are integers such as 0 or 7"
        ) from None
    if cpu < 0:
        raise ValueError(f"{where}: CPU {cpu} is negative; CPU ids start at 0")
    return cpu


def parse_cpu_list(text: str) -> list[int]:
    """Parse a Linux CPU list such as ``"0-3,8,10-11"``.

    This is the format of sysfs files like ``shared_cpu_list`` and of ``taskset -c``.

    Parameters
    ----------
    text : str
        Comma-separated CPU ids and inclusive ranges ``lo-hi``. Whitespace around items and a
        trailing newline are ignored. An empty string means no CPUs, as the kernel writes an
        empty line for an empty mask (e.g. ``/sys/devices/system/cpu/offline``).

    Returns
    -------
    list of int
        The CPU ids, sorted, each once.

    Raises
    ------
    ValueError
        If an item is neither a number nor a range, a range runs backwards or a CPU id is
        implausibly large; the message quotes ``text``.

    Examples
    --------
    >>> parse_cpu_list("0-3,8,10-11")
    [0, 1, 2, 3, 8, 10, 11]
    >>> parse_cpu_list("5\\n")
    [5]
    >>> parse_cpu_list("")
    []
    """
    if not isinstance(text, str):
        raise TypeError(f"CPU list must be a string like '0-3,8', got {type(text).__name__} {text!r}")
    stripped = text.strip()
    if not stripped:
        return []
    cpus: set[int] = set()
    for raw in stripped.split(","):
        item = raw.strip()
        match = _CPU_RANGE.match(item)
        if not match:
            raise ValueError(
                f"malformed CPU list {text!r}: {item!r} is neither a CPU id nor a range like "
                f"'0-3'; write it like '0-3,8,10-11'"
            )
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        if high < low:
            raise ValueError(
                f"malformed CPU list {text!r}: range {item!r} runs backwards; write it as "
                f"'{high}-{low}'"
            )
        if high > _MAX_CPU_ID:
            raise ValueError(
                f"malformed CPU list {text!r}: CPU {high} is beyond any real machine "
                f"(largest accepted id is {_MAX_CPU_ID}); check for a typo"
            )
        cpus.update(range(low, high + 1))
    return sorted(cpus)


def format_cpu_list(cpus: Iterable[int]) -> str:
    """Format CPU ids as a compact Linux CPU list, the inverse of :func:`parse_cpu_list`.

    Parameters
    ----------
    cpus : iterable of int
        Non-negative CPU ids in any order; duplicates are ignored.

    Returns
    -------
    str
        Runs of two or more consecutive ids as ``lo-hi`` (as the kernel writes them), joined by
        commas; ``""`` for no CPUs.

    Raises
    ------
    ValueError
        If an element is not a non-negative integer.

    Examples
    --------
    >>> format_cpu_list([0, 1, 2, 3, 8])
    '0-3,8'
    >>> format_cpu_list([11, 10, 8])
    '8,10-11'
    """
    ids = sorted({cpu_id(cpu, where="format_cpu_list") for cpu in cpus})
    parts: list[str] = []
    start = 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or ids[i] != ids[i - 1] + 1:
            low, high = ids[start], ids[i - 1]
            parts.append(str(low) if low == high else f"{low}-{high}")
            start = i
    return ",".join(parts)

def cpu_set(cpus: Iterable[int] | str) -> set[int]:
    """A set of CPU ids from a CPU-list string such as ``"0-3"`` or an iterable of ints.

    >>> sorted(cpu_set("0-2,5"))
    [0, 1, 2, 5]
    """
    if isinstance(cpus, str):
        return set(parse_cpu_list(cpus))
    return {cpu_id(cpu, where="allowed_cpus") for cpu in cpus}
