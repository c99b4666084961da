"""Scheduling hints from ``parsl_resource_specification``, validated with errors that name the key.

Recognised keys: ``footprint`` (bytes, or a size such as ``"24MiB"``), ``runtime`` (seconds),
``priority`` (a number, higher first, as in Parsl's HighThroughputExecutor) and ``profile_key``
(a string naming the task's profile). Other keys (``cores``, ``memory``, ``running_time_min``, ...)
mean something to other executors; they are ignored here, with one warning per key per process.

Parsl's ``walltime`` is not a hint but an app keyword argument; :func:`parse_walltime` reads it
from the call's keyword arguments so the node scheduler can kill a task that ignores it.
"""

from __future__ import annotations

import logging
import math
import numbers
import threading
from dataclasses import dataclass
from typing import Any

from parsl.executors.errors import InvalidResourceSpecification

from scalpel_executor.core.units import parse_size, show

logger = logging.getLogger(__name__)

KNOWN_KEYS = ("footprint", "runtime", "priority", "profile_key")
_warned: set[str] = set()
_warned_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Hints:
    footprint: float | None = None
    runtime: float | None = None
    priority: float = 0.0
    profile_key: str | None = None


class InvalidHint(InvalidResourceSpecification, ValueError):
    """A bad hint: Parsl's :class:`InvalidResourceSpecification`, and a ``ValueError`` too."""


def _invalid(key: str, message: str) -> InvalidHint:
    return InvalidHint({key}, f"resource specification key {key!r}: {message}")


def _finite_float(value: Any) -> float | None:
    """``value`` as a finite float, or None. Any ``numbers.Real`` but bool counts (numpy scalars
    do); an int too large for a float (``10**400``) is not finite."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _number(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _invalid(key, f"must be a number, got {show(value)} of type {type(value).__name__}")
    number = _finite_float(value)
    if number is None:
        raise _invalid(key, f"must be a finite number, got {show(value)}")
    return number


def parse_hints(specification: dict[str, Any] | None) -> Hints:
    """Validate a resource specification and return the hints this executor uses.

    Numbers may be any ``numbers.Real`` but bool, numpy scalars included.

    Raises
    ------
    InvalidHint
        (an ``InvalidResourceSpecification`` and a ``ValueError``) for a wrong type, a negative,
        NaN, infinite or too large value, or an unparseable size; the message names the key and
        the value.
    """
    if specification is None:
        return Hints()
    if not isinstance(specification, dict):
        raise InvalidHint(
            set(), f"resource specification must be a dict such as {{'footprint': '24MiB'}}, "
                   f"got {specification!r} of type {type(specification).__name__}")
    if not specification:
        return Hints()
    for key in specification:
        if key not in KNOWN_KEYS:
            with _warned_lock:
                first = key not in _warned
                _warned.add(key)
            if first:
                logger.warning(
                    "ignoring resource specification key %r: ScalpelExecutor uses only %s", key, ", ".join(KNOWN_KEYS)
                )
    footprint = runtime = None
    if specification.get("footprint") is not None:
        value = specification["footprint"]
        try:
            footprint = float(parse_size(value, what="footprint"))
        except ValueError as error:
            raise _invalid("footprint", str(error)) from None
    if specification.get("runtime") is not None:
        runtime = _number("runtime", specification["runtime"])
        if runtime < 0:
            raise _invalid("runtime", f"must be a non-negative number of seconds, got {runtime!r}")
    priority = _number("priority", specification["priority"]) if specification.get("priority") is not None else 0.0
    profile_key = specification.get("profile_key")
    if profile_key is not None and (not isinstance(profile_key, str) or not profile_key.strip()):
        raise _invalid("profile_key", f"must be a non-empty string naming the task's profile, got {profile_key!r}")
    return Hints(footprint, runtime, priority, profile_key)


def parse_walltime(kwargs: dict[str, Any]) -> float | None:
    """Return the ``walltime`` keyword argument of a Parsl app call, in seconds, or None.

    Parsl enforces ``walltime`` itself (an exception raised in the task's Python bytecode, or a
    timeout on a ``bash_app``'s command); the executor reads it only to kill a worker whose task
    runs past it anyway.

    Raises
    ------
    ValueError
        For a value that is not a positive, finite number of seconds; the message names it.

    Examples
    --------
    >>> parse_walltime({"walltime": 30})
    30.0
    >>> parse_walltime({}) is None
    True
    """
    value = kwargs.get("walltime")
    if value is None:
        return None
    number = _finite_float(value)
    if number is None or number <= 0:
        raise ValueError(f"walltime must be a positive number of seconds such as walltime=60, got {show(value)}")
    return number
