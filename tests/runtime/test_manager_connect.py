"""Provider mode's channel: node managers in connect mode and the driver's ManagerHub, real processes.

Managers are started here by hand (as a provider block would), each confined to its own CPU.
No timed assertion is tighter than a generous bound.
"""

import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time

import psutil
import pytest
from parsl.executors.high_throughput.errors import ManagerLost
from parsl.serialize import deserialize

from scalpel_executor.core.tasks import Task
from scalpel_executor.runtime.channel import make_keys
from scalpel_executor.runtime.errors import NodeManagerLost
from scalpel_executor.runtime.hub import ManagerHub
from scalpel_executor.runtime.manager_protocol import ManagerConfig
from scalpel_executor.runtime.options import PoolOptions
from tests.runtime.test_manager import GENEROUS, Outcomes, alive, call, sleep_after_marking, wait_until, where

CPUS = sorted(os.sched_getaffinity(0))


def manager_command(url, cert_dir, block_id, cpus=None, *extra):
    command = [sys.executable, "-m", "scalpel_executor.runtime.manager", "--connect", url, "--cert-dir",
               str(cert_dir), "--block-id", str(block_id), *extra]
    return command + (["--cpus", str(cpus)] if cpus is not None else [])


@pytest.fixture
def hub_and_managers(tmp_path):
    started = []
    hubs = []

    def make(threshold=30.0, period=0.5, prefetch=1, domains=None):
        outcomes = Outcomes()
        config = ManagerConfig(domains=domains, sys_path=[p for p in sys.path if p])
        options = PoolOptions(heartbeat_period=period, heartbeat_threshold=threshold)
        hub = ManagerHub(config, options, outcomes, cert_dir=make_keys(tmp_path / "certificates"), address="127.0.0.1",
                         prefetch=prefetch)
        hub.start()
        hubs.append(hub)

        def launch(block_id, cpus=None, cert_dir=None, *extra, python=None):
            command = manager_command(hub.url, cert_dir or hub.cert_dir, block_id, cpus, *extra)
            if python is not None:  # another interpreter command in place of "python -m <the manager>"
                command = [*python, *command[3:]]
            process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
            started.append(process)
            return process

        return hub, outcomes, launch

    yield make
    for hub in hubs:
        hub.shutdown()
    for process in started:
        try:
            process.wait(GENEROUS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def registered(hub, count):
    return wait_until(lambda: sum(m["worker_count"] > 0 for m in hub.connected_managers()) >= count)


def test_two_managers_connect_and_run_tasks_each_on_its_own_cpus(hub_and_managers):
    hub, outcomes, launch = hub_and_managers()
    cpus = CPUS[:2] if len(CPUS) >= 2 else CPUS * 2
    launch("0", cpus[0])
    launch("1", cpus[1])
    assert registered(hub, 2), hub.connected_managers()
    managers = {m["block_id"]: m for m in hub.connected_managers()}
    assert sorted(managers) == ["0", "1"]
    assert managers["0"]["slot_cpus"] == [[cpus[0]]] and managers["1"]["slot_cpus"] == [[cpus[1]]]
    for task_id in range(8):
        hub.submit(call(task_id, where, task_id))
    results = outcomes.wait(range(8))
    assert all(outcome.ok and outcome.error is None for outcome in results.values()), results
    ran_on = {tuple(deserialize(results[i].payload)[2]) for i in range(8)}
    assert ran_on <= {(cpus[0],), (cpus[1],)}
    assert all(len(outcomes.by_task[i]) == 1 for i in range(8))
    assert hub.outstanding == 0


@pytest.mark.parametrize("keys", ["client key of another run", "every key of another run"])
def test_a_manager_with_the_wrong_key_is_refused_and_logged_and_exits(hub_and_managers, tmp_path, caplog, keys):
    caplog.set_level(logging.WARNING, logger="scalpel_executor.runtime")
    hub, outcomes, launch = hub_and_managers()
    other_keys = make_keys(tmp_path / "another-run")
    if keys == "client key of another run":  # it knows the server's public key, but not the client's secret
        shutil.copy(hub.cert_dir / "server.key", other_keys / "server.key")
    process = launch("0", None, other_keys, "--connect-timeout", "20")
    code = process.wait(GENEROUS)
    stderr = process.stderr.read()
    assert code == 2, stderr
    assert "refused this manager's CURVE key" in stderr
    assert hub.connected_managers() == [] and outcomes.by_task == {}
    assert wait_until(lambda: "refused a" in caplog.text), caplog.text
    print(caplog.text)


def test_a_manager_without_keys_exits_naming_the_directory(tmp_path):
    empty = tmp_path / "no-keys"
    empty.mkdir()
    process = subprocess.run(manager_command("tcp://127.0.0.1:1", empty, "0"), stderr=subprocess.PIPE, text=True,
                             timeout=GENEROUS)
    assert process.returncode == 2
    assert "cannot read the client keys" in process.stderr and str(empty) in process.stderr, process.stderr


# A manager whose package reports another version, as a node with another install would.
OTHER_VERSION = ("-c", "import sys, scalpel_executor; scalpel_executor.__version__ = '0.0.1-other'; "
                       "from scalpel_executor.runtime.manager import main; sys.argv[0] = 'scalpel-manager'; "
                       "sys.exit(main(sys.argv[1:]))")


def test_a_manager_of_another_version_is_refused_logged_and_exits_saying_so(hub_and_managers, caplog):
    caplog.set_level(logging.WARNING, logger="scalpel_executor.runtime")
    hub, outcomes, launch = hub_and_managers()
    hub.submit(call(0, where, 0))
    stranger = launch("0", CPUS[0], None, python=(sys.executable, *OTHER_VERSION))
    code = stranger.wait(GENEROUS)
    stderr = stranger.stderr.read()
    assert code == 2 and "refused this manager" in stderr and "version" in stderr, (code, stderr)
    assert "0.0.1-other" in caplog.text and "install the same version on every node" in caplog.text
    assert hub.connected_managers() == [] and outcomes.by_task == {} and hub.outstanding == 1
    launch("1", CPUS[0])  # the task waited in the driver for a manager it may use
    assert outcomes.wait([0])[0].ok


def test_managers_on_nodes_of_different_shapes_each_schedule_for_their_own(hub_and_managers):
    if len(CPUS) < 2:
        pytest.skip("needs 2 CPUs")
    hub, outcomes, launch = hub_and_managers()  # no topology from the driver: each node detects its own
    launch("small", CPUS[0])
    launch("large", f"{CPUS[0]},{CPUS[1]}")
    assert registered(hub, 2), hub.connected_managers()
    managers = {m["block_id"]: m for m in hub.connected_managers()}
    assert managers["small"]["slot_cpus"] == [[CPUS[0]]]
    assert sorted(cpu for slot in managers["large"]["slot_cpus"] for cpu in slot) == CPUS[:2]
    assert managers["small"]["worker_count"] == 1 and managers["large"]["worker_count"] == 2
    for task_id in range(12):
        hub.submit(call(task_id, where, task_id))
    results = outcomes.wait(range(12))
    assert all(results[i].ok for i in range(12)), results


def test_a_driver_topology_naming_cpus_the_node_lacks_is_laid_over_its_own_with_a_warning(hub_and_managers, caplog):
    caplog.set_level(logging.WARNING, logger="scalpel_executor")
    hub, outcomes, launch = hub_and_managers(domains=[{"cpus": [4000, 4001], "llc_size": None}])
    launch("0", CPUS[0])
    assert registered(hub, 1), hub.connected_managers()
    (manager,) = hub.connected_managers()
    assert manager["slot_cpus"] == [[CPUS[0]], [CPUS[0]]]  # the driver's two slots, on the one CPU it has
    assert "4000-4001" in caplog.text and "laid over this node's CPUs" in caplog.text, caplog.text
    for task_id in range(4):
        hub.submit(call(task_id, where, task_id))
    assert all(outcome.ok for outcome in outcomes.wait(range(4)).values())


def test_a_manager_that_cannot_reach_the_driver_gives_up(tmp_path):
    cert_dir = make_keys(tmp_path / "certificates")
    with __import__("socket").socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.run(manager_command(f"tcp://127.0.0.1:{port}", cert_dir, "0", None, "--connect-timeout",
                                             "1"), stderr=subprocess.PIPE, text=True, timeout=GENEROUS)
    assert process.returncode == 2
    assert "no configuration from the driver within 1 s" in process.stderr and "reachable" in process.stderr


def test_a_sigkilled_manager_fails_its_tasks_once_with_manager_lost_and_the_other_goes_on(hub_and_managers,
                                                                                           tmp_path):
    hub, outcomes, launch = hub_and_managers(threshold=30.0)
    victim = launch("0", CPUS[0])
    assert registered(hub, 1)
    survivor = launch("1", CPUS[-1])
    assert registered(hub, 2)
    for task_id in range(2):
        hub.submit(call(task_id, sleep_after_marking, str(tmp_path / f"running-{task_id}"), 8))
    assert wait_until(lambda: all((tmp_path / f"running-{i}").exists() for i in range(2)))
    held = {m["block_id"]: m for m in hub.connected_managers()}
    victim_workers = held["0"]["worker_pids"]
    victim_tasks = held["0"]["tasks"]
    assert victim_tasks >= 1
    start = time.monotonic()
    os.kill(victim.pid, signal.SIGKILL)
    assert wait_until(lambda: sum(len(v) for v in outcomes.by_task.values()) >= victim_tasks)
    print(f"lost after {time.monotonic() - start:.2f} s")
    lost = [entries for task_id, entries in outcomes.by_task.items() if entries]
    assert all(isinstance(entries[0][1].error, ManagerLost) for entries in lost), lost
    assert len(lost) == victim_tasks and all(len(entries) == 1 for entries in lost)
    for ((task, outcome),) in lost:
        assert isinstance(outcome.error, NodeManagerLost) and isinstance(outcome.error, ManagerLost)
    assert wait_until(lambda: not alive(victim_workers)), "the lost manager's workers outlived it"
    assert [m["block_id"] for m in hub.connected_managers()] == ["1"]
    hub.submit(call(10, where, 10))  # runs once the survivor's sleeper ends
    assert outcomes.wait([10])[10].ok
    assert survivor.poll() is None


def test_a_silent_manager_is_lost_its_late_result_dropped_and_it_exits(hub_and_managers, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="scalpel_executor")
    hub, outcomes, launch = hub_and_managers(threshold=2.0, period=0.5)
    manager = launch("0", CPUS[0])
    assert registered(hub, 1)
    hub.submit(call(0, sleep_after_marking, str(tmp_path / "running-0"), 3))
    assert wait_until(lambda: (tmp_path / "running-0").exists())
    os.kill(manager.pid, signal.SIGSTOP)
    try:
        (outcome,) = outcomes.wait([0]).values()
    finally:
        os.kill(manager.pid, signal.SIGCONT)
    assert isinstance(outcome.error, NodeManagerLost) and "silent" in str(outcome.error)
    assert manager.wait(GENEROUS) == 0
    assert len(outcomes.by_task[0]) == 1
    assert wait_until(lambda: "dropped a late" in caplog.text), caplog.text


def test_a_killed_driver_leaves_no_manager_or_worker_behind(tmp_path):
    driver_code = textwrap.dedent(f"""
        import sys, time
        from scalpel_executor.runtime.channel import make_keys
        from scalpel_executor.runtime.hub import ManagerHub
        from scalpel_executor.runtime.manager_protocol import ManagerConfig
        from scalpel_executor.runtime.options import PoolOptions
        hub = ManagerHub(ManagerConfig(), PoolOptions(heartbeat_period=0.5), lambda task, outcome: None,
                         cert_dir=make_keys({str(tmp_path / 'certificates')!r}))
        hub.start()
        print(hub.url, flush=True)
        time.sleep(600)
    """)
    driver = subprocess.Popen([sys.executable, "-c", driver_code], stdout=subprocess.PIPE, text=True)
    try:
        url = driver.stdout.readline().strip()
        manager = subprocess.Popen(manager_command(url, tmp_path / "certificates", "0", CPUS[0]))
        assert wait_until(lambda: len(psutil.Process(manager.pid).children()) >= 1), "no workers started"
        time.sleep(1.0)  # registered and configured: its workers run
        workers = [child.pid for child in psutil.Process(manager.pid).children(recursive=True)]
        driver.kill()
        driver.wait()
        assert manager.wait(GENEROUS) is not None
        assert wait_until(lambda: not alive(workers)), "workers outlived the driver"
    finally:
        if driver.poll() is None:
            driver.kill()


def wait_for_file_then_where(path, x):
    import os
    import time

    while not os.path.exists(path):
        time.sleep(0.02)
    return x, os.environ.get("PARSL_WORKER_BLOCK_ID")


def test_heavy_footprints_spread_over_managers_and_a_manager_that_joins_mid_run_takes_work(hub_and_managers,
                                                                                            tmp_path):
    hub, outcomes, launch = hub_and_managers(prefetch=1)  # room: one slot + one prefetched task per manager
    gate = tmp_path / "go"
    launch("0", CPUS[0])
    assert registered(hub, 1)
    for task_id in range(6):  # manager 0 takes two, four wait in the driver
        hub.submit(call(task_id, wait_for_file_then_where, str(gate), task_id))
    assert wait_until(lambda: hub.connected_managers()[0]["tasks"] == 2)
    launch("1", CPUS[-1])
    assert registered(hub, 2)
    assert wait_until(lambda: sorted(m["tasks"] for m in hub.connected_managers()) == [2, 2])
    gate.touch()
    results = outcomes.wait(range(6))
    blocks = [deserialize(results[i].payload)[1] for i in range(6)]
    assert blocks.count("1") >= 2, blocks  # the late joiner ran work that waited in the driver

    # Two heavy and two light tasks dealt at once: one heavy one to each manager.
    gate.unlink()
    footprints = {10: 200e6, 11: 1e6, 12: 180e6, 13: 2e6}
    for task_id, footprint in footprints.items():
        job = call(task_id, wait_for_file_then_where, str(gate), task_id).payload
        hub.submit(Task(task_id, footprint, payload=job))
    assert wait_until(lambda: sorted(m["tasks"] for m in hub.connected_managers()) == [2, 2])
    gate.touch()
    results = outcomes.wait(footprints)
    block_of = {i: deserialize(results[i].payload)[1] for i in footprints}
    assert block_of[10] != block_of[12], block_of


def test_a_burst_of_submits_faster_than_the_hub_thread_is_queued_whole(hub_and_managers, monkeypatch):
    hub, outcomes, launch = hub_and_managers()
    deal, bursting = hub._deal, threading.Event()

    def slow_deal(router):  # while the burst lasts, a hub thread far slower than the submitting one
        if bursting.is_set():
            time.sleep(0.5)
        deal(router)

    monkeypatch.setattr(hub, "_deal", slow_deal)
    bursting.set()
    for task_id in range(3000):  # more wake-ups than the hub's inproc queue holds (about 2,000)
        hub.submit(call(task_id, len, "ab"))
    bursting.clear()
    assert hub.outstanding == 3000
    launch("0", CPUS[0])
    results = outcomes.wait(range(3000), timeout=120)
    assert all(outcome.ok for outcome in results.values())
