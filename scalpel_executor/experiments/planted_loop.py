"""The learning loop live under planted contention (:mod:`scalpel_executor.workloads.planted`): a
workflow written as people write it, run again and again on one store through the real
ScalpelExecutor, its detached refit and its run report (``benchmarks/planted_loop.py``, and a
small version in ``tests/experiments/test_planted_loop.py``).

::

    PlantedWorkflow     the kinds in the order a scientist lists them (streams first, then the
                        compute tasks), each task's seconds alone, and the reduce
    planted_run         one run on a peer: a board made for it (removed after), the tasks' dicts,
                        Scalpel's run report, the refit it started waited for
    learning_runs       a first run on an emptied store, then more on it: what each planned with,
                        what its refit chose, its hurting co-run seconds and makespan
    tell_oracle         a store told the planted matrix as per-key terms (oracle_terms) through
                        the table the refit writes: the run planned with the truth, knowing the
                        same run times as the learned run
    hurting_corun_seconds   the summed overlaps of tasks whose planted pair hurts (either way at
                        least HURTING), from the tasks' own stamps
    repetition          the learning runs, then the learned run and the oracle's (on a copy of the
                        trained store told the planted matrix) in alternating order
    summarise           medians over repetitions, the learned run's share of the first's hurting
                        co-run seconds and the gap to the oracle it closed, with bootstrap intervals

**Load does not enter.** A planted task's wall time is its planted slowdown (it sleeps), so the
hurting co-run seconds, the makespans and what the refit learns do not depend on the host's other
work; :func:`planted_host` sets the executor's rule against learning on a busy host aside for
the same reason (it guards real co-runs, whose times the other work would stretch).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import random
import sqlite3
import statistics
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from scalpel_executor.core.batching import Batching
from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.domains import Topology
from scalpel_executor.experiments.harness import ParslSubmitter, fresh_store, parsl_executor, warmed
from scalpel_executor.experiments.live_workflows import wait_for_refit
from scalpel_executor.learning import host_model
from scalpel_executor.learning.host_model import HostInterference, HostModelStore, host_id
from scalpel_executor.learning.keys import profile_key
from scalpel_executor.learning.store import ProfileStore
from scalpel_executor.runtime.driver.executor import ScalpelExecutor
from scalpel_executor.workloads.planted import PLANTED, RETUNED, Board, PlantedMatrix, gather, oracle_terms, planted

#: A planted pair hurts when either member runs at least this much slower beside the other.
HURTING = 1.5
SCALPEL, HTEX = "scalpel", "htex-block"
#: Seconds the executor holds a burst of arrivals for company (its ``Batching`` window; it holds a burst
#: still arriving up to four windows). Parsl's DataFlowKernel took longer than the default's
#: 4 x 5 ms to submit this workflow's 17 tasks on the 2-core development VM (under load, longer
#: than 4 x 50 ms), so the default released the first streams alone, before any other kind had
#: arrived, and the first two started together in every run, the oracle's too: no term learned
#: could keep them apart.
BATCH_WINDOW = 0.1
ORACLE_REASON = "per-key: told the planted matrix (the oracle's terms, oracle_terms)"


@dataclass(frozen=True)
class PlantedWorkflow:
    """A workflow of planted tasks: ``kinds`` (kind, how many) in the order they are submitted,
    then a reduce over all of them, under the planted ``matrix``."""

    name: str
    matrix: PlantedMatrix
    kinds: tuple[tuple[str, int], ...]

    def hurting(self) -> set[frozenset[str]]:
        """The pairs of kinds (a kind with itself: a one-member set) whose planted pair hurts."""
        kinds = [kind for kind, _ in self.kinds]
        return {frozenset((a, b)) for a, b in itertools.combinations_with_replacement(kinds, 2)
                if max(self.matrix.factor(a, [b]), self.matrix.factor(b, [a])) >= HURTING}


#: The first world (tuned on): six streams listed first, then four sensitive tasks and six
#: compute tasks. A plan that knows nothing pairs the streams with each other (2.2x each).
FIRST = PlantedWorkflow("planted", PLANTED, (("stream", 6), ("sensitive", 4), ("compute", 6)))
#: The second, written after tuning on the first: its shuffles hurt the lookups most and not
#: each other; the lookups are listed after the shuffles, the solvers last.
SECOND = PlantedWorkflow("retuned", RETUNED, (("shuffle", 4), ("lookup", 6), ("solver", 6)))
WORKFLOWS = {workflow.name: workflow for workflow in (FIRST, SECOND)}


def hurting_corun_seconds(results: Sequence[Mapping], workflow: PlantedWorkflow) -> float:
    """Summed time two tasks whose planted pair hurts ran at once (pairwise overlaps of their stamps).

    >>> tasks = [{"kind": "stream", "t0": 0.0, "t1": 2.0}, {"kind": "stream", "t0": 1.0, "t1": 3.0},
    ...          {"kind": "compute", "t0": 2.0, "t1": 4.0}]
    >>> hurting_corun_seconds(tasks, FIRST)  # the streams' 1 s; a stream beside a compute task is 1.3x
    1.0
    """
    hurting = workflow.hurting()
    return sum(max(0.0, min(a["t1"], b["t1"]) - max(a["t0"], b["t0"]))
               for a, b in itertools.combinations(results, 2) if frozenset((a["kind"], b["kind"])) in hurting)


def makespan(results: Sequence[Mapping]) -> float:
    return max(r["t1"] for r in results) - min(r["t0"] for r in results)


@contextlib.contextmanager
def planted_host() -> Iterator[None]:
    """Runs whose co-runs are learned however busy the host (module docstring: their times are planted)."""
    saved = host_model.BUSY_OTHERS, host_model.BUSY_LOAD
    host_model.BUSY_OTHERS = host_model.BUSY_LOAD = math.inf
    try:
        yield
    finally:
        host_model.BUSY_OTHERS, host_model.BUSY_LOAD = saved


def submit_workflow(submitter, board: str, workflow: PlantedWorkflow, seconds: float) -> list[dict]:
    """The workflow on ``submitter``, as a scientist writes it: each kind's tasks in the order
    listed, then the reduce over them all; the tasks' dicts (the reduce's last)."""
    task, reduce = submitter.app(planted), submitter.app(gather)
    futures = [task(board, kind, seconds) for kind, count in workflow.kinds for _ in range(count)]
    reduced = reduce(*futures)
    return [f.result(timeout=600) for f in futures] + [reduced.result(timeout=600)]


def start_executor(peer: str, topology: Topology, store: str, run_dir: str, batch_window: float) -> ParslSubmitter:
    """The started, warmed-up submitter of ``peer`` (:data:`SCALPEL`, on a store, with ``batch_window``;
    or HTEX) on every core of ``topology``."""
    cores = len(topology.cpus)
    executor = (ScalpelExecutor(label="scalpel", profiles=store, topology=topology,
                                batching=Batching(window=batch_window))
                if peer == SCALPEL else parsl_executor(peer, cores, topology, store))
    return warmed(ParslSubmitter(executor, run_dir), cores)


def planted_run(peer: str, workflow: PlantedWorkflow, seconds: float, topology: Topology, store: str,
                folder: Path, *, refit_timeout: float = 120.0, batch_window: float = BATCH_WINDOW) -> dict:
    """One run of ``workflow`` under ``peer`` (its own board in ``folder``, removed after): the
    tasks' dicts (the reduce left out of the figures), makespan, hurting co-run seconds; for
    Scalpel, what it planned with, and the choice its refit stored once that finished."""
    folder.mkdir(parents=True, exist_ok=True)
    board_path = folder / "board"
    with Board.create(board_path, [d.cpus for d in topology.domains], workflow.matrix):
        submitter = start_executor(peer, topology, store, str(folder / "runinfo"), batch_window)
        try:
            results = submit_workflow(submitter, str(board_path), workflow, seconds)
            report = submitter.executor.run_report() if peer == SCALPEL else None
        finally:
            submitter.close()
    tasks = [r for r in results if r["kind"] != "gather"]
    row = {"peer": peer, "makespan": makespan(results), "hurting_corun_seconds": hurting_corun_seconds(tasks, workflow),
           "tasks": tasks}
    if report is not None:
        interference = (report.get("contention_model") or {}).get("interference") or {}
        row.update(planned_with=interference.get("planned_with"), plan_reason=interference.get("reason"),
                   told_tasks=interference.get("tasks"))
        row["refit_seconds"] = wait_for_refit(store, topology, refit_timeout)
        models = HostModelStore(store)
        try:
            chosen = models.interference(host_id(topology))
        finally:
            models.close()
        row["refit_choice"] = None if chosen is None else {"per_key": chosen.per_key, "reason": chosen.reason,
                                                           "terms": {k: list(t) for k, t in chosen.terms.items()}}
    return row


def task_key(workflow_kind: str, seconds: float) -> str:
    """The profile key of a planted task of ``workflow_kind`` (its board's path is a ``str`` in it)."""
    return profile_key(planted, ("/run/board", workflow_kind, seconds))


def tell_oracle(store: str, topology: Topology, workflow: PlantedWorkflow, seconds: float) -> None:
    """Tell ``store`` the planted matrix as each kind's per-key terms, residuals of the footprint
    model the next run plans with (the host's fit where it is planned with, else the default;
    terms of another model are not told) at the footprints the store learned for each kind, and
    each kind's planted ``seconds`` as its solo time: the next run plans with the truth."""
    host, llc = host_id(topology), topology.llc_size
    with ProfileStore(store) as profiles:
        learned = {kind: profiles.get(task_key(kind, seconds)) for kind, _ in workflow.kinds}
    footprints = {kind: profile.footprint for kind, profile in learned.items()
                  if profile is not None and profile.footprint is not None}
    models = HostModelStore(store)
    try:
        fit = models.fitted(host)
        model = fit.model if fit is not None and fit.planned(llc) else ContentionModel()
        terms = oracle_terms(workflow.matrix, llc, model, footprints)
        models.tell(host, HostInterference(True, ORACLE_REASON, model, float(llc),
                                           {task_key(kind, seconds): t for kind, t in terms.items()},
                                           {task_key(kind, seconds): seconds for kind in terms}))
    finally:
        models.close()


def learning_runs(workflow: PlantedWorkflow, seconds: float, topology: Topology, runs: int, folder: Path,
                  *, refit_timeout: float = 120.0, batch_window: float = BATCH_WINDOW) -> list[dict]:
    """``runs`` Scalpel runs of ``workflow`` on one store, emptied before the first, each after the
    refit of the one before; each row numbered (``run``, from 1)."""
    store = fresh_store(folder / "store")
    rows = []
    with planted_host():
        for number in range(1, runs + 1):
            row = planted_run(SCALPEL, workflow, seconds, topology, store, folder / f"run-{number}",
                              refit_timeout=refit_timeout, batch_window=batch_window)
            rows.append({"run": number, **row})
    return rows


def scratch() -> tempfile.TemporaryDirectory:
    """A temporary folder for a loop's stores, boards and run directories."""
    return tempfile.TemporaryDirectory(prefix="scalpel-planted-")


def repetition(workflow: PlantedWorkflow, seconds: float, topology: Topology, train: int, folder: Path,
               number: int) -> dict:
    """One repetition: on an emptied store a first run and ``train`` more, each after the refit of
    the one before; then the learned run on that store and the oracle's on a copy of it told the
    planted matrix (:func:`tell_oracle`), so the two differ only in the terms they plan with (both
    know the same run times); the oracle first in odd repetitions. The host's load averages
    before and after."""
    store = fresh_store(folder / "store")
    load_before = os.getloadavg()[0]
    with planted_host():
        runs = [{"run": n, **planted_run(SCALPEL, workflow, seconds, topology, store, folder / f"run-{n}")}
                for n in range(1, train + 2)]
        told_store = fresh_store(folder / "oracle-store")
        copy_store(store, told_store)
        tell_oracle(told_store, topology, workflow, seconds)

        def learned() -> dict:
            return {"run": train + 2, **planted_run(SCALPEL, workflow, seconds, topology, store,
                                                    folder / f"run-{train + 2}")}

        def oracle() -> dict:
            return planted_run(SCALPEL, workflow, seconds, topology, told_store, folder / "oracle")

        if number % 2:
            told = oracle()
            runs.append(learned())
        else:
            runs.append(learned())
            told = oracle()
    return {"repeat": number, "runs": runs, "oracle": told, "load": [load_before, os.getloadavg()[0]]}


def copy_store(source: str, target: str) -> None:
    """A consistent copy of the profile store ``source`` (profiles, host co-runs, fits) at ``target``."""
    with contextlib.closing(sqlite3.connect(source)) as src, contextlib.closing(sqlite3.connect(target)) as dst:
        src.backup(dst)


def gap_closed(first: float, learned: float, oracle: float) -> float | None:
    """The share of the first run's gap to the oracle that the learned run closed (None: no gap)."""
    return (first - learned) / (first - oracle) if first > oracle else None


def summarise(repetitions: Sequence[Mapping], *, resamples: int = 10_000, seed: int = 0) -> dict:
    """Medians over repetitions of the first, learned and oracle runs' makespans and hurting co-run
    seconds, the learned run's share of the first's hurting co-run seconds and the gap it closed
    (each on the medians, with a 95% percentile bootstrap interval resampling repetitions whole),
    the run at which the refit first chose per-key terms, and the load."""
    def figure(name: str, pick) -> list[float]:
        return [pick(r)[name] for r in repetitions]

    first = {name: figure(name, lambda r: r["runs"][0]) for name in ("makespan", "hurting_corun_seconds")}
    learned = {name: figure(name, lambda r: r["runs"][-1]) for name in ("makespan", "hurting_corun_seconds")}
    oracle = {name: figure(name, lambda r: r["oracle"]) for name in ("makespan", "hurting_corun_seconds")}

    def shares(indices: Sequence[int]) -> tuple[float | None, float | None]:
        m = {side: {k: statistics.median(v[i] for i in indices) for k, v in values.items()}
             for side, values in (("first", first), ("learned", learned), ("oracle", oracle))}
        hurting = (m["learned"]["hurting_corun_seconds"] / m["first"]["hurting_corun_seconds"]
                   if m["first"]["hurting_corun_seconds"] > 0 else None)
        return hurting, gap_closed(m["first"]["makespan"], m["learned"]["makespan"], m["oracle"]["makespan"])

    n = len(repetitions)
    point = shares(range(n))
    rng = random.Random(seed)
    draws = [shares([rng.randrange(n) for _ in range(n)]) for _ in range(resamples)]

    def interval(k: int) -> list[float] | None:
        values = sorted(d[k] for d in draws if d[k] is not None)
        if not values:
            return None
        return [values[int(0.025 * (len(values) - 1))], values[math.ceil(0.975 * (len(values) - 1))]]

    accepted = [next((r["run"] for r in rep["runs"] if ((r.get("refit_choice") or {}).get("reason") or "")
                      .startswith("per-key model")), None) for rep in repetitions]  # exploring is not learning
    return {
        "repeats": n,
        "makespan": {side: statistics.median(v["makespan"]) for side, v in
                     (("first", first), ("learned", learned), ("oracle", oracle))},
        "hurting_corun_seconds": {side: statistics.median(v["hurting_corun_seconds"]) for side, v in
                                  (("first", first), ("learned", learned), ("oracle", oracle))},
        "learned_hurting_share": point[0], "learned_hurting_share_interval": interval(0),
        "gap_closed": point[1], "gap_closed_interval": interval(1),
        "per_key_first_chosen_after_run": accepted,
        "learned_planned_with": [rep["runs"][-1].get("planned_with") for rep in repetitions],
        "load": [min(min(r["load"]) for r in repetitions), max(max(r["load"]) for r in repetitions)],
    }
