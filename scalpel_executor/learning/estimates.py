"""Each task's footprint and run time before it runs, and what its run taught afterwards.

::

    submit (DFK thread) ── estimate(func, args, kwargs, hints) ──> Estimate(key, footprint, runtime, sources,
                              │                                             intensity, measure, runtime_spread)
                              │ the keys: a profile_key hint or key function names one key; otherwise
                              │   the shape key, or the exact key once the store split the shape key
                              │ 1. hints            (footprint= / runtime= in the resource specification)
                              │ 2. the key          (earlier in this run: "learned"; an earlier run: "store")
                              │ 3. the shape key    (the exact key is new, its shape known: "shape")
                              │ 4. the app          (every key of the app pooled: "app")
                              │ 5. the prior        (never seen: the executor's defaults, logged once per key)
                              └ measure: whether the probe measures this task (learning.sampling)
    completion thread ── observe(estimate, stats) ──> in-memory profiles of the key, its shape key and its app
                                                  ├─> an unmeasured task's drift: the key's next task is measured
                                                  └─> pending observations ──flush()──> ProfileStore.record
                                                      (every second or 256 tasks on a thread of its own,
                                                       off the completion thread; at shutdown, waiting)

Sources are per quantity: a hint may give the footprint while the store gives the run time. A task
too short for the probe teaches its key a footprint of 0 while the key has measured none, and
nothing beside a real reading.
Each level holds the store's statistics as read at its first use in this run plus this run's
observations. Nothing is run to measure it: the measurement is the task's real run, taken by the
probe in the worker (``stats["footprint"]``, wall time); which tasks the probe measures is decided
here, by the :mod:`~scalpel_executor.learning.sampling` rule, and travels with the task. Failed
tasks teach nothing, because a crash's run time says nothing about the next run. A store fault is
the store's business (it fails over to memory); an error in a user's key function fails that
task's submit with a message naming the function.

``runtime_spread`` says how far the run-time estimate may be off, relative, from the level that
gave it: a key's or shape key's run-time standard deviation over its mean (every run the store
and this run have seen, Welford), or :data:`ONE_RUN_SPREAD` with a single run; for the app, its
standard deviation over its mean across every key, at least :data:`APP_SPREAD`;
:data:`PRIOR_SPREAD` for the prior and 0 for a hint. The default policy keeps longest-first's
order unless its plan's predicted gain survives that spread
(:func:`~scalpel_executor.core.planning.robust_choice`).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from scalpel_executor.host.probe.estimator import ENDED_BEFORE_FIRST_WINDOW
from scalpel_executor.learning.hints import Hints
from scalpel_executor.learning.keys import app_name, profile_keys
from scalpel_executor.learning.migrate import family_of
from scalpel_executor.learning.refine import ONE_RUN_SPREAD, Moments
from scalpel_executor.learning.sampling import MeasurePlan, Sampling
from scalpel_executor.learning.exchange import finite
from scalpel_executor.learning.store import Observation, Profile, ProfileStore
from scalpel_executor.core.widths import SpeedupModel, at_width
from scalpel_executor.core.units import format_size

logger = logging.getLogger(__name__)

SOURCES = ("hint", "learned", "store", "shape", "app", "prior")
FLUSH_SECONDS = 1.0
FLUSH_BATCH = 256
APP_SPREAD = 0.5  # an app's other shapes: at least twice as uncertain as a key seen once
PRIOR_SPREAD = 1.0  # never seen: the prior says little


@dataclass(frozen=True, slots=True)
class Estimate:
    """What the scheduler is told about one task, and where each figure came from."""

    key: str  # the key this task's measurements are recorded under
    app: str
    footprint: float
    runtime: float
    footprint_source: str  # one of SOURCES
    runtime_source: str
    intensity: float | None = None  # LLC miss rate (misses / references) where counters measured it
    measure: bool = False  # the probe measures this task (footprint, LLC counts); wall and CPU time always
    runtime_spread: float = 0.0  # relative error of ``runtime``: the key's run-time std / mean (module docstring)
    shape: str | None = None  # the call's shape key (None: a named key); ``key`` is it or refines it
    exact: str | None = None  # the call's exact key (its integers below 16 as given)
    memory: float | None = None  # the largest peak RSS measured for its key or shape key (bytes); None: none
    speedup: tuple[float, int] | None = None  # a malleable task's key's serial fraction and the readings it
    #                                           rests on (earlier runs' and this run's); None: none, or not malleable
    family: tuple[str, float, int] | None = None  # a malleable task's key's family (the key before its
    #                    arguments: the app, a bash app's program) with the serial fraction every key of it
    #                    read in earlier runs and their readings (0.0, 0: none); None: a named key, or not
    #                    malleable. What the key borrows while it has no reading of its own (core.widths)


@dataclass
class _Known:
    """One level's profile in this run: the store's statistics when first read, plus this run's."""

    footprint: float | None
    runtime: float | None
    source: str  # "store" or "learned"; a fallback level reports its level instead
    intensity: float | None = None  # LLC miss rate; only hardware counters give one
    runs: int = 0  # run times seen (the store's and this run's), their mean and sum of squared deviations
    runtime_mean: float = 0.0
    runtime_m2: float = 0.0
    split: bool = False  # a shape key whose exact keys have profiles of their own
    pooled: bool = False  # an app's profile: its estimates are plain means over every key
    footprints: Moments = Moments()  # footprints seen; the estimate of a pooled level
    memory: float | None = None  # the largest peak RSS measured (the probe's; the store keeps its max)

    @classmethod
    def of(cls, profile: Profile, pooled: bool = False) -> _Known:
        return cls(profile.footprint, profile.runtime if profile.runs else None, "store", profile.llc_miss_rate,
                   profile.runs, profile.runtime_mean or 0.0, (profile.runtime_std or 0.0) ** 2 * max(0, profile.runs - 1),
                   profile.split, pooled,
                   Moments.of(profile.footprint_runs, profile.footprint_mean,
                              (profile.footprint_std or 0.0) ** 2 * max(0, profile.footprint_runs - 1)),
                   profile.peak_rss)

    @property
    def spread(self) -> float:
        if self.runs >= 2 and self.runtime_mean > 0:
            spread = math.sqrt(self.runtime_m2 / (self.runs - 1)) / self.runtime_mean
        else:
            spread = ONE_RUN_SPREAD if self.runtime is not None else PRIOR_SPREAD
        return max(spread, APP_SPREAD) if self.pooled else spread

    def learn(self, runtime: float | None, footprint: float | None, miss_rate: float | None, alpha: float,
              peak_rss: float | None = None) -> None:
        """One task's measurements, each a number >= 0 or None (:func:`measured`); the run time
        also finite. ``alpha``: the weight of a new measurement in the blended estimates."""
        if peak_rss is not None:
            self.memory = max(self.memory or 0.0, peak_rss)
        if runtime is not None:
            self.runs += 1
            delta = runtime - self.runtime_mean
            self.runtime_mean += delta / self.runs
            self.runtime_m2 += delta * (runtime - self.runtime_mean)
        if footprint is not None:
            self.footprints = self.footprints.add(footprint)
        if self.pooled:
            self.runtime = self.runtime_mean if self.runs else None
            self.footprint = self.footprints.mean if self.footprints.count else None
        else:
            self.runtime = _blend(alpha, self.runtime, runtime)
            self.footprint = _blend(alpha, self.footprint, footprint)
        self.intensity = _blend(alpha, self.intensity, miss_rate)


def measured(value: Any) -> float | None:
    """A measurement as a float when it is a number >= 0 (not a bool, not NaN), else None."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value) or value < 0:
        return None
    return float(value)


def _blend(alpha: float, old: float | None, new: float | None) -> float | None:
    """``new`` (already :func:`measured`) blended into ``old`` with weight ``alpha``; old where new is None."""
    if new is None:
        return old
    return new if old is None else alpha * new + (1 - alpha) * old


class Estimator:
    """Looks up, falls back and learns (see the module docstring).

    Parameters
    ----------
    store : ProfileStore or None
        None: no persistence and no lookups; hints or the prior only, with learning inside the run.
    default_footprint, default_runtime : float
        The prior for never-seen keys.
    key_function : callable(func, args, kwargs) -> str or None, optional
        Replaces :func:`~scalpel_executor.learning.keys.profile_key`; returning None falls back to it.
    alpha : float
        Weight of a new measurement in this run's in-memory estimate.
    sampling : Sampling, optional
        Which tasks the probe measures (:mod:`~scalpel_executor.learning.sampling`); None: none
        (``Estimate.measure`` is always False).
    """

    def __init__(self, store: ProfileStore | None, default_footprint: float, default_runtime: float,
                 key_function: Callable[..., str | None] | None = None, alpha: float = 0.3,
                 sampling: Sampling | None = None):
        self.store = store
        self.default_footprint = float(default_footprint)
        self.default_runtime = float(default_runtime)
        self.key_function = key_function
        self.alpha = alpha
        self._known: dict[str, _Known | None] = {}  # by key (exact and shape keys alike)
        self._apps: dict[str, _Known | None] = {}  # by app name
        self._lock = threading.Lock()  # _known, _apps and _pending: submit thread vs completion thread
        self._pending: list[Observation] = []
        self._last_flush = time.monotonic()
        # One flush writes at a time, in the order they took their observations; a flush due while
        # tasks complete runs on a thread of its own (_flush_soon): its store folds cost the completing
        # thread, which delivers every result, 0.2 ms a task (2,007 folds in 0.36 s of CPU) when each
        # was a read and a write; now a batch reads and writes each key once (ProfileStore.record),
        # 3-9 us an observation, still the driver's CPU.
        self._flushing = threading.Lock()
        self._flusher: threading.Thread | None = None  # under _lock
        self.priors: set[str] = set()  # keys that started this run with the prior
        self._plan = MeasurePlan(sampling) if sampling is not None else None  # under _lock
        self._learn_cold = sampling is None or sampling.learn_cold
        self.drifts = 0  # unmeasured tasks whose wall time made their key due for a measurement
        # Malleable keys' speed-ups as the scheduler's model holds them: each key seeded once from the
        # store, each family from the store's readings of its keys, then this run's readings (under _lock)
        self._speedups = SpeedupModel()
        self._families: dict[str, tuple[float, int]] = {}  # family -> the store's speed-up over its keys, read once
        # key -> the last Estimate made for it (and its fields), handed out again while nothing it says has
        # changed: each object a submit keeps alive until its task ends adds to the driver's garbage
        # collections, and a frozen Estimate takes 2.6 us to build
        self._last: dict[str, tuple[tuple, Estimate]] = {}

    def key(self, func: Callable, args: tuple, kwargs: Mapping[str, Any], hints: Hints) -> str:
        """The key a call's measurements are recorded under (see :meth:`keys`)."""
        return self.keys(func, args, kwargs, hints)[0]

    def keys(self, func: Callable, args: tuple, kwargs: Mapping[str, Any],
             hints: Hints) -> tuple[str, str | None, str | None]:
        """(key, shape key, exact key) of a call: a named key has neither of the other two, and the
        key is the exact key only once the store split the shape key."""
        if hints.profile_key is not None:
            return hints.profile_key, None, None
        if self.key_function is not None:
            try:
                chosen = self.key_function(func, args, kwargs)
            except Exception as error:
                raise ValueError(
                    f"the profile_key function {getattr(self.key_function, '__name__', self.key_function)!r} "
                    f"raised {type(error).__name__}: {error}"
                ) from error
            if chosen is not None:
                if not isinstance(chosen, str):
                    raise TypeError(f"the profile_key function must return a string or None, got {chosen!r}")
                return chosen, None, None
        keys = profile_keys(func, args, kwargs)
        if keys.exact == keys.shape:
            return keys.shape, keys.shape, keys.exact
        shape = self._lookup(keys.shape)
        split = shape is not None and shape.split
        return (keys.exact if split else keys.shape), keys.shape, keys.exact

    def _lookup(self, key: str) -> _Known | None:
        with self._lock:
            if key in self._known:
                return self._known[key]
        profile = None if self.store is None else self.store.get(key) or self.store.adoptable(key)
        found = _Known.of(profile) if profile is not None and (profile.runs or profile.footprint_runs) else None
        with self._lock:
            return self._known.setdefault(key, found)

    def _lookup_app(self, app: str) -> _Known | None:
        with self._lock:
            if app in self._apps:
                return self._apps[app]
        profile = self.store.app_profile(app) if self.store is not None else None
        found = _Known.of(profile, pooled=True) if profile is not None else None
        with self._lock:
            return self._apps.setdefault(app, found)

    def estimate(self, func: Callable, args: tuple, kwargs: Mapping[str, Any], hints: Hints) -> Estimate:
        """The task's estimates and their sources."""
        name = app_name(func)
        key, shape, exact = self.keys(func, args, kwargs, hints)
        measure = self._decide(key)
        speedup = family = None
        if hints.max_cores is not None:
            speedup = self._speedup(key)
            family = self._family(key) if shape is not None else None
        if hints.footprint is not None and hints.runtime is not None:
            return Estimate(key, name, hints.footprint, hints.runtime, "hint", "hint", measure=measure,
                            shape=shape, exact=exact, speedup=speedup, family=family)
        levels = [(self._lookup(key), None)]
        if shape is not None and shape != key:
            levels.append((self._lookup(shape), "shape"))
        levels.append((self._lookup_app(name), "app"))
        with self._lock:  # the completion thread updates these profiles
            footprint, footprint_source, _ = self._pick(hints.footprint, levels, "footprint", self.default_footprint)
            runtime, runtime_source, level = self._pick(hints.runtime, levels, "runtime", self.default_runtime)
            spread = 0.0 if hints.runtime is not None else level.spread if level is not None else PRIOR_SPREAD
            intensity = next((known.intensity for known, _ in levels[:-1]
                              if known is not None and known.intensity is not None), None)
            memory = next((known.memory for known, _ in levels[:-1] if known is not None and known.memory), None)
        if footprint_source in ("prior", "hint") and runtime_source in ("prior", "hint") and key not in self.priors:
            self.priors.add(key)
            logger.info("no profile for %s yet: assuming a footprint of %s and a run time of %.3g s until it is measured",
                        key, format_size(self.default_footprint), self.default_runtime)
        values = (key, name, footprint, runtime, footprint_source, runtime_source, intensity, measure, spread, shape,
                  exact, memory, speedup, family)
        last = self._last.get(key)
        if last is not None and last[0] == values:  # as its key's last task's: that Estimate, not another
            return last[1]
        estimate = Estimate(*values)
        self._last[key] = (values, estimate)
        return estimate

    def _speedup(self, key: str) -> tuple[float, int] | None:
        """A malleable key's serial fraction and readings: the store's, read once, plus this run's."""
        with self._lock:
            known = self._speedups.knows(key)
        if not known:
            stored = self.store.speedup(key) if self.store is not None else None
            with self._lock:
                if not self._speedups.knows(key):
                    self._speedups.seed(key, *((stored.serial_fraction, stored.readings) if stored else (0.0, 0)))
        with self._lock:
            return self._speedups.own(key)

    def _family(self, key: str) -> tuple[str, float, int]:
        """A derived key's family (the key before its arguments) and the store's speed-up over every
        key of it (the readings' mean and count; 0.0, 0 with none), read once per run."""
        family = family_of(key)
        with self._lock:
            known = self._families.get(family)
        if known is None:
            found = self.store.family_speedup(family) if self.store is not None else None
            with self._lock:
                known = self._families.setdefault(family, (found.serial_fraction, found.readings) if found else (0.0, 0))
        with self._lock:
            if not self._speedups.joined(key):
                self._speedups.join(key, family, *known)
        return (family, *known)

    def at_widest(self, key: str, seconds: float, width: int, widest: int) -> float:
        """``seconds`` a task of ``key`` ran on ``width`` cores, taken to ``widest`` cores by its
        key's serial fraction so far, shrunk as the scheduler's: what a chain at the widest counts a
        task of its app (``Task.wide_tail``; :func:`scalpel_executor.core.widths.at_width`); ``seconds``
        where the key has no speed-up learned (no gain)."""
        return at_width(seconds, self._serial(key), width, widest)

    def _serial(self, key: str) -> float:
        """The key's serial fraction so far (the store's readings and this run's), shrunk as the
        scheduler's :class:`~scalpel_executor.core.widths.SpeedupModel` shrinks it; with no reading
        of its own, its family's as the model borrows it (the store's and this run's readings of
        every key of the family, :func:`~scalpel_executor.core.widths.borrowed`)."""
        self._speedup(key)  # the store's readings, read once
        with self._lock:
            return self._speedups.serial_fraction(key)

    def _decide(self, key: str) -> bool:
        if self._plan is None:
            return False
        with self._lock:
            return self._plan.decide(key)

    @staticmethod
    def _pick(hint: float | None, levels: list[tuple[_Known | None, str | None]], field: str,
              prior: float) -> tuple[float, str, _Known | None]:
        """The first level that knows ``field``: (value, source, that level)."""
        if hint is not None:
            return hint, "hint", None
        for known, source in levels:
            value = getattr(known, field) if known is not None else None
            if value is not None:
                return value, source or known.source, known
        return prior, "prior", None

    def observe(self, estimate: Estimate, stats: Mapping[str, Any], narrowest: int = 1) -> None:
        """Learn from one successful task's measurements (``wall`` seconds, ``footprint`` bytes).

        A malleable task that ran on ``stats["width"]`` cores, more than its ``narrowest``, teaches
        its key the run time at ``narrowest`` its wall time stands for by Amdahl's law with the key's
        serial fraction (the run-time estimate is the narrowest width's), and the serial fraction
        its run read (``stats["serial_reading"]``, the scheduler's) joins the key's speed-up. A cold
        call (``stats["cold"]``) teaches nothing where the sampling rule says so (``learn_cold``)."""
        if stats.get("cold") and not self._learn_cold:
            return
        runtime = stats.get("wall")
        reading, width = finite(stats.get("serial_reading")), stats.get("width")
        if reading is not None:
            self._speedup(estimate.key)
            with self._lock:  # the key's and, where it joined one, its family's
                self._speedups.add(estimate.key, min(1.0, max(0.0, reading)))
        if isinstance(width, int) and width > narrowest and isinstance(runtime, (int, float)) and runtime > 0:
            runtime = at_width(runtime, self._serial(estimate.key), width, narrowest)
        footprint = stats.get("footprint")
        if footprint is None and str(stats.get("footprint_source", "")).startswith(ENDED_BEFORE_FIRST_WINDOW):
            # Over before the probe's first window: too short to hold the cache. While its key has
            # measured no footprint that is one of 0 (a key of short tasks then gets its footprint
            # from the store, not the prior); beside a real reading it is none, so a warm worker's
            # fast runs of a key do not average its cold run's 70 MiB down to 23.
            with self._lock:
                known = self._known.get(estimate.key)
            footprint = None if known is not None and known.footprint else 0.0
        references, misses = stats.get("llc_references"), stats.get("llc_misses")
        miss_rate = misses / references if references and misses is not None else None
        # A cold call (a fresh worker's first of its app, paying for its imports) counts for its key but
        # not as its small integer's variant: one per worker, each a different tile number or seed,
        # read high and split a Montage key into 16 by tile (learning.refine's guard leaves out one).
        observation = None if self.store is None else Observation(
            estimate.key, estimate.app, runtime, footprint, stats.get("peak_rss") or stats.get("max_rss"), miss_rate,
            estimate.shape, None if stats.get("cold") else estimate.exact, reading,
        )
        levels = [estimate.key] + ([estimate.shape] if estimate.shape not in (None, estimate.key) else [])
        for level in levels[1:]:
            self._lookup(level)  # the store's statistics first, so this run's add to them
        self._lookup_app(estimate.app)
        with self._lock:
            known = self._known.get(estimate.key)
            if known is None:
                known = self._known[estimate.key] = _Known(None, None, "learned")
            if self._plan is not None and not estimate.measure and isinstance(runtime, (int, float)) \
                    and self._plan.observe_runtime(estimate.key, runtime, known.runtime):
                self.drifts += 1
                logger.debug("%s ran %.3g s against a learned %.3g s: its next task is measured", estimate.key,
                            runtime, known.runtime)
            for level in levels[1:]:
                if self._known.get(level) is None:
                    self._known[level] = _Known(None, None, "learned")
            if self._apps.get(estimate.app) is None:
                self._apps[estimate.app] = _Known(None, None, "learned", pooled=True)
            wall = measured(runtime)
            values = (wall if wall is not None and math.isfinite(wall) else None, measured(footprint),
                      measured(miss_rate), self.alpha, measured(stats.get("peak_rss")))
            for profile in [self._known[level] for level in levels] + [self._apps[estimate.app]]:
                profile.learn(*values)
            if observation is None:  # no store
                return
            self._pending.append(observation)
            due = len(self._pending) >= FLUSH_BATCH or time.monotonic() - self._last_flush >= FLUSH_SECONDS
            if due and (self._flusher is None or not self._flusher.is_alive()):
                self._flusher = threading.Thread(target=self.flush, name="scalpel-profiles", daemon=True)
                self._flusher.start()

    def flush(self) -> None:
        """Write pending observations to the store (one transaction), after any flush under way."""
        with self._flushing:
            with self._lock:
                batch, self._pending = self._pending, []
                self._last_flush = time.monotonic()
            if batch and self.store is not None:
                try:
                    self.store.record(batch)
                except Exception:  # a store fault never fails a task; the store already warned
                    logger.exception("could not record %d observations in the profile store", len(batch))
