"""Interleaved rounds: executors timed on no-op tasks in turn, each sample in a process of its own.

The harness of ``benchmarks/throughput.py``, ``node_manager.py``, ``provider_mode.py`` and the node
check (:mod:`scalpel_executor.experiments.node_check`)::

    the script's process                              one child per sample (this module, run with -m)
      run_rounds(contenders, rounds, ...)               build the contender's executor, parsl.load
        round 1: A B C, round 2: A B C, ... ──SPEC──>   wait for its managers (provider mode)
        on_sample(round, name, sample)      <──JSON──   warm up (every worker), time TASKS at once,
      medians(samples, keys)                            then PINGS lone tasks one after another

Contenders alternate within every round so that the machine's drift hits all alike, and each
sample is a fresh interpreter with one DataFlowKernel, so no executor inherits another's threads or
imports. The executors' profiles go to a store of the rounds' own (``SCALPEL_PROFILE_STORE``), kept
across rounds as a user's would be, never to the user's store.

A sample holds ``throughput`` (tasks/s of the submitted-at-once phase), ``round_trip_median`` and
``round_trip_p90`` (seconds, lone tasks), ``start_seconds`` (``parsl.load`` and the warm-up), and
with :attr:`Contender.measure_cpu` the CPU each process of the run spent per task in the throughput
phase: ``driver_cpu_per_task_us`` (the sample's own process: Parsl's DFK and, in-process, the
pool's threads), ``manager_cpu_per_task_us`` (ScalpelExecutor's node manager, HTEX's
``process_worker_pool``; None without one), ``interchange_cpu_per_task_us`` (HTEX's interchange)
and ``workers_cpu_per_task_us`` (every other process below the driver: the workers), and per
thread of the driver and the manager (``driver_threads``, ``manager_threads``: name and µs per
task, most first). With :attr:`Contender.stages` (ScalpelExecutor only) ``stages`` holds each
task's time stamps (:func:`task_stages`) and ``queue`` the tasks in flight sampled every
:data:`QUEUE_EVERY` seconds.

:func:`width_contenders` builds the three contenders of one width (HTEX, ScalpelExecutor and
Parsl's ``ThreadPoolExecutor``, the DataFlowKernel's own ceiling), emulating a wider node than
this machine with ``topology="1xN"``; :func:`width_summary` and :func:`width_lines` turn their
samples into a table; :func:`stage_summary` turns ``stages`` into medians per stage.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import parsl
import psutil
from parsl import python_app
from parsl.config import Config
from parsl.executors import HighThroughputExecutor, ThreadPoolExecutor
from parsl.providers import LocalProvider

import scalpel_executor
from scalpel_executor.core.batching import Batching
from scalpel_executor.experiments.records import scratch_folder
from scalpel_executor.experiments.tables import format_table
from scalpel_executor.host.sysfs import detect_topology
from scalpel_executor.runtime.driver.executor import DEFAULT_LAUNCH_CMD, ScalpelExecutor

WARM_UP = 50  # tasks before the timed phases: workers started, imports done
#: Warm-up batches at most while waiting for every worker to have run a task (HTEX's workers
#: start after its block does; 128 of them on 2 CPUs take tens of seconds).
WARM_UP_BATCHES = 40
#: Seconds between samples of the tasks in flight (:attr:`Contender.stages`).
QUEUE_EVERY = 0.005
#: Seconds a sample waits for any one timed result before it fails (a lost task fails the sample, not the run's clock).
RESULT_TIMEOUT = 60.0
#: ... and for a warm-up result: the fresh workers of a wide emulated node on a loaded machine may take minutes.
WARM_UP_TIMEOUT = 300.0
#: Threads listed per process in a sample (most CPU first).
TOP_THREADS = 8


@dataclass(frozen=True)
class Contender:
    """One executor of the rounds, as its child process builds it.

    ``executor``: ``"htex"`` (Parsl's HighThroughputExecutor), ``"scalpel"`` (ScalpelExecutor)
    or ``"threads"`` (Parsl's ThreadPoolExecutor), labelled so; ``options``: its other constructor
    arguments (JSON); ``provider``: the ``LocalProvider`` arguments of its blocks (None: no
    provider; HTEX always needs one); ``launch_suffix``: appended to ScalpelExecutor's default
    ``launch_cmd`` in provider mode; ``config``: ``parsl.config.Config`` arguments besides the
    executor and run directory; ``managers``: node managers to wait for before the warm-up
    (provider mode); ``workers``: distinct workers (threads, for ``threads``) the warm-up waits to
    have run a task (0: only the warm-up's 50 tasks); ``measure_cpu``: record the CPU per task of
    every process of the run and per thread of the driver and the manager; ``manager_cpu``: look
    for the manager (kept for the scripts that name it; ``measure_cpu`` does); ``stages``: record
    each task's time stamps (ScalpelExecutor in local mode).
    """

    executor: str
    options: dict = field(default_factory=dict)
    provider: dict | None = None
    launch_suffix: str = ""
    config: dict = field(default_factory=lambda: {"strategy": "none"})
    managers: int = 0
    measure_cpu: bool = False
    manager_cpu: bool = False
    workers: int = 0
    stages: bool = False


def run_sample(contender: Contender, tasks: int, pings: int, folder: str, timeout: float = 900) -> dict:
    """One sample of ``contender`` in a child process; RuntimeError with its stderr if it fails."""
    spec = {**asdict(contender), "tasks": tasks, "pings": pings, "run_dir": os.path.join(folder, "runinfo")}
    # The parent's own copy of the package first, so the child times the code the script imported.
    package_root = str(Path(scalpel_executor.__file__).resolve().parents[1])
    env = dict(os.environ, SCALPEL_PROFILE_STORE=os.path.join(folder, "profiles.sqlite"),
               PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])))
    run = subprocess.run([sys.executable, "-m", __spec__.name, json.dumps(spec)],
                         capture_output=True, text=True, timeout=timeout, env=env)
    if run.returncode != 0:
        raise RuntimeError(f"{contender.executor} failed with exit code {run.returncode}:\n{run.stderr[-3000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def run_rounds(contenders: Mapping[str, Contender], rounds: int, tasks: int, pings: int, *, prefix: str,
               on_sample: Callable[[int, str, dict], None] = lambda round_, name, sample: None,
               keep_going: bool = False) -> dict[str, list[dict]]:
    """``rounds`` samples of every contender, interleaved; ``on_sample(round, name, sample)`` after each.

    Returns each contender's samples in round order. ``prefix`` names the temporary folder of the
    rounds' profile store and run directories. A sample that fails raises RuntimeError, or with
    ``keep_going`` is kept as ``{"error": its stderr's end}`` (:func:`good_samples` leaves it out).
    """
    samples: dict[str, list[dict]] = {name: [] for name in contenders}
    with scratch_folder(prefix) as folder:
        for round_ in range(rounds):
            for name, contender in contenders.items():
                try:
                    sample = run_sample(contender, tasks, pings, folder)
                except (RuntimeError, subprocess.TimeoutExpired) as error:
                    if not keep_going:
                        raise
                    sample = {"error": str(error)[-3000:]}
                samples[name].append(sample)
                on_sample(round_, name, sample)
    return samples


def good_samples(samples: Iterable[dict]) -> list[dict]:
    """The samples that did not fail (:func:`run_rounds` with ``keep_going``)."""
    return [sample for sample in samples if "error" not in sample]


def medians(samples: Mapping[str, list[dict]], keys: Iterable[str]) -> dict[str, dict[str, float]]:
    """Each contender's median of each of ``keys`` over its samples; a key its samples leave None is left out."""
    return {name: {key: statistics.median(s[key] for s in values) for key in keys if values[0].get(key) is not None}
            for name, values in samples.items()}


def write_samples(path: str | None, arguments, samples: Mapping[str, list[dict]], medians_: Mapping) -> None:
    """``--json PATH``: the command's arguments (an argparse namespace), every sample and the medians."""
    if path:
        with open(path, "w") as handle:
            json.dump({"args": vars(arguments), "samples": samples, "medians": medians_}, handle, indent=1)


# --- one width: HTEX, ScalpelExecutor and the ThreadPool ceiling -------------------------------------

#: The contenders of a width, in the order each round runs them.
WIDTH_CONTENDERS = ("htex", "scalpel", "threads")


def machine_cores() -> tuple[int, ...]:
    """The CPUs ScalpelExecutor runs its workers on by default here (one per physical core)."""
    return detect_topology().cpus


def scalpel_topology(workers: int, cores: Sequence[int] | None = None):
    """ScalpelExecutor's ``topology`` for ``workers`` workers: None (the machine) at its core count;
    fewer: the first ``workers`` cores, in their LLC domains; more: ``"1xN"``, one LLC domain of
    ``workers`` cores, which the pool lays over the real CPUs round-robin (an emulated node)."""
    topology = detect_topology()
    cores = tuple(topology.cpus if cores is None else cores)
    if workers == len(cores):
        return None
    if workers > len(cores):
        return f"1x{workers}"
    kept = set(cores[:workers])
    return [[cpu for cpu in domain.cpus if cpu in kept] for domain in topology.domains
            if any(cpu in kept for cpu in domain.cpus)]


def width_contenders(workers: int, *, stages: bool = False, scalpel_options: Mapping | None = None,
                     pin_driver: bool = False) -> dict[str, Contender]:
    """HTEX (``max_workers_per_node=workers``, ``cpu_affinity="block"`` up to the CPU count, else
    none; one ``LocalProvider`` block), ScalpelExecutor (the default node manager,
    :func:`scalpel_topology`, and ``scalpel_options``) and Parsl's
    ``ThreadPoolExecutor(max_threads=workers)``, each measuring its CPU per process and thread;
    ``stages``: ScalpelExecutor's samples carry time stamps; ``pin_driver``: also ``scalpel-pin``,
    ScalpelExecutor with ``pin_driver="auto"`` (its driver's threads on one CPU for the whole run),
    and ``scalpel-unpinned``, with ``pin_driver=None`` (never; the defaults pin them while busy)."""
    cpus = len(os.sched_getaffinity(0))
    scalpel = {"topology": scalpel_topology(workers), **(scalpel_options or {})}
    contenders = {
        "htex": Contender("htex", {"max_workers_per_node": workers,
                                   "cpu_affinity": "block" if workers <= cpus else "none"},
                          provider={"init_blocks": 1, "max_blocks": 1}, measure_cpu=True, workers=workers),
        "scalpel": Contender("scalpel", scalpel, measure_cpu=True, workers=workers, stages=stages),
        "threads": Contender("threads", {"max_threads": workers}, measure_cpu=True, workers=workers),
    }
    if pin_driver:
        for name, pin in (("scalpel-pin", "auto"), ("scalpel-unpinned", None)):
            contenders[name] = Contender("scalpel", {**scalpel, "pin_driver": pin}, measure_cpu=True, workers=workers)
    return contenders


#: What a width's table shows per contender: sample key, heading, scale, digits.
WIDTH_FIGURES = (
    ("throughput", "tasks/s", 1.0, 0),
    ("round_trip_median", "round trip ms", 1e3, 2),
    ("round_trip_p90", "p90 ms", 1e3, 2),
    ("driver_cpu_per_task_us", "driver µs/task", 1.0, 0),
    ("manager_cpu_per_task_us", "manager µs/task", 1.0, 0),
    ("interchange_cpu_per_task_us", "interchange µs/task", 1.0, 0),
    ("workers_cpu_per_task_us", "workers µs/task", 1.0, 0),
)


def _spread(values: Sequence[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def thread_medians(samples: Sequence[dict], which: str) -> list[dict]:
    """The median µs per task of each thread name of ``which`` (``driver`` or ``manager``) over
    ``samples`` (0 in a sample that lacked it), most first."""
    per_sample = []
    for sample in samples:
        named: dict[str, float] = {}
        for thread in sample.get(f"{which}_threads") or ():
            name = re.sub(r"\d{3,}", "N", thread["name"])  # a pid or thread id in a name differs per sample
            named[name] = named.get(name, 0.0) + thread["cpu_per_task_us"]
        per_sample.append(named)
    names = {name for named in per_sample for name in named}
    rows = [{"name": name, "cpu_per_task_us": statistics.median(named.get(name, 0.0) for named in per_sample)}
            for name in names]
    return sorted(rows, key=lambda row: -row["cpu_per_task_us"])


def width_summary(samples: Mapping[str, list[dict]]) -> dict:
    """One width's samples (by contender) as figures: per contender its good samples and failed ones,
    each of :data:`WIDTH_FIGURES`' median, min and max (those its samples have), its threads'
    medians (:func:`thread_medians`);
    and ``ratios``: ScalpelExecutor's medians (each of its contenders') over HTEX's and over the ThreadPool's."""
    summary: dict = {"contenders": {}, "ratios": {}}
    for name, every in samples.items():
        values = good_samples(every)
        if not values:
            continue
        figures = {key: _spread([s[key] for s in values]) for key, *_ in WIDTH_FIGURES
                   if all(s.get(key) is not None for s in values)}
        summary["contenders"][name] = {"samples": len(values), "failed": len(every) - len(values), "figures": figures,
                                       "driver_threads": thread_medians(values, "driver")[:TOP_THREADS],
                                       "manager_threads": thread_medians(values, "manager")[:TOP_THREADS]}
    for mine, other in itertools.product(("scalpel", "scalpel-pin", "scalpel-unpinned"), ("htex", "threads")):
        ours, theirs = summary["contenders"].get(mine), summary["contenders"].get(other)
        if ours is None or theirs is None:
            continue
        summary["ratios"][f"{mine}/{other}"] = {
            key: ours["figures"][key]["median"] / theirs["figures"][key]["median"]
            for key in ("throughput", "round_trip_median", "round_trip_p90", "driver_cpu_per_task_us")
            if key in ours["figures"] and key in theirs["figures"] and theirs["figures"][key]["median"]}
    return summary


def width_lines(workers: int, summary: Mapping, *, markdown: bool = False) -> list[str]:
    """The table of one width's :func:`width_summary`: medians (min–max) per contender, the ratios,
    and each process's busiest threads."""
    contenders = summary["contenders"]
    shown = [(key, heading, scale, digits) for key, heading, scale, digits in WIDTH_FIGURES
             if any(key in c["figures"] for c in contenders.values())]
    rows = []
    for name, contender in contenders.items():
        row = [name, str(contender["samples"]) + (f" ({contender['failed']} failed)" if contender.get("failed") else "")]
        for key, _, scale, digits in shown:
            figure = contender["figures"].get(key)
            row.append("-" if figure is None else
                       f"{figure['median'] * scale:,.{digits}f} ({figure['min'] * scale:,.{digits}f}–"
                       f"{figure['max'] * scale:,.{digits}f})")
        rows.append(row)
    lines = [f"{workers} workers (medians, min–max over samples)"]
    lines += format_table(["executor", "samples", *(heading for _, heading, *_ in shown)], rows,
                          right=range(1, 2 + len(shown)), markdown=markdown)
    for pair, ratios in summary["ratios"].items():
        lines.append(f"{pair}: " + ", ".join(f"{key} {value:.2f}x" for key, value in ratios.items()))
    for name, contender in contenders.items():
        for which in ("driver", "manager"):
            threads = contender[f"{which}_threads"][:5]
            if threads:
                lines.append(f"{name} {which} threads, µs/task: "
                             + ", ".join(f"{t['name']} {t['cpu_per_task_us']:.0f}" for t in threads))
    return lines


def machine_facts() -> dict:
    """The machine a figure was measured on: CPU model, CPUs, cores and LLC domains as the package
    detects them (``host.sysfs``), memory, load average, Python and Parsl versions."""
    topology = detect_topology()
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as stream:
            model = next((line.split(":", 1)[1].strip() for line in stream if line.startswith("model name")), model)
    except OSError:
        pass
    return {"cpu_model": model, "cpus": os.cpu_count(), "allowed_cpus": len(os.sched_getaffinity(0)),
            "cores": len(topology.cpus), "topology": topology.describe(),
            "llc_domains": [{"cpus": list(domain.cpus), "llc_bytes": domain.llc_size} for domain in topology.domains],
            "memory_bytes": psutil.virtual_memory().total, "load_average": list(os.getloadavg()),
            "python": platform.python_version(), "parsl": parsl.__version__, "platform": platform.platform()}


# --- the stage breakdown -----------------------------------------------------------------------------

#: The stages of a task's time, from the stamps :func:`task_stages` records, in order:
#: (name, what it covers, from stamp, to stamp). ``ran`` is the worker's own wall time.
STAGES = (
    ("launch", "app call → executor.submit (Parsl's DFK)", "called", "submitted"),
    ("to_worker", "executor.submit → sent to its worker (channel, batching, scheduler)", "submitted", "started"),
    ("handoff_and_return", "sent to worker → result in the driver, less the run (hand-off to the worker, "
                           "worker end → driver receive)", None, None),
    ("run", "the task's run in the worker (its wall time)", None, None),
    ("to_future", "driver receive → AppFuture done (result set, Parsl's callbacks)", "finished", "done"),
    ("total", "app call → AppFuture done", "called", "done"),
)


def stage_seconds(stamp: Mapping) -> dict[str, float]:
    """Seconds of each of :data:`STAGES` for one task's stamps (a missing stamp leaves its stages out)."""
    seconds = {}
    for name, _, begin, end in STAGES:
        if begin is not None and stamp.get(begin) is not None and stamp.get(end) is not None:
            seconds[name] = stamp[end] - stamp[begin]
    wall = stamp.get("wall")
    if wall is not None:
        seconds["run"] = wall
        if stamp.get("started") is not None and stamp.get("finished") is not None:
            seconds["handoff_and_return"] = stamp["finished"] - stamp["started"] - wall
    return seconds


def _quantile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def stage_summary(stamps: Sequence[Mapping]) -> dict[str, dict]:
    """Median and 90th percentile, in seconds, of each of :data:`STAGES` over ``stamps``
    (one task's stamps each, as :func:`task_stages` gives), with how many tasks had it."""
    by_stage: dict[str, list[float]] = {}
    for stamp in stamps:
        for name, value in stage_seconds(stamp).items():
            by_stage.setdefault(name, []).append(value)
    return {name: {"median": statistics.median(by_stage[name]), "p90": _quantile(by_stage[name], 0.9),
                   "tasks": len(by_stage[name])} for name, *_ in STAGES if by_stage.get(name)}


def stage_lines(summary: Mapping[str, Mapping[str, dict]], *, markdown: bool = False) -> list[str]:
    """The stage table: per phase (``burst``: tasks submitted at once; ``lone``: one at a time), each
    stage's median and 90th percentile in µs."""
    rows = []
    for name, words, *_ in STAGES:
        cells = [name]
        for phase in summary.values():
            figure = phase.get(name)
            cells += ["-", "-"] if figure is None else [f"{figure['median'] * 1e6:,.0f}", f"{figure['p90'] * 1e6:,.0f}"]
        rows.append([*cells, words])
    headers = ["stage", *(f"{phase} {what} µs" for phase in summary for what in ("median", "p90")), "covers"]
    return format_table(headers, rows, right=range(1, 1 + 2 * len(summary)), markdown=markdown)


# --- the child process ---------------------------------------------------------------------------------

def noop():
    return 0


def whoami():
    """The worker a task ran on: its process and thread (imports its own: a worker may have run
    nothing else yet)."""
    import os
    import threading
    return os.getpid(), threading.get_ident()


def _executor(spec: dict):
    """The contender's executor, as ``spec`` describes it (see :class:`Contender`)."""
    provider = LocalProvider(**spec["provider"]) if spec["provider"] is not None else None
    if spec["executor"] == "htex":
        return HighThroughputExecutor(label="htex", provider=provider, **spec["options"])
    if spec["executor"] == "threads":
        return ThreadPoolExecutor(label="threads", **spec["options"])
    options = dict(spec["options"])
    if "batching" in options:  # its fields, as JSON carries them
        options["batching"] = Batching(**options["batching"])
    if provider is not None:
        options.update(provider=provider, launch_cmd=DEFAULT_LAUNCH_CMD + spec["launch_suffix"])
    return ScalpelExecutor(label="scalpel", **options)


def _wait_for_managers(executor, count: int, timeout: float = 120) -> None:
    """Until ``count`` node managers of the executor's blocks are connected (0: at once)."""
    if count == 0:
        return
    deadline = time.monotonic() + timeout
    while len(executor.connected_managers()) < count:
        if time.monotonic() > deadline:
            sys.exit(f"the blocks' {count} managers did not connect within {timeout:.0f} s")
        time.sleep(0.1)


def _warm_up(workers: int) -> None:
    """:data:`WARM_UP` tasks, then batches until ``workers`` distinct workers ran one (HTEX's start
    after its block; a thread pool's threads start as tasks arrive)."""
    app = python_app(whoami)
    for _ in range(WARM_UP):
        app().result(timeout=WARM_UP_TIMEOUT)
    seen: set = set()
    for _ in range(WARM_UP_BATCHES if workers else 0):
        seen |= {future.result(timeout=WARM_UP_TIMEOUT) for future in [app() for _ in range(2 * workers)]}
        if len(seen) >= workers:
            break


class ProcessTree:
    """The run's processes below this one, told apart: the node manager (ScalpelExecutor's, or
    HTEX's ``process_worker_pool``), HTEX's interchange, and the workers (the rest)."""

    def __init__(self, manager_pid: int | None, log_dir: str | None = None) -> None:
        descendants = psutil.Process().children(recursive=True)
        self.interchange = next((p for p in descendants if "interchange" in _cmdline(p)), None)
        if manager_pid is None and log_dir:
            # HTEX's block starts its process_worker_pool in the background of a shell that exits, so
            # it is no descendant: it is the one whose --logdir is this run's (its workers below it).
            pools = [p for p in psutil.process_iter() if "process_worker_pool" in _cmdline(p)
                     and f"--logdir={log_dir}" in _cmdline(p)]
            pool_pids = {p.pid for p in pools}
            manager_pid = next((p.pid for p in pools if p.ppid() not in pool_pids), None)
        self.manager = _process(manager_pid) if manager_pid is not None and manager_pid > 0 else None
        if self.manager is not None:
            self.workers = self.manager.children(recursive=True)
        else:
            self.workers = [p for p in descendants if p is not self.interchange]

    def cpu(self) -> dict[str, float]:
        """CPU seconds so far: ``manager``, ``interchange``, ``workers`` (those found)."""
        seconds = {}
        for name, processes in (("manager", [self.manager]), ("interchange", [self.interchange]),
                                ("workers", self.workers)):
            processes = [p for p in processes if p is not None]
            if processes:
                seconds[name] = sum(_cpu_seconds(p) for p in processes)
        return seconds


def _cmdline(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


def _process(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


def _cpu_seconds(process: psutil.Process) -> float:
    try:
        times = process.cpu_times()
        return times.user + times.system
    except psutil.Error:
        return 0.0


def thread_cpu(process: psutil.Process) -> dict[int, float]:
    """CPU seconds of each thread of ``process`` by its native id ({} once it is gone)."""
    try:
        return {thread.id: thread.user_time + thread.system_time for thread in process.threads()}
    except psutil.Error:
        return {}


#: The name :func:`thread_names` gives the threads that named themselves nothing (summed per sample).
UNNAMED = "unnamed"


def thread_names(pid: int) -> dict[int, str]:
    """A name for each thread of ``pid``: in this process Python's own (``threading``: native id →
    name); else the OS name (``/proc/<pid>/task/<tid>/comm``) where the thread set one: ``main``
    for the process's first thread, :data:`UNNAMED` for the others that kept the process's name."""
    names = {}
    try:
        with open(f"/proc/{pid}/comm") as stream:
            own = stream.read().strip()
        for tid in map(int, os.listdir(f"/proc/{pid}/task")):
            try:
                with open(f"/proc/{pid}/task/{tid}/comm") as stream:
                    comm = stream.read().strip()
            except OSError:
                continue
            names[tid] = "main" if tid == pid else UNNAMED if comm == own else comm
    except OSError:
        pass
    if pid == os.getpid():
        names.update({thread.native_id: thread.name for thread in threading.enumerate() if thread.native_id})
    return names


def per_thread(before: Mapping[int, float], after: Mapping[int, float], names: Mapping[int, str],
               tasks: int) -> list[dict]:
    """Each thread's µs per task between two :func:`thread_cpu` readings (a thread born between
    them counts from 0; one that ended is missed), named by ``names`` else by its id, most first."""
    rows = [{"name": names.get(tid) or UNNAMED, "tid": tid,
             "cpu_per_task_us": (seconds - before.get(tid, 0.0)) / tasks * 1e6} for tid, seconds in after.items()]
    rows = [row for row in rows if row["cpu_per_task_us"] > 0]
    return sorted(rows, key=lambda row: -row["cpu_per_task_us"])[:TOP_THREADS * 2]


def task_stages(executor: ScalpelExecutor, futures: Sequence, called: Sequence[float], done: Sequence) -> list[dict]:
    """Each task's time stamps (``time.monotonic()``, one clock for every process of this host):
    ``called`` (the app call), ``submitted`` (executor.submit), ``started`` (sent to its worker, the
    manager's stamp), ``wall`` (its run, the worker's wall time: the worker keeps no stamps of its
    begin and end), ``finished`` (the result in the driver) and ``done`` (the AppFuture set)."""
    records = {record.task_id: record for record in executor.records}
    stamps = []
    for future, call, finished in zip(futures, called, done):
        exec_future = future.task_record.get("exec_fu")
        record = records.get(getattr(exec_future, "parsl_executor_task_id", None))
        if record is None:
            continue
        wall = record.stats.get("wall")
        stamps.append({"called": call, "submitted": record.submitted, "started": record.started,
                       "finished": record.finished, "wall": wall if isinstance(wall, (int, float)) else None,
                       "done": finished})
    return stamps


def _timed(app, count: int, queue: list | None = None) -> tuple[list, list[float], list]:
    """``count`` calls of ``app`` at once: the futures, each call's and each done time; with ``queue``,
    a thread appends (seconds since the first call, tasks in flight) every :data:`QUEUE_EVERY` s."""
    called, done = [], [None] * count
    futures = []
    stop = threading.Event()

    def mark(index: int):
        return lambda _: done.__setitem__(index, time.monotonic())

    def sample_queue(origin: float) -> None:
        while not stop.wait(QUEUE_EVERY):
            finished = sum(moment is not None for moment in done)
            queue.append((round(time.monotonic() - origin, 4), len(called) - finished))

    sampler = None
    if queue is not None:
        sampler = threading.Thread(target=sample_queue, args=(time.monotonic(),), name="queue-sampler", daemon=True)
        sampler.start()
    for index in range(count):
        called.append(time.monotonic())
        future = app()
        future.add_done_callback(mark(index))
        futures.append(future)
    try:
        for future in futures:
            future.result(timeout=RESULT_TIMEOUT)
    finally:
        stop.set()
    if sampler is not None:
        sampler.join()
    return futures, called, done


def _manager_pid(executor, spec: dict) -> int | None:
    """Local mode's node manager process (None: HTEX's is found by its command line, a thread pool
    and an in-process pool have none, provider mode's runs on its blocks)."""
    if not isinstance(executor, ScalpelExecutor) or spec["provider"] is not None:
        return None
    pid = getattr(executor.pool, "pid", None)
    return pid if pid != os.getpid() else -1


def _sample(spec: dict) -> dict:
    """The child's whole run: one executor, one DataFlowKernel, the timed phases."""
    executor = _executor(spec)
    app = python_app(noop)  # defined in __main__: Parsl ships it by value, as a user's script function
    tasks, pings = spec["tasks"], spec["pings"]
    stages = spec.get("stages", False) and isinstance(executor, ScalpelExecutor)
    measure = spec["measure_cpu"] or spec["manager_cpu"]
    sample: dict = {}
    loading = time.perf_counter()
    with parsl.load(Config(executors=[executor], run_dir=spec["run_dir"], **spec["config"])):
        _wait_for_managers(executor, spec["managers"])
        _warm_up(spec.get("workers", 0))
        sample["start_seconds"] = time.perf_counter() - loading
        log_dir = os.path.join(executor.run_dir, executor.label) if spec["executor"] == "htex" else None
        tree = ProcessTree(_manager_pid(executor, spec), log_dir) if measure else None
        processes_before = tree.cpu() if tree else {}
        driver_threads = thread_cpu(psutil.Process()) if measure else {}
        manager_threads = thread_cpu(tree.manager) if tree and tree.manager else {}
        queue: list | None = [] if stages else None
        cpu, start = os.times(), time.perf_counter()
        futures, called, done = _timed(app, tasks, queue)
        elapsed, after = time.perf_counter() - start, os.times()
        if tree:
            processes_after = tree.cpu()
            sample["driver_threads"] = per_thread(driver_threads, thread_cpu(psutil.Process()),
                                                  thread_names(os.getpid()), tasks)
            sample["manager_threads"] = per_thread(manager_threads, thread_cpu(tree.manager),
                                                   thread_names(tree.manager.pid), tasks) if tree.manager else []
        if stages:
            sample["queue"] = queue
        trips, ping_futures, ping_called, ping_done = [], [], [], []
        for _ in range(pings):
            began = time.perf_counter()
            ping_done.append(None)
            ping_called.append(time.monotonic())
            future = app()
            future.add_done_callback(lambda _, index=len(ping_done) - 1: ping_done.__setitem__(index, time.monotonic()))
            future.result(timeout=RESULT_TIMEOUT)
            trips.append(time.perf_counter() - began)
            ping_futures.append(future)
    if stages:  # after the DataFlowKernel's cleanup: Parsl records a task's executor future after its
        # callback is added, so the last lone task's may be missing while its AppFuture is already done
        sample["stages"] = {"burst": task_stages(executor, futures, called, done),
                            "lone": task_stages(executor, ping_futures, ping_called, ping_done)}
    trips.sort()
    sample.update({"throughput": tasks / elapsed, "round_trip_median": trips[len(trips) // 2],
                   "round_trip_p90": trips[int(len(trips) * 0.9)]})
    if measure:
        sample["driver_cpu_per_task_us"] = (after.user + after.system - cpu.user - cpu.system) / tasks * 1e6
        for name in ("manager", "interchange", "workers"):
            used = processes_after.get(name)
            sample[f"{name}_cpu_per_task_us"] = None if used is None else \
                (used - processes_before.get(name, 0.0)) / tasks * 1e6
    return sample


if __name__ == "__main__":
    print(json.dumps(_sample(json.loads(sys.argv[1]))))
