"""Fault injection at node managers: every task ends once, and no finished result is thrown away.

Drives real executors under a real DataFlowKernel — local mode's node manager (a child process of
the driver) and provider mode (``LocalProvider``, 2 blocks, each block's manager on its own CPU,
plus managers this harness starts by hand and fake ones holding the run's keys) — through the
states a manager can be in, and injects one fault per case, chosen and timed by a seeded generator::

    state        the manager the fault lands on
    ───────────  ──────────────────────────────────────────────────────────────────────────────────
    registering  provider: one launched by hand, between its Register and its Started
    idle         a started manager holding no task
    busy         a manager whose workers run tasks (it also holds a prefetched one)
    draining     provider: one launched by hand that sent Drain while it holds running tasks
    replacing    a manager was SIGKILLed with tasks; the fault lands on the one taking its place
                 (local: the client's replacement process; provider: the block the strategy starts)
    stalled      a busy manager while the driver stalls: the hub thread, between its read and its
                 judgement of silence, as a stopped driver resumes (local mode: the client's reader
                 thread), is paused for heartbeat_threshold + 1 s

    fault               injected by
    ──────────────────  ───────────────────────────────────────────────────────────────────────────
    sigkill             SIGKILL of the manager
    stop_short          SIGSTOP of the manager for 0.4 heartbeat_threshold, then SIGCONT
    stop_long           SIGSTOP of the manager for heartbeat_threshold + 2 s, and until it is lost
                        (local mode: a replacement stopped before its Started, after START_TIMEOUT)
    no_workers          every worker the manager starts from now dies at start (a broken node), and
                        its workers are killed (local mode: one of its two, so one core is retired)
    malformed_keyed     a fake manager holding the run's keys sends a malformed message
    oversized_keyed     the same fake sends one frame over the 16 MiB cap
    malformed_stranger  a TCP peer without keys sends garbage to the hub's port
    oversized_stranger  a TCP peer without keys announces a 128 MiB frame and sends 8 MiB of it
    slow_callback       a future's done-callback sleeps heartbeat_threshold + 1 s

The keyed faults' fake manager (:class:`FakeManager`) is itself in the case's state (registered
but not started; started and idle; holding tasks; draining; ...); the strangers and slow callbacks
meet the state's real manager. Local mode has no network, no registration and no draining: its
cases are the process faults and slow callbacks in the states idle, busy, replacing and stalled.

Every task writes ``N.started`` (its manager's pid) when its body begins and ``N.done`` when it
ends, and returns N. Checked per round (a fresh executor, several cases, ``dfk.cleanup()``):

1. every future is done, and the executor completed each task exactly once;
2. no finished result is discarded: a task whose ``Result`` reached the driver (the hub's or the
   client's reader saw it) ends with that result, and a task whose body finished ends with its
   result unless its manager was killed, stopped or broken from less than 0.5 s before it finished;
3. a task fails only through a fault that may cost tasks (sigkill, stop_long, no_workers, the
   keyed faults, and the kill that starts ``replacing``), and only if it ran on that manager, or
   never started: a task lost unstarted with its manager (``NodeManagerLost``) is counted apart as
   ``unstarted_failed``, the known gap while managers do not report each start; stop_short,
   strangers, slow callbacks and stalls cost no task and no manager;
4. a manager that cannot run tasks receives none: no Submit leaves the hub for a manager it knows
   to be draining, given up or without a live slot (``dealt_to_unable``);
5. tasks submitted after each case succeed (the executor recovered);
6. no process the round started (managers, workers, samplers, the blocks' shells) outlives cleanup.

Provider mode's managers are started with ``--driver-threshold`` well above the stall, so a stall
tests the hub's judgement of silence (what it has not read yet is not silence), not the managers'
own. With the hub's ``SILENCE_GRACE`` set to 0 (the code before that fix), three stalled cases
threw away 11 results the driver had received.
Parsl's block error handler is off: blocks whose manager a case kills end with an error status.

Usage::

    python benchmarks/manager_faults.py                              # 200 cases, seed 1, both modes
    python benchmarks/manager_faults.py --mode provider --cases 500 --seed 7 --part 1/2 --json a.json
    python benchmarks/manager_faults.py --replay provider/busy/sigkill/7000014   # as a failure printed it

``tests/runtime/test_manager_faults.py`` runs a handful of cases in the test command.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

import psutil

from scalpel_executor.core.batching import Batching
from scalpel_executor.runtime.wire.channel import MAX_FRAME, PING
from scalpel_executor.runtime.driver.executor import DEFAULT_LAUNCH_CMD
from scalpel_executor.runtime.driver.manager_client import START_TIMEOUT
from scalpel_executor.runtime.wire.manager_messages import Drain, Heartbeat, Result, decode, encode
from scalpel_executor.stress import faults
from scalpel_executor.stress.manager_peers import (DRAINS_ON_FILE, SITECUSTOMIZE, FakeManager, malformed_message,
                                                   stranger)

STATES = ("registering", "idle", "busy", "draining", "replacing", "stalled")
PROCESS_FAULTS = ("sigkill", "stop_short", "stop_long", "no_workers")
KEYED_FAULTS = ("malformed_keyed", "oversized_keyed")
STRANGER_FAULTS = ("malformed_stranger", "oversized_stranger")
FAULTS = PROCESS_FAULTS + KEYED_FAULTS + STRANGER_FAULTS + ("slow_callback",)
COSTLY = {"sigkill", "stop_long", "no_workers", *KEYED_FAULTS}  # faults that may cost the victim's tasks
LOCAL_STATES = ("idle", "busy", "replacing", "stalled")
COMBINATIONS = tuple(
    [("provider", state, fault) for state in STATES for fault in FAULTS]
    + [("local", state, fault) for state in LOCAL_STATES for fault in PROCESS_FAULTS + ("slow_callback",)]
)
MODES = ("provider", "local")
LOSS_ERRORS = {"NodeManagerLost", "WorkerDied"}  # what a task that ran on a faulted manager may end with

HEARTBEAT_PERIOD = 0.2  # seconds: short, so that silence is judged within a case
HEARTBEAT_THRESHOLD = 2.0
STALL = HEARTBEAT_THRESHOLD + 1.0  # seconds the driver's reading thread is paused
MANAGER_DRIVER_THRESHOLD = 3 * STALL  # provider mode's managers outlast the stall (the hub is under test)
STOP_SHORT = 0.4 * HEARTBEAT_THRESHOLD
STOP_LONG = HEARTBEAT_THRESHOLD + 2.0
SLOW_CALLBACK = HEARTBEAT_THRESHOLD + 1.0
FINISH_MARGIN = 0.5  # seconds: a body that ended this long before its manager's fault had sent its result
WAIT = 60.0  # seconds any one wait of a case may take before the case is reported as stuck
LEFTOVER_WAIT = 20.0  # seconds after cleanup within which every process must be gone
STRANGER_RSS_LIMIT = 64 << 20  # driver growth that would mean the announced frame was allocated
def marked_task(marks: str, number: int, seconds: float) -> int:
    """The task every case submits: marks its start (with its manager's pid) and its end, returns ``number``."""
    import os
    import sys
    import time

    # The worker's --parent, not its parent now: a worker outlives a killed manager for a moment
    manager = sys.argv[sys.argv.index("--parent") + 1] if "--parent" in sys.argv else os.getppid()
    path = os.path.join(marks, str(number))
    with open(path + ".started", "w") as handle:
        handle.write(f"{manager} {time.time()}")
    time.sleep(seconds)
    with open(path + ".done", "w") as handle:
        handle.write(f"{time.time()}")
    return number


@dataclass
class Case(faults.Case):
    mode: str = "provider"

    @property
    def combination(self) -> tuple:
        return self.mode, self.state, self.fault

    def __str__(self) -> str:
        return (f"case {self.number} ({self.mode}, state {self.state}, fault {self.fault}; replay: --replay "
                f"{self.mode}/{self.state}/{self.fault}/{self.seed})")


@dataclass
class Report(faults.Report):
    discarded: int = 0  # finished results a task did not end with
    unstarted_failed: int = 0  # tasks lost with a manager before they started (NodeManagerLost)
    finished_in_fault: int = 0  # bodies that ended as their manager was killed or stopped: the result never left it
    dealt_to_unable: int = 0  # Submits sent to a manager known to be draining, given up or without workers
    stranger_rss_growth: int = 0  # bytes: the largest growth of the driver's memory while a stranger sent
    managers_lost: int = 0

    def to_dict(self) -> dict:
        return {**super().to_dict(), "discarded": self.discarded, "unstarted_failed": self.unstarted_failed,
                "finished_in_fault": self.finished_in_fault, "dealt_to_unable": self.dealt_to_unable,
                "stranger_rss_growth_mib": round(self.stranger_rss_growth / 2**20, 1),
                "managers_lost": self.managers_lost}


def plan(cases: int, seed: int, modes=MODES) -> list[Case]:
    """``cases`` cases of ``modes``: every combination once in a seeded order, then seeded random picks."""
    combinations = [c for c in COMBINATIONS if c[0] in modes]
    return [Case(i, state, fault, case_seed, mode) for i, (mode, state, fault), case_seed
            in faults.seeded_picks(cases, seed, combinations)]


@dataclass
class Fault:
    """Where and when a case's fault landed."""

    victims: set = field(default_factory=set)  # pids of real managers it may cost tasks of
    at: float = float("inf")  # time.time() when it landed on them
    costly: bool = False
    losses_allowed: bool = False  # whether managers may be lost in this case


class Round:
    """One fresh executor under a DataFlowKernel (local or provider mode), a few cases, cleanup, checks."""

    def __init__(self, mode: str, run_dir: str, report: Report):
        import parsl
        from parsl.config import Config

        from scalpel_executor import ScalpelExecutor

        self.mode, self.run_dir, self.report = mode, run_dir, report
        self.marks = os.path.join(run_dir, "marks")
        self.site = os.path.join(run_dir, "site")
        os.makedirs(self.marks)
        os.makedirs(self.site)
        with open(os.path.join(self.site, "sitecustomize.py"), "w") as handle:
            handle.write(SITECUSTOMIZE)
        path = os.pathsep.join(filter(None, [self.site, os.environ.get("PYTHONPATH")]))
        common = dict(label="manager_faults", batching=Batching(window=0.002), heartbeat_period=HEARTBEAT_PERIOD,
                      heartbeat_threshold=HEARTBEAT_THRESHOLD, worker_env={"PYTHONPATH": path})
        if mode == "provider":
            from parsl.launchers import SingleNodeLauncher
            from parsl.providers import LocalProvider

            cpus = len(os.sched_getaffinity(0))
            launch = DEFAULT_LAUNCH_CMD.replace("{driver_threshold}", f"{MANAGER_DRIVER_THRESHOLD:g}")
            self.executor = ScalpelExecutor(
                provider=LocalProvider(init_blocks=2, min_blocks=0, max_blocks=2, nodes_per_block=1,
                                       launcher=SingleNodeLauncher()),
                launch_cmd=launch + f" --cpus $(( {{block_id}} % {cpus} ))", block_error_handler=False,
                profiles=False, **common)
        else:
            self.executor = ScalpelExecutor(profiles=False, **common)
        self.completions = faults.count_completions(self.executor)
        # Executor task id -> when its outcome was decided: provider mode, when the hub thread delivered
        # it (its callback runs later, on the completion thread, maybe after a block's cancel); local
        # mode, when the client's reader completed it.
        self.delivered: dict[int, float] = {}
        self.results_seen: dict[int, float] = {}  # executor task id -> when the driver read its Result(ok)
        complete = self.executor._complete

        def timed(task, outcome):
            self.delivered.setdefault(task.id, time.monotonic())
            complete(task, outcome)

        self.executor._complete = timed
        self.dealt_to_unable = 0
        self.preexisting = {child.pid for child in psutil.Process().children(recursive=True)}
        self.seen: dict[int, float] = {}  # pid -> create time, of every process the round started
        self.extras: list[subprocess.Popen] = []
        self.fakes: list[FakeManager] = []
        self.futures: list = []  # (future, number, case, fault)
        self.numbers = 0
        self.stall_next = threading.Event()
        self.dfk = parsl.load(Config(executors=[self.executor], run_dir=run_dir, retries=0, strategy_period=0.5,
                                     max_idletime=3600.0, initialize_logging=False))
        self.app = parsl.python_app(marked_task, executors=["manager_faults"])
        self.pool = self.executor.pool
        self._spy()
        self._watching = True
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()

    # -- what the driver reads and deals, and which processes the round started --------------------

    def _spy(self) -> None:
        """Count Results the driver reads and Submits dealt to managers that cannot run them; pause
        the reading thread once when asked (a stalled driver)."""
        pool = self.pool
        if self.mode == "provider":
            receive, send, judge, deliver = pool._receive, pool._send, pool._judge_silence, pool._deliver

            def receiving(router, frames):
                if len(frames) == 2:
                    self._saw(frames[1])
                receive(router, frames)

            def sending(router, manager, data, identity=None):
                if manager is not None and data is not PING and bytes(data[4:14]).startswith(b'["submit"') \
                        and (manager.draining or manager.unusable or not manager.live_slots):
                    self.dealt_to_unable += 1
                return send(router, manager, data, identity)

            def judging(router):  # after the pass's read, as when a stopped driver resumes: unread since
                self._stall_here()
                judge(router)

            def delivering(task, outcome):  # on the hub thread, as it reads: ordered with the Results it saw
                self.delivered.setdefault(task.id, time.monotonic())
                deliver(task, outcome)

            pool._receive, pool._send, pool._judge_silence, pool._deliver = receiving, sending, judging, delivering
        else:
            handle = pool._handle

            def handling(manager, message):
                self._stall_here()
                if isinstance(message, Result) and message.ok:
                    self.results_seen.setdefault(message.task_id, time.monotonic())
                handle(manager, message)

            pool._handle = handling

    def _saw(self, data: bytes) -> None:
        if len(data) < 1 << 16 and data[4:14].startswith(b'["result"'):
            try:
                message = decode(data)
            except ValueError:
                return
            if message.ok:
                self.results_seen.setdefault(message.task_id, time.monotonic())

    def _stall_here(self) -> None:
        if self.stall_next.is_set():
            self.stall_next.clear()
            time.sleep(STALL)

    def _watch(self) -> None:
        me = psutil.Process()
        last_scan = 0.0
        while self._watching:
            roots = [me, *self._manager_processes()]
            if time.monotonic() - last_scan > 0.5:  # the blocks' shells and managers are not our children
                last_scan = time.monotonic()
                roots += [p for p in psutil.process_iter(["cmdline"])
                          if any(self.run_dir in part for part in p.info["cmdline"] or ())]
            for root in roots:
                try:
                    family = [root] if root is not me else []
                    family += root.children(recursive=True)
                except psutil.Error:
                    continue
                for process in family:
                    if process.pid not in self.preexisting and process.pid not in self.seen:
                        try:
                            self.seen[process.pid] = process.create_time()
                        except psutil.Error:
                            pass
            time.sleep(0.05)

    def _manager_processes(self) -> list:
        pids = [m["pid"] for m in self.managers()] if self.mode == "provider" else [self.pool.pid]
        processes = []
        for pid in pids + [extra.pid for extra in self.extras]:
            try:
                processes.append(psutil.Process(pid))
            except psutil.Error:
                pass
        return processes

    # -- the executor's state ----------------------------------------------------------------------

    def managers(self) -> list[dict]:
        """Provider mode's connected managers, fakes left out."""
        return [m for m in self.pool.connected_managers() if not m["hostname"].startswith("fake-")]

    def usable(self) -> list[dict]:
        if self.mode == "local":
            ready = self.pool.worker_pids and len(self.pool.slot_cpus_map) > len(self.pool.retired_slots)
            return [{"pid": self.pool.pid, "worker_pids": self.pool.worker_pids}] if ready else []
        return [m for m in self.managers() if m["worker_count"] and m["active"]]

    def losses(self) -> int:
        return self.pool.managers_lost

    def until(self, condition, what: str, case: Case, timeout: float = WAIT) -> bool:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                self.report.failures.append(f"{case}: {what} within {timeout:.0f} s did not happen")
                return False
            time.sleep(0.01)
        return True

    def submit(self, case: Case, fault: Fault, seconds: float):
        number = self.numbers
        self.numbers += 1
        future = self.app(self.marks, number, seconds)
        self.futures.append((future, number, case, fault))
        self.report.tasks += 1
        return future

    def started_on(self, number: int) -> int | None:
        try:
            with open(os.path.join(self.marks, f"{number}.started")) as handle:
                return int(handle.read().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def wait_case(self, case: Case) -> None:
        for future, _, owner, _ in self.futures:
            if owner is case:
                try:
                    future.exception(timeout=WAIT)
                except TimeoutError:
                    self.report.failures.append(f"{case}: a task had not ended {WAIT:.0f} s after the fault")
                    return

    def ready(self, case: Case, fault: Fault, count: int) -> bool:
        """Wait until ``count`` managers can run tasks (the strategy starts blocks for waiting tasks)."""
        if self.mode == "local":
            count = 1
        deadline = time.monotonic() + WAIT
        while len(self.usable()) < count and time.monotonic() < deadline:
            if self.mode == "provider" and not self.pool.outstanding:  # the strategy starts blocks for work
                for _ in range(2):
                    self.submit(case, fault, 0.3)
            time.sleep(0.05)
        if len(self.usable()) < count:
            self.report.failures.append(f"{case}: {count} managers able to run tasks were not there within {WAIT:.0f} s")
            return False
        return True

    # -- one case --------------------------------------------------------------------------------

    def run_case(self, case: Case) -> None:
        rng = random.Random(case.seed)
        fault = Fault(costly=case.fault in COSTLY)
        if self.mode == "local" and self.pool.retired_slots:  # a core an earlier case broke: a fresh manager
            old = self.pool.pid
            os.kill(old, signal.SIGKILL)
            self.until(lambda: self.pool.pid != old and self.usable() and not self.pool.retired_slots,
                       "a fresh manager", case)
        if not self.ready(case, fault, 2):
            return
        self.wait_case(case)  # fillers first: the state is set up from a quiet executor
        losses = self.losses()
        if self.put_in_state(case, fault, rng):
            self.inject(case, fault, rng)
            self.wait_case(case)
        if not fault.losses_allowed and self.losses() != losses:
            self.report.failures.append(f"{case}: {self.losses() - losses} managers were lost to a fault that "
                                        f"must cost none")
        for _ in range(2):  # recovery: later tasks run
            self.submit(case, Fault(), 0.05)
        self.ready(case, Fault(), 1)
        self.wait_case(case)
        self.report.managers_lost += self.losses() - losses
        self.end_extras()

    def put_in_state(self, case: Case, fault: Fault, rng: random.Random) -> bool:
        """Bring a manager into ``case.state``; sets ``self.victim`` (a pid, or a FakeManager); False
        when the state could not be reached (a failure is reported)."""
        keyed = case.fault in KEYED_FAULTS
        state = case.state
        self.victim = None
        if keyed:
            fake = FakeManager(self.pool, f"{state}-{case.number}", state != "registering", HEARTBEAT_PERIOD)
            self.fakes.append(fake)
            fake.start()
            if not self.until(fake.configured.is_set, "the fake manager's configuration", case):
                return False
            self.victim = fake
        if state == "registering" and not keyed:
            extra = self.launch(case)
            if case.fault == "no_workers":
                self.break_workers(extra.pid)
            if not self.until(lambda: any(m["pid"] == extra.pid for m in self.pool.connected_managers())
                              or extra.poll() is not None, "the hand-launched manager's registration", case):
                return False
            self.victim = extra.pid
            for _ in range(2):  # bystanders on the block managers
                self.submit(case, fault, rng.uniform(0.2, 0.6))
        elif state in ("idle", "registering"):
            if not self.victim:
                self.victim = rng.choice(self.usable())["pid"]
        elif state in ("busy", "stalled"):
            for _ in range(2 * len(self.usable()) + (2 if keyed else 0)):
                self.submit(case, fault, rng.uniform(1.0, 1.6))
            if keyed:
                self.until(lambda: self.victim.submits, "a task dealt to the fake manager", case)
            else:
                self.victim = rng.choice(self.usable())["pid"]
                self.until(lambda: self.running_on(self.victim), "a task running on the chosen manager", case)
            if state == "stalled":
                self.stall_next.set()
                time.sleep(rng.uniform(0.3, 1.5))  # the fault lands while the driver is stalled
        elif state == "draining":
            extra = None if keyed else self.launch(case, drains=True)
            if extra is not None and not self.until(lambda: any(m["pid"] == extra.pid and m["worker_count"]
                                                                for m in self.managers()), "the hand-launched "
                                                    "manager's start", case):
                return False
            for _ in range(6):
                self.submit(case, fault, rng.uniform(1.0, 1.6))
            if keyed:
                self.until(lambda: self.victim.submits, "a task dealt to the fake manager", case)
                self.victim.outbox.put(encode(Drain(1.0)))
            else:
                self.victim = extra.pid
                self.until(lambda: self.running_on(extra.pid), "a task running on the draining manager", case)
                open(self.drain_trigger(case), "w").close()
                self.until(lambda: any(m["pid"] == extra.pid and m["draining"] for m in self.managers()),
                           "the hand-launched manager's drain", case)
        elif state == "replacing":
            for _ in range(2 * len(self.usable())):
                self.submit(case, fault, rng.uniform(0.8, 1.4))
            lost = rng.choice(self.usable())["pid"]
            self.until(lambda: self.running_on(lost), "a task running on the manager to replace", case)
            fault.victims.add(lost)
            fault.at = min(fault.at, time.time())
            fault.costly = fault.losses_allowed = True
            before = {m["pid"] for m in self.usable()}
            os.kill(lost, signal.SIGKILL)
            if not keyed:
                self.victim = self.newcomer(before, case, fault)
        return True

    def newcomer(self, before: set, case: Case, fault: Fault) -> int | None:
        """The manager process that replaces one of ``before`` (local: the client's replacement, once
        launched; provider: a block the strategy starts, for work kept waiting until it registers)."""
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            if self.mode == "local":
                if self.pool.pid not in before:
                    return self.pool.pid
            else:
                fresh = [m["pid"] for m in self.pool.connected_managers() if m["pid"] not in before]
                if fresh:
                    return fresh[0]
                if self.pool.outstanding < 2:
                    self.submit(case, fault, 0.5)
            time.sleep(0.005)
        self.report.failures.append(f"{case}: no manager replaced the killed one within {WAIT:.0f} s")
        return None

    def running_on(self, pid: int) -> bool:
        return any(self.started_on(number) == pid and not future.done() for future, number, _, _ in self.futures)

    def launch(self, case: Case, drains: bool = False) -> subprocess.Popen:
        """A manager started by hand, as a block would, on one of this host's CPUs."""
        cpus = sorted(os.sched_getaffinity(0))
        command = [sys.executable, "-c", DRAINS_ON_FILE, self.drain_trigger(case)] if drains \
            else [sys.executable, "-m", "scalpel_executor.runtime.node.manager"]
        command += ["--connect", self.pool.url, "--cert-dir", str(self.pool.cert_dir), "--block-id",
                    f"hand-{case.number}", "--cpus", str(cpus[case.number % len(cpus)]), "--driver-threshold",
                    f"{MANAGER_DRIVER_THRESHOLD:g}", "--connect-timeout", f"{WAIT:g}"]
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        self.extras.append(process)
        return process

    def drain_trigger(self, case: Case) -> str:
        return os.path.join(self.run_dir, f"drain-{case.number}")

    def break_workers(self, manager_pid: int) -> None:
        """From now on every worker this manager starts dies at start (the site's sitecustomize)."""
        directory = os.path.join(self.site, f"break-{manager_pid}")
        os.makedirs(directory, exist_ok=True)
        open(os.path.join(directory, "forever"), "w").close()

    def inject(self, case: Case, fault: Fault, rng: random.Random) -> None:
        victim = self.victim
        if case.fault in KEYED_FAULTS:
            fault.losses_allowed = True
            victim.outbox.put(malformed_message(rng) if case.fault == "malformed_keyed"
                              else encode(Heartbeat([], 0, [], []))[:10] + bytes(MAX_FRAME + 100))
            self.until(lambda: not any(m["hostname"] == f"fake-{victim.block_id}"
                                       for m in self.pool.connected_managers()), "the fake manager's loss", case)
            victim.stopping.set()
            return
        if case.fault in STRANGER_FAULTS:
            grown = stranger(self.pool.port, case.fault == "oversized_stranger", rng, WAIT)
            self.report.stranger_rss_growth = max(self.report.stranger_rss_growth, grown)
            if grown > STRANGER_RSS_LIMIT:
                self.report.failures.append(f"{case}: the driver's memory grew by {grown >> 20} MiB while a stranger "
                                            f"sent")
            return
        if case.fault == "slow_callback":  # later tasks' callbacks wait behind it
            self.submit(case, fault, 0.05).add_done_callback(lambda _: time.sleep(SLOW_CALLBACK))
            for _ in range(2):
                self.submit(case, fault, rng.uniform(0.1, 0.5))
            return
        if victim is None:
            return
        time.sleep(rng.uniform(0.0, 0.4))
        if case.fault in COSTLY:
            fault.victims.add(victim)
            fault.at = min(fault.at, time.time())
            fault.losses_allowed = True
        try:
            if case.fault == "sigkill":
                os.kill(victim, signal.SIGKILL)
            elif case.fault == "stop_short":
                os.kill(victim, signal.SIGSTOP)
                time.sleep(STOP_SHORT)
                faults.resume(victim)
            elif case.fault == "stop_long":  # stopped until the driver has lost it (a stall moves that later)
                os.kill(victim, signal.SIGSTOP)
                time.sleep(STOP_LONG)
                # Local mode judges a manager that has not sent Started by START_TIMEOUT, not by silence
                self.until(lambda: self.judged(victim, case.fault), "the stopped manager's loss", case,
                           START_TIMEOUT + WAIT if self.mode == "local" else WAIT)
                faults.resume(victim)
            elif case.fault == "no_workers":  # every worker it starts from now dies; those it has are killed
                self.break_workers(victim)
                workers = [child.pid for child in psutil.Process(victim).children()]
                for pid in workers[:1] if self.mode == "local" else workers:  # local: one core of two
                    os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass
        if case.fault in COSTLY:  # the driver has judged it before the case's later tasks are submitted
            self.until(lambda: self.judged(victim, case.fault), "the faulted manager's loss", case)

    def judged(self, victim: int, fault: str) -> bool:
        """Whether the driver has acted on the fault at ``victim``: lost it, or (local mode, a broken
        core) retired that core."""
        if self.mode == "local":  # a replacement that could not start is replaced in turn
            return self.pool.pid != victim or fault == "no_workers" and bool(self.pool.retired_slots)
        return all(m["pid"] != victim for m in self.pool.connected_managers())

    def end_extras(self) -> None:
        """End the managers started by hand and the fakes before the next case."""
        for fake in self.fakes:
            fake.stopping.set()
            fake.join(WAIT)
        self.fakes = []
        for extra in self.extras:
            if extra.poll() is None:
                extra.kill()
            extra.wait()
        if self.mode == "provider":
            pids = {extra.pid for extra in self.extras}
            deadline = time.monotonic() + WAIT
            while any(m["pid"] in pids for m in self.pool.connected_managers()) and time.monotonic() < deadline:
                time.sleep(0.01)

    # -- checking --------------------------------------------------------------------------------

    def finish(self) -> None:
        deliveries = {}
        for future, number, case, fault in self.futures:
            deliveries[number] = (future, case, fault)
        self.dfk.cleanup()
        self.end_extras()
        self._watching = False
        self._watcher.join()
        report = self.report
        report.dealt_to_unable += self.dealt_to_unable
        if self.dealt_to_unable:
            report.failures.append(f"round {report.rounds}: {self.dealt_to_unable} tasks were dealt to managers "
                                   f"known to be draining, given up or without workers")
        for future, number, case, fault in self.futures:
            self.check(future, number, case, fault)
        faults.check_completions(report, self.completions)
        left = faults.outlived(self.alive_seen(), LEFTOVER_WAIT)
        left &= self.alive_seen()
        if left:
            report.leftovers += len(left)
            report.failures.append(f"round {report.rounds} ({self.mode}): processes outlived cleanup: "
                                   f"{sorted(left)}")
        report.rounds += 1

    def alive_seen(self) -> set[int]:
        """Seen processes still running as themselves (not a later process given the same pid)."""
        alive = set()
        for pid, created in self.seen.items():
            try:
                process = psutil.Process(pid)
                if process.create_time() == created and process.status() != psutil.STATUS_ZOMBIE:
                    alive.add(pid)
            except psutil.Error:
                pass
        return alive

    def check(self, future, number: int, case: Case, fault: Fault) -> None:
        report = self.report
        if not future.done():
            report.lost += 1
            report.failures.append(f"{case}: task {number} was still pending after dfk.cleanup()")
            return
        error = future.exception()
        if error is None:
            report.outcomes["ok"] += 1
            if future.result() != number:
                report.failures.append(f"{case}: task {number} returned {future.result()!r}")
            return
        name = type(error).__name__
        report.outcomes[name] += 1
        executor_future = future.task_record.get("exec_fu")
        executor_id = getattr(executor_future, "parsl_executor_task_id", None)
        ran_on = self.started_on(number)
        done_at = self._done_at(number)
        # A Result read before the task's failure was decided was thrown away; one read after it (a
        # manager declared lost, resumed, sends what it held) comes too late to be anyone's, even
        # while the failure still waits for the completion thread.
        if self.results_seen.get(executor_id, float("inf")) < self.delivered.get(executor_id, float("inf")):
            report.discarded += 1
            report.failures.append(f"{case}: task {number}'s result reached the driver, yet it ended with {error!r}")
        elif done_at is not None:
            if fault.costly and ran_on in fault.victims and done_at > fault.at - FINISH_MARGIN:
                report.finished_in_fault += 1
            else:
                report.discarded += 1
                report.failures.append(f"{case}: task {number} finished its body (on manager {ran_on}) yet ended "
                                       f"with {error!r}")
        elif ran_on is None:
            if fault.costly and name in LOSS_ERRORS:
                report.unstarted_failed += 1
            else:
                report.failures.append(f"{case}: task {number} failed before it started, with {error!r}")
        elif not (fault.costly and ran_on in fault.victims and name in LOSS_ERRORS):
            report.failures.append(f"{case}: task {number}, running on manager {ran_on}, ended with {error!r}; "
                                   f"faulted managers: {sorted(fault.victims) or 'none'}")

    def _done_at(self, number: int) -> float | None:
        try:
            with open(os.path.join(self.marks, f"{number}.done")) as handle:
                return float(handle.read())
        except (OSError, ValueError):
            return None


def run(cases: int = 100, seed: int = 1, per_round: int = 8, progress=None, planned: list[Case] | None = None,
        modes=MODES) -> Report:
    """Run ``cases`` cases, ``per_round`` per fresh executor of each mode; returns the figures and any failures."""
    report = Report()
    started = time.monotonic()
    planned = planned if planned is not None else plan(cases, seed, modes)
    quieted = {name: logging.getLogger(name).level for name in ("parsl", "scalpel_executor")}
    for name in quieted:  # every injected fault would log its error and traceback
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        with tempfile.TemporaryDirectory(prefix="scalpel-manager-faults-") as workspace:
            for mode in MODES:
                faults.run_rounds(report, [case for case in planned if case.mode == mode], per_round,
                                  lambda: Round(mode, os.path.join(workspace, f"round-{report.rounds}"), report),
                                  progress)
    finally:  # the caller's logging as it was (a test run goes on logging after this)
        for name, level in quieted.items():
            logging.getLogger(name).setLevel(level)
    report.seconds = time.monotonic() - started
    return report


def main(argv: list[str] | None = None) -> int:
    chooser = argparse.ArgumentParser(add_help=False)
    chooser.add_argument("--mode", choices=MODES, action="append",
                         help="run only this mode's cases (repeatable; default both)")
    chooser.add_argument("--part", metavar="I/N", default="1/1",
                         help="run the I-th of N equal parts of the plan (N processes side by side; default 1/1)")
    chosen, rest = chooser.parse_known_args(argv)
    modes = tuple(chosen.mode or MODES)
    index, _, parts = chosen.part.partition("/")
    if not (index.isdigit() and parts.isdigit() and 1 <= int(index) <= int(parts)):
        chooser.error(f"--part takes I/N with 1 <= I <= N, e.g. 1/2, got {chosen.part!r}")

    def run_part(cases, seed, per_round, progress, planned):
        if planned is None:
            everything = plan(cases, seed, modes)
            size = -(-len(everything) // int(parts))
            planned = everything[(int(index) - 1) * size:int(index) * size]
        return run(cases, seed, per_round, progress, planned, modes)

    return faults.command_line(rest, __doc__, COMBINATIONS,
                               lambda number, combination, seed: Case(number, *combination[1:], seed, combination[0]),
                               run_part, "MODE/STATE/FAULT/SEED", "provider/busy/sigkill/7000014")


if __name__ == "__main__":
    sys.exit(main())
