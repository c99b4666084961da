"""Scheduling hints from ``parsl_resource_specification``, validated with errors that name the key.

Recognised keys:

- ``footprint``: bytes, or a size such as ``"24MiB"``;
- ``runtime``: estimated solo seconds;
- ``priority``: a number, **lower first, as in Parsl's HighThroughputExecutor**; a task without
  one runs after every task that has one (HTEX's interchange reads a missing priority as
  ``inf``). :func:`scheduling_priority` turns it into ``Task.priority``, which the scheduler core
  orders higher first;
- ``profile_key``: a string naming the task's profile;
- ``cores``: CPUs of one LLC domain the task runs on (an integer >= 1; its affinity and BLAS/OpenMP
  thread count follow), as TaskVine and Work Queue read it;
- ``max_cores``: the task is *malleable* (numpy, BLAS, OpenMP code that runs on as many threads as
  it is given): it may run on up to this many cores of one LLC domain (an integer >= ``cores``),
  ``cores`` (default 1) its narrowest width; the scheduler chooses the width when it starts
  (:mod:`scalpel_executor.core.widths`). Without it a task runs on exactly ``cores``;
- ``memory``: memory the task holds, in MiB as TaskVine and Work Queue read it (or a size such as
  ``"4GiB"``); running tasks never declare more than the node's budget together;
- ``gpus``: accelerators the task needs (an integer >= 0); it is given that many distinct ids.

Other keys that Parsl's TaskVine and Work Queue executors read (:data:`OTHER_EXECUTORS_KEYS`:
``disk``, ``category``, ...) are accepted, so a specification written for them runs here, but not
used: each logs one warning per key per process. Any other key is refused with
:class:`InvalidHint` naming it and the nearest known key, as HTEX refuses keys it does not know: a
misspelt ``"Footprint"`` would otherwise lose its hint without a word.

After a task succeeds, :class:`HintAudit` compares its ``footprint`` and ``runtime`` hints with
what it measured and counts (and logs once per profile key) those more than :data:`HINT_DRIFT`
times off.

**Hints a script keeps when it goes back to HTEX.** Parsl's HighThroughputExecutor refuses a
resource specification with keys it does not know, so a ``footprint`` written there ties the
script to this executor. :func:`app_hints` gives the same hints for every call of an app, as a
decorator that only marks the function (:data:`~scalpel_executor.learning.keys.APP_HINTS`), which
Parsl's other executors never read; it also declares the app's size-free arguments (seeds,
labels: :mod:`~scalpel_executor.learning.keys`). A call's own resource specification wins over
it, key by key (:func:`parse_hints`'s ``declared``).

Parsl's ``walltime`` is not a hint but an app keyword argument; :func:`parse_walltime` reads it
from the call's keyword arguments so the node scheduler can kill a task that ignores it.
"""

from __future__ import annotations

import difflib
import logging
import math
import numbers
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from parsl.executors.errors import InvalidResourceSpecification

from scalpel_executor.core.units import format_size, parse_mebibytes, parse_size, show
from scalpel_executor.learning.keys import APP_HINTS, declared, forget_declared  # noqa: F401 - declared: the doctests
from scalpel_executor.learning.sampling import DRIFT_FLOOR, REMEASURE_DRIFT, drifted

logger = logging.getLogger(__name__)

KNOWN_KEYS = ("footprint", "runtime", "priority", "profile_key", "cores", "memory", "gpus", "max_cores")
# Read per task by Parsl's TaskVine executor (executors/taskvine/executor.py: the loop over the
# specification's keys, and exec_mode) and Work Queue's (executors/workqueue/executor.py,
# acceptable_fields); cores, memory, gpus and priority are ours too, the rest change nothing here.
OTHER_EXECUTORS_KEYS = ("disk", "running_time_min", "category", "exec_mode")
_warned: set[str] = set()
_warned_lock = threading.Lock()

HINT_DRIFT = REMEASURE_DRIFT  # a hint this many times off its task's measurement, either way, is counted:
# co-running slowed tasks here by up to 1.4x and the machine's noise is +-30 % (learning.sampling),
# so a smaller factor would count contention as a wrong hint.
FOOTPRINT_FLOOR = 2**20  # bytes: the probe reads 0.2 to 0.7 MiB of noise per window
# (host/probe/sampler.py), so a footprint hint is not judged unless it or the measurement reaches 1 MiB.


@dataclass(frozen=True, slots=True)
class Hints:
    footprint: float | None = None
    runtime: float | None = None
    priority: float | None = None  # the user's value, lower first; None: after every task that has one
    profile_key: str | None = None
    cores: int | None = None  # None: the executor's cores_per_task
    memory: float | None = None  # bytes; None: the executor's mem_per_task, else what its key learned
    gpus: int | None = None
    max_cores: int | None = None  # malleable up to this many cores; None: it runs on ``cores`` exactly


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


#: What other systems call a key this executor reads (Slurm, PBS, Kubernetes, Dask): meant, not misspelt.
SYNONYMS = {"cpus": "cores", "ncpus": "cores", "num_cpus": "cores", "cpus_per_task": "cores", "threads": "cores",
            "num_cores": "cores", "ncores": "cores", "mem": "memory", "mem_mb": "memory", "memory_mb": "memory",
            "gpu": "gpus", "ngpus": "gpus", "num_gpus": "gpus", "time": "walltime"}


def _unknown_keys(keys: list[Any]) -> InvalidHint:
    """The error for keys neither this executor nor Parsl's others read, each with its nearest known key."""
    names = KNOWN_KEYS + OTHER_EXECUTORS_KEYS
    clauses = []
    for key in keys:
        # lower-cased first: "Footprint" is footprint, and difflib scores case as a difference
        synonym = SYNONYMS.get(str(key).lower())
        nearest = [synonym] if synonym in names else difflib.get_close_matches(str(key).lower(), names, n=1)
        clauses.append(f"{key!r}" + (f" (did you mean {nearest[0]!r}?)" if nearest else ""))
    return InvalidHint(
        set(keys), f"unknown resource specification key {', '.join(clauses)}; ScalpelExecutor reads "
                   f"{', '.join(KNOWN_KEYS)}, and accepts {', '.join(OTHER_EXECUTORS_KEYS)} (Parsl's TaskVine "
                   f"and Work Queue keys) without using them; fix or remove the key")


def _count(key: str, value: Any, lowest: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or _finite_float(value) is None \
            or float(value) != int(value):
        raise _invalid(key, f"must be a whole number >= {lowest}, got {show(value)}")
    if int(value) < lowest:
        raise _invalid(key, f"must be a whole number >= {lowest}, got {show(value)}")
    return int(value)


def _memory(value: Any) -> float:
    """``memory`` in bytes: a number is MiB (TaskVine's and Work Queue's unit), a string a size."""
    if not isinstance(value, str):
        _number("memory", value)  # a wrong type is named as for every numeric hint
    try:
        return parse_mebibytes(value, what="memory")
    except ValueError as error:
        raise _invalid("memory", str(error).removeprefix("memory ")) from None


def _warn_unused(key: str) -> None:
    with _warned_lock:
        first = key not in _warned
        _warned.add(key)
    if first:
        logger.warning("resource specification key %r (of Parsl's TaskVine and Work Queue executors) is not "
                       "used by ScalpelExecutor and is ignored; this executor reads %s", key, ", ".join(KNOWN_KEYS))


#: The hints of a task that asks for nothing: one shared instance (Hints is frozen), as each object
#: a submit keeps alive until its task ends adds to the driver's garbage collections.
NO_HINTS = Hints()


def parse_hints(specification: dict[str, Any] | None, declared: Mapping[str, Any] | None = None) -> Hints:
    """Validate a resource specification and return the hints this executor uses.

    ``declared``: the app's hints from :func:`app_hints` (already checked); the specification's
    own keys win over them.

    Numbers may be any ``numbers.Real`` but bool, numpy scalars included. Keys of
    :data:`OTHER_EXECUTORS_KEYS` are accepted and unused (one warning per key per process).

    Raises
    ------
    InvalidHint
        (an ``InvalidResourceSpecification`` and a ``ValueError``) for a key this executor does
        not know, naming it and the nearest known one; for a wrong type, a negative, NaN,
        infinite or too large value, or an unparseable size, naming the key and the value.

    Examples
    --------
    >>> parse_hints({"footprint": "24MiB", "priority": 2, "cores": 2})
    Hints(footprint=25165824.0, runtime=None, priority=2.0, profile_key=None, cores=2, memory=None, gpus=None, max_cores=None)
    >>> parse_hints({"Footprint": "24MiB"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    scalpel_executor.learning.hints.InvalidHint: ... key 'Footprint' (did you mean 'footprint'?); ...
    """
    from_app: set[str] = set()  # keys the app's @app_hints gave, the call not
    if declared:
        if specification is not None and not isinstance(specification, dict):
            return parse_hints(specification)  # the error names the call's own specification
        from_app = set(declared) - set(specification or {})
        specification = {**declared, **(specification or {})}
    if specification is None:
        return NO_HINTS
    if not isinstance(specification, dict):
        raise InvalidHint(
            set(), f"resource specification must be a dict such as {{'footprint': '24MiB'}}, "
                   f"got {specification!r} of type {type(specification).__name__}")
    if not specification:
        return NO_HINTS
    unknown = [key for key in specification if key not in KNOWN_KEYS and key not in OTHER_EXECUTORS_KEYS]
    if unknown:
        raise _unknown_keys(unknown)
    for key in specification:
        if key in OTHER_EXECUTORS_KEYS:
            _warn_unused(key)
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
    priority = _number("priority", specification["priority"]) if specification.get("priority") is not None else None
    profile_key = specification.get("profile_key")
    if profile_key is not None and (not isinstance(profile_key, str) or not profile_key.strip()):
        raise _invalid("profile_key", f"must be a non-empty string naming the task's profile, got {profile_key!r}")
    cores = _count("cores", specification["cores"], 1) if specification.get("cores") is not None else None
    memory = _memory(specification["memory"]) if specification.get("memory") is not None else None
    gpus = _count("gpus", specification["gpus"], 0) if specification.get("gpus") is not None else None
    max_cores = _count("max_cores", specification["max_cores"], 1) if specification.get("max_cores") is not None \
        else None
    if max_cores is not None and max_cores < (cores or 1):
        where = ""
        if declared and cores is not None and ("cores" in from_app) != ("max_cores" in from_app):
            where = (" (max_cores from the app's @app_hints, cores from this call's specification)"
                     if "max_cores" in from_app else " (cores from the app's @app_hints, max_cores from this call's "
                                                     "specification)")
        raise _invalid("max_cores", f"must be at least 'cores' ({cores or 1}), got {max_cores}{where}: a malleable "
                                    f"task runs on 'cores' to 'max_cores' cores; raise max_cores or lower cores")
    return Hints(footprint, runtime, priority, profile_key, cores, memory, gpus, max_cores)


def scheduling_priority(priority: float | None) -> float:
    """``Task.priority`` for a user's ``priority`` hint: the scheduler core runs higher first, users
    (as in HTEX) lower first, so the value is negated; no hint is ``-inf``, after every task with one.

    >>> [scheduling_priority(p) for p in (1, 0, -2.5, None)]
    [-1.0, 0.0, 2.5, -inf]
    """
    return -math.inf if priority is None else 0.0 - priority  # 0.0 - x, not -x: no -0.0 level in a report


class HintAudit:
    """Counts the hints more than :data:`HINT_DRIFT` times off what their tasks measured, by hint,
    and logs a warning for the first such task of each (profile key, hint).

    The ``footprint`` hint is judged only on tasks the probe measured (``stats["footprint"]``);
    the ``runtime`` hint against the wall time, which includes any slowdown from co-running tasks.
    A hint of 0 is a claim too (a footprint of 0 fits anywhere), judged against the floor.

    >>> audit = HintAudit()
    >>> audit.observe("k", Hints(footprint=24 * 2**20, runtime=1.0), {"wall": 3.5, "footprint": 20 * 2**20})
    ['runtime']
    >>> audit.counts
    {'runtime': 1}
    """

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._logged: set[tuple[str, str]] = set()
        self._lock = threading.Lock()  # the completion thread counts, run_report() reads

    @property
    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def observe(self, key: str, hints: Hints, stats: Mapping[str, Any]) -> list[str]:
        """Judge one successful task's hints; returns the names of those too far off."""
        if hints.footprint is None and hints.runtime is None:  # most tasks: nothing to judge, 0.3 us not 4
            return []
        off = []
        for name, hint, measured, floor in (("footprint", hints.footprint, stats.get("footprint"), FOOTPRINT_FLOOR),
                                            ("runtime", hints.runtime, stats.get("wall"), DRIFT_FLOOR)):
            value = _finite_float(measured)
            if hint is None or value is None or value < 0:
                continue
            if (value >= floor) if hint == 0 else drifted(value, hint, HINT_DRIFT, floor):
                off.append(name)
                self._note(key, name, hint, value)
        return off

    def _note(self, key: str, name: str, hint: float, measured: float) -> None:
        with self._lock:
            self._counts[name] += 1
            first = (key, name) not in self._logged
            self._logged.add((key, name))
        if not first:
            return
        logger.warning("the %s hint %s of %s is more than %gx off the %s its task measured; correct the hint, "
                       "or drop it and the executor learns the %s (further tasks of this key are counted in the "
                       "run report's hints_off, not logged)", name, _shown(name, hint), key, HINT_DRIFT,
                       _shown(name, measured), name)


def _shown(name: str, value: float) -> str:
    return format_size(value) if name == "footprint" else f"{value:.3g} s"


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


def app_hints(*, size_free: tuple[str, ...] | list[str] = (), **specification: Any):
    """A decorator: hints for every call of an app that Parsl's other executors ignore.

    Put it under ``@python_app`` or ``@bash_app``. ``specification`` takes the resource
    specification's keys (:data:`KNOWN_KEYS`: ``footprint="24MiB"``, ``runtime=3.0``, ...), checked
    now with the same errors; ``size_free`` names the app's arguments that do not change a task's
    size (a seed, a label), which then do not split its profile key. It returns the function
    itself, marked (:data:`~scalpel_executor.learning.keys.APP_HINTS`): nothing changes when
    the script runs on another executor.

    Examples
    --------
    >>> @app_hints(footprint="24MiB", size_free=("seed",))
    ... def simulate(n, seed):
    ...     return n
    >>> parse_hints({"runtime": 2.0}, declared(simulate)["specification"]).footprint
    25165824.0
    >>> app_hints(footprnt="1MiB")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    scalpel_executor.learning.hints.InvalidHint: ... key 'footprnt' (did you mean 'footprint'?); ...
    """
    parse_hints(specification)
    names = (size_free,) if isinstance(size_free, str) else tuple(size_free)
    bad = [name for name in names if not (isinstance(name, str) and name.isidentifier())]
    if bad:
        raise InvalidHint(set(), f"size_free must name the app's arguments, such as size_free=('seed',), got {bad[0]!r}")

    def mark(func):
        target = getattr(func, "func", None) if hasattr(func, "executors") else func  # above @python_app: its function
        setattr(target if callable(target) else func, APP_HINTS,
                {"specification": dict(specification), "size_free": names})
        forget_declared()
        return func

    return mark
