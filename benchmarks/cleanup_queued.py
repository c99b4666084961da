"""``dfk.cleanup()`` with tasks still queued in Parsl: how long it takes and what it writes to parsl.log.

A user who leaves ``with parsl.load(...)`` before waiting for every future (Parsl's default
``exit_mode="cleanup"``), or whose script raises part-way, calls ``dfk.cleanup()`` while Parsl's
single launch thread still holds thousands of tasks it has not handed to the executor. Cleanup
shuts the executor down first and then lets that thread hand every remaining task to it. This
script submits ``--tasks`` no-op apps as fast as a loop can, calls ``dfk.cleanup()`` at once, and
reports, per executor (each run a fresh interpreter, executors interleaved over ``--rounds``):
the seconds cleanup took, how many tasks had not been launched when it began, how they ended,
and how much parsl.log grew during cleanup.

    python benchmarks/cleanup_queued.py --tasks 20000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CONTENDERS = ("htex", "scalpel", "scalpel-in-process")


def child(name: str, tasks: int, run_dir: str) -> dict:
    import parsl
    from parsl import python_app
    from parsl.config import Config
    from parsl.executors import HighThroughputExecutor
    from parsl.providers import LocalProvider

    from scalpel_executor import ScalpelExecutor

    if name == "htex":
        executor = HighThroughputExecutor(label="htex", max_workers_per_node=os.cpu_count(),
                                          provider=LocalProvider(init_blocks=1, max_blocks=1))
    else:
        executor = ScalpelExecutor(label="scalpel", profiles=False, node_manager=name == "scalpel")

    @python_app(executors=[executor.label])
    def noop():
        return None

    dfk = parsl.load(Config(executors=[executor], run_dir=run_dir))
    futures = [noop() for _ in range(tasks)]
    log = os.path.join(dfk.run_dir, "parsl.log")
    launched = sum(f.task_record["try_time_launched"] is not None for f in futures)
    before = os.path.getsize(log)
    started = time.perf_counter()
    dfk.cleanup()
    cleanup = time.perf_counter() - started
    grown = os.path.getsize(log) - before
    parsl.clear()
    done = sum(f.done() for f in futures)
    failed = sum(f.done() and f.exception(timeout=0) is not None for f in futures)
    return {"executor": name, "tasks": tasks, "unlaunched_at_cleanup": tasks - launched, "cleanup_s": cleanup,
            "log_growth_bytes": grown, "done_after_cleanup": done, "failed": failed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--contenders", default=",".join(CONTENDERS))
    parser.add_argument("--out", help="write every sample as JSON here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.tasks, tempfile.mkdtemp(prefix="cleanup-queued-"))), flush=True)
        os._exit(0)  # a never-finished future must not hold the interpreter
    names = args.contenders.split(",")
    samples = []
    for round_ in range(args.rounds):
        for name in names if round_ % 2 == 0 else names[::-1]:
            done = subprocess.run([sys.executable, __file__, "--child", name, "--tasks", str(args.tasks)],
                                  capture_output=True, text=True, timeout=900)
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            if not lines:
                print(f"{name}: no result (exit {done.returncode}): {done.stderr[-1500:]}", file=sys.stderr)
                continue
            sample = json.loads(lines[-1])
            sample["round"] = round_
            samples.append(sample)
            print(f"round {round_ + 1}/{args.rounds} {name}: cleanup {sample['cleanup_s']:.2f} s with "
                  f"{sample['unlaunched_at_cleanup']} tasks not launched; parsl.log +"
                  f"{sample['log_growth_bytes'] / 2**20:.1f} MiB; {sample['done_after_cleanup']} done, "
                  f"{sample['failed']} failed", file=sys.stderr)
    print(f"{'executor':20} {'cleanup s (median)':>18} {'not launched':>13} {'parsl.log MiB':>14} {'never ended':>12}")
    for name in names:
        mine = [s for s in samples if s["executor"] == name]
        if mine:
            print(f"{name:20} {statistics.median(s['cleanup_s'] for s in mine):18.2f} "
                  f"{statistics.median(s['unlaunched_at_cleanup'] for s in mine):13.0f} "
                  f"{statistics.median(s['log_growth_bytes'] for s in mine) / 2**20:14.2f} "
                  f"{statistics.median(s['tasks'] - s['done_after_cleanup'] for s in mine):12.0f}")
    if args.out:
        with open(args.out, "w") as stream:
            json.dump({"command": " ".join(sys.argv), "samples": samples}, stream, indent=1)


if __name__ == "__main__":
    main()
