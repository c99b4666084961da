"""``pin_driver``: the driver's Parsl threads on one CPU, while they are busy (``"busy"``, the
default) or while the executor runs (``"auto"``, a CPU), and back after.

The pinning cases run in threads of their own (the pin confines the calling thread and what it
starts), and the end-to-end case in a Parsl script of its own, so pytest's own threads keep their
CPUs whatever a case does.
"""

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalpel_executor import ScalpelExecutor
from scalpel_executor.core.cpulist import format_cpu_list
from scalpel_executor.host.sysfs import allowed_cpus, detect_topology
from scalpel_executor.runtime.driver import driver_pin
from scalpel_executor.runtime.driver.driver_pin import BusyGate, BusyPin, DriverPin, resolve_pin_driver

PROJECT_ROOT = str(Path(__file__).resolve().parents[2])
CPUS = sorted(os.sched_getaffinity(0))
TWO_CPUS = pytest.mark.skipif(len(CPUS) < 2, reason="needs two CPUs: pinned to one of one changes nothing")


def test_pin_driver_names_a_cpu_of_this_process_or_auto():
    assert resolve_pin_driver(None) is None
    assert resolve_pin_driver("auto") == CPUS[-1]
    assert resolve_pin_driver("busy") == (CPUS[-1] if len(CPUS) > 1 else None)  # one CPU: nothing to gain
    assert resolve_pin_driver(CPUS[0]) == CPUS[0]
    with pytest.raises(ValueError, match=r"pin_driver=4096 is not a CPU this process may use \(" + format_cpu_list(CPUS)):
        resolve_pin_driver(4096)
    with pytest.raises(ValueError, match="pin_driver must be a CPU number, 'auto', 'busy' or None, got 'fast'"):
        resolve_pin_driver("fast")
    with pytest.raises(TypeError, match="got bool True"):
        resolve_pin_driver(True)
    with pytest.raises(TypeError, match="got float 1.0"):
        resolve_pin_driver(1.0)


@TWO_CPUS
def test_auto_takes_the_last_cpu_no_worker_is_on():
    assert resolve_pin_driver("auto", workers=CPUS[1:]) == CPUS[0]  # the one CPU left free
    assert resolve_pin_driver("auto", workers=CPUS[:-1]) == CPUS[-1]
    assert resolve_pin_driver("auto", workers=CPUS) == CPUS[-1]  # a worker on every CPU: the last
    assert resolve_pin_driver("auto", workers=range(10_000)) == CPUS[-1]  # an emulated wider node
    assert resolve_pin_driver(CPUS[0], workers=CPUS) == CPUS[0]  # a CPU asked for is taken as asked
    # max_workers_per_node keeps the first cores: "auto" takes one of the others
    executor = ScalpelExecutor(profiles=False, pin_driver="auto", max_workers_per_node=len(CPUS) - 1)
    assert executor._driver_cpu not in executor.resolved_topology.cpus


def test_pin_driver_needs_per_thread_affinity(monkeypatch):
    monkeypatch.setattr(driver_pin, "thread_affinity_available", lambda: False)
    with pytest.raises(ValueError, match="pin_driver='auto' needs per-thread CPU affinity"):
        resolve_pin_driver("auto")
    assert resolve_pin_driver(None) is None  # off: nothing asked of the platform
    assert resolve_pin_driver("busy") is None  # the default: off where it cannot be, and no error
    assert ScalpelExecutor(profiles=False)._driver_cpu is None


def test_the_executor_checks_pin_driver_when_it_is_made(tmp_path):
    with pytest.raises(ValueError, match="is not a CPU this process may use"):
        ScalpelExecutor(profiles=False, pin_driver=4096)
    with pytest.raises(ValueError, match="pin_driver='auto' is a local-mode option.*node_manager=True"):
        ScalpelExecutor(profiles=False, pin_driver="auto", node_manager=False)
    from parsl.providers import LocalProvider

    with pytest.raises(ValueError, match="pin_driver=0 is a local-mode option.*with provider="):
        ScalpelExecutor(profiles=False, pin_driver=0, provider=LocalProvider())
    assert ScalpelExecutor(profiles=False, pin_driver="auto").pin_driver == "auto"  # read back, as Parsl does
    # the default, "busy", where the driver runs no node manager of its own: off, not an error
    assert ScalpelExecutor(profiles=False).pin_driver == "busy"
    assert ScalpelExecutor(profiles=False, provider=LocalProvider())._driver_cpu is None
    assert ScalpelExecutor(profiles=False, node_manager=False)._driver_cpu is None
    assert ScalpelExecutor(profiles=False, pin_driver=None)._driver_cpu is None


def _in_thread(work):
    """Run ``work()`` in a thread of its own; its result, or its exception raised here."""
    box = {}

    def run():
        try:
            box["result"] = work()
        except BaseException as error:  # noqa: BLE001 - re-raised in the test's thread
            box["error"] = error

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    if "error" in box:
        raise box["error"]
    return box["result"]


@TWO_CPUS
def test_a_pin_confines_its_thread_and_what_it_starts_and_release_gives_their_cpus_back():
    cpu = CPUS[-1]
    bystander_ready, bystander_done = threading.Event(), threading.Event()
    seen = {}

    def bystander():  # a thread that ran before the pin: left alone
        seen["bystander_id"] = threading.get_native_id()
        bystander_ready.set()
        bystander_done.wait(30)

    other = threading.Thread(target=bystander)
    other.start()
    bystander_ready.wait(30)

    def work():
        me = threading.get_native_id()
        pin = DriverPin(cpu)
        pin.pin()
        try:
            seen["pinned"] = os.sched_getaffinity(me)
            seen["allowed"] = allowed_cpus()  # the process's, not this thread's one CPU
            seen["detected"] = detect_topology().cpus
            seen["bystander"] = os.sched_getaffinity(seen["bystander_id"])
            started, own = threading.Event(), threading.Event()
            release_child, release_own = threading.Event(), threading.Event()
            ids = {}

            def child():
                ids["child"] = threading.get_native_id()
                started.set()
                release_child.wait(30)

            def sets_its_own():
                ids["own"] = threading.get_native_id()
                os.sched_setaffinity(0, {CPUS[0]})
                own.set()
                release_own.wait(30)

            threads = [threading.Thread(target=child), threading.Thread(target=sets_its_own)]
            for thread in threads:
                thread.start()
            started.wait(30), own.wait(30)
            seen["child"] = os.sched_getaffinity(ids["child"])
            pin.release()
            pin.release()  # idempotent
            seen["child_after"] = os.sched_getaffinity(ids["child"])
            seen["own_after"] = os.sched_getaffinity(ids["own"])
            release_child.set(), release_own.set()
            for thread in threads:
                thread.join(30)
        finally:
            pin.release()
        seen["after"] = os.sched_getaffinity(me)
        seen["allowed_after"] = allowed_cpus()

    try:
        _in_thread(work)
    finally:
        bystander_done.set()
        other.join(30)
    assert seen["pinned"] == {cpu}
    assert seen["allowed"] == set(CPUS) and sorted(seen["detected"]) == sorted(detect_topology().cpus)
    assert seen["bystander"] == set(CPUS)
    assert seen["child"] == {cpu}  # inherited
    assert seen["child_after"] == set(CPUS)  # started meanwhile: the process's CPUs
    assert seen["own_after"] == {CPUS[0]}  # set its own: left alone
    assert seen["after"] == set(CPUS) and seen["allowed_after"] == set(CPUS)


@TWO_CPUS
def test_a_start_that_fails_gives_the_cpus_back(tmp_path, monkeypatch):
    from scalpel_executor.runtime.driver import executor as executor_module

    class Refused(Exception):
        pass

    def refuse(*args, **kwargs):
        raise Refused("no manager today")

    monkeypatch.setattr(executor_module, "ManagerClient", refuse)
    executor = ScalpelExecutor(profiles=str(tmp_path / "profiles.sqlite"), pin_driver=CPUS[-1])

    def work():
        with pytest.raises(Refused):
            executor.start()
        return os.sched_getaffinity(0), allowed_cpus()

    assert _in_thread(work) == (set(CPUS), set(CPUS))


def test_a_pin_that_cannot_be_set_changes_nothing(monkeypatch):
    def refused(thread_id, cpus):
        raise OSError(22, "Invalid argument")

    monkeypatch.setattr(driver_pin, "set_thread_cpus", refused)
    pin = DriverPin(CPUS[-1])

    def work():
        with pytest.raises(OSError):
            pin.pin()
        pin.release()  # nothing was pinned: nothing to give back
        return os.sched_getaffinity(0), driver_pin._holding

    assert _in_thread(work) == (set(CPUS), 0)
    assert allowed_cpus() == set(CPUS)


@TWO_CPUS
def test_two_pins_keep_the_process_cpus_until_the_last_is_released():
    def work():
        first, second = DriverPin(CPUS[-1]), DriverPin(CPUS[-1])
        first.pin()
        second.pin()
        first.release()
        during = allowed_cpus()
        second.release()
        return during, os.sched_getaffinity(0)

    during, after = _in_thread(work)
    assert during == set(CPUS)  # the second still holds: not this thread's one CPU
    assert after == set(CPUS)


SCRIPT = textwrap.dedent(
    """
    import os
    import sys
    import threading

    import parsl
    import psutil
    from parsl import python_app
    from parsl.config import Config
    from scalpel_executor import ScalpelExecutor

    @python_app
    def cpus_here():
        import os
        import time

        time.sleep(0.2)  # so both workers take a task
        return os.getpid(), sorted(os.sched_getaffinity(0))

    def cpus(tid):
        return ",".join(map(str, sorted(os.sched_getaffinity(tid))))

    if __name__ == "__main__":
        executor = ScalpelExecutor(label="scalpel", profiles=False, pin_driver=int(sys.argv[2]))
        with parsl.load(Config(executors=[executor], run_dir=sys.argv[1])):
            runs = [f.result() for f in [cpus_here() for _ in range(4)]]
            print("MAIN", cpus(0))
            for thread in threading.enumerate():
                print("THREAD", thread.name, cpus(thread.native_id))
            manager = psutil.Process(executor.pool.pid)
            print("MANAGER", ",".join(map(str, manager.cpu_affinity())))
            for pid, where in runs:
                print("TASK", pid, ",".join(map(str, where)))
        print("AFTER", cpus(0))
    """
)


@TWO_CPUS
def test_a_run_with_pin_driver_confines_the_driver_not_its_manager_or_workers(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    cpu = CPUS[0]  # not "auto"'s: the pin is the one asked for
    env = dict(os.environ, PYTHONPATH=PROJECT_ROOT, SCALPEL_PROFILE_STORE=str(tmp_path / "profiles.sqlite"))
    run = subprocess.run([sys.executable, str(script), str(tmp_path / "runinfo"), str(cpu)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    lines = [line.split() for line in run.stdout.splitlines()]
    everything = ",".join(map(str, CPUS))
    assert [line[1] for line in lines if line[0] == "MAIN"] == [str(cpu)]
    threads = {line[1]: line[2] for line in lines if line[0] == "THREAD"}
    assert threads["scalpel-manager-reader"] == str(cpu)
    assert threads["Task-Launch_0"] == str(cpu)  # Parsl's, started after the pin
    assert [line[1] for line in lines if line[0] == "MANAGER"] == [everything]
    tasks = [(line[1], line[2]) for line in lines if line[0] == "TASK"]
    assert len(tasks) == 4
    assert {where for _, where in tasks} == {str(c) for c in CPUS[:2]}  # each worker on its own core, as ever
    assert [line[1] for line in lines if line[0] == "AFTER"] == [everything]


# -- pin_driver="busy": the gate ----------------------------------------------------------------

share = st.floats(min_value=0.0, max_value=2.0, allow_nan=False)
windows = st.lists(st.tuples(share, share), max_size=60)  # (the driver's threads, the workers)


@given(windows, st.integers(min_value=1, max_value=4))
def test_the_gate_turns_only_after_steady_windows_in_a_row_past_its_threshold(busy, steady):
    gate = BusyGate(engage=0.75, release=0.45, steady=steady, workers_free=0.5)
    pinned, history = False, []
    for threads, workers in busy:
        turn = gate.step(threads, workers)
        history.append((threads, workers))
        if turn is None:
            assert gate.pinned == pinned
            continue
        assert turn == gate.pinned == (not pinned)  # it says which way it turned, and turns that way
        last = history[-steady:]
        assert len(last) == steady
        if turn:  # pinned: the last `steady` windows were busy, and the workers mostly free
            assert all(threads >= 0.75 and workers < 0.5 for threads, workers in last)
        else:  # released: the last `steady` windows were quiet
            assert all(threads < 0.45 for threads, _ in last)
        pinned, history = turn, []  # the next turn needs `steady` windows of its own


@given(st.lists(st.floats(min_value=0.45, max_value=0.7499), max_size=40), st.booleans())
def test_between_its_thresholds_the_gate_stays_as_it_is(busy, start_pinned):
    gate = BusyGate(engage=0.75, release=0.45, steady=1)
    if start_pinned:
        assert gate.step(0.9) is True
    for share in busy:
        assert gate.step(share) is None
    assert gate.pinned == start_pinned


def test_the_gate_pins_a_burst_and_releases_after_it():
    gate = BusyGate(engage=0.75, release=0.45, steady=2)
    assert [gate.step(share) for share in (0.9, 0.3, 0.9, 0.95, 0.8, 0.5, 0.2, 0.8, 0.1, 0.05)] == \
        [None, None, None, True, None, None, None, None, None, False]


def test_the_gate_leaves_a_cpu_to_workers_that_are_busy():
    gate = BusyGate(engage=0.75, release=0.45, steady=2, workers_free=0.5)
    assert [gate.step(0.95, workers) for workers in (0.8, 0.9, 0.6, 0.1, 0.7, 0.2, 0.1)] == \
        [None, None, None, None, None, None, True]
    assert gate.step(0.7, 0.99) is None  # pinned: busy workers alone do not release it; its own share does


def test_a_thread_busy_with_other_work_than_tasks_is_never_pinned_and_a_pin_ends_with_the_tasks():
    gate = BusyGate(engage=0.75, release=0.45, steady=2, min_rate=100)
    # the thread that started the executor runs the user's own code at a full CPU, no task finishing
    assert [gate.step(1.0, 0.0, rate) for rate in (0.0, 50.0, 99.0, 0.0)] == [None] * 4
    assert [gate.step(1.0, 0.0, 500.0) for _ in range(2)] == [None, True]  # a burst
    assert [gate.step(1.0, 0.0, 10.0) for _ in range(2)] == [None, False]  # its tasks are over


def test_the_gate_defaults_to_the_module_thresholds():
    gate = BusyGate()
    assert (gate.engage, gate.release, gate.steady, gate.workers_free, gate.min_rate) == \
        (driver_pin.ENGAGE, driver_pin.RELEASE, driver_pin.STEADY, driver_pin.WORKERS_FREE, driver_pin.MIN_RATE)
    assert driver_pin.RELEASE < driver_pin.ENGAGE


def test_the_gate_refuses_thresholds_that_cannot_work():
    with pytest.raises(ValueError, match=r"release \(0.8\) must be below engage \(0.5\)"):
        BusyGate(engage=0.5, release=0.8)
    with pytest.raises(ValueError, match="steady must be at least 1 window, got 0"):
        BusyGate(steady=0)


# -- pin_driver="busy": the pin -----------------------------------------------------------------


class _Idle:
    """A thread that waits until told to end (alive for as long as a case needs it)."""

    def __init__(self, name):
        self.done, self.ready = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run, name=name)
        self.thread.start()
        self.ready.wait(30)

    def _run(self):
        self.ready.set()
        self.done.wait(30)

    def end(self):
        self.done.set()
        self.thread.join(30)


class _Clock:
    """CPU seconds per native thread id, advanced by hand: each window, ``share`` of the window to
    the first thread watched."""

    def __init__(self):
        self.seconds = {}

    def __call__(self, tid):
        return self.seconds.setdefault(tid, 0.0)

    def spend(self, tid, seconds):
        self.seconds[tid] = self.seconds.get(tid, 0.0) + seconds


@TWO_CPUS
def test_busy_pins_the_watched_threads_while_they_are_busy_and_gives_their_cpus_back():
    cpu = CPUS[-1]
    caller, reader = _Idle("caller"), _Idle("reader")
    os.sched_setaffinity(caller.thread.native_id, set(CPUS[:2]))  # a thread confined before: given back as it was
    clock, done = _Clock(), [0, 0.0]  # tasks finished, their seconds: 50 a window (500 a second)
    pin = BusyPin(cpu, threads=lambda: [reader.thread], gate=BusyGate(engage=0.75, release=0.45, steady=2),
                  clock=clock, finished=lambda: (done[0], done[1]), workers=2)
    pin.watch(caller.thread)
    try:
        pin.step(now=-0.2)  # the first look: what later windows are measured from
        for now in (-0.1, 0.0):  # busy, but so are the workers (0.15 of their 0.2 s): left alone
            clock.spend(caller.thread.native_id, 0.09)
            done[0], done[1] = done[0] + 50, done[1] + 0.15
            pin.step(now=now)
        assert os.sched_getaffinity(caller.thread.native_id) == set(CPUS[:2])
        for now in (0.1, 0.2):
            clock.spend(caller.thread.native_id, 0.05)
            clock.spend(reader.thread.native_id, 0.04)  # 0.9 of a CPU between them
            done[0] += 50
            pin.step(now=now)
        assert os.sched_getaffinity(caller.thread.native_id) == {cpu}
        assert os.sched_getaffinity(reader.thread.native_id) == {cpu}
        assert allowed_cpus() == set(CPUS)  # the process's CPUs, all the same
        late = _Idle("launch")  # a thread that calls submit once pinned: pinned at the next look
        pin.watch(late.thread)
        clock.spend(caller.thread.native_id, 0.06)
        done[0] += 50
        pin.step(now=0.3)  # 0.6: between the thresholds, still pinned
        assert os.sched_getaffinity(late.thread.native_id) == {cpu}
        for now in (0.4, 0.5):
            pin.step(now=now)  # nothing spent: quiet
        assert os.sched_getaffinity(caller.thread.native_id) == set(CPUS[:2])
        assert os.sched_getaffinity(reader.thread.native_id) == set(CPUS)
        assert os.sched_getaffinity(late.thread.native_id) == set(CPUS)
        assert pin.summary() == {"mode": "busy", "cpu": cpu, "engaged": 1, "seconds": pytest.approx(0.3)}
        late.end()
    finally:
        pin.stop()
        caller.end(), reader.end()


@TWO_CPUS
def test_stopping_a_busy_pin_that_holds_gives_everything_back_and_an_ended_thread_is_skipped():
    cpu = CPUS[-1]
    caller, gone = _Idle("caller"), _Idle("gone")
    clock = _Clock()
    pin = BusyPin(cpu, threads=lambda: [], gate=BusyGate(engage=0.5, release=0.1, steady=1, min_rate=0),
                  clock=clock)
    pin.start()  # its own thread looks every WINDOW: nothing spent, nothing pinned
    pin.watch(caller.thread)
    pin.watch(gone.thread)
    gone.end()  # ended before a look: skipped, not an error
    pin.step(now=100.0)
    clock.spend(caller.thread.native_id, 0.09)
    pin.step(now=100.1)
    assert os.sched_getaffinity(caller.thread.native_id) == {cpu}
    pin.stop()
    pin.stop()  # idempotent
    try:
        assert os.sched_getaffinity(caller.thread.native_id) == set(CPUS)
        assert pin.summary()["engaged"] == 1 and allowed_cpus() == set(CPUS)
        assert driver_pin._holding == 0
    finally:
        caller.end()


BUSY_SCRIPT = textwrap.dedent(
    """
    import os
    import sys
    import threading

    import parsl
    from parsl import python_app
    from parsl.config import Config
    from scalpel_executor import ScalpelExecutor
    from scalpel_executor.runtime.driver import driver_pin

    # every window busy, the workers never too busy to share a CPU: pinned from the second on
    driver_pin.ENGAGE, driver_pin.RELEASE, driver_pin.WORKERS_FREE, driver_pin.MIN_RATE = 1e-9, 0.0, float("inf"), 0.0

    @python_app
    def where():
        import os
        import time

        time.sleep(0.3)  # so both workers take a task
        return sorted(os.sched_getaffinity(0))

    def cpus(tid):
        return ",".join(map(str, sorted(os.sched_getaffinity(tid))))

    if __name__ == "__main__":
        executor = ScalpelExecutor(label="scalpel")  # pin_driver="busy", the default
        with parsl.load(Config(executors=[executor], run_dir=sys.argv[1])):
            runs = [f.result() for f in [where() for _ in range(8)]]
            print("MAIN", cpus(0))
            for thread in threading.enumerate():
                print("THREAD", thread.name, cpus(thread.native_id))
            for cpus_of_task in runs:
                print("TASK", ",".join(map(str, cpus_of_task)))
        print("AFTER", cpus(0))
        report = executor.run_report()["driver_pin"]
        print("REPORT", report["mode"], report["cpu"], report["engaged"], report["seconds"] > 0)
    """
)


@TWO_CPUS
def test_a_run_with_the_default_pins_the_driver_while_busy_and_gives_it_back(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(BUSY_SCRIPT)
    env = dict(os.environ, PYTHONPATH=PROJECT_ROOT, SCALPEL_PROFILE_STORE=str(tmp_path / "profiles.sqlite"))
    run = subprocess.run([sys.executable, str(script), str(tmp_path / "runinfo")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    lines = [line.split() for line in run.stdout.splitlines()]
    cpu, everything = str(CPUS[-1]), ",".join(map(str, CPUS))
    assert [line[1] for line in lines if line[0] == "MAIN"] == [cpu]
    threads = {line[1]: line[2] for line in lines if line[0] == "THREAD"}
    assert threads["scalpel-manager-reader"] == cpu and threads["Task-Launch_0"] == cpu
    assert threads["scalpel-driver-pin"] == everything  # the watch itself is never pinned
    tasks = [line[1] for line in lines if line[0] == "TASK"]
    assert len(tasks) == 8 and set(tasks) == {str(c) for c in CPUS[:2]}  # the workers keep their own cores
    assert [line[1] for line in lines if line[0] == "AFTER"] == [everything]
    assert [line[1:] for line in lines if line[0] == "REPORT"] == [["busy", cpu, "1", "True"]]
