"""Malleable tasks live: a user's workflow with its numpy steps marked malleable, as whole processes,
against the same workflow with every task fixed at one core and at two, and on Parsl's HTEX.

    python benchmarks/width_live.py --repeats 5 --out docs/data/width-live.json
    python benchmarks/width_live.py --workflow examples/malleable/ensemble.py --args="--members 10"

Each repetition runs the workflow script (default ``examples/malleable/covariance.py``) five
times, as a user would run it, each a fresh Python process (imports, ``parsl.load()``,
``dfk.cleanup()`` included), in an order that rotates between repetitions:

- ``fixed-1`` (``--width 1``) and ``fixed-2`` (``--width 2``): every task on that many cores, each on
  a profile store of its own that persists across repetitions (they plan with what they learned);
- ``first``: widths chosen by the executor on an empty store (nothing learned: the first run);
- ``learned``: widths chosen again on the store ``first`` wrote in the same repetition;
- ``htex``: Parsl's HighThroughputExecutor, one worker per core pinned to it (``cpu_affinity="block"``,
  which sets ``OMP_NUM_THREADS`` to the worker's one core), as many users configure it; first in
  one repetition, last in the next. HTEX keeps no tasks' timestamps: its whole process only.

Per run it records the process's wall seconds, the makespan from the tasks' own timestamps, the
core-seconds the tasks held, the result's checksum (every run must give the same) and the widths
chosen and why. The summary gives each contender's median and range, and the paired ratios
(``first`` over ``fixed-1``, ...) per repetition, their median and range. The stores are this
script's own, in a temporary folder.

The ``floor`` is what no widths can beat on this machine: each repetition's ``fixed-1`` run with
its makespan replaced by its tasks' core-seconds over the cores (the makespan were every core busy
to the end), the rest of its whole process kept. Widths move the end only by filling cores that
sit idle; a task spends at least its one-core core-seconds at any width unless it speeds up more
than linearly (or sheds a co-runner that slowed it), so ``floor / fixed-1`` is the least ratio any
width rule can show with this workflow here.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from scalpel_executor.experiments.records import scratch_folder

CONTENDERS = ("fixed-1", "fixed-2", "first", "learned", "htex")
WIDTH = {"fixed-1": "1", "fixed-2": "2", "first": "auto", "learned": "auto", "htex": "auto"}
DEFAULT_WORKFLOW = "examples/malleable/covariance.py"
FLOOR = "floor"  # derived from fixed-1's run per repetition (module docstring), not run
#: Ratios the goals read: (numerator, denominator).
RATIOS = (("first", "fixed-1"), ("first", "fixed-2"), ("learned", "fixed-1"), ("learned", "fixed-2"),
          ("learned", "first"), (FLOOR, "fixed-1"), ("first", "htex"), ("learned", "htex"))


def floor_of(run: Mapping) -> dict | None:
    """The floor (module docstring) of one ``fixed-1`` run: its process seconds and makespan with the
    makespan replaced by its core-seconds over its cores; None for a run that did not count them."""
    busy, cores = run.get("busy_core_seconds"), run.get("cores")
    if busy is None or not cores or run.get("makespan") is None:
        return None
    makespan = busy / cores
    return {"repeat": run["repeat"], "contender": FLOOR, "makespan": makespan,
            "process_seconds": run["process_seconds"] - run["makespan"] + makespan}


def run_once(workflow: str, extra: Sequence[str], width: str, store: str, run_dir: str,
             timeout: float, executor: str = "scalpel") -> dict:
    """One whole process of ``workflow`` at ``width`` on ``executor``: its wall seconds and the JSON
    its last line says (HTEX's: no makespan, core-seconds or widths)."""
    command = [sys.executable, workflow, "--executor", executor, "--width", width, "--store", store,
               "--run-dir", run_dir, *extra]
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(shlex.quote, command))} exited {done.returncode}:\n{done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {"process_seconds": round(seconds, 3), **result}


def order(repeat: int) -> list[str]:
    """This repetition's contenders, rotated by one per repetition; ``learned`` always after ``first``,
    ``htex`` first and last in turn."""
    fixed = ["fixed-1", "fixed-2"] if repeat % 2 == 0 else ["fixed-2", "fixed-1"]
    auto = ["first", "learned"]
    scalpel = [*fixed, *auto] if repeat % 4 < 2 else [*auto, *fixed]
    return ["htex", *scalpel] if repeat % 2 == 0 else [*scalpel, "htex"]


def _spread(values: Sequence[float]) -> dict:
    return {"median": round(statistics.median(values), 4), "min": round(min(values), 4),
            "max": round(max(values), 4), "n": len(values)}


def summarise(runs: Sequence[Mapping]) -> dict:
    """Per contender the median and range of its process seconds and makespans; per ratio of
    :data:`RATIOS` the per-repetition ratios' median and range; whether every checksum agreed."""
    by = {name: [r for r in runs if r["contender"] == name] for name in CONTENDERS}
    by[FLOOR] = [floor for floor in map(floor_of, by["fixed-1"]) if floor is not None]
    summary: dict = {"checksums_agree": len({r["checksum"] for r in runs}) == 1, "contenders": {}, "ratios": {}}
    for name, rows in by.items():
        figures = {figure: [r[figure] for r in rows if r.get(figure) is not None]
                   for figure in ("process_seconds", "makespan")}
        if rows:  # HTEX keeps no tasks' timestamps: no makespan
            summary["contenders"][name] = {figure: _spread(values) for figure, values in figures.items() if values}
    repeats = sorted({r["repeat"] for r in runs})
    for top, bottom in RATIOS:
        for figure in ("process_seconds", "makespan"):
            pairs = [(next((r[figure] for r in by[top] if r["repeat"] == k), None),
                      next((r[figure] for r in by[bottom] if r["repeat"] == k), None)) for k in repeats]
            ratios = [a / b for a, b in pairs if a and b]
            if ratios:
                summary["ratios"][f"{top}/{bottom} {figure}"] = _spread(ratios)
    return summary


def report_lines(summary: Mapping) -> list[str]:
    lines = ["| contender | whole process s (median [min, max]) | makespan s |", "|---|---|---|"]
    for name, figures in summary["contenders"].items():
        cells = [f"{f['median']:.2f} [{f['min']:.2f}, {f['max']:.2f}]" if f else "-"
                 for f in (figures.get("process_seconds"), figures.get("makespan"))]
        lines.append(f"| {name} | {' | '.join(cells)} |")
    lines += ["", "| ratio (per repetition) | whole process (median [min, max]) | makespan |", "|---|---|---|"]
    for top, bottom in RATIOS:
        cells = [summary["ratios"].get(f"{top}/{bottom} {figure}") for figure in ("process_seconds", "makespan")]
        lines.append(f"| {top} / {bottom} | " + " | ".join(
            f"{c['median']:.3f} [{c['min']:.3f}, {c['max']:.3f}]" if c else "-" for c in cells) + " |")
    lines.append(f"\nresults identical in every run: {summary['checksums_agree']}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))  # the first paragraph
    parser.add_argument("--workflow", default=DEFAULT_WORKFLOW, help=f"the workflow script (default {DEFAULT_WORKFLOW})")
    parser.add_argument("--args", default="", help="more arguments for the workflow, one string (e.g. \"--tiles 6\")")
    parser.add_argument("--repeats", type=int, default=3, help="repetitions (default 3)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds one run may take (default 600)")
    parser.add_argument("--out", help="write the JSON record here")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    if not Path(args.workflow).is_file():
        parser.error(f"--workflow {args.workflow!r} is not a file")
    extra = shlex.split(args.args)
    runs = []
    with scratch_folder("width-live-") as folder:
        for repeat in range(args.repeats):
            first_store = os.path.join(folder, f"auto-{repeat}.sqlite")
            for name in order(repeat):
                store = first_store if name in ("first", "learned") else os.path.join(folder, f"{name}.sqlite")
                run = run_once(args.workflow, extra, WIDTH[name], store, os.path.join(folder, f"{name}-{repeat}"),
                               args.timeout, "htex" if name == "htex" else "scalpel")
                runs.append({"repeat": repeat, "contender": name, **run})
                makespan = "-" if run["makespan"] is None else f"{run['makespan']:.2f} s"
                print(f"[{repeat + 1}/{args.repeats}] {name:8} {run['process_seconds']:7.2f} s whole process, "
                      f"makespan {makespan}, widths {run['widths']}", file=sys.stderr, flush=True)
    summary = summarise(runs)
    record = {"format": "scalpel-width-live/1", "command": " ".join(["python", *map(shlex.quote, sys.argv)]),
              "workflow": args.workflow, "args": args.args, "repeats": args.repeats, "cpus": os.cpu_count(),
              "load_average": os.getloadavg(), "runs": runs, "summary": summary}
    print("\n".join(report_lines(summary)))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {args.out}", file=sys.stderr)
    return 0
