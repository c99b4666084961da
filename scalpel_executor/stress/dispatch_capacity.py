"""The driver's dispatch capacity in provider mode: tasks/s through one ManagerHub, no DFK, no workers.

A real :class:`~scalpel_executor.runtime.driver.hub.ManagerHub`, made as ``ScalpelProviderExecutor.start()``
makes it, serves M fake node managers that answer every task at once, so the figure is what the
driver's side of the channel can push (submit, deal and place, encode, CurveZMQ, decode, deliver),
not what Parsl's DataFlowKernel or a worker adds::

    this process (the driver)                          fake-manager process (--fake-processes: more)
      main thread: hub.submit(Task(payload=Job)) ─┐       one thread, one zmq Poller over M DEALERs
      hub thread: ROUTER (CURVE server)           │         (CURVE client keys, as ManagerLink's):
        deal + place ──── Submit ─────────────────┴──────>    Register ─> (Configure) ─> Started(slots)
        on_complete <──── Result(serialized 0) ─────────────   each Submit answered at once
                    <──── Heartbeat, every heartbeat_period     (real protocol encode/decode)

Each sample starts a fresh hub and fresh fake managers, waits until all M have started, warms up
with ``--warmup`` tasks, then submits ``--tasks`` tasks at once from the main thread (as the DFK
would) and times them from the first submit to the last ``on_complete``. It records the CPU time
the driver process spent in that window (``getrusage``: its submitting thread, the hub thread and
libzmq's I/O and authenticator threads), the hub thread's alone (from ``/proc`` through psutil),
and the fake managers' processes', so a reader can tell which side was saturated. Rounds are
interleaved (every manager count once per round) so the machine's drift hits each alike.

Before the warm-up, each sample also sits idle for ``--idle`` seconds (default two heartbeat
periods) with every manager connected, and records the CPU the driver, its hub thread and the
fake managers spend there: the heartbeat load (each manager's Heartbeat and the hub's Ping every
``heartbeat_period``), which is what M managers cost the driver when no task runs.

The fake managers share the machine's cores with the driver: on a small machine the figures are a
lower bound of the driver's capacity. ``--json`` writes every sample. Each manager holds one TCP
connection to the driver (one descriptor there, a few in its fake process), so :func:`run` raises
this process's soft limit on open files (``RLIMIT_NOFILE``, inherited by the fakes) to what the
largest count needs, and says which limit to raise when the hard one is too low.

    python benchmarks/dispatch_capacity.py --managers 1,8,64 --tasks 20000 --rounds 5 --json capacity.json
    python benchmarks/dispatch_capacity.py --managers 1,8,64,1024 --fake-processes 8 --rounds 3
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from itertools import count
from pathlib import Path

import psutil
import zmq
from parsl.serialize import pack_apply_message, serialize
from tabulate import tabulate

import scalpel_executor
from scalpel_executor import __version__
from scalpel_executor.core.tasks import Task
from scalpel_executor.core.domains import Domain, Topology
from scalpel_executor.runtime.wire.channel import PING, load_keys, make_keys
from scalpel_executor.runtime.driver.hub import ManagerHub
from scalpel_executor.runtime.wire.manager_messages import (Configure, Heartbeat, ManagerConfig, Register, Result, Shutdown,
                                                       Started, Submit, decode, encode)
from scalpel_executor.runtime.options import HEARTBEAT_THRESHOLD, PoolOptions
from scalpel_executor.runtime.contract import Job

START_TIMEOUT = 120.0  # seconds for every fake manager to register and start (1,024 CURVE handshakes on 2 cores)
FAKE_EXIT_TIMEOUT = 10.0  # seconds a fake-manager process has to exit after the hub's Shutdown
HUB_THREAD = "scalpel-hub"  # ManagerHub's thread name, to find its CPU time
# Open files per manager: the driver's end of its TCP connection; in a fake process its socket's
# connection and libzmq's mailbox (an eventfd) per socket, with room to spare.
FILES_PER_MANAGER = 4
FILES_SPARE = 256  # the driver's own: libraries, its ROUTER, the inproc and monitor sockets, the fakes' pipes
# The columns of the summary table, each the median of a sample field (tasks/s also min and max).
TABLE_FIELDS = ("managers", "tasks_per_s", "tasks_per_s_min", "tasks_per_s_max", "driver_cpu_us_per_task",
                "hub_thread_cpu_us_per_task", "fake_cpu_us_per_task", "driver_cores_busy", "fake_cores_busy",
                "idle_driver_cpu_pct", "idle_hub_thread_cpu_pct", "idle_fake_cpu_pct")


def _noop():
    return 0


@functools.cache
def _call() -> bytes:
    """What the executor sends for a no-op app (the fakes never unpickle it). Packed on first use:
    while this module is still being imported, dill cannot find ``_noop`` by name and would pack
    the whole module by value."""
    return pack_apply_message(_noop, (), {})


# -- the fake node managers (their own process) ----------------------------------------------


class FakeManagers:
    """``len(block_ids)`` node managers on one thread, speaking the real protocol over the real channel.

    Every manager registers as a real one does (connect mode), reports ``slots`` workers once
    configured, and answers each Submit at once with a Result carrying a serialized ``0`` and a
    worker's stats; it beats every ``heartbeat_period`` of its configuration. ``received`` counts
    the tasks each was sent, by block id.

    ManagerLink is not used: it is one I/O thread per manager, and 64 of them would contend for
    this process's interpreter lock, making the fake side the bottleneck. The DEALERs take the
    same client keys (``load_keys``) and CURVE options.
    """

    def __init__(self, url: str, cert_dir: str, block_ids: list[str], slots: int):
        public, secret, server_public = load_keys(cert_dir, "client")
        self.slots = slots
        self.payload = serialize(0)
        self.stats = {"footprint": None, "footprint_source": "unavailable: not measured (sampling)", "wall": 1e-6,
                      "cpu": 1e-6, "max_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "children_cpu": 0.0}
        self.topology = Topology((Domain(0, tuple(range(slots)), None),), "fake").to_dict()
        self.received = Counter({block_id: 0 for block_id in block_ids})
        self.context = zmq.Context()
        self.context.set(zmq.MAX_SOCKETS, len(block_ids) + 16)  # libzmq's default is 1,023 per context
        self.poller = zmq.Poller()
        self.blocks: dict[zmq.Socket, str] = {}  # open managers
        self.configured: set[zmq.Socket] = set()  # those that beat
        self.period = float("inf")
        self.next_beat = float("inf")
        for block_id in block_ids:
            dealer = self.context.socket(zmq.DEALER)
            dealer.setsockopt(zmq.LINGER, 0)
            dealer.curve_secretkey, dealer.curve_publickey, dealer.curve_serverkey = secret, public, server_public
            dealer.connect(url)
            dealer.send(encode(Register(block_id, f"fake-{block_id}", __version__, os.getpid(), list(range(slots)))))
            self.poller.register(dealer, zmq.POLLIN)
            self.blocks[dealer] = block_id

    def serve(self, parent: int) -> dict[str, int]:
        """Answer until the hub shuts every manager down, ``parent`` exits, or the hub is silent too long."""
        last_heard = time.monotonic()
        while self.blocks and os.getppid() == parent and time.monotonic() - last_heard < HEARTBEAT_THRESHOLD:
            # At most a second asleep: the parent check above is how a killed driver ends this process.
            events = self.poller.poll(max(0.0, min(self.next_beat - time.monotonic(), 1.0)) * 1000)
            if events:
                last_heard = time.monotonic()
            for dealer, _ in events:
                self._drain(dealer)
            if time.monotonic() >= self.next_beat:
                self._beat()
        for dealer in self.blocks:
            dealer.close()
        self.context.term()
        return dict(self.received)

    def _drain(self, dealer: zmq.Socket) -> None:
        while dealer in self.blocks:
            try:
                data = dealer.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            if data != PING:
                self._answer(dealer, decode(data))

    def _answer(self, dealer: zmq.Socket, message) -> None:
        if isinstance(message, Submit):
            block_id = self.blocks[dealer]
            slot = self.received[block_id] % self.slots
            self.received[block_id] += 1
            dealer.send(encode(Result(message.task_id, True, self.stats, slot, 0, slot, time.monotonic(),
                                      self.payload)))
        elif isinstance(message, Configure):
            self.period = PoolOptions.from_dict(message.options).heartbeat_period
            self.next_beat = min(self.next_beat, time.monotonic() + self.period)
            self.configured.add(dealer)
            # the no-op tasks declare no memory and no accelerators: the host's memory, none
            dealer.send(encode(Started(os.getpid(), [], [[cpu] for cpu in range(self.slots)], self.topology,
                                       float(psutil.virtual_memory().total), 0)))
        elif isinstance(message, Shutdown):
            self.poller.unregister(dealer)
            self.configured.discard(dealer)
            del self.blocks[dealer]
            dealer.close()

    def _beat(self) -> None:
        self.next_beat = time.monotonic() + self.period
        for dealer in self.configured:
            dealer.send(encode(Heartbeat([], 0, [], [])))


def start_fake_managers(url: str, cert_dir: Path, block_ids: list[str], slots: int) -> subprocess.Popen:
    """A process serving :class:`FakeManagers` (this module with ``--serve``)."""
    spec = json.dumps({"url": url, "cert_dir": str(cert_dir), "block_ids": block_ids, "slots": slots})
    # The driver's own copy of the package first: Register must carry the driver's version.
    package_root = str(Path(scalpel_executor.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])))
    return subprocess.Popen([sys.executable, "-m", __spec__.name, "--serve", spec],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def stop_fake_managers(process: subprocess.Popen) -> dict[str, int]:
    """Wait for a fake-manager process to exit (the hub told its managers to); kill it by pid if it does not.

    Returns the tasks each of its managers received.
    """
    try:
        out, err = process.communicate(timeout=FAKE_EXIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        raise RuntimeError(f"fake-manager process {process.pid} did not exit within {FAKE_EXIT_TIMEOUT:g} s "
                           f"of the hub's shutdown; killed it. Its stderr:\n{err[-3000:]}") from None
    if process.returncode != 0:
        raise RuntimeError(f"fake-manager process {process.pid} exited with status {process.returncode}:\n"
                           f"{err[-3000:]}")
    return json.loads(out.strip().splitlines()[-1])


# -- the driver side ------------------------------------------------------------------------


class Completions:
    """The hub's ``on_complete``: counts outcomes and wakes the waiter at a target (hub thread only)."""

    def __init__(self):
        self.ids: list = []
        self.failed = 0
        self.done = threading.Event()
        self.finished_at = 0.0  # perf_counter() of the outcome that reached the target
        self._target = 0

    def expect(self, total: int) -> None:
        """Wake the waiter when ``total`` outcomes have come in (called while none are due)."""
        self._target = total
        self.done.clear()
        if len(self.ids) >= total:
            self.done.set()

    def __call__(self, task: Task, outcome) -> None:
        self.ids.append(task.id)
        if not outcome.ok or outcome.error is not None:
            self.failed += 1
        if len(self.ids) == self._target:
            self.finished_at = time.perf_counter()
            self.done.set()


def make_tasks(ids, how_many: int) -> list[Task]:
    """No-op tasks as ScalpelExecutor.submit builds them with no history (footprint 0, runtime 1 s)."""
    return [Task(next(ids), 0.0, 1.0, 0.0, None, payload=Job(_call(), walltime=None, measure=True))
            for _ in range(how_many)]


def submit_all(hub: ManagerHub, tasks: list[Task]) -> None:
    for task in tasks:
        hub.submit(task)


def wait_for_managers(hub: ManagerHub, managers: int, slots: int, fakes: list[subprocess.Popen]) -> None:
    """Until all ``managers`` have started ``slots`` workers each; RuntimeError if they do not within START_TIMEOUT."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        started = [m for m in hub.connected_managers() if m["worker_count"] == slots]
        if len(started) == managers:
            return
        dead = [process for process in fakes if process.poll() is not None]
        if dead or time.monotonic() > deadline:
            why = (f"fake-manager process {dead[0].pid} exited with status {dead[0].returncode}:\n"
                   f"{dead[0].stderr.read()[-3000:]}" if dead else f"waited {START_TIMEOUT:g} s")
            raise RuntimeError(f"{len(started)} of {managers} fake managers started; {why}")
        time.sleep(0.02)


def thread_cpu(native_id: int) -> float:
    """CPU seconds one thread of this process has used."""
    for thread in psutil.Process().threads():
        if thread.id == native_id:
            return thread.user_time + thread.system_time
    raise RuntimeError(f"no thread {native_id} in this process")


def process_cpu(pids: list[int]) -> float:
    return sum(sum(psutil.Process(pid).cpu_times()[:2]) for pid in pids)


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def raise_file_limit(managers: int) -> int:
    """Raise this process's soft limit on open files (the fakes inherit it) to what ``managers``
    connections need; returns the soft limit. RuntimeError naming the figures when the hard limit
    is lower."""
    needed = managers * FILES_PER_MANAGER + FILES_SPARE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return soft
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise RuntimeError(f"{managers} fake managers need about {needed} open files and the hard limit is {hard}; "
                           f"raise it (ulimit -Hn {needed}, or nofile in /etc/security/limits.conf) or measure "
                           f"fewer managers")
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    return needed


def measure(managers: int, *, tasks: int, slots: int, prefetch: int, warmup: int, fake_processes: int,
            cert_dir: Path, idle: float = 0.0) -> dict:
    """One sample: ``tasks`` no-op tasks through a fresh hub to ``managers`` fake managers.

    Returns the sample as a dict: the settings, ``seconds`` (first submit to last on_complete),
    ``tasks_per_s``, ``submit_s`` (the submit loop alone), CPU per task of the driver process,
    its hub thread and the fake managers (µs), each side's busy cores (CPU s / wall s), the
    CPU each spent while ``idle`` seconds passed with no task (``idle_*_cpu_pct``, % of a core),
    ``completed``/``distinct``/``failed`` outcomes of the timed tasks, ``received``, the tasks
    each fake manager was sent (warm-up included),.
    """
    completions = Completions()
    ids = count()
    hub = ManagerHub(ManagerConfig.of_driver(), PoolOptions(), completions, cert_dir=cert_dir, address="127.0.0.1",
                     prefetch=prefetch)
    hub.start()
    fakes: list[subprocess.Popen] = []
    received: dict[str, int] = {}
    try:
        block_ids = [str(index) for index in range(managers)]
        fakes = [start_fake_managers(hub.url, cert_dir, block_ids[first::fake_processes], slots)
                 for first in range(min(fake_processes, managers))]
        wait_for_managers(hub, managers, slots, fakes)
        hub_thread = next(thread for thread in threading.enumerate() if thread.name == HUB_THREAD)
        fake_pids = [process.pid for process in fakes]
        idle_cpu = (own_cpu(), thread_cpu(hub_thread.native_id), process_cpu(fake_pids))
        idle_start = time.perf_counter()
        time.sleep(idle)
        idle_seconds = time.perf_counter() - idle_start
        idle_cpu = tuple(after - before for after, before in zip(
            (own_cpu(), thread_cpu(hub_thread.native_id), process_cpu(fake_pids)), idle_cpu))
        timeout = START_TIMEOUT + (warmup + tasks) / 100
        completions.expect(warmup)
        submit_all(hub, make_tasks(ids, warmup))
        if not completions.done.wait(timeout):
            raise RuntimeError(f"{len(completions.ids)} of {warmup} warm-up tasks completed in {timeout:g} s")
        batch = make_tasks(ids, tasks)
        completions.expect(warmup + tasks)
        cpu, hub_cpu, fake_cpu = own_cpu(), thread_cpu(hub_thread.native_id), process_cpu(fake_pids)
        start = time.perf_counter()
        submit_all(hub, batch)
        submitted = time.perf_counter()
        if not completions.done.wait(timeout):
            raise RuntimeError(f"{len(completions.ids) - warmup} of {tasks} tasks completed in {timeout:g} s")
        cpu, hub_cpu = own_cpu() - cpu, thread_cpu(hub_thread.native_id) - hub_cpu
        fake_cpu = process_cpu(fake_pids) - fake_cpu
        seconds = completions.finished_at - start
    finally:
        try:
            hub.shutdown()
            for process in fakes:
                received.update(stop_fake_managers(process))
        finally:
            for process in fakes:
                if process.poll() is None:
                    process.kill()  # by its pid; only reached when an error came first
                    process.wait()
    timed = completions.ids[warmup:]
    return {"managers": managers, "tasks": tasks, "slots": slots, "prefetch": prefetch, "warmup": warmup,
            "fake_processes": len(fakes), "seconds": seconds, "tasks_per_s": tasks / seconds,
            "submit_s": submitted - start, "driver_cpu_us_per_task": cpu / tasks * 1e6,
            "hub_thread_cpu_us_per_task": hub_cpu / tasks * 1e6, "fake_cpu_us_per_task": fake_cpu / tasks * 1e6,
            "driver_cores_busy": cpu / seconds, "fake_cores_busy": fake_cpu / seconds, "idle_s": idle_seconds,
            "idle_driver_cpu_pct": idle_cpu[0] / idle_seconds * 100, "idle_hub_thread_cpu_pct":
            idle_cpu[1] / idle_seconds * 100, "idle_fake_cpu_pct": idle_cpu[2] / idle_seconds * 100,
            "completed": len(timed), "distinct": len(set(timed)), "failed": completions.failed,
            "received": received}


def run(manager_counts: list[int], *, tasks: int, slots: int, prefetch: int, warmup: int, rounds: int,
        fake_processes: int, idle: float = 0.0, on_sample=None) -> list[dict]:
    """Every sample: ``rounds`` rounds, each measuring every manager count once, in order.

    ``on_sample(sample)`` is called after each (progress). One key pair serves the whole run.
    """
    raise_file_limit(max(manager_counts))
    samples = []
    with tempfile.TemporaryDirectory(prefix="scalpel-dispatch-capacity-") as folder:
        cert_dir = make_keys(Path(folder) / "certificates")
        for round_ in range(rounds):
            for managers in manager_counts:
                sample = measure(managers, tasks=tasks, slots=slots, prefetch=prefetch, warmup=warmup,
                                 fake_processes=fake_processes, cert_dir=cert_dir, idle=idle)
                sample["round"] = round_
                samples.append(sample)
                if on_sample is not None:
                    on_sample(sample)
    return samples


def summarize(samples: list[dict]) -> list[dict]:
    """One row per manager count: medians of the samples, and the tasks/s range."""
    rows = []
    for managers in dict.fromkeys(sample["managers"] for sample in samples):
        mine = [sample for sample in samples if sample["managers"] == managers]
        row = {key: statistics.median(sample[key] for sample in mine) for key in TABLE_FIELDS if key in mine[0]}
        rates = [sample["tasks_per_s"] for sample in mine]
        row.update(managers=managers, tasks_per_s_min=min(rates), tasks_per_s_max=max(rates), samples=len(mine))
        rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    return tabulate(
        [[row["managers"], f"{row['tasks_per_s']:,.0f} [{row['tasks_per_s_min']:,.0f}, {row['tasks_per_s_max']:,.0f}]",
          row["driver_cpu_us_per_task"], row["hub_thread_cpu_us_per_task"], row["fake_cpu_us_per_task"],
          row["driver_cores_busy"], row["fake_cores_busy"], row["idle_driver_cpu_pct"],
          row["idle_hub_thread_cpu_pct"]] for row in rows],
        headers=["managers", "tasks/s median [min, max]", "driver CPU µs/task", "hub thread µs/task",
                 "fake managers CPU µs/task", "driver cores busy", "fake cores busy", "idle: driver CPU %",
                 "idle: hub thread CPU %"],
        floatfmt=("", "", ".0f", ".0f", ".0f", ".2f", ".2f", ".1f", ".1f"), colalign=("right", "right"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog="example: python benchmarks/dispatch_capacity.py --rounds 5 --tasks 20000")
    parser.add_argument("--managers", default="1,8,64", help="comma-separated manager counts (default %(default)s)")
    parser.add_argument("--tasks", type=int, default=20000, help="timed tasks per sample (default %(default)s)")
    parser.add_argument("--warmup", type=int, default=500,
                        help="untimed tasks before each sample (default %(default)s)")
    parser.add_argument("--slots", type=int, default=2, help="workers each fake manager reports (default %(default)s)")
    parser.add_argument("--prefetch", type=int, default=1,
                        help="tasks the hub sends a manager beyond its slots; the executor's prefetch_capacity "
                             "(default %(default)s, as the executor's)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="samples per manager count, interleaved (default %(default)s)")
    parser.add_argument("--fake-processes", type=int, default=1,
                        help="processes the fake managers are spread over (default %(default)s)")
    parser.add_argument("--idle", type=float, default=2 * PoolOptions.heartbeat_period,
                        help="seconds each sample sits idle with every manager connected, to measure the "
                             "heartbeat load (default %(default)s: two heartbeat periods)")
    parser.add_argument("--json", help="write every sample and the summary to this file")
    parser.add_argument("--serve", help=argparse.SUPPRESS)  # the fake-manager process: a JSON spec
    args = parser.parse_args(argv)
    if args.serve:
        spec = json.loads(args.serve)
        fakes = FakeManagers(spec["url"], spec["cert_dir"], spec["block_ids"], spec["slots"])
        print(json.dumps(fakes.serve(parent=os.getppid())))
        return 0
    try:
        manager_counts = [int(text) for text in args.managers.split(",")]
    except ValueError:
        parser.error(f"--managers must be comma-separated positive integers like 1,8,64, got {args.managers!r}")
    for name in ("tasks", "slots", "rounds", "fake_processes"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be 1 or more, got {getattr(args, name)}")
    if min(manager_counts) < 1 or args.warmup < 0 or args.prefetch < 0:
        parser.error("--managers must be positive, --warmup and --prefetch 0 or more")

    def progress(sample: dict) -> None:
        print(f"round {sample['round'] + 1}/{args.rounds} {sample['managers']:3d} managers "
              f"{sample['tasks_per_s']:8,.0f} tasks/s  driver {sample['driver_cpu_us_per_task']:4.0f} µs/task "
              f"(hub thread {sample['hub_thread_cpu_us_per_task']:4.0f})  fake managers "
              f"{sample['fake_cpu_us_per_task']:4.0f} µs/task  cores busy {sample['driver_cores_busy']:.2f} + "
              f"{sample['fake_cores_busy']:.2f}; idle driver {sample['idle_driver_cpu_pct']:.1f}% (hub thread "
              f"{sample['idle_hub_thread_cpu_pct']:.1f}%)", flush=True)

    load_before = os.getloadavg()[0]
    samples = run(manager_counts, tasks=args.tasks, slots=args.slots, prefetch=args.prefetch, warmup=args.warmup,
                  rounds=args.rounds, fake_processes=args.fake_processes, idle=args.idle, on_sample=progress)
    rows = summarize(samples)
    machine = {"cpus": os.cpu_count(), "hostname": socket.gethostname(), "load_average_before": load_before,
               "load_average_after": os.getloadavg()[0]}
    print(f"\n{args.tasks} tasks per sample, {args.slots} slots per manager, prefetch {args.prefetch}, medians of "
          f"{args.rounds} rounds; {machine['cpus']} CPUs shared by the driver and the fake managers, load "
          f"average {load_before:.1f} -> {machine['load_average_after']:.1f}\n")
    print(table(rows))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"args": vars(args), "machine": machine, "samples": samples, "summary": rows}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
