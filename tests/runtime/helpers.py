"""What the runtime tests share: the generous bound, waiting on a condition, which processes live,
the manager tests' outcome recorder, and task bodies (the executor tests make Parsl apps of them).

Imported as ``tests.runtime.helpers`` (pytest runs from the repository root); the task bodies here
are shipped to workers by reference, and workers import them from the driver's sys.path.
"""

import threading
import time
from collections import defaultdict

import psutil
from parsl.serialize import deserialize, pack_apply_message

from scalpel_executor.core.tasks import Task
from scalpel_executor.runtime.contract import Job

GENEROUS = 30.0  # seconds: a bound that only a broken mechanism misses, never a slow machine


def alive(pids) -> list[int]:
    """Those of ``pids`` whose process runs (a zombie has ended)."""
    return [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]


def gone(pids) -> bool:
    return not alive(pids)


def wait_until(condition, timeout=GENEROUS, interval=0.02) -> bool:
    """Whether ``condition()`` came true within ``timeout`` seconds (asked every ``interval``)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


class Outcomes:
    """Every outcome a pool delivers, per task id (a list, so a second delivery shows)."""

    def __init__(self):
        self.by_task = defaultdict(list)
        self._changed = threading.Condition()

    def __call__(self, task, outcome):
        with self._changed:
            self.by_task[task.id].append((task, outcome))
            self._changed.notify_all()

    def wait(self, ids, timeout=GENEROUS):
        with self._changed:
            assert self._changed.wait_for(lambda: all(self.by_task[i] for i in ids), timeout), \
                {i: self.by_task[i] for i in ids}
        return {i: self.by_task[i][0][1] for i in ids}

    def value(self, task_id):
        (task, outcome), = self.by_task[task_id]
        assert outcome.ok and outcome.error is None, outcome
        return deserialize(outcome.payload)


def call(task_id, func, *args, walltime=None, **kwargs):
    """A pool's task that runs ``func(*args, **kwargs)``."""
    return Task(task_id, payload=Job(pack_apply_message(func, args, kwargs), walltime=walltime))


def where(x):
    import os

    return x, os.getpid(), sorted(os.sched_getaffinity(0))


def crash(how, pid_file=None):
    """Kill the worker running this task: ``exit`` (exit code 3), ``segfault``, ``sigkill``, or
    ``wait`` for a kill from outside; with ``pid_file``, the worker's pid written there first."""
    import ctypes
    import os
    import signal
    import time

    if pid_file:
        with open(pid_file + ".tmp", "w") as handle:
            handle.write(str(os.getpid()))
        os.rename(pid_file + ".tmp", pid_file)
    if how == "exit":
        os._exit(3)
    if how == "segfault":
        ctypes.string_at(0)
    if how == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "wait":  # for a kill from outside
        time.sleep(120)


def segfault_once(marker):
    """Kill the worker with SIGSEGV the first time (``marker`` does not exist yet), then return
    ``"recovered"``: a transient crash, for a retry to get past."""
    import ctypes
    import os

    if not os.path.exists(marker):
        open(marker, "w").close()
        ctypes.string_at(0)
    return "recovered"


def sleep_after_marking(path, seconds):
    import time

    open(path, "w").close()
    time.sleep(seconds)
    return seconds


def run_once_marked(path, seconds):
    """Append this worker's pid to ``path`` (one line per run of the task), then sleep ``seconds``."""
    import os
    import time

    with open(path, "a") as handle:
        handle.write(f"{os.getpid()}\n")
    time.sleep(seconds)
    return os.getpid()
