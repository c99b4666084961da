"""What a local-mode executor plans with from this host's history, and what its run adds to it.

:class:`HostLearning` is held by :class:`~scalpel_executor.runtime.driver.executor.ScalpelExecutor`,
which calls it at four moments; the store is :class:`~scalpel_executor.learning.host_model.HostModelStore`::

    executor.start ───── start(profile store, log dir) ── fitted(host), interference(host) ──> planning_model,
                          (load averages and CPU time sampled)     (stale: spawn_refit)        terms per key
    executor.submit ──── terms(key) ──> Task.interference; told() counts the tasks given terms;
                         planned_runtime(estimate) ──> Task.runtime: a told key's solo time
    executor.shutdown ── learn(records, log dir) ── busy_reason? ── record(host, task_spans) ──> spawn_refit
    run_report ───────── report(records, shut_down) ──> the report's ``contention_model``

Provider mode calls only ``report``: its nodes are other hosts, whose co-runs are not learned here.
A fault reading or storing the host's fit is one warning; a run never fails for what it could learn.
"""

from __future__ import annotations

import logging
import os
from typing import Iterable, Optional, Sequence

from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.domains import Topology
from scalpel_executor.core.interference import Terms
from scalpel_executor.host.cpu_time import CpuSample, other_work_per_core, sample_cpu
from scalpel_executor.learning.estimates import Estimate
from scalpel_executor.learning.host_model import (MIN_OBSERVATIONS, SOLO_SOURCE, HostFit, HostInterference,
                                                  HostModelStore, busy_reason, host_id, model_report, spawn_refit)
from scalpel_executor.learning.store import ProfileStore
from scalpel_executor.runtime.driver.report import TaskRecord, task_spans

logger = logging.getLogger(__name__)

__all__ = ["HostLearning"]


def _load_averages() -> list[float]:
    """The host's 1- and 5-minute load averages, or none where the platform has none."""
    try:
        return list(os.getloadavg()[:2])
    except (OSError, AttributeError):
        return []


class HostLearning:
    """This host's contention fit and per-key interference choice, for one executor's run.

    Parameters
    ----------
    label : str
        The executor's name, in the log lines.
    topology : Topology
        The LLC domains the executor schedules for: what is kept of them is the host's name
        (``host_id``), its LLC size and its CPU count (the executor keeps the topology itself).
    contention_model : ContentionModel
        The model the executor was given, or the default.
    given : bool
        Whether ``contention_model`` was given (then the host's fit is not read).
    local : bool
        Local mode (False: provider mode, whose nodes are other hosts).
    """

    def __init__(self, label: str, topology: Topology, contention_model: ContentionModel, *, given: bool,
                 local: bool):
        self.label = label
        self.host, self.llc, self.host_cpus = host_id(topology), topology.llc_size, len(topology.cpus)
        self.local = local
        # What start() plans with: the given model, else this host's fit once it rests on enough co-runs.
        self.model_source = "given" if given else "default"
        self.planning_model = contention_model
        self.models: HostModelStore | None = None
        self.host_fit: HostFit | None = None  # this host's fit as stored at shutdown, before this run's co-runs
        self.coruns_stored = 0  # this run's co-runs stored at shutdown for the host's fit
        self.refit_spawned = False  # a detached refit was started (at start: the fit was stale; at shutdown)
        self.host_loads: list[float] = []  # the host's load averages sampled over the run (busy_reason)
        self.cpu_at_start: CpuSample | None = None  # the host's and this tree's CPU time at start (busy_reason)
        self.not_learned: str | None = None  # why this run's co-runs were not added to the host's fit
        self.preview: tuple[int, HostFit | None] | None = None  # (records, fit) for the report before shutdown
        # Each profile key's Terms, told to its tasks at submit (Task.interference): the
        # host's stored per-key choice, read once by start(); empty while planning footprint-only.
        self.interference: dict[str, Terms] = {}
        self.solo: dict[str, float] = {}  # seconds alone of keys with terms, as the choice's fit implies them
        self.interference_reason: str | None = None  # the choice's sentence (run report); None: start() read none
        self.interference_tasks = 0  # tasks submitted with terms

    def start(self, store: Optional[ProfileStore], log_dir: Optional[str]) -> None:
        """Read this host's fit and per-key choice once, and plan with them (:meth:`use_fit`,
        :meth:`use_interference`); a store problem leaves the default and footprint-only (the
        fit's store warns once and carries on in memory). A fit older than the co-runs stored (its
        refit died, or still runs) is planned with as it is and refitted in the background
        (:func:`~scalpel_executor.learning.host_model.spawn_refit`)."""
        self.host_loads, self.cpu_at_start = _load_averages(), sample_cpu()
        host = self.host
        try:
            self.models = HostModelStore(store.path if store is not None and store.persistent else None)
            fit = self.models.fitted(host)
            interference = self.models.interference(host)
            if self.models.stale(host):
                self.refit(self.models, host, log_dir)
        except Exception as error:  # noqa: BLE001 - never fail a run for what it could learn
            logger.warning("executor %r plans with the default contention model: the host's fit could not be "
                           "read (%s)", self.label, error)
            self.interference_reason = f"footprint-only: the host's stored choice could not be read ({error})"
            return
        self.use_fit(fit)
        self.use_interference(interference)

    def use_fit(self, fit: HostFit | None) -> None:
        """Plan with the host's fit when it rests on :data:`MIN_OBSERVATIONS` co-runs and beats
        the default beyond chance (:attr:`HostFit.beats_default`); the log says which, and why."""
        if fit is not None and fit.observations >= MIN_OBSERVATIONS and fit.llc == self.llc \
                and not fit.beats_default:
            logger.info("executor %r plans with the default contention model: the host's fit (rho %.3f, sigma %.3f "
                        "from %d co-runs, rms error %.3f) explains them about as well as the default (%s)",
                        self.label, fit.model.capacity_fraction, fit.model.sensitivity, fit.observations,
                        fit.rms_error, "not recorded" if fit.default_error is None else f"{fit.default_error:.3f}")
        elif fit is not None and fit.observations >= MIN_OBSERVATIONS and fit.llc == self.llc:
            self.planning_model, self.model_source = fit.model, "fitted on this host"
            logger.info("executor %r plans with the contention model fitted on this host: rho %.3f, sigma %.3f "
                        "from %d co-runs", self.label, fit.model.capacity_fraction, fit.model.sensitivity,
                        fit.observations)

    def use_interference(self, stored: HostInterference | None) -> None:
        """Tell tasks their key's per-key terms when the host's last refit chose them, around the
        footprint model this run plans with (they are its residuals); else plan footprint-only.
        Either way the choice's sentence goes to the run report, once."""
        if stored is None:
            self.interference_reason = ("footprint-only: no per-key choice is stored for this host yet (the refit "
                                        "after a run that stored co-runs makes one)")
        elif stored.footprint_model != self.planning_model or stored.llc != self.llc:
            self.interference_reason = ("footprint-only: the stored per-key terms are residuals of another "
                                        "footprint model than this run plans with; the next refit fits them again")
        else:
            self.interference_reason = stored.reason
            self.interference = dict(stored.terms) if stored.per_key else {}
            self.solo = {key: seconds for key, seconds in stored.solo.items() if key in self.interference}
        logger.info("executor %r plans with %s: %s", self.label,
                    "per-key interference" if self.interference else "the footprint model alone",
                    self.interference_reason)

    def terms(self, key: str) -> Terms | None:
        """The per-key terms a task of profile key ``key`` is told (None: none)."""
        return self.interference.get(key)

    def planned_runtime(self, estimate: Estimate) -> tuple[float, str]:
        """The run time a task is planned with, and its source: for a key told terms, its solo time
        as the per-key fit implies it (:attr:`HostInterference.solo`, source :data:`SOLO_SOURCE`),
        since its terms slow a solo time and the mean of its walls already holds what co-runners
        cost it; else, or where the user hinted a run time, the estimate's."""
        solo = self.solo.get(estimate.key)
        if solo is None or estimate.runtime_source == "hint":
            return estimate.runtime, estimate.runtime_source
        return solo, SOLO_SOURCE

    def told(self) -> None:
        """Count a task submitted with terms (the report's ``interference.tasks``)."""
        self.interference_tasks += 1

    def refit(self, models: HostModelStore, host: str, log_dir: Optional[str]) -> None:
        """Refit the host's model in a detached process (persistent stores only: an in-memory one
        ends with this process); its warnings go to ``<log_dir>/host-refit.log``."""
        path = models.path if models.problem is None else None
        if path is None:
            return
        spawn_refit(path, host, self.llc,
                    None if log_dir is None else os.path.join(log_dir, "host-refit.log"))
        self.refit_spawned = True

    def learn(self, records: Iterable[TaskRecord], log_dir: Optional[str]) -> None:
        """Store this run's co-runs for the host's fit, in one transaction, and leave the refit to a
        detached process (shutdown: milliseconds, where a refit over a full history takes seconds);
        a fault is one warning. ``host_fit`` is the fit as stored before this run's co-runs."""
        store, self.models = self.models, None
        if store is None:
            return
        host = self.host
        host_cores = os.cpu_count() or self.host_cpus  # the host's time and load are all its cores'
        others = None if self.cpu_at_start is None else other_work_per_core(self.cpu_at_start, sample_cpu(),
                                                                            host_cores)
        self.not_learned = busy_reason(self.host_loads + _load_averages(), host_cores, others)
        try:
            self.host_fit = store.fitted(host)
            if self.not_learned is not None:  # the run's closing line says so (run_summary)
                return
            self.coruns_stored = store.record(host, task_spans(records))
            if self.coruns_stored:
                self.refit(store, host, log_dir)
        except Exception as error:  # noqa: BLE001 - never fail a shutdown for what it could learn
            logger.warning("executor %r could not add this run's co-runs to the host's contention fit: %s",
                           self.label, error)
        finally:
            store.close()

    def report(self, records: Sequence[TaskRecord], shut_down: bool) -> dict:
        """The run report's ``contention_model`` (see ``ScalpelExecutor.run_report``): before
        shutdown a preview of the host's fit with ``records``' co-runs, once per number of records."""
        fit = self.host_fit
        if not shut_down and self.models is not None:
            if self.preview is None or self.preview[0] != len(records):
                try:
                    preview = self.models.preview(self.host, self.llc,
                                                  task_spans(records))
                except Exception as error:  # noqa: BLE001 - the report goes on without it
                    logger.warning("the host's contention fit could not be previewed: %s", error)
                    preview = None
                self.preview = (len(records), preview)
            fit = self.preview[1]
        footprints = [float(r.stats.get("footprint") or r.stats.get("scheduled_footprint") or r.footprint)
                      for r in records if r.started is not None]
        report = model_report(self.planning_model, self.model_source, self.host,
                              self.llc, fit, footprints, self.not_learned)
        report.update(coruns_stored=self.coruns_stored, refit_in_background=self.refit_spawned,
                      interference=self.interference_report())
        return report

    def interference_report(self) -> dict:
        """The run report's ``contention_model.interference`` (see ``ScalpelExecutor.run_report``)."""
        reason = self.interference_reason  # None: start() read no choice, and this says why
        if reason is None and self.model_source == "given":
            reason = "footprint-only: the contention model was given, and per-key terms are residuals of the host's own"
        elif reason is None and not self.local:
            reason = "footprint-only: provider mode's nodes are other hosts, whose co-runs are not learned here"
        elif reason is None:
            reason = "footprint-only: the executor has not started"
        return {"planned_with": "per-key interference" if self.interference else "footprint", "reason": reason,
                "keys": len(self.interference), "tasks": self.interference_tasks}
