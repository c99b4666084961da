"""Planning with learned per-key interference, in simulation: footprint-only, learned and true residuals.

::

    machine (core.machines) + task pool (study_machines) ──plant──> keys with true (s, p) residuals
        │                                                           (streams, sensitive, asymmetric)
        ├─ earlier runs: other batches (or the workflow at other seeds), planned footprint-only,
        │     simulated with the truth ──> co-run records (segments, co-runner keys), noise exp(N(0, 0.2))
        │     ──> core.interference_fit.choose_interference (time-ordered hold-out) ──> learned terms or none
        └─ the scored batch, three times, the simulator always running the truth:
              footprint      told nothing (today's policy)
              learned        told what the acceptance test kept (nothing where it refused)
              truth          told the true residuals

``benchmarks/interference_study.py`` is the command line; docs/results/interference.md has its figures.

**The planted machines.** Every key of the pool (a kernel of the policy study's pool, or a
workflow's task type) is, with the shares of :data:`SHARES`, one of: a *stream* (its footprint
cut to 1/64 of the LLC, so the footprint model calls it harmless; pressure U(0.2, 0.4), sensitivity
U(0, 0.1)), *sensitive* (sensitivity U(0.2, 0.3)), *asymmetric* (an aggressor that suffers less
than its footprint says: sensitivity U(-0.3, -0.15), pressure U(0.2, 0.35)) or plain (no
residual). On the *footprint-truth* machines no key has a residual: today's machines, where the
learned model must change nothing.

**The learning.** The co-run records are the newest :data:`~scalpel_executor.learning.host_model.MAX_CORUNS`
(what a host keeps) of as many earlier runs as it takes to record that many, at most
:data:`HISTORY` (never the scored batch), planned as today's policy plans them:
each task's life cut where its co-runners change (``contention_fit.co_runner_segments``), its
slowdown its wall time over its own solo time times exp(N(0, :data:`NOISE`)) (a live host divides
by its key's mean solo time instead). ``at`` orders them by run, then end time.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Hashable, Sequence

from scalpel_executor.core.batching import Batching
from scalpel_executor.core.contention_fit import co_runner_segments
from scalpel_executor.core.interference import Terms
from scalpel_executor.core.interference_fit import InterferenceChoice, KeyedCoRun, choose_interference
from scalpel_executor.core.machines import MACHINES
from scalpel_executor.core.simulate import SimResult, SimTask, simulate
from scalpel_executor.experiments.simulated_policies import batch_for, gmean
from scalpel_executor.experiments.study_machines import machine_setup
from scalpel_executor.experiments.workflows import task_type, workflow
from scalpel_executor.learning.host_model import MAX_CORUNS

__all__ = ["SHARES", "HISTORY", "NOISE", "BATCH_FACTOR", "PLANNINGS", "plant", "observed_coruns", "run_instance",
           "summarise"]

#: Shares of the keys planted as streams, sensitive and asymmetric; the rest have no residual.
SHARES = {"stream": 0.2, "sensitive": 0.2, "asymmetric": 0.15}
HISTORY = 12  # earlier runs at most whose co-runs teach the residuals: until MAX_CORUNS are recorded
NOISE = 0.2  # observation noise, log slowdown
#: Batch sizes per machine: tasks per core (the paper machine's pool is 23 kernels: 3 per core).
BATCH_FACTOR = {"paper": 3, "wide": 5, "epyc": 4, "xeon16": 5}
PLANNINGS = ("footprint", "learned", "truth")
STREAM_FOOTPRINT = 1 / 64  # of the LLC: what a stream's footprint is cut to


def plant(keys: Sequence[Hashable], seed: int) -> dict[Hashable, tuple[str, Terms | None]]:
    """Each key's class and true (sensitivity, pressure), drawn with :data:`SHARES`; seeded."""
    rng = random.Random(f"plant/{seed}")
    out: dict[Hashable, tuple[str, Terms | None]] = {}
    for key in sorted(keys, key=repr):
        draw = rng.random()
        if draw < SHARES["stream"]:
            out[key] = ("stream", (rng.uniform(0.0, 0.1), rng.uniform(0.2, 0.4)))
        elif draw < SHARES["stream"] + SHARES["sensitive"]:
            out[key] = ("sensitive", (rng.uniform(0.2, 0.3), 0.0))
        elif draw < SHARES["stream"] + SHARES["sensitive"] + SHARES["asymmetric"]:
            out[key] = ("asymmetric", (rng.uniform(-0.3, -0.15), rng.uniform(0.2, 0.35)))
        else:
            out[key] = ("plain", None)
    return out


def _with_truth(tasks: Sequence[SimTask], key_of: Callable[[str], Hashable],
                planted: dict[Hashable, tuple[str, Terms | None]], llc: float) -> list[SimTask]:
    out = []
    for task in tasks:
        kind, terms = planted.get(key_of(task.name), ("plain", None))
        footprint = min(task.footprint, STREAM_FOOTPRINT * llc) if kind == "stream" else task.footprint
        # its key, as a live task's profile key: the scheduler judges told terms by key (admission.TermsLedger)
        out.append(dataclasses.replace(task, footprint=footprint, interference=terms, told_interference=None,
                                       key=str(key_of(task.name))))
    return out


def observed_coruns(tasks: Sequence[SimTask], result: SimResult, key_of: Callable[[str], Hashable],
                    rng: random.Random, run: int) -> list[KeyedCoRun]:
    """The co-runs of one simulated run as a host records them: per task that ran beside others,
    its segments with its co-runners' keys and footprints, its observed slowdown with noise."""
    footprint = {t.name: t.footprint for t in tasks}
    records = result.records
    segments = co_runner_segments([(r.domain, r.start, r.end) for r in records])
    out = []
    for record, life in zip(records, segments):
        if not any(beside for _, beside in life) or record.solo_time <= 0:
            continue
        named = tuple((seconds, tuple((key_of(records[j].name), footprint[records[j].name]) for j in beside))
                      for seconds, beside in life)
        out.append(KeyedCoRun(key_of(record.name), footprint[record.name], named,
                              record.slowdown * math.exp(rng.gauss(0.0, NOISE)), at=run * 1e9 + record.end))
    return out


def _workload(machine: str, workload: str, seed: int, run: int) -> tuple[list[SimTask], Callable[[str], Hashable],
                                                                           Batching | None]:
    """Run ``run`` of a workload (0: the scored one; others: the earlier runs that teach): its
    tasks, the profile key of a task's name, the batch rule it arrives by."""
    if workload == "batch":
        _, _, pool, _ = machine_setup(machine)
        cores = MACHINES[machine].topology().total_cores
        return batch_for(pool, BATCH_FACTOR[machine] * cores, 1000 + run if run else 0, seed), str, None
    tasks = workflow(workload, seed=seed + 1000 * run)
    return tasks, {t.name: task_type(t) for t in tasks}.__getitem__, Batching()


def run_instance(machine: str, workload: str, seed: int, planted: bool) -> dict:
    """One scored run of ``workload`` ("batch" or a workflow shape) on ``machine``, planned three
    ways; the earlier runs that teach are simulated here too."""
    preset = MACHINES[machine]
    topology = preset.topology()
    domains, llc, model = [list(d.cpus) for d in topology.domains], float(topology.llc_size), preset.model
    scored, key_of, batching = _workload(machine, workload, seed, 0)
    truth = plant({key_of(t.name) for t in scored}, seed) if planted else {}
    rng = random.Random(f"observe/{machine}/{workload}/{seed}/{planted}")
    coruns: list[KeyedCoRun] = []
    for run in range(1, HISTORY + 1):
        if len(coruns) >= MAX_CORUNS:
            break
        earlier, earlier_key, _ = _workload(machine, workload, seed, run)
        earlier = _with_truth(earlier, earlier_key, truth, llc)
        coruns += observed_coruns(earlier, simulate(earlier, domains, llc, "scalpel", model=model, batching=batching),
                                  earlier_key, rng, run)
    coruns = sorted(coruns, key=lambda c: c.at)[-MAX_CORUNS:]
    choice = choose_interference(coruns, model, llc)
    tasks = _with_truth(scored, key_of, truth, llc)
    told = {
        "footprint": tasks,
        "learned": [dataclasses.replace(t, told_interference=choice.model.terms(key_of(t.name))) for t in tasks]
        if choice.per_key else tasks,
        "truth": [dataclasses.replace(t, told_interference=t.interference) for t in tasks],
    }
    makespans = {}
    for planning in PLANNINGS:
        if planning != "footprint" and told[planning] is tasks:
            makespans[planning] = makespans["footprint"]  # told nothing more: today's plan
            continue
        makespans[planning] = simulate(told[planning], domains, llc, "scalpel", model=model,
                                       batching=batching).makespan
    return {"machine": machine, "workload": workload, "seed": seed, "planted": planted, "tasks": len(tasks),
            "earlier_runs": run,
            "classes": {kind: sum(1 for k, _ in truth.values() if k == kind) for kind in (*SHARES, "plain")},
            "makespans": makespans, "coruns": len(coruns), "choice": _choice_row(choice)}


def _choice_row(choice: InterferenceChoice) -> dict:
    row = choice.to_dict()
    row["keys"] = len(choice.model.keys)
    return row


def summarise(rows: Sequence[dict]) -> dict:
    """Per condition and machine: the geometric means of each planning's makespan over the truth's
    (planted) or over today's (footprint truth), the gap learned planning closes, how often the
    acceptance test kept the per-key model."""
    out = {}
    for planted, label in ((True, "planted"), (False, "footprint_truth")):
        of = [r for r in rows if r["planted"] == planted]
        if not of:
            continue
        groups = {"all": of, **{f"{m}/{w}": [r for r in of if r["machine"] == m and r["workload"] == w]
                                for m, w in dict.fromkeys((r["machine"], r["workload"]) for r in of)}}
        cells = {}
        for name, here in groups.items():
            if planted:
                over = {p: gmean([r["makespans"][p] / r["makespans"]["truth"] for r in here]) for p in PLANNINGS}
                gap = over["footprint"] - 1.0
                cells[name] = {"instances": len(here), "over_truth": over,
                               "gap_closed": (over["footprint"] - over["learned"]) / gap if gap > 1e-9 else None,
                               "accepted": sum(r["choice"]["model"] == "per-key" for r in here)}
            else:
                ratios = [r["makespans"]["learned"] / r["makespans"]["footprint"] for r in here]
                cells[name] = {"instances": len(here), "learned_over_today": gmean(ratios),
                               "worst": max(ratios, key=lambda x: abs(x - 1.0)),
                               "accepted": sum(r["choice"]["model"] == "per-key" for r in here)}
        out[label] = cells
    return out
