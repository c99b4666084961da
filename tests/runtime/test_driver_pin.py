"""``pin_driver``: the driver's Parsl threads on one CPU while the executor runs, and back after.

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

from scalpel_executor import ScalpelExecutor
from scalpel_executor.core.cpulist import format_cpu_list
from scalpel_executor.host.sysfs import allowed_cpus, detect_topology
from scalpel_executor.runtime.driver import driver_pin
from scalpel_executor.runtime.driver.driver_pin import DriverPin, resolve_pin_driver

PROJECT_ROOT = str(Path(__file__).resolve().parents[2])
CPUS = sorted(os.sched_getaffinity(0))
TWO_CPUS = pytest.mark.skipif(len(CPUS) < 2, reason="needs two CPUs: pinned to one of one changes nothing")


def test_pin_driver_names_a_cpu_of_this_process_or_auto():
    assert resolve_pin_driver(None) is None
    assert resolve_pin_driver("auto") == CPUS[-1]
    assert resolve_pin_driver(CPUS[0]) == CPUS[0]
    with pytest.raises(ValueError, match=r"pin_driver=4096 is not a CPU this process may use \(" + format_cpu_list(CPUS)):
        resolve_pin_driver(4096)
    with pytest.raises(ValueError, match="pin_driver must be a CPU number, 'auto' or None, got 'fast'"):
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


def test_the_executor_checks_pin_driver_when_it_is_made(tmp_path):
    with pytest.raises(ValueError, match="is not a CPU this process may use"):
        ScalpelExecutor(profiles=False, pin_driver=4096)
    with pytest.raises(ValueError, match="pin_driver='auto' is a local-mode option.*node_manager=True"):
        ScalpelExecutor(profiles=False, pin_driver="auto", node_manager=False)
    from parsl.providers import LocalProvider

    with pytest.raises(ValueError, match="pin_driver=0 is a local-mode option.*with provider="):
        ScalpelExecutor(profiles=False, pin_driver=0, provider=LocalProvider())
    assert ScalpelExecutor(profiles=False, pin_driver="auto").pin_driver == "auto"  # read back, as Parsl does


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
