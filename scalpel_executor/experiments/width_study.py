"""Malleable tasks' widths in simulation: the default width rule against fixed widths, the best
fixed width chosen in hindsight, and equipartitioning (``benchmarks/width_study.py``).

::

    python benchmarks/width_study.py --seeds 0,1                 # the seeds the rule was tuned on
    python benchmarks/width_study.py --seeds 100,101,102 --jobs 2  # seeds never looked at while tuning
    python benchmarks/width_study.py --report docs/data/width-study.json
    python benchmarks/width_study.py --seeds 0,1 --reuse docs/data/width-study-tuning.json  # after a rule change
    python benchmarks/width_study.py --seeds 100,101,102 --known 5   # and the rule told the true speed-ups
    python benchmarks/width_study.py --explain montage/paper/600     # one instance, key by key

``--reuse`` copies the makespans of the contenders no width rule of ``scalpel`` reaches (every
task fixed at 1, 2 or the domain's cores, and equipartitioning: :data:`UNTOUCHED`) from an
earlier record of the same instances, and simulates the rest; each row names what it copied.

An instance is a workload on a machine of :data:`scalpel_executor.core.machines.MACHINES` (``paper``,
``wide``, ``epyc``, ``xeon16``), every task malleable from one core to its whole LLC domain:

* a WfChef workflow (:data:`~scalpel_executor.experiments.workflows.STUDY_SHAPES`, drawn with the
  seed), each task type one profile key with its own serial fraction, released as its parents
  end through the live pool's batch rule, each task told its tail on the DAG
  (:func:`~scalpel_executor.core.simulate.graph_tails`): the chain at its tasks' estimates, which
  orders them, and, for the width rule, the chain with its malleable tasks at their widest at the
  serial fractions the rule starts the run with (a first run's: no gain, so at their narrowest);
* a batch of malleable kernels arriving at once, :data:`BATCH_PER_CORE` tasks per core of the
  machine, :data:`KERNELS` kernel types (keys) each with a serial fraction, solo times on one core
  2·exp(N(0, 0.8)) s, footprints of Table II's range.

Serial fractions are drawn per key, log-uniform on :data:`SERIAL_RANGE` (0.02 to 0.5: BLAS
products to stencils with much memory traffic). Contenders, all under the default policy
``scalpel``: every task fixed at 1 core, at 2, at its whole domain (each a plain task of that
many cores, its solo time Amdahl's there); the best of those three per instance (chosen in
hindsight); the width rules of :data:`~scalpel_executor.core.widths.RULES`: ``scalpel`` (the
default), ``scalpel-any`` (the same on any width, not topology-shaped), ``equipartition`` (plain)
and ``equipartition-shaped``, each on a *first run* (nothing learned); and ``scalpel`` *learned*,
starting from what it learned on the same workload drawn with seed + 1000 (other tasks of the
same keys: what an earlier run of the workflow leaves in the profile store). With ``--history K``,
also ``scalpel`` *after k runs* for k = 2 to K: learned over k earlier draws run one after another
(seed + 1000, + 2000, ...), each from what the one before left, as a profile store is once the
workflow ran k times (the learned condition is k = 1). With ``--known N``,
also ``scalpel`` *known*: the rule told each key's true serial fraction as N readings before the
run (what it would do with nothing left to learn; shrunk toward no gain as N readings are).

Printed, per condition: the geometric mean over instances of each fixed width's makespan over the
rule's (> 1: the rule ends first), the geometric mean and the minimum of the hindsight-best fixed
width's over the rule's, and the topology-shaped against the any-width rules; with the goals:
≥ 1.10 against every fixed width, never below 0.98 against the hindsight best, shaped no worse
than plain. Written: one JSON record (``--out``).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import math
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from scalpel_executor.core.batching import Batching
from scalpel_executor.core.machines import MACHINES
from scalpel_executor.core.scheduler import Scheduler
from scalpel_executor.core.simulate import SimTask, graph_tails, simulate
from scalpel_executor.core.widths import Widths
from scalpel_executor.experiments.records import write_and_report
from scalpel_executor.experiments.simulated_policies import gmean
from scalpel_executor.experiments.tables import format_table
from scalpel_executor.experiments.workflow_studies import run_instances
from scalpel_executor.experiments.workflows import STUDY_SHAPES, task_type, workflow

MiB = 2**20
SERIAL_RANGE = (0.02, 0.5)
KERNELS = 6
BATCH_PER_CORE = (0.5, 2, 6)
FOOTPRINTS_MIB = (0.5, 2, 6, 12, 20, 28, 40)
LEARN_SEED = 1000  # the learned condition learns on the workload drawn with seed + this
FIXED = ("fixed-1", "fixed-2", "fixed-domain")
CONTENDERS = (*FIXED, "scalpel/first", "scalpel/learned", "scalpel-any/first", "equipartition", "equipartition-shaped")
GOAL_FIXED, GOAL_HINDSIGHT = 1.10, 0.98
CONDITIONS = {"first": "first run", "learned": "learned", "known": "told the true speed-ups (--known)",
              "unknown": "first run, run times learned in the run (--unknown-runtimes)"}
#: The run time a first run's executor guesses for a key never seen (``ScalpelExecutor(default_runtime=)``'s default).
PRIOR_RUNTIME = 1.0
#: Contenders the ``scalpel`` width rule does not reach (plain tasks of fixed cores, equipartitioning):
#: ``--reuse`` copies their makespans from an earlier record of the same instances.
UNTOUCHED = (*FIXED, *(f"{f}/unknown" for f in FIXED), "equipartition", "equipartition-shaped")
WORKLOADS = (*STUDY_SHAPES, *(f"batch-{f:g}" for f in BATCH_PER_CORE))


def serial_fraction(seed: int, workload: str, key: str) -> float:
    """Key ``key``'s serial fraction in ``workload`` drawn with ``seed``: log-uniform on SERIAL_RANGE."""
    low, high = map(math.log, SERIAL_RANGE)
    return math.exp(random.Random(f"{workload}/{seed}/{key}").uniform(low, high))


def workload_tasks(workload: str, seed: int, cores: int, domain: int, keys_seed: int | None = None) -> list[SimTask]:
    """The malleable tasks of ``workload`` drawn with ``seed`` for a machine of ``cores`` cores in
    domains of ``domain``; every task from 1 core to ``domain``, tails told on the DAG. Its keys'
    serial fractions (and a batch's kernels) are drawn with ``keys_seed`` (default ``seed``): an
    earlier run of the same workflow draws other tasks of the same keys."""
    keys_seed = seed if keys_seed is None else keys_seed
    if workload.startswith("batch-"):
        kinds_rng, rng = random.Random(f"{workload}/{keys_seed}"), random.Random(f"{workload}/{seed}/tasks")
        kinds = [(f"kernel{k}", kinds_rng.choice(FOOTPRINTS_MIB) * MiB) for k in range(KERNELS)]
        tasks = []
        for i in range(max(1, round(float(workload.split("-", 1)[1]) * cores))):
            key, footprint = rng.choice(kinds)
            tasks.append(SimTask(f"{key}_{i}", 2.0 * rng.lognormvariate(0, 0.8), footprint, key=key))
    else:
        tasks = [dataclasses.replace(t, key=task_type(t)) for t in workflow(workload, seed=seed)]
    tasks = [dataclasses.replace(t, max_cores=domain, serial_fraction=serial_fraction(keys_seed, workload, t.key))
             for t in tasks]
    return _with_tails(tasks)


def fixed_width(tasks: Sequence[SimTask], width: int) -> list[SimTask]:
    """Every task as a plain task of ``width`` cores (its solo time Amdahl's there)."""
    return _with_tails([dataclasses.replace(t, solo_time=t.solo_at(width), cores=width, max_cores=None)
                        for t in tasks])


def _with_tails(tasks: list[SimTask], rule: Widths | None = None, domain: int | None = None) -> list[SimTask]:
    """``tasks`` told their tails (``tail``: the chain as its tasks are estimated, which orders
    them); with ``rule``, also the chain with its malleable tasks at their widest (up to ``domain``
    cores) at the serial fractions ``rule`` knows now (``wide_tail``, which the width rule weighs),
    as the executor tells them."""
    if not any(t.parents for t in tasks):
        return tasks
    tails = graph_tails(tasks)
    if rule is None:
        return [dataclasses.replace(t, tail=tail) for t, tail in zip(tasks, tails)]
    wide = graph_tails(tasks, serial_fraction=rule.model.serial_fraction, domain_cores=domain)
    return [dataclasses.replace(t, tail=tail, wide_tail=at_widest) for t, tail, at_widest in zip(tasks, tails, wide)]


def _instance(workload: str, seed: int, name: str):
    """``workload`` drawn with ``seed`` on machine ``name``: a function simulating tasks under the
    default policy (and a width rule) there, its tasks, the earlier draw the learned condition learns
    on, and its domain's cores."""
    machine = MACHINES[name]
    topology = machine.topology()
    domains = [list(d.cpus) for d in topology.domains]
    llc, domain = float(topology.llc_size), len(domains[0])
    batching = None if workload.startswith("batch-") else Batching()

    def run(tasks: list[SimTask], rule: Widths | None = None, prior: float | None = None):
        scheduler = Scheduler(domains, "scalpel", llc=llc, model=machine.model, width_rule=rule)
        return simulate(tasks, domains, llc, model=machine.model, batching=batching, scheduler=scheduler, prior=prior)

    tasks = workload_tasks(workload, seed, topology.total_cores, domain)
    return run, tasks, _earlier(workload, seed, name), domain


def _earlier(workload: str, seed: int, name: str, draw: int = 1) -> list[SimTask]:
    """The ``draw``-th earlier run of ``workload`` drawn with ``seed`` on machine ``name``: the same
    keys, other tasks (drawn with seed + draw · :data:`LEARN_SEED`)."""
    topology = MACHINES[name].topology()
    domain = len(topology.domains[0].cpus)
    return workload_tasks(workload, seed + draw * LEARN_SEED, topology.total_cores, domain, keys_seed=seed)


def _told(tasks: Sequence[SimTask], known: int) -> Widths:
    """The default rule told each key's true serial fraction as ``known`` readings."""
    told = Widths("scalpel")
    for key, serial in {task.key: task.serial_fraction for task in tasks}.items():
        told.model.seed(key, serial, known)
    return told


def run_instance(workload: str, seed: int, machines: Sequence[str], reused: dict | None = None,
                 known: int = 0, history: int = 0, unknown: bool = False) -> list[dict]:
    """Every contender on ``workload`` drawn with ``seed``, on each machine; those of :data:`UNTOUCHED`
    found in ``reused`` (``(workload, machine, seed)`` -> makespans, from an earlier record) are
    copied, not simulated again. ``known``: also ``scalpel/known``, the rule seeded with each key's
    true serial fraction as that many readings. ``history``: also ``scalpel/after-K`` for K = 2 to
    ``history``, the rule after K earlier draws (:func:`_earlier`), each run on what the one before left.
    ``unknown``: also ``scalpel/unknown``, a first run told no run time either: the executor's
    guess (:data:`PRIOR_RUNTIME`) until a task of the key ends (``simulate``'s ``prior``)."""
    rows = []
    for name in machines:
        simulated, tasks, earlier, domain = _instance(workload, seed, name)

        def run(tasks: list[SimTask], rule: Widths | None = None, prior: float | None = None) -> float:
            return simulated(tasks, rule, prior).makespan

        copied = {k: v for k, v in (reused or {}).get((workload, name, seed), {}).items() if k in UNTOUCHED}
        makespans = {f"fixed-{label}": copied.get(f"fixed-{label}") or run(fixed_width(tasks, width))
                     for label, width in (("1", 1), ("2", min(2, domain)), ("domain", domain))}
        for rule in ("scalpel", "scalpel-any", "equipartition", "equipartition-shaped"):
            label = f"{rule}/first" if rule.startswith("scalpel") else rule
            makespans[label] = copied.get(label) or run(tasks, Widths(rule))
        learned = Widths("scalpel")
        run(earlier, learned)
        for draw in range(1, max(1, history) + 1):
            if draw > 1:
                run(_earlier(workload, seed, name, draw), learned)
            now = copy.deepcopy(learned) if draw < history else learned  # what the store holds after draw runs
            label = "scalpel/learned" if draw == 1 else f"scalpel/after-{draw}"
            makespans[label] = run(_with_tails(tasks, now, domain), now)
        if known:
            told = _told(tasks, known)
            makespans["scalpel/known"] = run(_with_tails(tasks, told, domain), told)
        if unknown:  # the fixed widths told no run time either: the same first run's references
            for label, width in (("1", 1), ("2", min(2, domain)), ("domain", domain)):
                makespans[f"fixed-{label}/unknown"] = (copied.get(f"fixed-{label}/unknown")
                                                       or run(fixed_width(tasks, width), None, PRIOR_RUNTIME))
            makespans["scalpel/unknown"] = run(tasks, Widths("scalpel"), PRIOR_RUNTIME)
        rows.append({"workload": workload, "machine": name, "seed": seed, "tasks": len(tasks),
                     "makespans": makespans, **({"copied": sorted(copied)} if copied else {})})
    return rows


def explain(instance: str, known: int = 50) -> list[str]:
    """Lines saying, for one instance (``WORKLOAD/MACHINE/SEED``), what the rule knew of each key and
    the widths its tasks ran at: per key its tasks, their core-seconds on one core, the true serial
    fraction and what the learned condition started from (its fit and readings); then per condition
    (first run, learned, told the true speed-ups as ``known`` readings), each key's widths and its
    tasks' mean slowdown (their time over their solo time at that width: the cache's share)."""
    workload, name, seed_text = (instance.split("/") + ["", "", ""])[:3]
    if instance.count("/") != 2 or name not in MACHINES or not seed_text.lstrip("-").isdigit():
        raise ValueError(f"--explain expects WORKLOAD/MACHINE/SEED, e.g. montage/paper/600, with a machine of "
                         f"{', '.join(MACHINES)}; got {instance!r}")
    seed = int(seed_text)
    if workload not in WORKLOADS:
        raise ValueError(f"--explain: unknown workload {workload!r}; workloads: {', '.join(WORKLOADS)}")
    run, tasks, earlier, domain = _instance(workload, seed, name)
    learned = Widths("scalpel")
    run(earlier, learned)
    keys = sorted({t.key for t in tasks}, key=lambda k: -sum(t.solo_time for t in tasks if t.key == k))
    true = {t.key: t.serial_fraction for t in tasks}
    told = _told(tasks, known)
    rows = [[key, sum(t.key == key for t in tasks), f"{sum(t.solo_time for t in tasks if t.key == key):.0f}",
             f"{true[key]:.3f}", f"{learned.model.serial_fraction(key):.3f} ({learned.model.readings(key)})"]
            for key in keys]
    lines = format_table(["key", "tasks", "core-s on 1", "serial fraction", "learned from (readings)"], rows,
                         right=range(1, 5))
    key_of = {t.name: t.key for t in tasks}
    for condition, result in (("first", run(tasks, Widths("scalpel"))),
                              ("learned", run(_with_tails(tasks, learned, domain), learned)),
                              ("known", run(_with_tails(tasks, told, domain), told))):
        lines.append(f"\n{CONDITIONS[condition]}: makespan {result.makespan:.1f} s")
        for key in keys:
            mine = [r for r in result.records if key_of.get(r.name) == key]
            widths = ", ".join(f"{count} at {width}" for width, count in sorted(Counter(r.cores for r in mine).items()))
            lines.append(f"  {key}: {widths}; mean slowdown {sum(r.slowdown for r in mine) / len(mine):.2f}")
    return lines


def summarise(rows: list[dict]) -> dict:
    """Per condition (first run, learned, after k earlier runs, known and unknown, where simulated): the goals'
    figures over every instance; the unknown condition's against the fixed widths told no run time either."""
    out = {}
    simulated = rows[0]["makespans"] if rows else {}
    after = sorted((c.split("/", 1)[1] for c in simulated if c.startswith("scalpel/after-")), key=lambda c: int(c[6:]))
    for condition in ("first", "learned", *after, *(["known"] if "scalpel/known" in simulated else []),
                      *(["unknown"] if "scalpel/unknown" in simulated else [])):
        rule = f"scalpel/{condition}"
        named = {f: f"{f}/unknown" if condition == "unknown" else f for f in FIXED}  # the references it is read against

        def over(row: dict, other: str) -> float:
            return row["makespans"][named.get(other, other)] / row["makespans"][rule]

        def best(row: dict) -> float:
            return min(row["makespans"][named[f]] for f in FIXED)

        hindsight = [best(r) / r["makespans"][rule] for r in rows]
        worst = min(range(len(rows)), key=hindsight.__getitem__)
        per_workload = {}
        for workload in dict.fromkeys(r["workload"] for r in rows):
            here = [r for r in rows if r["workload"] == workload]
            per_workload[workload] = {
                **{f: gmean(over(r, f) for r in here) for f in FIXED},
                "hindsight": gmean(best(r) / r["makespans"][rule] for r in here),
                "hindsight_min": min(best(r) / r["makespans"][rule] for r in here),
                "equipartition": gmean(over(r, "equipartition") for r in here),
            }
        fixed = {f: gmean(over(r, f) for r in rows) for f in FIXED}
        shaped = {"scalpel": gmean(r["makespans"]["scalpel-any/first"] / r["makespans"]["scalpel/first"] for r in rows),
                  "equipartition": gmean(r["makespans"]["equipartition"] / r["makespans"]["equipartition-shaped"]
                                         for r in rows)}
        out[condition] = {
            "fixed": fixed, "hindsight": gmean(hindsight), "hindsight_min": hindsight[worst],
            "worst": f"{rows[worst]['workload']}/{rows[worst]['machine']}/seed {rows[worst]['seed']}",
            "below_hindsight_goal": sum(h < GOAL_HINDSIGHT for h in hindsight),
            "equipartition": gmean(over(r, "equipartition") for r in rows),
            "shaped_over_any": shaped, "workloads": per_workload, "instances": len(rows),
            "goals": {"fixed": all(v >= GOAL_FIXED for v in fixed.values()),
                      "hindsight": hindsight[worst] >= GOAL_HINDSIGHT,
                      "shaped": all(v >= 1.0 for v in shaped.values())},
        }
    return out


def condition_label(condition: str) -> str:
    """How a report names ``condition``: ``first``, ``learned``, ``after-K`` or ``known``."""
    if condition.startswith("after-"):
        return f"learned over {condition[6:]} earlier runs (--history)"
    return CONDITIONS.get(condition, condition)


def print_report(record: dict, markdown: bool = True) -> None:
    for condition, summary in record["summary"].items():
        print(f"\n**scalpel widths, {condition_label(condition)}** "
              f"(seeds {', '.join(map(str, record['seeds']))}; {summary['instances']} instances): "
              f"other contender's makespan / the rule's (> 1: the rule ends first), geometric mean "
              f"over the four machines and seeds\n")
        rows = [[workload, *(f"{cell[f]:.3f}" for f in FIXED), f"{cell['hindsight']:.3f} ({cell['hindsight_min']:.3f})",
                 f"{cell['equipartition']:.3f}"] for workload, cell in summary["workloads"].items()]
        rows.append(["**all**", *(f"**{summary['fixed'][f]:.3f}**" for f in FIXED),
                     f"**{summary['hindsight']:.3f}** ({summary['hindsight_min']:.3f})",
                     f"**{summary['equipartition']:.3f}**"])
        print("\n".join(format_table(["workload", *FIXED, "hindsight best (min)", "equipartition"], rows,
                                     right=range(1, 6), markdown=markdown)))
        goals, shaped = summary["goals"], summary["shaped_over_any"]
        print(f"\nGoals: >= {GOAL_FIXED:.2f}x every fixed width on the geometric mean: "
              f"{'met' if goals['fixed'] else 'MISSED'}; never more than 2% behind the hindsight-best fixed width: "
              f"{'met' if goals['hindsight'] else 'MISSED'} (worst {summary['hindsight_min']:.3f}, {summary['worst']}; "
              f"{summary['below_hindsight_goal']} of {summary['instances']} instances below {GOAL_HINDSIGHT}); "
              f"topology-shaped no worse than any width: {'met' if goals['shaped'] else 'MISSED'} "
              f"(scalpel-any / scalpel {shaped['scalpel']:.4f}, equipartition / equipartition-shaped "
              f"{shaped['equipartition']:.4f})")
    print(f"\n{len(record['rows'])} instances in {record['seconds']:.0f} s ({record['jobs']} process"
          f"{'es' if record['jobs'] > 1 else ''}).")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))  # the first paragraph
    parser.add_argument("--seeds", default="0,1", help="comma-separated seeds (default 0,1: the tuning seeds)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help=f"of {', '.join(WORKLOADS)}")
    parser.add_argument("--machines", default=",".join(MACHINES), help=f"of {', '.join(MACHINES)}")
    parser.add_argument("--jobs", type=int, default=1, help="processes simulating at once (default 1)")
    parser.add_argument("--out", default="width-study.json", help="the JSON record (default width-study.json)")
    parser.add_argument("--report", help="print the tables of a record written before, run nothing")
    parser.add_argument("--reuse", help="an earlier record of these instances: copy the makespans of the contenders "
                                        f"the width rule does not reach ({', '.join(UNTOUCHED)}) from it")
    parser.add_argument("--known", type=int, default=0, metavar="N",
                        help="also run the rule told each key's true serial fraction as N readings (default 0: not)")
    parser.add_argument("--history", type=int, default=0, metavar="K",
                        help="also run the rule after K earlier runs of each workload, each learning from what "
                             "the one before left (2 or more; default 0: not; the learned condition is 1)")
    parser.add_argument("--unknown-runtimes", action="store_true",
                        help="also run a first run told no run time either: the executor's guess of "
                             f"{PRIOR_RUNTIME:g} s for a key until one of its tasks ends, as a live first run")
    parser.add_argument("--explain", metavar="WORKLOAD/MACHINE/SEED",
                        help="simulate one instance and print what the rule knew of each key and the widths its "
                             "tasks ran at, first, learned and told (--known N readings, default 50); writes nothing")
    args = parser.parse_args(argv)
    if args.explain:
        try:
            print("\n".join(explain(args.explain, args.known or 50)))
        except ValueError as error:
            parser.error(str(error))
        return 0
    if args.report:
        print_report(json.loads(Path(args.report).read_text()))
        return 0
    seeds, workloads, machines = instances_of(parser, args)
    if args.known < 0:
        parser.error(f"--known must be 0 or more readings, got {args.known}")
    if args.history < 0 or args.history == 1:
        parser.error(f"--history must be 0 (not run) or 2 or more earlier runs (1 is the learned condition), "
                     f"got {args.history}")
    reused = {}
    if args.reuse:
        reused = {(r["workload"], r["machine"], r["seed"]): r["makespans"]
                  for r in json.loads(Path(args.reuse).read_text())["rows"]}
    started = time.perf_counter()
    units = [(workload, seed, 0.0) for workload in workloads for seed in seeds]
    rows = run_instances(_unit, units, (machines, reused, args.known, args.history, args.unknown_runtimes), args.jobs)
    rows.sort(key=lambda r: (workloads.index(r["workload"]), machines.index(r["machine"]), r["seed"]))
    record = {"format": "scalpel-width-study/1", "command": " ".join(["python", *sys.argv]),
              "seeds": seeds, "workloads": workloads, "machines": list(machines), "reused": args.reuse,
              "serial_range": list(SERIAL_RANGE), "known": args.known, "history": args.history,
              "unknown_runtimes": args.unknown_runtimes,
              "contenders": [*CONTENDERS, *(f"scalpel/after-{k}" for k in range(2, args.history + 1)),
                             *(["scalpel/known"] if args.known else []),
                             *([*(f"{f}/unknown" for f in FIXED), "scalpel/unknown"] if args.unknown_runtimes else [])],
              "jobs": args.jobs,
              "seconds": time.perf_counter() - started, "rows": rows}
    record["summary"] = summarise(rows)
    write_and_report(record, args.out, print_report)
    return 0


def instances_of(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[list[int], list[str], tuple[str, ...]]:
    """The seeds, workloads and machines a study's ``--seeds``, ``--workloads`` and ``--machines``
    name, its ``--jobs`` checked; the parser's error names a bad one."""
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        parser.error(f"--seeds must be integers separated by commas, got {args.seeds!r}")
    workloads, machines = args.workloads.split(","), tuple(args.machines.split(","))
    unknown = [w for w in workloads if w not in WORKLOADS] + [m for m in machines if m not in MACHINES]
    if unknown:
        parser.error(f"unknown workload or machine {unknown[0]!r}; workloads: {', '.join(WORKLOADS)}; "
                     f"machines: {', '.join(MACHINES)}")
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    return seeds, workloads, machines


def _unit(workload: str, seed: int, _noise: float, machines: Sequence[str], reused: dict, known: int = 0,
          history: int = 0, unknown: bool = False) -> list[dict]:
    """:func:`run_instance` as :func:`~scalpel_executor.experiments.workflow_studies.run_instances` calls it."""
    return run_instance(workload, seed, machines, reused, known, history, unknown)
