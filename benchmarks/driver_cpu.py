"""The driver's CPU per no-op task, its garbage collector's share, and where it goes (sampled).

One process per executor: a DataFlowKernel with ScalpelExecutor (default options, ``profiles=False``)
or HTEX (``max_workers_per_node`` = the CPU count, one LocalProvider block), ``--warm`` no-op tasks
to warm up, then ``--bursts`` bursts of ``--tasks`` no-op tasks submitted at once. Printed per
executor: the driver process's CPU per task over the bursts (``getrusage``: every thread of the
process, not the node manager's or HTEX's interchange, which are other processes) and the part of it
spent in the garbage collector (``gc.callbacks``, the collecting thread's CPU time; also by generation,
with the objects tracked after the bursts, which each full collection walks), and for
ScalpelExecutor the frames its driver read from the node manager per task (each a read and a JSON
document). ``--workers N`` runs N workers (HTEX's ``max_workers_per_node``; ScalpelExecutor's
topology by ``experiments.interleaved.scalpel_topology``: more than the cores emulates a wider node).
With ``--warm`` above 50, the lone tasks after the first 50 also give the median round trip.
``--store`` gives ScalpelExecutor a profile store (a fresh one in the run's temporary folder), as a
user's run has by default: its folds of every task's measurements are then driver CPU too.
``--logging`` keeps Parsl's own log file (``parsl.log`` at DEBUG, ``initialize_logging=True``: a
user's default): about 20 lines a task, each a write that lets go of the interpreter, so the
driver's threads hand it to each other; the voluntary context switches per task say how often.

**Contention.** With the log file on, each of the DataFlowKernel's three threads in the driver (the
main thread's ``submit``, its launch thread, the executor's results thread) changes a task's state
under one lock, ``DataFlowKernel.task_state_counts_lock``, and writes a log line while holding it;
a write lets go of the interpreter, another thread takes it and may reach the same lock and wait.
Printed per executor: how many acquisitions of that lock per task found it held (the lock is
wrapped by a counting one for the bursts), and for ScalpelExecutor the messages per frame read
from its node manager (1.0: a Began and each Result in frames of their own).

``--rounds N`` runs the executors N times each, interleaved (scalpel, htex, scalpel, ...), and
ends with the medians and the paired ratios scalpel/htex of the same round; ``--json PATH`` keeps
every sample. ``scalpel`` is ScalpelExecutor with its defaults (the driver's threads on one CPU while
they are busy: ``runtime.driver.driver_pin``); ``--executors scalpel,scalpel-pin,scalpel-unpinned,htex``
adds it with ``pin_driver="auto"`` (on one CPU for the whole run) and with ``pin_driver=None`` (never),
and their ratios to HTEX.

``--spy FOLDER`` also samples the bursts with py-spy (``pip install py-spy``), only the thread
holding the GIL (``--gil --threads``), and prints, per thread, the share of its samples in each
function of the executor (inclusive); the raw samples go to FOLDER/<executor>.txt.

    python benchmarks/driver_cpu.py                       # scalpel then htex, 3,000 tasks, one burst
    python benchmarks/driver_cpu.py --executors scalpel --bursts 4 --spy /tmp/spy
    python benchmarks/driver_cpu.py --workers 16 --bursts 2      # an emulated 16-worker node
    python benchmarks/driver_cpu.py --store --bursts 2           # with a profile store, as users run
    python benchmarks/driver_cpu.py --store --logging --bursts 2 # and Parsl's log file, as users run
    python benchmarks/driver_cpu.py --store --logging --bursts 2 --rounds 6 --json cpu.json  # paired
    python benchmarks/driver_cpu.py --store --logging --bursts 2 --rounds 6 --executors scalpel,scalpel-pin,scalpel-unpinned,htex
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


#: Lone tasks that warm up (fresh workers, first imports) before any round trip counts.
WARMED = 50


#: ``--executors``' ScalpelExecutors: the defaults, pinned for the whole run, never pinned.
PIN_DRIVER = {"scalpel": {}, "scalpel-pin": {"pin_driver": "auto"}, "scalpel-unpinned": {"pin_driver": None}}

def noop():
    return 0


class CountingLock:
    """A lock that counts the acquisitions that found it held (the DataFlowKernel's state lock)."""

    def __init__(self, inner):
        self.inner, self.contended = inner, 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self.inner.acquire(False):
            return True
        self.contended += 1
        return self.inner.acquire(blocking, timeout)

    def release(self) -> None:
        self.inner.release()

    __enter__ = acquire

    def __exit__(self, *_) -> None:
        self.release()


def measure(kind: str, tasks: int, bursts: int, warm: int, spy: Path | None, workers: int | None = None,
            store: bool = False, logging: bool = False) -> dict:
    """Run in a child process (a fresh interpreter per executor): the figures of one executor."""
    import parsl
    from parsl.config import Config

    scratch = tempfile.TemporaryDirectory(prefix="scalpel-driver-cpu-")  # the run directory and the store

    if kind == "htex":
        from parsl.executors import HighThroughputExecutor
        from parsl.providers import LocalProvider
        executor = HighThroughputExecutor(label="x", max_workers_per_node=workers or os.cpu_count(),
                                          provider=LocalProvider(init_blocks=1, max_blocks=1))
    else:
        from scalpel_executor import ScalpelExecutor
        from scalpel_executor.experiments.interleaved import scalpel_topology
        executor = ScalpelExecutor(label="x", topology=scalpel_topology(workers) if workers else None,
                                   profiles=os.path.join(scratch.name, "profiles.sqlite") if store else False,
                                   **PIN_DRIVER[kind])
    app = parsl.python_app(noop)
    collector = [0.0, 0.0]
    by_generation = [[0, 0.0] for _ in range(3)]  # per generation: collections, CPU seconds

    def collecting(phase, info):
        if phase == "start":
            collector[1] = time.thread_time()
        else:
            spent = time.thread_time() - collector[1]
            collector[0] += spent
            by_generation[info["generation"]][0] += 1
            by_generation[info["generation"]][1] += spent

    with scratch as run_dir:
        with parsl.load(Config(executors=[executor], run_dir=run_dir, initialize_logging=logging)) as dfk:
            trips = []
            for _ in range(warm):
                called = time.perf_counter()
                app().result()
                trips.append(time.perf_counter() - called)
            sampler = None
            if spy is not None:
                sampler = subprocess.Popen(["py-spy", "record", "-p", str(os.getpid()), "-r", "500", "-f", "raw",
                                            "--gil", "--threads", "--nonblocking", "-o", str(spy / f"{kind}.txt")],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(1.5)  # py-spy attaches
            gc.callbacks.append(collecting)
            channel = getattr(executor, "_pool", None)  # ScalpelExecutor's ManagerClient; HTEX has none
            frames, messages = getattr(channel, "frames_read", 0), getattr(channel, "messages_read", 0)
            state_lock = dfk.task_state_counts_lock = CountingLock(dfk.task_state_counts_lock)
            before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            for _ in range(bursts):
                futures = [app() for _ in range(tasks)]
                for future in futures:
                    future.result()
            seconds, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF)
            frames = getattr(channel, "frames_read", 0) - frames
            messages = getattr(channel, "messages_read", 0) - messages
            dfk.task_state_counts_lock = state_lock.inner
            gc.callbacks.remove(collecting)
            tracked = len(gc.get_objects())  # what every full collection walks, after the bursts
            if sampler is not None:
                sampler.send_signal(2)  # SIGINT: py-spy writes what it sampled
                sampler.wait(timeout=30)
    count = tasks * bursts
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"executor": kind, "tasks": count, "tasks_per_second": count / seconds,
            "driver_us_per_task": cpu / count * 1e6, "gc_us_per_task": collector[0] / count * 1e6,
            "user_us_per_task": (after.ru_utime - before.ru_utime) / count * 1e6,
            "system_us_per_task": (after.ru_stime - before.ru_stime) / count * 1e6,
            "voluntary_switches_per_task": (after.ru_nvcsw - before.ru_nvcsw) / count,
            "gc_per_1000_tasks": [round(n / count * 1000, 2) for n, _ in by_generation],
            "gc_us_per_task_by_generation": [round(spent / count * 1e6, 1) for _, spent in by_generation],
            "tracked_objects_after": tracked,
            "frames_per_task": frames / count if kind != "htex" else None,
            "messages_per_frame": messages / frames if kind != "htex" and frames else None,
            "state_lock_contended_per_task": state_lock.contended / count,
            "round_trip_ms": statistics.median(trips[WARMED:]) * 1e3 if len(trips) > WARMED else None}


def shares(raw: Path, limit: float = 0.015) -> dict[str, list[tuple[float, str]]]:
    """Per thread, the executor's functions by their share of the thread's samples (inclusive)."""
    totals, inclusive = collections.Counter(), collections.defaultdict(collections.Counter)
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        thread = re.sub(r"\s*\(?0x[0-9a-f]+\)?|\(\d+\)|thread", "", frames[0]).strip(" :")
        totals[thread] += int(count)
        for name in {re.sub(r" \(.*$", "", frame) + " " + re.sub(r".*scalpel_executor/", "", frame.rsplit(":", 1)[0])
                     .split(" (")[-1].rstrip(")") for frame in frames[1:] if "scalpel_executor/" in frame}:
            inclusive[thread][name] += int(count)
    return {thread: [(n / totals[thread], name) for name, n in inclusive[thread].most_common() if n / totals[thread] >= limit]
            for thread, _ in totals.most_common(4)}


def run_child(kind: str, args: argparse.Namespace) -> dict | None:
    """One sample: ``measure`` in a fresh interpreter; None (said on stderr) when it failed."""
    command = [sys.executable, __file__, "--child", kind, "--tasks", str(args.tasks), "--bursts",
               str(args.bursts), "--warm", str(args.warm)] + (["--spy", str(args.spy)] if args.spy else []) \
        + (["--workers", str(args.workers)] if args.workers else []) + (["--store"] if args.store else []) \
        + (["--logging"] if args.logging else [])
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        print(f"{kind}: failed (exit {done.returncode})\n{done.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(lines[-1])


def show(row: dict, spy: Path | None) -> None:
    kind = row["executor"]
    print(f"{kind:8s} {row['tasks_per_second']:7.0f} tasks/s   driver {row['driver_us_per_task']:6.0f} us/task"
          f"   of it in the garbage collector {row['gc_us_per_task']:4.0f}"
          + (f"   frames read per task {row['frames_per_task']:.2f}" if row.get("frames_per_task") is not None else "")
          + (f"   lone round trip {row['round_trip_ms']:.2f} ms" if row.get("round_trip_ms") is not None else ""))
    print(f"{'':8s} user {row['user_us_per_task']:.0f} + system {row['system_us_per_task']:.0f} us/task; "
          f"voluntary context switches per task {row['voluntary_switches_per_task']:.2f}; the DataFlowKernel's "
          f"state lock found held {row['state_lock_contended_per_task']:.2f} times a task"
          + (f"; {row['messages_per_frame']:.2f} messages a frame" if row.get("messages_per_frame") else ""))
    print(f"{'':8s} collections per 1,000 tasks (young, middle, full) {row['gc_per_1000_tasks']}, us/task "
          f"{row['gc_us_per_task_by_generation']}; objects tracked after the bursts {row['tracked_objects_after']:,}")
    if spy is not None and (spy / f"{kind}.txt").exists():
        for thread, functions in shares(spy / f"{kind}.txt").items():
            print(f"  {thread}")
            for share, name in functions[:14]:
                print(f"    {share:6.1%}  {name}")


#: What the summary of several rounds compares, by the sample's field.
COMPARED = {"driver_us_per_task": "driver CPU us/task", "tasks_per_second": "tasks/s",
            "voluntary_switches_per_task": "voluntary switches/task",
            "state_lock_contended_per_task": "state lock found held/task"}


def summarize(samples: list[dict], kinds: list[str]) -> None:
    """Medians per executor, and the paired ratios of each of ours over htex in the same round (median [min-max])."""
    print(f"\nover {max(row['round'] for row in samples) + 1} interleaved rounds:")
    for field, name in COMPARED.items():
        medians = {kind: statistics.median(row[field] for row in samples if row["executor"] == kind) for kind in kinds}
        line = f"  {name:28s} " + "   ".join(f"{kind} {value:8.2f}" for kind, value in medians.items())
        by_round = collections.defaultdict(dict)
        for row in samples:
            by_round[row["round"]][row["executor"]] = row[field]
        for mine in [kind for kind in kinds if kind != "htex"] if "htex" in kinds else []:
            ratios = sorted(pair[mine] / pair["htex"] for pair in by_round.values() if pair.get("htex") and mine in pair)
            if ratios:
                line += f"   {mine}/htex {statistics.median(ratios):.3f} [{ratios[0]:.3f}-{ratios[-1]:.3f}]"
        print(line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog="\n".join(__doc__.splitlines()[2:]),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--executors", default="scalpel,htex", help="comma-separated: scalpel (its defaults), "
                        "scalpel-pin (pin_driver='auto': the driver's threads on one CPU for the whole run), "
                        "scalpel-unpinned (pin_driver=None), htex (default scalpel,htex)")
    parser.add_argument("--tasks", type=int, default=3000, help="no-op tasks per burst (default %(default)s)")
    parser.add_argument("--bursts", type=int, default=1, help="bursts measured (default %(default)s)")
    parser.add_argument("--workers", type=int, help="workers per executor (default: the CPU count; more emulates a "
                        "wider node)")
    parser.add_argument("--warm", type=int, default=50, help="lone no-op tasks first (default %(default)s)")
    parser.add_argument("--spy", type=Path, metavar="FOLDER", help="sample the bursts with py-spy into FOLDER")
    parser.add_argument("--logging", action="store_true", help="keep Parsl's log file (parsl.log, DEBUG), as a "
                        "user's run does (default: initialize_logging=False)")
    parser.add_argument("--store", action="store_true", help="ScalpelExecutor keeps a profile store (a fresh "
                        "one in a temporary folder), as a user's run does (default: profiles=False)")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds of the executors (default "
                        "%(default)s); more than one ends with medians and paired ratios")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write every sample to PATH")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    for name in ("tasks", "bursts", "rounds") + (("workers",) if args.workers is not None else ()):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.child:
        print(json.dumps(measure(args.child, args.tasks, args.bursts, args.warm, args.spy, args.workers, args.store,
                                 args.logging)))
        return 0
    kinds = [kind.strip() for kind in args.executors.split(",") if kind.strip()]
    if unknown := [kind for kind in kinds if kind not in (*PIN_DRIVER, "htex")]:
        parser.error(f"--executors takes {', '.join(PIN_DRIVER)} and htex, got {', '.join(unknown)}")
    if args.spy is not None:
        if shutil.which("py-spy") is None:
            parser.error("--spy needs py-spy on the PATH (pip install py-spy)")
        args.spy.mkdir(parents=True, exist_ok=True)
    samples = []
    for round_ in range(args.rounds):
        for kind in kinds:
            row = run_child(kind, args)
            if row is None:
                return 1
            row["round"] = round_
            samples.append(row)
            show(row, args.spy)
    if args.rounds > 1:
        summarize(samples, kinds)
    if args.json is not None:
        args.json.write_text(json.dumps({"argv": sys.argv[1:], "cpus": os.cpu_count(), "load": os.getloadavg(),
                                         "samples": samples}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
