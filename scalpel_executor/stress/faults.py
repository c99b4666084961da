"""Fault injection: every task ends exactly once, whatever happens to its worker, and when.

Drives real ScalpelExecutors under a real DataFlowKernel through the states a worker can be in and
injects one fault per case at one state, chosen by a seeded random generator::

    state      where the fault lands
    ─────────  ────────────────────────────────────────────────────────────────────────────
    starting   a replacement worker that has not yet reported ready (after a kill set it off)
    idle       a ready worker with no task
    running    a worker in the middle of a task (the fault may come from the task itself)
    replacing  the worker of a task whose predecessor on that core just died
    walltime   a worker whose task is blocked in C past its walltime, as the kill comes due
    probing    the footprint sampler process (the worker's child) while a task runs

    fault               injected by
    ──────────────────  ──────────────────────────────────────────────────────────────────
    sigkill             SIGKILL from outside (or from the task itself, when running)
    sigstop             SIGSTOP from outside, SIGCONT 0.3 s later
    bg_exit             os._exit(9) from a thread the task left behind, 0.05 s after it returned
    sys_exit            sys.exit(3) in the task
    keyboard_interrupt  KeyboardInterrupt raised in the task
    base_exception      a BaseException subclass that is not an Exception
    fork                os.fork() in the task, the child returning into the worker's loop
    close_fds           the task closes every descriptor above 2 (the worker's socket included)
    unpicklable         the task returns a lock
    unreadable          the task returns an object that raises when the driver unpickles it
    unreadable_exit     the task returns an object whose unpickling calls sys.exit(3) in the driver
    huge_result         the result needs more memory to serialize than the worker may use

Invariants checked after every round (a fresh executor, several cases, ``dfk.cleanup()``):

1. every future is done, and the executor completed each task exactly once;
2. each outcome is a result or an error of the kind the fault allows (a task no fault touched
   succeeds, unless an outside kill or stop raced it onto the faulted worker);
3. after each case, tasks on every core succeed (the executor recovered);
4. no process the executor started (workers, samplers, children of tasks) outlives cleanup.

Usage::

    python benchmarks/faults.py                      # 200 cases, seed 1
    python benchmarks/faults.py --cases 3000 --seed 7 --json faults.json
    python benchmarks/faults.py --seed 123 --cases 1  # replay the case a failure printed

``tests/runtime/test_faults.py`` runs it at a small size with every fault and state at least once.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import psutil

STATES = ("starting", "idle", "running", "replacing", "walltime", "probing")
IN_TASK = ("bg_exit", "sys_exit", "keyboard_interrupt", "base_exception", "fork", "close_fds",
           "unpicklable", "unreadable", "unreadable_exit", "huge_result")
FAULTS = ("sigkill", "sigstop") + IN_TASK
# Which faults can land in which state: outside signals anywhere, the task's own faults while it runs.
COMBINATIONS = tuple(
    [(state, fault) for state in STATES for fault in ("sigkill", "sigstop")]
    + [("running", fault) for fault in IN_TASK + ("sigkill",)]
    + [("replacing", fault) for fault in ("sys_exit", "fork", "bg_exit")]
)
TASK_ERRORS = {  # the error class names a faulted task may end with
    "sigkill": {"WorkerDied"},
    "sigstop": set(),  # stopped and continued: the task still succeeds
    "bg_exit": set(),  # the thread exits after the task returned: its result arrives first
    "sys_exit": {"TaskExit"},
    "keyboard_interrupt": {"TaskExit"},
    "base_exception": {"TaskExit"},
    "fork": set(),
    "close_fds": {"WorkerDied"},
    "unpicklable": {"TypeError"},
    "unreadable": {"UnreadableError", "DeserializationError"},
    "unreadable_exit": {"TaskExit"},  # fails its own future (it was left pending forever)
    "huge_result": {"TypeError", "RuntimeError", "MemoryError"},
}
STOP_FOR = 0.3  # seconds a SIGSTOPped process stays stopped
WALLTIME = 0.5  # seconds, with a grace shortened to WALLTIME_GRACE for the walltime state
WALLTIME_GRACE = 0.3
READY_TIMEOUT = 20.0  # the node's start deadline, shortened so a stuck start fails a round quickly
LEFTOVER_WAIT = 3.0  # seconds after cleanup within which every process must be gone


class InjectedBaseException(BaseException):
    """A BaseException subclass that is not an Exception (as some frameworks define)."""


class UnreadableError(Exception):
    """Raised when the driver unpickles an :class:`Unreadable` result."""


def _explode():
    raise UnreadableError("this result cannot be read back (injected)")


class Unreadable:
    def __reduce__(self):
        return (_explode, ())


class ExitsWhenRead:
    def __reduce__(self):
        return (sys.exit, (3,))


def fault_task(fault: str, value: int, walltime: float | None = None, parsl_resource_specification: dict | None = None):
    """The task a case submits: returns ``value``, after doing ``fault`` to its own worker."""
    import os
    import signal
    import sys
    import threading
    import time

    if fault == "sys_exit":
        sys.exit(3)
    if fault == "keyboard_interrupt":
        raise KeyboardInterrupt
    if fault == "base_exception":
        raise InjectedBaseException("injected")
    if fault == "fork":
        os.fork()  # both return: the child must never answer
        return value
    if fault == "bg_exit":
        threading.Thread(target=lambda: (time.sleep(0.05), os._exit(9)), daemon=True).start()
        return value
    if fault == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if fault == "close_fds":
        os.closerange(3, 4096)
        return value
    if fault == "unpicklable":
        return threading.Lock()
    if fault == "unreadable":
        return Unreadable()
    if fault == "unreadable_exit":
        return ExitsWhenRead()
    if fault == "huge_result":
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        usage = _virtual_memory()
        result = bytearray(48 << 20)  # fits; serializing it needs another copy, which does not
        resource.setrlimit(resource.RLIMIT_AS, (usage + (80 << 20), hard))
        # Lift the limit again once the worker is back in its loop, so later tasks run normally.
        threading.Timer(0.2, resource.setrlimit, (resource.RLIMIT_AS, (soft, hard))).start()
        return result
    if fault == "sleep":
        time.sleep(value / 1000)
        return value
    if fault == "block":  # blocked in C, where Parsl's walltime cannot reach it
        import select

        select.select([], [], [], 30)
        return value
    return value


def _virtual_memory() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


@dataclass
class Case:
    number: int
    state: str
    fault: str
    seed: int

    @property
    def combination(self) -> tuple:
        return self.state, self.fault

    def __str__(self) -> str:
        return f"case {self.number} (state {self.state}, fault {self.fault}; replay: --replay {self.state}/{self.fault}/{self.seed})"


@dataclass
class Report:
    cases: int = 0
    rounds: int = 0
    tasks: int = 0
    outcomes: Counter = field(default_factory=Counter)
    combinations: Counter = field(default_factory=Counter)
    lost: int = 0
    doubled: int = 0
    leftovers: int = 0
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {
            "cases": self.cases, "rounds": self.rounds, "tasks": self.tasks,
            "outcomes": dict(self.outcomes),
            "combinations": {"/".join(key): n for key, n in sorted(self.combinations.items())},
            "lost": self.lost, "doubled": self.doubled, "leftovers": self.leftovers,
            "failures": self.failures, "seconds": round(self.seconds, 1),
        }


class Round:
    """One fresh executor under a DataFlowKernel, a few cases, cleanup and the invariant checks."""

    def __init__(self, run_dir: str, report: Report):
        import parsl
        from parsl.config import Config

        import scalpel_executor.runtime.node.pool as pool_module
        from scalpel_executor import Batching, ScalpelExecutor

        pool_module.READY_TIMEOUT = READY_TIMEOUT
        self.report = report
        # Children this process had before the round (a multiprocessing resource tracker, another
        # test's worker) are not the round's to end.
        self.preexisting = {child.pid for child in psutil.Process().children(recursive=True)}
        # The pool in this process (node_manager=False): the harness reads its workers' states to
        # time each fault. The same WorkerPool runs inside a node manager; the manager's own faults
        # are tests/runtime/test_manager.py's.
        self.executor = ScalpelExecutor(label="faults", profiles=False, batching=Batching(window=0.001),
                                        node_manager=False)
        self.completions = count_completions(self.executor)  # task id -> times the executor completed it
        self.dfk = parsl.load(Config(executors=[self.executor], run_dir=run_dir, retries=0,
                                     initialize_logging=False))
        self.pool = self.executor.pool
        self.pool.walltime_grace = WALLTIME_GRACE
        self.app = parsl.python_app(fault_task, executors=["faults"])
        self.futures = []  # (future, allowed error names or None for "must succeed", case)
        self.seen_pids: set[int] = set()
        self._watching = True
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()

    # -- what the executor started ---------------------------------------------------------------

    def _watch(self) -> None:
        me = psutil.Process()
        while self._watching:
            try:
                self.seen_pids.update(child.pid for child in me.children(recursive=True)
                                      if child.pid not in self.preexisting)
            except psutil.Error:
                pass
            time.sleep(0.01)

    def workers(self) -> dict:
        return dict(self.pool._workers)

    def wait_all_ready(self, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        slots = len(self.pool.slot_cpus_map) - len(self.pool.retired_slots)
        while time.monotonic() < deadline:
            workers = self.workers()
            if len(workers) == slots and all(w.ready for w in workers.values()):
                return True
            time.sleep(0.01)
        return False

    def submit(self, fault: str, value: int, allowed, case, **kwargs):
        future = self.app(fault, value, **kwargs)
        self.futures.append((future, allowed, case))
        self.report.tasks += 1
        return future

    # -- injecting -------------------------------------------------------------------------------

    def signal(self, pid: int, how: str) -> None:
        try:
            if how == "sigkill":
                os.kill(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGSTOP)
                threading.Timer(STOP_FOR, resume, (pid,)).start()
        except ProcessLookupError:
            pass

    def busy_worker(self, future, timeout: float = 10.0):
        """The worker running ``future``'s task, once it runs; None if it ended first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not future.done():
            task_id = getattr(future, "tid", None)
            for worker in self.workers().values():
                task = worker.task
                if task is not None and worker.ready and getattr(task.payload, "future", None) is not None \
                        and self._dfk_task_of(task) == task_id:
                    return worker
            time.sleep(0.002)
        return None

    def _dfk_task_of(self, task) -> int | None:
        """The DataFlowKernel's task id of an executor task (its executor future maps back to it)."""
        executor_future = task.payload.future
        for record in self.dfk.tasks.values():
            if record.get("exec_fu") is executor_future:
                return record["id"]
        return None

    def run_case(self, case: Case) -> None:
        rng = random.Random(case.seed)
        state, fault = case.state, case.fault
        # A task already sent to a worker that an outside signal or a left-behind thread kills is lost
        # with it (WorkerDied), as under any executor: bystanders may end so, nothing else may.
        bystander_errors = {"WorkerDied"} if fault in ("sigkill", "bg_exit") or state == "starting" else None
        cores = len(self.pool.slot_cpus_map)
        for i in range(rng.randrange(0, 2 * cores + 1)):  # bystanders: short tasks no fault targets
            self.submit("sleep", rng.randrange(0, 30), bystander_errors, case)
        victim, faulted = self.inject(case, rng)
        if faulted is not None:
            faulted.exception(timeout=60)
        if victim is not None and fault == "sigkill":  # until the executor has noticed the death
            deadline = time.monotonic() + 10
            while victim in self.pool.worker_pids and time.monotonic() < deadline:
                time.sleep(0.002)
        time.sleep(STOP_FOR + 0.05 if fault == "sigstop" else 0.1 if fault == "bg_exit" else 0)
        # Recovery: once replacements are ready, a task on every core succeeds.
        if not self.wait_all_ready():
            self.report.failures.append(f"{case}: workers were not all ready 30 s after the fault")
        for i in range(2 * cores):
            self.submit("sleep", 20, None, case)
        for future, _, _ in self.futures:
            try:
                future.exception(timeout=60)
            except TimeoutError:
                pass

    def inject(self, case: Case, rng: random.Random):
        """Put a worker in ``case.state`` and inject ``case.fault``; returns (pid signalled, faulted future)."""
        state, fault = case.state, case.fault
        if state == "running" and fault in IN_TASK:
            return None, self.submit(fault, 1, TASK_ERRORS[fault] or None, case)
        if state == "replacing":
            self.submit("sigkill", 1, {"WorkerDied"}, case)
            time.sleep(rng.uniform(0, 0.05))
            return None, self.submit(fault, 2, TASK_ERRORS[fault] or None, case)
        if state == "running":  # an outside signal at a busy worker
            future = self.submit("sleep", 200, {"WorkerDied"} if fault == "sigkill" else None, case)
            worker = self.busy_worker(future)
            if worker is not None:
                time.sleep(rng.uniform(0, 0.1))
                self.signal(worker.process.pid, fault)
            return worker and worker.process.pid, future
        if state == "idle":
            self.wait_all_ready()
            idle = [w for w in self.workers().values() if w.task is None and w.ready]
            if not idle:
                return None, None
            pid = rng.choice(idle).process.pid
            self.signal(pid, fault)
            return pid, None
        if state == "starting":
            self.wait_all_ready()
            victim = rng.choice(list(self.workers().values()))
            os.kill(victim.process.pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                fresh = [w for w in self.workers().values() if not w.ready]
                if fresh:
                    time.sleep(rng.uniform(0, 0.1))
                    self.signal(fresh[0].process.pid, fault)
                    return fresh[0].process.pid, None
                time.sleep(0.001)
            return None, None
        if state == "walltime":
            future = self.submit("block", 3, {"WalltimeExceeded", "WorkerDied"}, case, walltime=WALLTIME)
            worker = self.busy_worker(future)
            if worker is not None:
                time.sleep(max(0.0, WALLTIME + WALLTIME_GRACE + rng.uniform(-0.1, 0.05)
                               - (time.monotonic() - worker.task.payload.started)))
                self.signal(worker.process.pid, fault)
            return worker and worker.process.pid, future
        if state == "probing":
            future = self.submit("sleep", 300, None, case)  # losing the sampler costs the footprint, not the task
            worker = self.busy_worker(future)
            sampler = _sampler_of(worker.process.pid) if worker is not None else None
            if sampler is not None:
                time.sleep(rng.uniform(0, 0.1))
                self.signal(sampler, fault)
            return None, future
        raise ValueError(f"no way to inject {fault!r} in state {state!r}")

    # -- checking --------------------------------------------------------------------------------

    def finish(self) -> None:
        self.dfk.cleanup()
        self._watching = False
        self._watcher.join()
        report = self.report
        for future, allowed, case in self.futures:
            if not future.done():
                report.lost += 1
                report.failures.append(f"{case}: a future was still pending after dfk.cleanup()")
                continue
            error = future.exception()
            name = "ok" if error is None else type(error).__name__
            report.outcomes[name] += 1
            if error is not None and (allowed is None or name not in allowed):
                report.failures.append(f"{case}: a task ended with {error!r}; allowed: {sorted(allowed or ['a result'])}")
        check_completions(report, self.completions)
        left = outlived(self.seen_pids, LEFTOVER_WAIT)
        if left:
            report.leftovers += len(left)
            report.failures.append(f"round {report.rounds}: processes outlived cleanup: {sorted(left)}")
        report.rounds += 1


def count_completions(executor) -> Counter:
    """Wrap ``executor._complete`` (before ``start()``, which hands it to the pool) to count, per
    executor task id, how many times the executor completed that task."""
    completions: Counter = Counter()
    complete = executor._complete

    def counted(task, outcome):
        completions[task.id] += 1
        complete(task, outcome)

    executor._complete = counted
    return completions


def check_completions(report: "Report", completions: Counter) -> None:
    """Count and describe in ``report`` each task completed other than once."""
    for task_id, count in completions.items():
        if count != 1:
            report.doubled += 1
            report.failures.append(f"task {task_id} was completed {count} times")


def outlived(pids, wait: float) -> set[int]:
    """Those of ``pids`` still running ``wait`` seconds from now (returns as soon as none is)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and _alive(pids):
        time.sleep(0.05)
    return _alive(pids)


def resume(pid: int) -> None:
    """SIGCONT, if the process still exists."""
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass


def _sampler_of(worker_pid: int) -> int | None:
    try:
        for child in psutil.Process(worker_pid).children():
            if "--sampler" in child.cmdline():
                return child.pid
    except psutil.Error:
        pass
    return None


def _alive(pids) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.add(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def seeded_picks(cases: int, seed: int, combinations) -> list[tuple[int, tuple, int]]:
    """``(number, combination, case seed)`` for ``cases`` cases: every combination once in a seeded
    order, then seeded random picks; the same for the same arguments."""
    rng = random.Random(seed)
    order = list(combinations)
    rng.shuffle(order)
    chosen = [order[i] if i < len(order) else rng.choice(combinations) for i in range(cases)]
    return [(i, combination, seed * 1_000_003 + i) for i, combination in enumerate(chosen)]


def plan(cases: int, seed: int) -> list[Case]:
    """``cases`` cases: every combination once in a seeded order, then seeded random picks."""
    return [Case(i, state, fault, case_seed) for i, (state, fault), case_seed in seeded_picks(cases, seed, COMBINATIONS)]


def run(cases: int = 200, seed: int = 1, per_round: int = 8, progress=None, planned: list[Case] | None = None) -> Report:
    """Run ``cases`` cases, ``per_round`` per fresh executor; returns the figures and any failures."""
    report = Report()
    started = time.monotonic()
    planned = planned if planned is not None else plan(cases, seed)
    with tempfile.TemporaryDirectory(prefix="scalpel-faults-") as run_dir:
        run_rounds(report, planned, per_round, lambda: Round(run_dir, report), progress)
    report.seconds = time.monotonic() - started
    return report


def run_rounds(report: Report, planned: list, per_round: int, new_round, progress=None) -> None:
    """Run ``planned`` cases, ``per_round`` per round that ``new_round()`` makes, each round finished
    (cleanup and checks) whatever happens; counts each case under its combination."""
    for first in range(0, len(planned), per_round):
        current = new_round()
        try:
            for case in planned[first:first + per_round]:
                current.run_case(case)
                report.cases += 1
                report.combinations[case.combination] += 1
                if progress:
                    progress(report)
        finally:
            current.finish()


def main(argv: list[str] | None = None) -> int:
    return command_line(argv, __doc__, COMBINATIONS, lambda number, combination, seed: Case(number, *combination, seed),
                        run, "STATE/FAULT/SEED", "idle/sigkill/1000003")


def command_line(argv, doc: str, combinations, make_case, run_cases, replay_form: str, replay_example: str) -> int:
    """A fault harness's command line: ``--cases``, ``--seed``, ``--per-round``, ``--json``, and
    ``--replay`` of one case as a failure printed it (``replay_form``: the combination's parts and
    the case's seed, joined by "/"); prints the figures; exit status 1 when a case failed."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=doc)
    parser.add_argument("--cases", type=int, default=200, help="fault cases to run (default 200)")
    parser.add_argument("--seed", type=int, default=1, help="seeds the choice of states, faults and timings")
    parser.add_argument("--per-round", type=int, default=8, help="cases per fresh executor (default 8)")
    parser.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    parser.add_argument("--replay", metavar=replay_form, help="run one case again, as a failure printed it")
    args = parser.parse_args(argv)
    planned = None
    if args.replay:
        *combination, case_seed = args.replay.split("/")
        if tuple(combination) not in combinations or not case_seed.isdigit():
            parser.error(f"--replay takes {replay_form} as a failure prints it, e.g. {replay_example}, with a "
                         f"combination this harness injects; got {args.replay!r}")
        planned = [make_case(0, tuple(combination), int(case_seed))]
        args.cases = 1
    if args.cases < 1 or args.per_round < 1:
        parser.error(f"--cases and --per-round must be at least 1, got {args.cases} and {args.per_round}")
    logging.basicConfig(level=logging.ERROR)
    logging.getLogger("parsl").setLevel(logging.CRITICAL)  # each injected failure would print its traceback

    printed = 0  # failures printed so far: each as soon as a case finds it

    def progress(report: Report) -> None:
        nonlocal printed
        for failure in report.failures[printed:]:
            print(f"FAILED {failure}", file=sys.stderr, flush=True)
        printed = len(report.failures)
        if report.cases % 10 == 0 or report.cases == args.cases:
            print(f"{report.cases}/{args.cases} cases, {report.tasks} tasks, {len(report.failures)} failures",
                  file=sys.stderr, flush=True)

    report = run_cases(args.cases, args.seed, args.per_round, progress, planned)
    figures = report.to_dict()
    print(json.dumps(figures, indent=1))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(figures, handle, indent=1)
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
