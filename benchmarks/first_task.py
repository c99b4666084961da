"""How long the first task on each core waits after submission, on a fresh executor.

For each round and each executor (ScalpelExecutor; Parsl's HighThroughputExecutor with
``cpu_affinity="block"``), interleaved: load it, wait until every worker is ready (for HTEX: every
worker connected), submit one 0.3 s task per core at once, and record, inside each task, when it
started. Prints per executor the median over rounds of the slowest core's start delay (submission
to the task's first line) and of the median core's. Usage::

    python benchmarks/first_task.py [--rounds 5]

Figures in docs/results/throughput.md.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

import parsl
from parsl import python_app
from parsl.config import Config


def started_at(seconds):
    import time

    begun = time.time()
    time.sleep(seconds)
    return begun


def executor(name, cores):
    if name == "htex":
        from parsl.executors import HighThroughputExecutor
        from parsl.providers import LocalProvider

        return HighThroughputExecutor(label="htex", cpu_affinity="block", max_workers_per_node=cores,
                                      provider=LocalProvider(init_blocks=1, min_blocks=1, max_blocks=1))
    from scalpel_executor import ScalpelExecutor

    return ScalpelExecutor(label="scalpel", profiles=False)


def workers_ready(ex, cores) -> bool:
    if ex.label == "htex":
        return sum(m["worker_count"] for m in ex.connected_managers()) >= cores
    return ex.pool.wait_started(0)  # the node manager reported every worker ready and warm


def one_round(name, cores, run_dir):
    ex = executor(name, cores)
    dfk = parsl.load(Config(executors=[ex], run_dir=run_dir, strategy="none"))
    try:
        deadline = time.monotonic() + 60
        while not workers_ready(ex, cores):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name}: workers not connected after 60 s")
            time.sleep(0.05)
        time.sleep(0.5)  # settle: ready is ready
        app = python_app(started_at, executors=[ex.label])
        submitted = time.time()
        starts = [f.result() for f in [app(0.3) for _ in range(cores)]]
        return sorted(s - submitted for s in starts)
    finally:
        dfk.cleanup()
        parsl.clear()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    delays = {"scalpel": [], "htex": []}
    with tempfile.TemporaryDirectory() as run_dir:
        for r in range(args.rounds):
            for name in (["scalpel", "htex"] if r % 2 == 0 else ["htex", "scalpel"]):
                delays[name].append(one_round(name, cores, run_dir))
                print(f"round {r} {name}: start delays {[round(d * 1000, 1) for d in delays[name][-1]]} ms",
                      file=sys.stderr)
    for name, rounds in delays.items():
        slowest = statistics.median(max(d) for d in rounds) * 1000
        typical = statistics.median(statistics.median(d) for d in rounds) * 1000
        print(f"{name:8s} {cores} cores, {args.rounds} rounds: slowest core's first task started "
              f"{slowest:.1f} ms after submission (median core {typical:.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
