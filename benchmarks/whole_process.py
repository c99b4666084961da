"""What a user waits for: the whole process of a Parsl script, ScalpelExecutor against HTEX, interleaved.

Every sample is a fresh Python process running what a user's script runs, so it pays what a user
pays: the interpreter, the imports, starting the workers, the work and the shutdown::

    parent ── spawn ──> child: import parsl and the executor     "import"
      │                        parsl.load(config)                "load"   (the workers start)
      │                        first submit ... last result      "work"
      │                        dfk.cleanup()                     "cleanup" (Scalpel: learns the run)
      │  <── one JSON line ──  exit
      └─ spawn to exit: the whole wall; os.getloadavg() before and after

The executors, each on one worker per core (the CPUs ScalpelExecutor resolves here):

- **HTEX** as the project's benchmarks configure it (``harness.parsl_executor("htex-block")``: one
  worker per core, pinned with ``cpu_affinity="block"``, one BLAS thread), in a ``Config`` that
  names only the executor and the run directory.
- **Scalpel**: ``scalpel_config(profiles=<a store of this script's own>)``, defaults otherwise
  (``--provider``: with ``provider=LocalProvider(init_blocks=1, max_blocks=1)``, a block on this node),
  on two stores: **empty** (a new file per sample: a first run) and **full** (a copy, per sample,
  of a store holding a full host history: the workflow's profiles from two runs of it, and the
  host's contention tables topped up to ``MAX_CORUNS`` co-runs: :func:`host_history_spans`).

The workflows, written as a user would (the apps are this file's functions, wrapped with
``python_app`` once Parsl is imported, so a worker gets them by value as from a notebook):

- ``short``: a notebook's cell: ``--tasks`` (60) small seeded numpy tasks, FFTs (about 4 ms) and
  linear solves (about 2 ms), and a reduce over all of them.
- ``quickstart``: what ``examples/quickstart.py`` runs, reproduced here (its app and sizes live in
  its ``__main__`` block, which cannot be imported): six stencils, with its footprint hints on
  Scalpel (HTEX refuses hints other than ``priority``, so its user leaves them out).
- ``chain``: ten simulations of 1.6 s submitted first, then a preparation of milliseconds whose
  result feeds a chain of five analyses as long as a simulation, and a reduce over all of them
  (the critical path's workflow: what helps is starting the chain first).
- ``pipelines``: twelve samples of 0.8 s first, then three pipelines of 2, 4 and 6 analyses of
  0.8 s, each from its own short preparation, and a reduce (written after ``chain``'s figures:
  the check on a shape the critical path was not tuned on).
- ``dag``: ``benchmarks/user_workflow.py``'s DAG (its ``run_workflow``: lookups, FFTs, follow-ups,
  matrix products, two shell steps, a reduce), lookups timed here to last about 1.5 s alone.

Each round runs every (workflow, executor) sample, HTEX first in even rounds and last in odd ones,
so drift in the host's load falls on all alike; after a Scalpel sample the next one waits until
the host fit it left stale is refitted (a detached, niced process: ``refit_after_exit``). The
child's own benchmark imports (the harness that builds HTEX, the DAG's script) are timed and taken
out of the wall (``wall`` is spawn to exit less them; ``process_wall`` keeps them). Printed: per
workflow and executor the median of each phase, and Scalpel's median wall over HTEX's with a
paired bootstrap 95% interval (> 1: Scalpel slower). The figures in the docs::

    python benchmarks/whole_process.py --rounds 5 --out docs/data/whole-process.json
"""

# Only the standard library at module level: a child's "import" phase is what it measures, and
# everything this file imports before it would be paid outside it.
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

WORKFLOWS = ("short", "quickstart", "dag", "chain", "pipelines")
DEFAULT_WORKFLOWS = ("short", "quickstart", "dag")  # chain and pipelines: docs/results/critical-path.md
STORES = ("empty", "full")
PHASES = ("wall", "import", "load", "work", "cleanup", "other")
LEARNING_RUNS = 2  # runs of a workflow on Scalpel that write the full store's profiles
QUICKSTART_SIZES = (1500, 200, 1200, 300, 900, 400)  # examples/quickstart.py's
# benchmarks/user_workflow.py's defaults: lookups of 40 MiB lasting about 1.5 s alone, products of order 1200
DAG_LOOKUP_MIB, DAG_LOOKUP_SECONDS, DAG_PRODUCT_N = 40, 1.5, 1200
RESULT_TIMEOUT = 1800.0
CHAIN_SIMULATIONS, CHAIN_STEPS, CHAIN_SECONDS = 10, 5, 1.6  # the chain workflow's (module docstring)
PIPELINE_LENGTHS, PIPELINE_SAMPLES, PIPELINE_SECONDS = (2, 4, 6), 12, 0.8  # the pipelines workflow's
REFIT_WAIT = 120.0  # seconds a sample waits for Scalpel's detached refit before the next one starts
#: Earlier work of this host besides the workflow's own, for the full store's co-runs: (app,
#: fraction of the LLC, seconds alone). Tasks of the workflow shorter than the host model's
#: MIN_WALL teach it nothing, so a notebook's host history comes from its other work.
EARLIER_APPS = (("earlier.stencil", 1 / 16, 0.4), ("earlier.fft", 1 / 8, 0.3), ("earlier.join", 1 / 4, 1.2),
                ("earlier.lookup", 1 / 2, 1.5), ("earlier.product", 1.0, 0.8), ("earlier.sort", 1 / 32, 0.2))
SOLO_RUNS = 5  # runs of each app alone in the host history: its solo mean
CORUN_NOISE = 0.08  # log-normal spread of a task's time run to run: co-runs on the development VM vary 3.5-17%


# -- the child: one user's script -------------------------------------------------------------------

def fft_peak(seed: int) -> int:
    """The strongest frequency of a seeded noisy signal of 2^16 samples (about 4 ms)."""
    import numpy as np

    signal = np.random.default_rng(seed).standard_normal(1 << 16)
    return int(np.abs(np.fft.rfft(signal)).argmax())


def solve_residual(seed: int) -> float:
    """The residual of a seeded, diagonally dominant 300 x 300 linear solve (about 2 ms)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    matrix, rhs = rng.random((300, 300)) + 300 * np.eye(300), rng.random(300)
    return float(np.abs(matrix @ np.linalg.solve(matrix, rhs) - rhs).max())


def total(*values: float) -> float:
    """The reduce."""
    return float(sum(values))


def stencil(n, parsl_resource_specification={}):  # noqa: B006 - examples/quickstart.py's app, as it is there
    import numpy as np

    grid = np.random.default_rng(n).random((n, n))
    for _ in range(20):
        grid[1:-1, 1:-1] = 0.25 * (grid[:-2, 1:-1] + grid[2:, 1:-1] + grid[1:-1, :-2] + grid[1:-1, 2:])
    return float(grid.mean())


def busy(seconds: float, seed: int) -> dict:
    """A simulation: ``seconds`` of computing, whose result is a seeded number."""
    import random
    import time

    end, rng, value = time.monotonic() + seconds, random.Random(seed), 0.0
    while time.monotonic() < end:
        value += rng.random()
    return {"seed": seed, "value": round(value / max(1.0, value), 6)}


def prepare(seed: int) -> dict:
    """A short preparation step whose result the analyses need."""
    return {"seed": seed, "calibration": seed * 0.5 + 1.0}


def analyse(previous: dict, seconds: float) -> dict:
    """One step of an analysis chain: ``seconds`` of computing on the previous step's result."""
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return {"seed": previous["seed"], "calibration": previous["calibration"] + 1.0}


def summary(*results: dict) -> dict:
    """The reduce: how many results, and the analyses' calibrations."""
    return {"results": len(results), "calibrations": sorted(r["calibration"] for r in results if "calibration" in r)}


def run_chain(spec: dict) -> dict:
    """Independent simulations submitted first, then a short preparation feeding a chain of analyses."""
    from parsl import python_app

    simulate, prep, step, reduce = python_app(busy), python_app(prepare), python_app(analyse), python_app(summary)
    sims = [simulate(CHAIN_SECONDS, seed) for seed in range(CHAIN_SIMULATIONS)]
    result = prep(7)
    for _ in range(CHAIN_STEPS):
        result = step(result, CHAIN_SECONDS)
    return reduce(*sims, result).result(timeout=RESULT_TIMEOUT)


def run_pipelines(spec: dict) -> dict:
    """Independent samples first, then pipelines of different lengths, each from a short preparation."""
    from parsl import python_app

    simulate, prep, step, reduce = python_app(busy), python_app(prepare), python_app(analyse), python_app(summary)
    samples = [simulate(PIPELINE_SECONDS, 100 + seed) for seed in range(PIPELINE_SAMPLES)]
    ends = []
    for number, length in enumerate(PIPELINE_LENGTHS):
        result = prep(number)
        for _ in range(length):
            result = step(result, PIPELINE_SECONDS)
        ends.append(result)
    return reduce(*samples, *ends).result(timeout=RESULT_TIMEOUT)


def run_short(spec: dict) -> float:
    from parsl import python_app

    peak, residual, reduce = python_app(fft_peak), python_app(solve_residual), python_app(total)
    halves = spec["tasks"] // 2
    values = [peak(seed) for seed in range(halves)] + [residual(seed) for seed in range(spec["tasks"] - halves)]
    return reduce(*values).result(timeout=RESULT_TIMEOUT)


def run_quickstart(spec: dict) -> list[float]:
    from parsl import python_app

    app = python_app(stencil)
    if spec["contender"] == "scalpel":
        futures = [app(n, parsl_resource_specification={"footprint": 8 * n * n}) for n in QUICKSTART_SIZES]
    else:
        futures = [app(n) for n in QUICKSTART_SIZES]
    return [round(f.result(timeout=RESULT_TIMEOUT), 4) for f in futures]


def run_dag(spec: dict) -> list[dict]:
    from parsl import bash_app, python_app

    import user_workflow  # imported (and timed) with the benchmark's own modules

    submitter = SimpleNamespace(app=python_app, bash_app=bash_app)
    options = SimpleNamespace(lookup_mib=spec["lookup_mib"], product_n=spec["product_n"])
    results, _ = user_workflow.run_workflow(submitter, Path(spec["folder"]), options, spec["lookup_rounds"])
    return [_without_stamps(result) for result in results]


def _without_stamps(value):
    """A DAG task's result without when and where it ran (``t0``, ``t1``, ``cpu``: the workloads'
    stamps), so the results of two executors compare by what they computed."""
    if isinstance(value, dict):
        return {k: _without_stamps(v) for k, v in value.items() if k not in ("t0", "t1", "cpu")}
    if isinstance(value, list):
        return [_without_stamps(v) for v in value]
    return value


RUN = {"short": run_short, "quickstart": run_quickstart, "dag": run_dag, "chain": run_chain,
       "pipelines": run_pipelines}


def child(spec: dict) -> dict:
    """One sample, as a user's script runs it; its phases in seconds (``perf_counter``), and the
    wall clock (``time.time``) at its start and end, which the parent sets against spawn and exit.

    ``spec``: ``workflow``, ``contender`` (``htex`` or ``scalpel``), ``store`` (Scalpel's profile
    store), ``folder`` (the run directory's parent), ``cores`` (HTEX's workers), ``tasks`` and,
    for the DAG, ``lookup_mib``, ``lookup_rounds``, ``product_n``."""
    begun = time.time()
    clock = [time.perf_counter()]

    def lap() -> float:
        clock.append(time.perf_counter())
        return clock[-1] - clock[-2]

    import parsl

    if spec["contender"] == "scalpel":
        from scalpel_executor import scalpel_config
    else:
        from parsl.config import Config
        from parsl.executors import HighThroughputExecutor  # noqa: F401 - what a user's script imports
    phases = {"import": lap()}
    if spec["contender"] == "htex":
        from scalpel_executor.experiments.harness import parsl_executor
    if spec["workflow"] == "dag":
        import user_workflow  # noqa: F401 - its run_workflow is the DAG
    phases["bench_import"] = lap()  # not a user's: taken out of the wall
    run_dir = str(Path(spec["folder"]) / "runinfo")
    if spec["contender"] == "scalpel" and spec.get("provider"):  # provider mode: a block of one node, as HTEX's
        from parsl.providers import LocalProvider

        config = scalpel_config(run_dir=run_dir, profiles=spec["store"],
                                provider=LocalProvider(init_blocks=1, min_blocks=1, max_blocks=1))
    elif spec["contender"] == "scalpel":
        config = scalpel_config(run_dir=run_dir, profiles=spec["store"])
    else:
        config = Config(executors=[parsl_executor("htex-block", spec["cores"], None, None)], run_dir=run_dir)
    phases["config"] = lap()
    dfk = parsl.load(config)
    phases["load"] = lap()
    try:
        result = RUN[spec["workflow"]](spec)
        phases["work"] = lap()
        phases["result_digest"] = hashlib.sha256(json.dumps(result, sort_keys=True).encode()).hexdigest()[:16]
    finally:
        dfk.cleanup()
        parsl.clear()
    phases["cleanup"] = lap()
    return {**phases, "begun": begun, "ended": time.time()}


# -- the parent: samples, the full store, the summary -----------------------------------------------

def sample(spec: dict, timeout: float, host: str) -> dict:
    """Run ``spec`` in a fresh interpreter: the child's phases, the whole wall (spawn to exit, and
    less the benchmark's own imports), the interpreter's start and exit, the load averages, and
    for Scalpel how long its detached refit went on after the exit (:func:`wait_for_refit`)."""
    folder = Path(spec["folder"])
    folder.mkdir(parents=True, exist_ok=True)
    record = {key: spec[key] for key in ("workflow", "contender", "state")}
    load_before = os.getloadavg()
    # Output into files, not pipes: the exit is the child's own even if something it started holds
    # them open. A session of its own: a child past --timeout goes with what it started.
    with open(folder / "child.out", "w") as out, open(folder / "child.err", "w") as err:
        spawned, clock = time.time(), time.perf_counter()
        process = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)],
                                   cwd=folder, stdout=out, stderr=err, start_new_session=True)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return {**record, "load_average_before": load_before, "load_average_after": os.getloadavg(),
                    "error": f"no exit after {timeout:g} s (--timeout)"}
    process_wall, exited = time.perf_counter() - clock, time.time()
    if spec["store"] is not None:
        record["refit_after_exit"] = wait_for_refit(spec["store"], host, REFIT_WAIT)
    record.update(process_wall=process_wall, load_average_before=load_before, load_average_after=os.getloadavg())
    lines = [line for line in (folder / "child.out").read_text().splitlines() if line.startswith("{")]
    if process.returncode != 0 or not lines:
        return {**record, "error": f"exit {process.returncode}: {(folder / 'child.err').read_text().strip()[-2000:]}"}
    phases = json.loads(lines[-1])
    wall = process_wall - phases["bench_import"]
    return {**record, **{name: value for name, value in phases.items() if name not in ("begun", "ended")},
            "wall": wall, "startup": phases["begun"] - spawned, "exit": exited - phases["ended"],
            "other": wall - sum(phases[name] for name in ("import", "load", "work", "cleanup"))}


def wait_for_refit(store: str, host: str, timeout: float) -> float | None:
    """Seconds until the host's fit in ``store`` is no longer stale: Scalpel refits in a detached,
    niced process after cleanup, and the next sample should not share the cores with it (a
    user's next script would, a little). None: still stale after ``timeout``."""
    from scalpel_executor.learning.host_model import HostModelStore

    if not Path(store).exists():
        return 0.0
    clock = time.perf_counter()
    models = HostModelStore(store)
    try:
        while models.stale(host):
            if time.perf_counter() - clock > timeout:
                return None
            time.sleep(0.1)
    finally:
        models.close()
    return time.perf_counter() - clock


def describe(record: dict) -> str:
    """A sample in one line: ``dag scalpel/full: wall 31.2 s (import 0.98, load 1.1, ...)``."""
    label = f"{record['workflow']} {record['contender']}" + (f"/{record['state']}" if record["state"] else "")
    loads = f"load average {record['load_average_before'][0]:.2f} -> {record['load_average_after'][0]:.2f}"
    if "error" in record:
        return f"{label}: FAILED ({loads}): {record['error'].splitlines()[-1] if record['error'] else ''}"
    return (f"{label}: wall {record['wall']:.1f} s (import {record['import']:.2f}, load {record['load']:.2f}, "
            f"work {record['work']:.2f}, cleanup {record['cleanup']:.2f}; {loads})"
            + (f", refit after exit {refit:.1f} s" if (refit := record.get("refit_after_exit")) else ""))


def host_history_spans(apps, coruns: int, llc: float, seed: int = 0) -> list:
    """Spans of earlier runs on this host that give at least ``coruns`` co-runs and a solo time of
    every app: pairs of ``apps`` (``(key, footprint bytes, seconds alone)``, drawn at random)
    started together on domain 0, each pair after the one before, then each app alone
    :data:`SOLO_RUNS` times. A task's time alone varies run to run (:data:`CORUN_NOISE`); beside
    the other it runs at the default model's slowdown until the first of the two ends, then
    alone. Pure: the same arguments give the same spans.

    >>> spans = host_history_spans([("a", 1e6, 0.5), ("b", 3e7, 1.0)], 4, 32 * 2**20)
    >>> len(spans), sorted({s.key for s in spans})
    (14, ['a', 'b'])
    """
    from scalpel_executor.core.contention import ContentionModel
    from scalpel_executor.learning.host_model import TaskSpan

    model, rng = ContentionModel(), random.Random(seed)
    spans, clock = [], 0.0
    for _ in range((coruns + 1) // 2):
        pair = [rng.choice(apps), rng.choice(apps)]
        alone = [seconds * rng.lognormvariate(0, CORUN_NOISE) for _, _, seconds in pair]
        slowdowns = model.slowdowns([footprint for _, footprint, _ in pair], [model.sensitivity] * 2, llc)
        first_end = min(a * s for a, s in zip(alone, slowdowns))
        walls = [first_end + a - first_end / s for a, s in zip(alone, slowdowns)]  # the rest of its work alone
        spans += [TaskSpan(key, 0, clock, clock + wall, wall, footprint)
                  for (key, footprint, _), wall in zip(pair, walls)]
        clock += max(walls) + 0.01
    for key, footprint, seconds in apps * SOLO_RUNS:
        wall = seconds * rng.lognormvariate(0, CORUN_NOISE)
        spans.append(TaskSpan(key, 0, clock, clock + wall, wall, footprint))
        clock += wall + 0.01
    return spans


def fill_host_history(store: Path, host: str, llc: float) -> dict:
    """Top the host's contention tables in ``store`` up to ``MAX_CORUNS`` co-runs, of the apps
    whose profiles it holds (those long enough to count) and :data:`EARLIER_APPS`; the host's
    co-runs, solo keys and fit after it."""
    from scalpel_executor.learning.host_model import MAX_CORUNS, MIN_WALL, HostModelStore
    from scalpel_executor.learning.store import ProfileStore

    with ProfileStore(store) as profiles:
        apps = [(p.key, p.footprint, p.runtime) for p in profiles.profiles()
                if p.footprint and p.runtime and p.runtime >= 2 * MIN_WALL]
    apps += [(key, fraction * llc, seconds) for key, fraction, seconds in EARLIER_APPS]
    models = HostModelStore(store)
    try:
        missing = MAX_CORUNS - len(models.history(host)[0])
        if missing > 0:  # stored and fitted at once: a host with this history has a fit that is not stale
            models.learn(host, llc, host_history_spans(apps, missing, llc))
        coruns, solo = models.history(host)
        fit = models.fitted(host)
    finally:
        models.close()
    return {"coruns": len(coruns), "solo_keys": len(solo), "apps": len(apps),
            "fit": fit.to_dict() if fit is not None else None}


def copy_store(source: Path, folder: Path) -> str:
    """A copy of the store ``source`` (with its WAL files) in ``folder``, for one sample."""
    folder.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{source}{suffix}").exists():
            shutil.copyfile(f"{source}{suffix}", folder / f"{source.name}{suffix}")
    return str(folder / source.name)


def summarise(samples: list[dict], workflows, stores) -> list[dict]:
    """Per workflow and executor the median of each phase over its good samples; for Scalpel its
    wall over HTEX's (medians) with a paired bootstrap 95% interval over the rounds both ran."""
    from scalpel_executor.experiments.bench.stats import bootstrap_ratio

    rows = []
    for workflow in workflows:
        good = [s for s in samples if s["workflow"] == workflow and "error" not in s]
        htex = {s["round"]: s for s in good if s["contender"] == "htex"}
        for state in (None, *stores):
            runs = {s["round"]: s for s in good if s["state"] == state}
            row = {"workflow": workflow, "executor": f"scalpel/{state}" if state else "htex", "samples": len(runs),
                   "failed": sum(1 for s in samples if s["workflow"] == workflow and s["state"] == state
                                 and "error" in s)}
            if runs:
                row.update({phase: statistics.median(s[phase] for s in runs.values()) for phase in PHASES})
            paired = sorted(set(runs) & set(htex))
            if state and paired:
                ratio, low, high = bootstrap_ratio([runs[r]["wall"] for r in paired], [htex[r]["wall"] for r in paired])
                row["wall_vs_htex"] = {"ratio": ratio, "low": low, "high": high, "rounds": len(paired)}
                ratio, low, high = bootstrap_ratio([runs[r]["work"] for r in paired], [htex[r]["work"] for r in paired])
                row["work_vs_htex"] = {"ratio": ratio, "low": low, "high": high, "rounds": len(paired)}
            digests = {s.get("result_digest") for s in good}
            row["results_match_htex"] = len(digests) == 1
            rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    from scalpel_executor.experiments.tables import format_table

    headers = ["workflow", "executor", "n", *(f"{phase} s" for phase in PHASES), "wall / HTEX [95%]",
               "work / HTEX [95%]", "results = HTEX's"]
    cells = []

    def interval(ratio):
        return f"{ratio['ratio']:.3f}x [{ratio['low']:.3f}, {ratio['high']:.3f}]" if ratio else "-"

    for row in rows:
        cells.append([row["workflow"], row["executor"], row["samples"],
                      *(f"{row[phase]:.2f}" if phase in row else "-" for phase in PHASES),
                      interval(row.get("wall_vs_htex")), interval(row.get("work_vs_htex")),
                      "yes" if row.get("results_match_htex") else "NO"])
    return "\n".join(format_table(headers, cells, right=range(2, len(headers))))


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of every (workflow, executor) sample")
    parser.add_argument("--workflows", default=",".join(DEFAULT_WORKFLOWS), help="comma-separated, of " + ", ".join(WORKFLOWS))
    parser.add_argument("--stores", default=",".join(STORES), help="Scalpel's store states, of " + ", ".join(STORES))
    parser.add_argument("--tasks", type=int, default=60, help="small tasks of the short workflow (its reduce besides)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds one sample may take")
    parser.add_argument("--out", help="write every sample and the summary (JSON) to this file")
    parser.add_argument("--provider", action="store_true",
                        help="run Scalpel in provider mode (provider=LocalProvider, one block of this node), as "
                             "HTEX runs here: what parsl.load() and dfk.cleanup() cost with a hub and a block")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 round, the short workflow only")
    parser.add_argument("--child", metavar="SPEC", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.workflows = 1, "short"
    args.workflows, args.stores = args.workflows.split(","), args.stores.split(",")
    for name, given, known in (("--workflows", args.workflows, WORKFLOWS), ("--stores", args.stores, STORES)):
        unknown = sorted(set(given) - set(known))
        if unknown:
            parser.error(f"{name}: unknown {', '.join(unknown)}; name some of {','.join(known)}")
    if args.rounds < 1 or args.tasks < 2:
        parser.error(f"--rounds must be at least 1 and --tasks at least 2, got {args.rounds} and {args.tasks}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))), flush=True)
        return 0
    from scalpel_executor.learning.host_model import host_id
    from scalpel_executor.runtime.driver.executor import ScalpelExecutor

    import user_workflow

    topology = ScalpelExecutor(profiles=False).resolved_topology  # what scalpel_config() resolves here
    host, cores, llc = host_id(topology), len(topology.cpus), topology.llc_size or 32 << 20
    dag = {"lookup_mib": DAG_LOOKUP_MIB, "product_n": DAG_PRODUCT_N,
           "lookup_rounds": user_workflow.rounds_for(DAG_LOOKUP_MIB, DAG_LOOKUP_SECONDS) if "dag" in args.workflows
           else None}
    print(f"host {host!r}, {cores} workers; load average {os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)
    samples, full_stores = [], {}
    with tempfile.TemporaryDirectory(prefix="scalpel-whole-process-") as folder:
        base = Path(folder)

        def spec(workflow: str, contender: str, state: str | None, name: str, store: str | None = None) -> dict:
            return {"workflow": workflow, "contender": contender, "state": state, "folder": str(base / name),
                    "store": store, "cores": cores, "tasks": args.tasks, "provider": args.provider, **dag}

        for workflow in args.workflows if "full" in args.stores else ():
            store = base / f"full-{workflow}" / "profiles.sqlite"
            learning = []
            for run in range(LEARNING_RUNS):
                learning.append(sample(spec(workflow, "scalpel", "learning", f"learn-{workflow}-{run}", str(store)),
                                       args.timeout, host))
                print(f"learning {run + 1}/{LEARNING_RUNS} {describe(learning[-1])}", file=sys.stderr, flush=True)
            full_stores[workflow] = {"learning_runs": learning, **fill_host_history(store, host, llc)}
            print(f"full store of {workflow}: {full_stores[workflow]['coruns']} co-runs, "
                  f"{full_stores[workflow]['solo_keys']} solo keys", file=sys.stderr, flush=True)
        for round_ in range(args.rounds):
            for workflow in args.workflows:
                order = [("htex", None), *(("scalpel", state) for state in args.stores)]
                for contender, state in order if round_ % 2 == 0 else order[::-1]:
                    name = f"{workflow}-{contender}-{state}-{round_}"
                    store = None
                    if state == "full":
                        store = copy_store(base / f"full-{workflow}" / "profiles.sqlite", base / name / "store")
                    elif state == "empty":
                        store = str(base / name / "store" / "profiles.sqlite")
                    run = spec(workflow, contender, state, name, store)
                    record = {"round": round_, **sample(run, args.timeout, host)}
                    samples.append(record)
                    print(f"round {round_ + 1}/{args.rounds} {describe(record)}", file=sys.stderr, flush=True)
    summary = summarise(samples, args.workflows, args.stores)
    print(table(summary))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "w") as stream:
            json.dump({"argv": sys.argv[1:], "args": {k: v for k, v in vars(args).items() if k != "child"},
                       "host": host, "cores": cores, "topology": topology.describe(), "dag": dag,
                       "full_stores": full_stores, "samples": samples, "summary": summary}, stream, indent=1)
    return 0 if all("error" not in s for s in samples) else 1


if __name__ == "__main__":
    sys.exit(main())
