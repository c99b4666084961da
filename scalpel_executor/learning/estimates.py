"""Each task's footprint and run time before it runs, and what its run taught afterwards.

::

    submit (DFK thread) ── estimate(func, args, kwargs, hints) ──> Estimate(key, footprint, runtime, sources,
                              │                                             intensity, measure, runtime_spread)
                              │ 1. hints            (footprint= / runtime= in the resource specification)
                              │ 2. this run         (a key measured earlier in this run: "learned")
                              │ 3. the store        (an earlier run, or an imported profile: "store")
                              │ 4. the prior        (never seen: the executor's defaults, logged once per key)
                              └ measure: whether the probe measures this task (learning.sampling)
    completion thread ── observe(estimate, stats) ──> in-memory profile updated at once
                                                  ├─> an unmeasured task's drift: the key's next task is measured
                                                  └─> pending observations ──flush()──> ProfileStore.record
                                                      (every second or 256 tasks, and at shutdown)

Sources are per quantity: a hint may give the footprint while the store gives the run time. Nothing
is run to measure it: the measurement is the task's real run, taken by the probe in the worker
(``stats["footprint"]``, wall time); which tasks the probe measures is decided here, by the
:mod:`~scalpel_executor.learning.sampling` rule, and travels with the task. Failed tasks teach
nothing, because a crash's run time says nothing about the next run. A store fault is the store's business (it fails over to memory); an
error in a user's key function fails that task's submit with a message naming the function.

``runtime_spread`` says how far the run-time estimate may be off, relative: the key's run-time
standard deviation over its mean (every run the store and this run have seen, Welford), or
:data:`ONE_RUN_SPREAD` with a single run, :data:`PRIOR_SPREAD` for the prior and 0 for a hint. The
default policy keeps longest-first's order unless its plan's predicted gain survives that spread
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

from scalpel_executor.learning.hints import Hints
from scalpel_executor.learning.keys import app_name, profile_key
from scalpel_executor.learning.sampling import MeasurePlan, Sampling
from scalpel_executor.learning.store import Observation, ProfileStore
from scalpel_executor.core.units import format_size

logger = logging.getLogger(__name__)

SOURCES = ("hint", "learned", "store", "prior")
FLUSH_SECONDS = 1.0
FLUSH_BATCH = 256
ONE_RUN_SPREAD = 0.25  # a key seen once: its run time is assumed off by about a quarter
PRIOR_SPREAD = 1.0  # never seen: the prior says little


@dataclass(frozen=True, slots=True)
class Estimate:
    """What the scheduler is told about one task, and where each figure came from."""

    key: str
    app: str
    footprint: float
    runtime: float
    footprint_source: str  # one of SOURCES
    runtime_source: str
    intensity: float | None = None  # LLC miss rate (misses / references) where counters measured it
    measure: bool = False  # the probe measures this task (footprint, LLC counts); wall and CPU time always
    runtime_spread: float = 0.0  # relative error of ``runtime``: the key's run-time std / mean (module docstring)


@dataclass
class _Known:
    footprint: float | None
    runtime: float | None
    source: str  # "store" or "learned"
    intensity: float | None = None  # LLC miss rate; only hardware counters give one
    runs: int = 0  # run times seen (the store's and this run's), their mean and sum of squared deviations
    runtime_mean: float = 0.0
    runtime_m2: float = 0.0

    @property
    def spread(self) -> float:
        if self.runs >= 2 and self.runtime_mean > 0:
            return math.sqrt(self.runtime_m2 / (self.runs - 1)) / self.runtime_mean
        return ONE_RUN_SPREAD if self.runtime is not None else PRIOR_SPREAD


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
        self._known: dict[str, _Known | None] = {}
        self._lock = threading.Lock()  # _known and _pending: submit thread vs completion thread
        self._pending: list[Observation] = []
        self._last_flush = time.monotonic()
        self.priors: set[str] = set()  # keys that started this run with the prior
        self._plan = MeasurePlan(sampling) if sampling is not None else None  # under _lock
        self.drifts = 0  # unmeasured tasks whose wall time made their key due for a measurement

    def key(self, func: Callable, args: tuple, kwargs: Mapping[str, Any], hints: Hints) -> str:
        if hints.profile_key is not None:
            return hints.profile_key
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
                return chosen
        return profile_key(func, args, kwargs)

    def _lookup(self, key: str) -> _Known | None:
        with self._lock:
            if key in self._known:
                return self._known[key]
        found = None
        if self.store is not None:
            profile = self.store.get(key)
            if profile is not None and (profile.runs or profile.footprint_runs):
                found = _Known(profile.footprint, profile.runtime if profile.runs else None, "store",
                               profile.llc_miss_rate, profile.runs, profile.runtime_mean or 0.0,
                               (profile.runtime_std or 0.0) ** 2 * max(0, profile.runs - 1))
        with self._lock:
            return self._known.setdefault(key, found)

    def estimate(self, func: Callable, args: tuple, kwargs: Mapping[str, Any], hints: Hints) -> Estimate:
        """The task's estimates and their sources."""
        name = app_name(func)
        key = self.key(func, args, kwargs, hints)
        measure = self._decide(key)
        if hints.footprint is not None and hints.runtime is not None:
            return Estimate(key, name, hints.footprint, hints.runtime, "hint", "hint", measure=measure)
        known = self._lookup(key)
        if hints.runtime is not None:
            spread = 0.0
        elif known is not None:
            with self._lock:
                spread = known.spread
        else:
            spread = PRIOR_SPREAD
        if known is None and key not in self.priors:
            self.priors.add(key)
            logger.info("no profile for %s yet: assuming a footprint of %s and a run time of %.3g s until it is measured",
                        key, format_size(self.default_footprint), self.default_runtime)
        footprint, footprint_source = self._pick(hints.footprint, known, "footprint", self.default_footprint)
        runtime, runtime_source = self._pick(hints.runtime, known, "runtime", self.default_runtime)
        intensity = known.intensity if known is not None else None
        return Estimate(key, name, footprint, runtime, footprint_source, runtime_source, intensity, measure, spread)

    def _decide(self, key: str) -> bool:
        if self._plan is None:
            return False
        with self._lock:
            return self._plan.decide(key)

    @staticmethod
    def _pick(hint: float | None, known: _Known | None, field: str, prior: float) -> tuple[float, str]:
        if hint is not None:
            return hint, "hint"
        value = getattr(known, field) if known is not None else None
        if value is not None:
            return value, known.source
        return prior, "prior"

    def observe(self, estimate: Estimate, stats: Mapping[str, Any]) -> None:
        """Learn from one successful task's measurements (``wall`` seconds, ``footprint`` bytes)."""
        runtime = stats.get("wall")
        footprint = stats.get("footprint")
        references, misses = stats.get("llc_references"), stats.get("llc_misses")
        miss_rate = misses / references if references and misses is not None else None
        observation = Observation(
            estimate.key, estimate.app, runtime, footprint, stats.get("peak_rss") or stats.get("max_rss"), miss_rate,
        )
        with self._lock:
            known = self._known.get(estimate.key)
            if known is None:
                known = self._known[estimate.key] = _Known(None, None, "learned")
            if self._plan is not None and not estimate.measure and isinstance(runtime, (int, float)) \
                    and self._plan.observe_runtime(estimate.key, runtime, known.runtime):
                self.drifts += 1
                logger.debug("%s ran %.3g s against a learned %.3g s: its next task is measured", estimate.key,
                            runtime, known.runtime)
            if isinstance(runtime, (int, float)) and not isinstance(runtime, bool) and math.isfinite(runtime) \
                    and runtime >= 0:
                known.runs += 1
                delta = runtime - known.runtime_mean
                known.runtime_mean += delta / known.runs
                known.runtime_m2 += delta * (runtime - known.runtime_mean)
            known.runtime = self._blend(known.runtime, runtime)
            known.footprint = self._blend(known.footprint, footprint)
            known.intensity = self._blend(known.intensity, miss_rate)
            if self.store is None:
                return
            self._pending.append(observation)
            due = len(self._pending) >= FLUSH_BATCH or time.monotonic() - self._last_flush >= FLUSH_SECONDS
        if due:
            self.flush()

    def _blend(self, old: float | None, new: Any) -> float | None:
        if not isinstance(new, (int, float)) or isinstance(new, bool) or math.isnan(new) or new < 0:
            return old
        return float(new) if old is None else self.alpha * float(new) + (1 - self.alpha) * old

    def flush(self) -> None:
        """Write pending observations to the store (one transaction)."""
        with self._lock:
            batch, self._pending = self._pending, []
            self._last_flush = time.monotonic()
        if batch and self.store is not None:
            try:
                self.store.record(batch)
            except Exception:  # a store fault never fails a task; the store already warned
                logger.exception("could not record %d observations in the profile store", len(batch))
