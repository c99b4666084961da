"""What this host's co-runs teach about contention: ρ and σ fitted to the executor's own runs.

::

    executor.start ──── HostModelStore.fitted(host) ──> HostFit: planned with once it rests on
                        (host: host_id(topology))       MIN_OBSERVATIONS co-runs and explains them
                                                        better than the default beyond chance
                                                        (beats_default); else the default
    executor.shutdown ─ TaskSpan per finished task ──> HostModelStore.record(host, spans): one transaction
                          (key, domain, start, end,       │ observe_run: who ran beside whom
                           wall, footprint, ok)           │   (core.contention_fit.co_runner_segments);
                                                          │   alone on its domain: a solo time of its key;
                                                          │   beside others: a co-run (wall, segments)
                                                          │ the fit is now stale (older than a co-run)
                                                          v
                       spawn_refit ──> a detached, niced process (python -m ...host_model refit):
                                       HostModelStore.refit(host, llc): the co-runs and solo times
                                       kept (the latest MAX_CORUNS per host) ──> fit_host: slowdown =
                                       wall / the key's solo mean, or, for a key never seen alone, its
                                       solo time a latent baseline; the prior;
                                       core.contention_fit.fit_contention (log error) ──> HostFit, stored;
                                       then core.interference_fit.choose_interference around the model
                                       planned with (interference_of) ──> HostInterference, stored:
                                       per-key terms (sensitivity, pressure, bandwidth), or footprint-only, and why

**Nothing that learns runs on the user's way out.** A fit over a full history (400 co-runs)
takes about 2 s of pure Python; run at shutdown it made ``dfk.cleanup()`` take 3.5–4.6 s
against HTEX's 0.07 s. So shutdown only stores the run's co-runs (one transaction, a few
milliseconds) and hands the refit to a process of its own that outlives the user's script,
at the lowest CPU priority: if it dies, nothing is lost, since its inputs are stored and the
next ``start()`` that finds the fit stale starts it again. A run plans with the fit stored when
it starts: the one the previous run's refit wrote once it finished (about 2 s after it).

The tables live in the profile store's SQLite file beside its profiles (``host_coruns``,
``host_solo``, ``host_fits``, ``host_interference``, ``host_interference_choice``; ``docs/profiles.md``,
``docs/interference.md``) and are opened through a connection of their
own, so the profile store's schema is not touched. A co-run is kept raw (its key, wall time and
co-runners' footprints and keys), not as a slowdown, because its key's solo time may come only from a
later run. The fit is relative to the host's LLC size as the topology states it: a sysfs that
overstates what the cores share (a VM's 480 MiB L3 for some 48–64 MiB) gives a small ρ.

**Keys never seen alone.** A workflow that keeps every core busy never runs its large tasks alone,
so their keys get no solo time. Their co-runs still count: the key's solo time is a latent
parameter of the fit, profiled out (``core.contention_fit``, ``baseline``), so such a key tells
ρ, σ through co-runs beside different co-runners (beside a small task and beside a large one).
It pays one co-run for its solo time: its co-runs count as observations beyond one per key, and
not at all when they all ran beside the same co-runners (:func:`~scalpel_executor.core.
contention_fit.observations`). A key with a solo time uses it, as measured.

**The prior.** Real co-runs cover few footprints. Beside them the fit sees the default model's
predictions for equal pairs of 1/16 to 1 LLC, weighing :data:`PRIOR_WEIGHT` co-runs in all, so
what no run has shown stays as the default says instead of what an overfit σ extrapolates; a
few dozen co-runs outweigh it where they speak.

**Only a fit that tells is planned with.** On a noisy host the co-runs of one workflow may not
tell ρ at all: the fit's error is then as low at ρ 0.05 as at 1.5, and whichever ρ it lands on is
noise. So the default model's error on the same co-runs is kept beside the fit's, and the
executor plans with the fit only when the fit's gain passes an F test (:data:`F_CRITICAL`): more
co-runs, or co-runs that differ more, are needed before the host's own model replaces the default.

**Only a quiet host teaches it.** A run during which processes outside the executor's own tree
used more than :data:`BUSY_OTHERS` of each core (CPU time sampled at start and at shutdown:
:mod:`scalpel_executor.host.cpu_time`; where the host's is unreadable, a load average above
:data:`BUSY_LOAD` per core) adds nothing: its co-runs' times measured the other work as much as
the co-runners (:func:`busy_reason`; the run report's ``contention_model.not_learned`` and the
run's closing line say so).

**Never fails a task.** A file that cannot be opened or written logs one warning and the tables
carry on in memory for the rest of the run; a row that does not parse is skipped.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import sqlite3
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.contention_fit import CoRun, co_runner_segments, fit_contention, model_error, observations
from scalpel_executor.core.domains import Topology
from scalpel_executor.core.interference import Terms
from scalpel_executor.core.interference_fit import (EXPLORING, choose_interference, coruns_from_history, exploration,
                                                    solo_times)
from scalpel_executor.core.units import format_size
from scalpel_executor.learning.tables import SideTables

logger = logging.getLogger(__name__)

#: Co-runs the fit must rest on before the executor plans with it. Repeated co-runs on the
#: development VM vary by about ±3.5% (2.26–2.42 s); the mean of 20 is then within about 1%,
#: well under the 5% the admission check treats as harm.
MIN_OBSERVATIONS = 20
MAX_CORUNS = 400  # kept per host, the latest: the host under a VM changes week to week
MAX_SOLO_KEYS = 1000  # solo times kept per host, the latest updated keys
SOLO_MEMORY = 20  # a key's solo mean weighs its last ~20 runs: after that, an exponential mean
MIN_WALL = 0.05  # seconds: shorter tasks' wall times are mostly start-up and timer noise
SOLO_SLACK = 0.02  # a task beside others for at most 2% of its life ran alone
PRIOR_WEIGHT = 2.0
#: The F statistic (2 parameters, ρ and σ; 5%, for 30 or more degrees of freedom: 3.0 to 3.3) the
#: fit must reach against the default model on the same co-runs before the executor plans with it.
#: Co-runs on a loaded 2-core VM scatter by 10-17% in log time: 32 of them from one workflow left
#: the fit's error within 2% of its best anywhere from ρ 0.03 to 2, and the fit's ρ, landing at
#: random in that range, once made a 2.6 MiB FFT look harmed 39% beside a lookup and a second
#: lookup 1.5%: the learned run then co-ran its lookups longer than HTEX did.
F_CRITICAL = 3.3
#: Load average per core above which a run's co-runs are not learned: the host ran other work
#: beside the executor's, and a co-run's wall time then measures that work as much as its
#: co-runners. On the 2-core development VM, first runs at load 3.6–4.3 fitted ρ 0.045 and 0.08
#: (an FFT harmed 39% beside a lookup, a second lookup 1.5%), which the F test could not tell
#: from a real host; at load 0.3–1.1 their fits stayed near ρ 0.5.
BUSY_LOAD = 1.5
#: CPU seconds per second per core that processes outside the executor's tree may use over a run
#: whose co-runs are learned. The load averages above (the executor's work included) put the
#: harmful runs at 3.6–4.3 on 2 cores while the workflow itself kept both busy: 0.8–1.2 of other
#: work per core; the runs that fitted well, at 0.3–1.1, had next to none. Half a core each lies
#: between, and no longer counts a workflow's own threads (10 per task drove the load to 13).
BUSY_OTHERS = 0.5
PRIOR_FRACTIONS = (1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS host_coruns (host TEXT NOT NULL, at REAL NOT NULL, key TEXT NOT NULL,
    footprint REAL NOT NULL, wall REAL NOT NULL, segments TEXT NOT NULL, corunner_keys TEXT);
CREATE INDEX IF NOT EXISTS host_coruns_by_host ON host_coruns (host, at);
CREATE TABLE IF NOT EXISTS host_solo (host TEXT NOT NULL, key TEXT NOT NULL, runs INTEGER NOT NULL,
    mean REAL NOT NULL, updated REAL NOT NULL, PRIMARY KEY (host, key));
CREATE TABLE IF NOT EXISTS host_fits (host TEXT PRIMARY KEY, llc REAL NOT NULL, capacity_fraction REAL NOT NULL,
    sensitivity REAL NOT NULL, observations INTEGER NOT NULL, rms_error REAL NOT NULL, updated REAL NOT NULL,
    default_error REAL);
CREATE TABLE IF NOT EXISTS host_refits (host TEXT PRIMARY KEY, as_of REAL NOT NULL);
CREATE TABLE IF NOT EXISTS host_interference (host TEXT NOT NULL, key TEXT NOT NULL, sensitivity REAL NOT NULL,
    pressure REAL NOT NULL, updated REAL NOT NULL, bandwidth REAL NOT NULL DEFAULT 0, solo REAL,
    PRIMARY KEY (host, key));
CREATE TABLE IF NOT EXISTS host_interference_choice (host TEXT PRIMARY KEY, model TEXT NOT NULL, reason TEXT NOT NULL,
    capacity_fraction REAL NOT NULL, sensitivity REAL NOT NULL, llc REAL NOT NULL, updated REAL NOT NULL)
"""
#: A host's fit is stale when a co-run or solo time was stored after the newest one its last refit
#: read (``host_refits.as_of``, kept even when that refit found nothing to fit).
_NEWEST_INPUT = ("SELECT MAX(at) FROM (SELECT MAX(at) AS at FROM host_coruns WHERE host = :host "
                 "UNION ALL SELECT MAX(updated) FROM host_solo WHERE host = :host)")


def host_id(topology: Topology, hostname: str | None = None) -> str:
    """This host as the fit knows it: its name and its LLC domains, e.g. ``"node7 1x2:480MiB"``.

    A host whose sysfs changes (a VM moved to another host) or a topology given by hand is
    another host, because ρ is relative to the LLC size stated."""
    cores = topology.cores_per_domain
    shape = f"{len(cores)}x{cores[0]}" if len(set(cores)) == 1 else "+".join(map(str, cores))
    llc = topology.llc_size
    return f"{hostname or socket.gethostname()} {shape}:{format_size(llc) if llc else 'unknown'}"


@dataclass(frozen=True)
class TaskSpan:
    """One finished task as the fit sees it. ``end``: when it stopped occupying its core (one
    clock with ``start``); ``wall``: its measured run time, None when unknown (a failure)."""

    key: str
    domain: int
    start: float
    end: float
    wall: float | None
    footprint: float
    ok: bool = True


@dataclass(frozen=True)
class RawCoRun:
    """A task that ran beside others: its key, footprint, wall time and segments (seconds, the
    co-runners' footprints). Its slowdown needs its key's solo time. ``corunner_keys``: the
    co-runners' profile keys, aligned with ``segments``; None where they were not recorded (a
    store written before they were), which teaches per-key sensitivities but no pressures."""

    key: str
    footprint: float
    wall: float
    segments: tuple[tuple[float, tuple[float, ...]], ...]
    corunner_keys: tuple[tuple[str, ...], ...] | None = None


@dataclass(frozen=True)
class HostFit:
    """The model fitted on a host, what it rests on and the LLC it is relative to."""

    model: ContentionModel
    observations: int  # co-runs with a solo time of their key, + those of keys never alone beyond one per key
    rms_error: float  # of the log slowdowns
    llc: float
    default_error: float | None = None  # the default model's rms error on the same co-runs; None: not known

    @property
    def beats_default(self) -> bool:
        """Whether the fit explains its co-runs better than the default model beyond chance: the F
        statistic of the two errors (2 parameters, ``observations - 2`` degrees of freedom) reaches
        :data:`F_CRITICAL`. A fit stored before this was recorded does not."""
        if self.default_error is None or self.default_error <= self.rms_error:
            return False
        if self.rms_error == 0:
            return True
        freedom = max(1, self.observations - 2)
        return (self.default_error ** 2 - self.rms_error ** 2) / 2 / (self.rms_error ** 2 / freedom) >= F_CRITICAL

    def planned(self, llc: float | None) -> bool:
        """Whether the executor plans with this fit on a host of LLC ``llc``: it rests on
        :data:`MIN_OBSERVATIONS` co-runs, is relative to that LLC and :attr:`beats_default`."""
        return self.observations >= MIN_OBSERVATIONS and self.llc == llc and self.beats_default

    def to_dict(self) -> dict:
        return {"capacity_fraction": self.model.capacity_fraction, "sensitivity": self.model.sensitivity,
                "observations": self.observations, "rms_error": self.rms_error, "llc": self.llc,
                "default_rms_error": self.default_error, "beats_default": self.beats_default}


#: The run-time source (the run report's ``sources``) of a task planned with its key's solo time
#: (:attr:`HostInterference.solo`) in place of its estimate.
SOLO_SOURCE = "solo"


@dataclass(frozen=True)
class HostInterference:
    """A host's stored per-key choice (:func:`~scalpel_executor.core.interference_fit.choose_interference`
    at its last refit): whether it plans with per-key residuals, why, the footprint model and LLC
    they are residuals of, and each key's Terms; no terms when footprint-only."""

    per_key: bool
    reason: str
    footprint_model: ContentionModel
    llc: float
    terms: Mapping[str, Terms]
    #: Seconds alone of keys with terms, as the fit implies them (:func:`~scalpel_executor.core.
    #: interference_fit.solo_times`): what a task told its terms is planned with. A key without one
    #: is planned with its run-time estimate.
    solo: Mapping[str, float] = field(default_factory=dict)


def observe_run(spans: Sequence[TaskSpan]) -> tuple[list[RawCoRun], dict[str, list[float]]]:
    """Who ran beside whom: the co-runs of ``spans``, and the wall times of tasks that ran alone, per key.

    Every span counts as a co-runner (a failed task held its core too); only successful tasks of
    at least :data:`MIN_WALL` seconds are observations.
    """
    segments = co_runner_segments([(s.domain, s.start, s.end) for s in spans])
    coruns, solos = [], defaultdict(list)
    for span, life in zip(spans, segments):
        if not span.ok or span.wall is None or span.wall < MIN_WALL or not life:
            continue
        beside = sum(seconds for seconds, others in life if others)
        if beside <= SOLO_SLACK * sum(seconds for seconds, _ in life):
            solos[span.key].append(span.wall)
        else:
            coruns.append(RawCoRun(span.key, span.footprint, span.wall,
                                   tuple((seconds, tuple(spans[j].footprint for j in others)) for seconds, others in life),
                                   tuple(tuple(spans[j].key for j in others) for _, others in life)))
    return coruns, dict(solos)


def prior_coruns(llc: float, prior: ContentionModel = ContentionModel()) -> list[CoRun]:
    """The prior as co-runs: ``prior``'s slowdowns of equal pairs at :data:`PRIOR_FRACTIONS` of the LLC."""
    weight = PRIOR_WEIGHT / len(PRIOR_FRACTIONS)
    return [CoRun(f * llc, ((1.0, (f * llc,)),), prior.slowdowns([f * llc] * 2, [prior.sensitivity] * 2, llc)[0], weight)
            for f in PRIOR_FRACTIONS]


def fit_host(coruns: Iterable[RawCoRun], solo: Mapping[str, float], llc: float | None) -> HostFit | None:
    """ρ, σ fitted to the host's co-runs plus the prior; None when no co-run counts or the LLC
    size is unknown.

    A co-run whose key has a solo time has the slowdown wall / solo. The co-runs of a key without
    one share it as a latent baseline (module docstring); they count beyond one per key, and a
    key whose co-runs all ran beside the same co-runners is left out (it tells only its solo time).
    """
    if not llc:
        return None
    measured, latent = [], defaultdict(list)
    for c in coruns:
        if c.wall <= 0:
            continue
        if solo.get(c.key, 0) > 0:
            measured.append(CoRun(c.footprint, c.segments, c.wall / solo[c.key]))
        else:
            latent[c.key].append(CoRun(c.footprint, c.segments, c.wall, baseline=c.key))
    observed = measured + [corun for key_coruns in latent.values() if observations(key_coruns) > 0
                           for corun in key_coruns]
    count = observations(observed)
    if count == 0:
        return None
    observed += prior_coruns(llc)
    model, error = fit_contention(observed, llc)
    return HostFit(model, count, error, float(llc), model_error(ContentionModel(), observed, llc))


def interference_of(coruns: Sequence[RawCoRun], solo: Mapping[str, float], fit: HostFit | None,
                    llc: float | None, *, explore: bool = True, incumbent: bool = False) -> HostInterference | None:
    """The per-key choice on a host's kept co-runs: :func:`~scalpel_executor.core.interference.
    choose_interference` around the footprint model the executor plans with (the host's fit where
    :meth:`HostFit.planned`, else the default), on the co-runs whose key has a solo time; None
    when the LLC size is unknown. Where it keeps footprint-only and the co-runs are caught in the
    coverage trap (:func:`~scalpel_executor.core.interference_fit.exploration`), the next run is told
    exploration terms instead (``explore``: not when the choice it replaces was exploring already),
    and the reason says so. ``incumbent``: the choice it replaces planned with per-key residuals
    the test chose (not exploring): they stay until footprint-only wins the test against them.
    About 1 s for 400 co-runs (the detached refit's share)."""
    if not llc:
        return None
    footprint_model = fit.model if fit is not None and fit.planned(llc) else ContentionModel()
    choice = choose_interference(coruns_from_history(coruns, solo), footprint_model, llc, incumbent=incumbent)
    if choice.per_key:
        model = choice.model
        return HostInterference(True, choice.reason, footprint_model, float(llc),
                                {key: model.terms(key) for key in model.keys}, solo_times(model, coruns, solo))
    terms, why = exploration(coruns, solo) if explore else ({}, None)
    if terms:  # the records cannot tell the keys' pairs apart: the next run makes pairs that can
        return HostInterference(True, f"{why} ({choice.reason})", footprint_model, float(llc), terms)
    return HostInterference(False, choice.reason, footprint_model, float(llc), {})


def busy_reason(loads: Iterable[float], cores: int, others: float | None = None) -> str | None:
    """Why a run's co-runs should not be learned, or None.

    ``others``: the CPU seconds per second per core that processes outside the executor's tree
    used over the run (:func:`~scalpel_executor.host.cpu_time.other_work_per_core`): busy above
    :data:`BUSY_OTHERS`. Where it is unknown (no ``/proc/stat``), the host's load averages sampled
    over the run (``os.getloadavg``), which count the executor's own work too: busy above
    :data:`BUSY_LOAD` per core."""
    if others is not None:
        if cores <= 0 or others <= BUSY_OTHERS:
            return None
        return (f"the host was busy with other work (processes outside the executor used {others * cores:.1f} of "
                f"its {cores} cores on average, more than {BUSY_OTHERS:g} per core), so its co-runs' times "
                f"measure that work too")
    peak = max(loads, default=0.0)
    if cores <= 0 or peak <= BUSY_LOAD * cores:
        return None
    return (f"the host was busy with other work (load average {peak:.1f} on {cores} cores, more than "
            f"{BUSY_LOAD:g} per core), so its co-runs' times measure that work too")


def pair_cost(model: ContentionModel, first: float, second: float, llc: float) -> float:
    """The slowdown ``model`` predicts for the larger of two tasks of these footprints run together."""
    return max(model.slowdowns([first, second], [model.sensitivity] * 2, llc))


def model_report(planned: ContentionModel, source: str, host: str, llc: float | None, fit: HostFit | None,
                 footprints: Sequence[float], not_learned: str | None = None) -> dict:
    """The run report's ``contention_model``: the model planned with and its ``source`` (``given``,
    ``fitted on this host``, ``default``), the host's fit (``fitted``) and what the fit, else the
    planned model, predicts for the two largest of ``footprints`` together (``two_largest``), in
    words too: "on this host, two 30 MiB tasks together cost 1.00x (fitted from 42 co-runs)";
    ``not_learned``: why this run's co-runs were not added (:func:`busy_reason`), or None."""
    largest = sorted(footprints, reverse=True)[:2]
    two = None
    if len(largest) == 2 and llc:
        cost = pair_cost(fit.model if fit is not None else planned, *largest, llc)
        first, second = (format_size(int(f)) for f in largest)
        tasks = f"two {first} tasks" if first == second else f"tasks of {first} and {second}"
        basis = (f"fitted from {fit.observations} co-runs" + ("" if fit.beats_default else
                 ", which the default model explains about as well: planned with the default") if fit is not None else
                 "the given model" if source == "given" else "the default model; no co-run fitted yet")
        two = {"footprints": largest, "slowdown": cost,
               "summary": f"on this host, {tasks} together cost {cost:.2f}x ({basis})"}
    return {"planned_with": {"capacity_fraction": planned.capacity_fraction, "sensitivity": planned.sensitivity},
            "source": source, "host": host, "llc": llc, "fitted": None if fit is None else fit.to_dict(),
            "min_observations": MIN_OBSERVATIONS, "two_largest": two, "not_learned": not_learned}


class HostModelStore(SideTables):
    """The per-host co-runs, solo times and fits, in the profile store's SQLite file.

    ``path`` None keeps them in memory. Every problem with the file is one warning; the tables
    then carry on in memory (``problem`` says why).
    """

    SCHEMA = _SCHEMA
    ADDED = (("host_fits", "default_error", "REAL"),
             ("host_coruns", "corunner_keys", "TEXT"),  # its old rows: co-runners' keys unknown
             ("host_interference", "bandwidth", "REAL NOT NULL DEFAULT 0"),
             ("host_interference", "solo", "REAL"))  # its old rows: no solo time, the walls' mean planned with
    WHAT = "the host's contention fit (its co-runs)"

    # -- the API --------------------------------------------------------------------------------

    def fitted(self, host: str) -> HostFit | None:
        """The host's stored fit, or None."""
        row = self._read(lambda c: c.execute("SELECT capacity_fraction, sensitivity, observations, rms_error, llc, "
                                             "default_error FROM host_fits WHERE host = ?", (host,)).fetchone())
        if row is None or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in row[:5]):
            return None
        default = row[5] if isinstance(row[5], (int, float)) and math.isfinite(row[5]) else None
        try:
            return HostFit(ContentionModel(row[0], row[1]), int(row[2]), row[3], row[4], default)
        except ValueError:  # a hand-edited row: ρ ≤ 0 or σ < 0
            return None

    def history(self, host: str) -> tuple[list[RawCoRun], dict[str, tuple[int, float]]]:
        """The host's kept co-runs (oldest first) and (runs, solo mean) per key."""
        return self._read(lambda connection: _read_history(connection, host))

    def preview(self, host: str, llc: float | None, spans: Sequence[TaskSpan]) -> HostFit | None:
        """The fit the host would have with ``spans`` added; stores nothing."""
        coruns, solos = observe_run(spans)
        kept, solo = self.history(host)
        return fit_host((kept + coruns)[-MAX_CORUNS:], _solo_means(_add_solo(solo, solos)), llc)

    def record(self, host: str, spans: Sequence[TaskSpan]) -> int:
        """Add the co-runs and solo times of ``spans`` (keeping the latest), in one transaction; no
        refit: the host's fit is stale until :meth:`refit`. Returns the co-runs added."""
        coruns, solos = observe_run(spans)
        now = time.time()

        def add(connection: sqlite3.Connection) -> None:
            connection.executemany(
                "INSERT INTO host_coruns (host, at, key, footprint, wall, segments, corunner_keys) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(host, now, c.key, c.footprint, c.wall, json.dumps([[s, list(o)] for s, o in c.segments]),
                  None if c.corunner_keys is None else json.dumps([list(k) for k in c.corunner_keys]))
                 for c in coruns])
            connection.execute("DELETE FROM host_coruns WHERE host = ? AND rowid NOT IN (SELECT rowid FROM "
                               "host_coruns WHERE host = ? ORDER BY at DESC, rowid DESC LIMIT ?)",
                               (host, host, MAX_CORUNS))
            stored = {key: tuple(row) for key, *row in connection.execute(
                "SELECT key, runs, mean FROM host_solo WHERE host = ?", (host,))}
            for key, (runs, mean) in _add_solo(stored, solos).items():
                if key in solos:
                    connection.execute("INSERT OR REPLACE INTO host_solo VALUES (?, ?, ?, ?, ?)",
                                       (host, key, runs, mean, now))
            connection.execute("DELETE FROM host_solo WHERE host = ? AND key NOT IN (SELECT key FROM host_solo "
                               "WHERE host = ? ORDER BY updated DESC LIMIT ?)", (host, host, MAX_SOLO_KEYS))

        self._run(add)
        return len(coruns)

    def stale(self, host: str) -> bool:
        """Whether a co-run or solo time of ``host`` was stored after the newest its fit rests on (or
        the host has inputs and no fit)."""
        def read(connection):
            newest = connection.execute(_NEWEST_INPUT, {"host": host}).fetchone()[0]
            seen = connection.execute("SELECT as_of FROM host_refits WHERE host = ?", (host,)).fetchone()
            return newest, seen

        newest, seen = self._read(read)
        if newest is None:
            return False
        return seen is None or not isinstance(seen[0], (int, float)) or seen[0] < newest

    def refit(self, host: str, llc: float | None) -> HostFit | None:
        """Fit ``host``'s kept co-runs and solo times and store the fit, marked as of the newest of
        them; then choose between footprint-only and per-key residuals around the model the
        executor will plan with (:func:`interference_of`) and store that choice. Returns the fit
        (None while no co-run counts: :func:`fit_host`)."""
        as_of, (kept, solo) = self._read(lambda c: (c.execute(_NEWEST_INPUT, {"host": host}).fetchone()[0],
                                                    _read_history(c, host)))
        means = _solo_means(solo)
        fit = fit_host(kept, means, llc)
        previous = self.interference(host)
        exploring = previous is not None and previous.reason.startswith(EXPLORING)
        interference = interference_of(kept, means, fit, llc, explore=not exploring,
                                       incumbent=previous is not None and previous.per_key and not exploring)
        now = time.time()

        def store(connection: sqlite3.Connection) -> None:
            if fit is not None:
                connection.execute("INSERT OR REPLACE INTO host_fits VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                   (host, fit.llc, fit.model.capacity_fraction, fit.model.sensitivity,
                                    fit.observations, fit.rms_error, now, fit.default_error))
            if interference is not None:
                _store_choice(connection, host, interference, now)
            if as_of is not None:
                connection.execute("INSERT OR REPLACE INTO host_refits VALUES (?, ?)", (host, as_of))

        self._run(store)
        return fit

    def tell(self, host: str, interference: HostInterference) -> None:
        """Store ``interference`` as ``host``'s per-key choice, as a refit does: what the next run
        plans with (an experiment's oracle, told the terms it planted)."""
        self._run(lambda connection: _store_choice(connection, host, interference, time.time()))

    def interference(self, host: str) -> HostInterference | None:
        """The host's stored per-key choice and terms (:meth:`refit`), or None (never refitted since
        they were kept, or a row that does not parse)."""
        def read(connection):
            choice = connection.execute("SELECT model, reason, capacity_fraction, sensitivity, llc FROM "
                                        "host_interference_choice WHERE host = ?", (host,)).fetchone()
            terms = connection.execute("SELECT key, sensitivity, pressure, bandwidth, solo FROM host_interference "
                                       "WHERE host = ?", (host,)).fetchall()
            return choice, terms

        choice, rows = self._read(read)
        if choice is None:
            return None
        model, reason, rho, sigma, llc = choice
        if model not in ("per-key", "footprint") or not isinstance(reason, str) or not all(
                isinstance(v, (int, float)) and math.isfinite(v) for v in (rho, sigma, llc)):
            return None
        try:
            footprint_model = ContentionModel(rho, sigma)
        except ValueError:  # a hand-edited row: ρ ≤ 0 or σ < 0
            return None
        rows = [(key, values, solo) for key, *values, solo in rows if isinstance(key, str) and all(
            isinstance(v, (int, float)) and math.isfinite(v) for v in values)] if model == "per-key" else []
        terms = {key: Terms(*map(float, values)) for key, values, _ in rows}
        solo = {key: float(solo) for key, _, solo in rows
                if isinstance(solo, (int, float)) and math.isfinite(solo) and solo > 0}
        return HostInterference(model == "per-key", reason, footprint_model, float(llc), terms, solo)

    def learn(self, host: str, llc: float | None, spans: Sequence[TaskSpan]) -> HostFit | None:
        """:meth:`record` ``spans``, then :meth:`refit` at once (what the detached refit does later).

        Returns the host's fit after it (None while no co-run counts: :func:`fit_host`)."""
        self.record(host, spans)
        return self.refit(host, llc)


def _store_choice(connection: sqlite3.Connection, host: str, interference: HostInterference, now: float) -> None:
    connection.execute("DELETE FROM host_interference WHERE host = ?", (host,))
    connection.executemany("INSERT INTO host_interference (host, key, sensitivity, pressure, updated, bandwidth, solo) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?)",
                           [(host, key, s, p, now, w, interference.solo.get(key))
                            for key, (s, p, w) in interference.terms.items()])
    model = interference.footprint_model
    connection.execute("INSERT OR REPLACE INTO host_interference_choice VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (host, "per-key" if interference.per_key else "footprint", interference.reason,
                        model.capacity_fraction, model.sensitivity, interference.llc, now))


def _read_history(connection: sqlite3.Connection,
                  host: str) -> tuple[list[RawCoRun], dict[str, tuple[int, float]]]:
    rows = connection.execute("SELECT key, footprint, wall, segments, corunner_keys FROM host_coruns WHERE host = ? "
                              "ORDER BY at, rowid", (host,)).fetchall()
    solo = connection.execute("SELECT key, runs, mean FROM host_solo WHERE host = ?", (host,)).fetchall()
    coruns = [corun for corun in map(_parse_corun, rows) if corun is not None]
    return coruns, {key: (runs, mean) for key, runs, mean in solo
                    if isinstance(runs, int) and isinstance(mean, float) and math.isfinite(mean) and mean > 0}


def _add_solo(stored: Mapping[str, tuple[int, float]], walls: Mapping[str, list[float]]) -> dict[str, tuple[int, float]]:
    """Each key's (runs, solo mean) with ``walls`` added: a mean over the first :data:`SOLO_MEMORY`
    runs, an exponential one after, so a host that changed speed is followed."""
    out = dict(stored)
    for key, values in walls.items():
        runs, mean = out.get(key, (0, 0.0))
        for wall in values:
            runs = min(runs + 1, SOLO_MEMORY)
            mean += (wall - mean) / runs
        out[key] = (runs, mean)
    return out


def _solo_means(solo: Mapping[str, tuple[int, float]]) -> dict[str, float]:
    return {key: mean for key, (_, mean) in solo.items()}


def _parse_corun(row: tuple) -> RawCoRun | None:
    """A stored co-run, or None for a row that is not one (only numbers and strings are read).
    Co-runner keys that are missing or do not match the segments read as unknown (None)."""
    key, footprint, wall, text, keys_text = row
    try:
        segments = tuple((float(seconds), tuple(float(f) for f in others)) for seconds, others in json.loads(text))
    except (TypeError, ValueError):
        return None
    numbers = [footprint, wall, *(s for s, _ in segments), *(f for _, o in segments for f in o)]
    if not isinstance(key, str) or not all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in numbers):
        return None
    return RawCoRun(key, float(footprint), float(wall), segments, _parse_keys(keys_text, segments))


def _parse_keys(text, segments) -> tuple[tuple[str, ...], ...] | None:
    """The co-runner keys stored beside ``segments``: one string per co-runner of each segment, else None."""
    if not isinstance(text, str):
        return None
    try:
        keys = json.loads(text)
    except ValueError:
        return None
    if not isinstance(keys, list) or len(keys) != len(segments) or not all(
            isinstance(names, list) and len(names) == len(others) and all(isinstance(k, str) for k in names)
            for names, (_, others) in zip(keys, segments)):
        return None
    return tuple(tuple(names) for names in keys)


#: Refits one process makes in a row while runs keep storing co-runs beside it; a later start
#: that finds the fit stale starts another.
REFITS_IN_A_ROW = 3


def spawn_refit(path: str | os.PathLike, host: str, llc: float | None, log: str | os.PathLike | None = None) -> None:
    """Refit ``host`` from the store at ``path`` in a process of its own, at the lowest CPU
    priority, and return at once (a few milliseconds: a shell that starts it and exits, so it
    is nobody's child and never a zombie of a long-lived notebook). What it has to say (a
    warning) goes to the file ``log``, made only then (none: discarded)."""
    command = [sys.executable, "-m", "scalpel_executor.learning.host_model", "refit", os.fspath(path), host,
               repr(float(llc or 0.0))] + (["--log", os.fspath(log)] if log is not None else [])
    subprocess.run(["/bin/sh", "-c", '"$@" </dev/null >/dev/null 2>&1 &', "sh", *command],
                   check=True, start_new_session=True, stdin=subprocess.DEVNULL, timeout=30)


def _refit_main(argv: Sequence[str]) -> int:
    """``python -m scalpel_executor.learning.host_model refit STORE HOST LLC``: what
    :func:`spawn_refit` runs. One refit per store at a time (a lock file beside it); it refits
    again while runs stored co-runs during its fit."""
    import argparse
    import fcntl

    parser = argparse.ArgumentParser(prog="python -m scalpel_executor.learning.host_model",
                                     description="Refit a host's contention model from its stored co-runs.")
    parser.add_argument("command", choices=["refit"])
    parser.add_argument("store", help="the profile store's SQLite file")
    parser.add_argument("host", help="the host as host_id() names it")
    parser.add_argument("llc", type=float, help="the LLC size in bytes the fit is relative to (0: unknown)")
    parser.add_argument("--log", help="a file for its warnings, made only when there is one")
    args = parser.parse_args(argv)
    handler = logging.FileHandler(args.log, delay=True) if args.log else logging.StreamHandler()
    logging.basicConfig(level=logging.WARNING, handlers=[handler],
                        format="%(asctime)s host refit %(levelname)s: %(message)s")
    try:
        os.nice(19)
    except OSError:
        pass
    lock_path = f"{args.store}.refit.lock"
    try:
        lock = open(lock_path, "a")
    except OSError as error:  # a folder it may not write: refit all the same (writes are SQLite's to order)
        logger.warning("cannot open the refit lock file %s (%s); refitting without it, so two refits of this "
                       "store may run at once", lock_path, error)
        lock = None
    try:
        if lock is not None:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return 0  # another refit of this store runs, and refits again if this run's co-runs came after it read
        store = HostModelStore(args.store)
        try:
            for _ in range(REFITS_IN_A_ROW):
                if not store.stale(args.host):
                    break
                store.refit(args.host, args.llc or None)
        finally:
            store.close()
    except Exception:  # noqa: BLE001 - its output is the log file alone: a failure must reach it
        logger.exception("the host refit of %s in %s failed; the stored fit stays as it was", args.host, args.store)
        return 1
    finally:
        if lock is not None:
            lock.close()
    return 0


if __name__ == "__main__":
    sys.exit(_refit_main(sys.argv[1:]))
