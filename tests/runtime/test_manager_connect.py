"""Provider mode's channel: node managers in connect mode and the driver's ManagerHub, real processes.

Managers are started here by hand (as a provider block would), each confined to its own CPU.
No timed assertion is tighter than a generous bound.
"""

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from types import SimpleNamespace

import psutil
import pytest
import zmq
from parsl.executors.high_throughput.errors import ManagerLost
from parsl.serialize import deserialize, serialize

from scalpel_executor import __version__
from scalpel_executor.core.tasks import Task
from scalpel_executor.runtime.driver import hub as hub_module, ledger as ledger_module
from scalpel_executor.runtime.wire.channel import MAX_FRAME, PING, load_keys, make_keys
from scalpel_executor.runtime.errors import NodeManagerLost, WorkerDied
from scalpel_executor.runtime.driver.hub import ManagerHub
from scalpel_executor.runtime.wire.manager_messages import (Began, Configure, Drain, Failed, Heartbeat, ManagerConfig,
                                                       Register, Result, Shutdown, Started, Submit, decode, encode)
from scalpel_executor.runtime.options import PoolOptions
from tests.runtime.helpers import GENEROUS, Outcomes, alive, call, sleep_after_marking, wait_until, where

CPUS = sorted(os.sched_getaffinity(0))


def manager_command(url, cert_dir, block_id, cpus=None, *extra):
    command = [sys.executable, "-m", "scalpel_executor.runtime.node.manager", "--connect", url, "--cert-dir",
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
                       "from scalpel_executor.runtime.node.manager import main; sys.argv[0] = 'scalpel-manager'; "
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
    with socket.socket() as probe:  # a port nothing listens on
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
        from scalpel_executor.runtime.wire.channel import make_keys
        from scalpel_executor.runtime.driver.hub import ManagerHub
        from scalpel_executor.runtime.wire.manager_messages import ManagerConfig
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


# -- faults of the channel and of managers' messages (issue 26: defects 1-4 and slow callbacks) -------------


class FakeManager:
    """A node manager played by the test: a DEALER holding this run's client keys, speaking
    manager_messages by hand, so a test decides exactly what reaches the hub and when."""

    def __init__(self, hub, block_id="fake", slots=1):
        public, secret, server_public = load_keys(hub.cert_dir, "client")
        self.context = zmq.Context()
        self.dealer = self.context.socket(zmq.DEALER)
        self.dealer.setsockopt(zmq.LINGER, 0)
        self.dealer.curve_secretkey, self.dealer.curve_publickey = secret, public
        self.dealer.curve_serverkey = server_public
        self.dealer.connect(hub.url)
        self.send(Register(block_id, f"fake-{block_id}", __version__, os.getpid(), list(range(slots))))
        self.receive(Configure)
        self.send(Started(os.getpid(), [], [[cpu] for cpu in range(slots)], {}, 2.0 * 2**30, 0))

    def send(self, message):
        self.send_raw(encode(message))

    def send_raw(self, data):
        self.dealer.send(data)

    def receive(self, kind, timeout=GENEROUS):
        """The next message but Pings, which must be a ``kind``."""
        deadline = time.monotonic() + timeout
        while self.dealer.poll(max(0.0, deadline - time.monotonic()) * 1000):
            data = b"".join(self.dealer.recv_multipart())
            if data != PING:
                message = decode(data)
                assert isinstance(message, kind), message
                return message
        raise AssertionError(f"no {kind.__name__} within {timeout} s")

    def begin(self, *submits):
        """Say these tasks start, as a manager's dispatch pass does before sending them to workers."""
        self.send(Began([submit.task_id for submit in submits]))

    def result(self, submit, value):
        return Result(submit.task_id, True, {"wall": 0.01}, 0, 0, 0, time.monotonic(), serialize(value))

    def close(self):
        self.dealer.close()
        self.context.term()


@pytest.fixture
def fakes():
    made = []

    def make(hub, block_id="fake", slots=1):
        made.append(FakeManager(hub, block_id, slots))
        return made[-1]

    yield make
    for fake in made:
        fake.close()


NO_WORKER_LEFT = Failed(0, "ExecutorShutdown", "no worker could be started on any core (see the log); no new tasks "
                        "are accepted", {}, None, None, None, None)


def test_a_manager_with_no_worker_left_is_sent_nothing_and_its_unstarted_tasks_run_on_another(hub_and_managers,
                                                                                               fakes):
    hub, outcomes, launch = hub_and_managers()
    broken = fakes(hub, "broken")
    assert registered(hub, 1)
    for task_id in range(2):
        hub.submit(call(task_id, where, task_id))
    held = [broken.receive(Submit) for _ in range(2)]
    launch("healthy", CPUS[0])
    assert registered(hub, 2)
    # Its pool retired its last core (the replacements died before "ready"): the heartbeat says so at
    # once, then the pool fails what it had not started, as WorkerDied and, for later arrivals, refusals.
    broken.send(Heartbeat([], 3, [], [0]))
    broken.send(Failed(held[0].task_id, "WorkerDied", "task 0 cannot run: no worker could be started on any core",
                       {"pid": None, "cpus": [], "cause": "no worker left"}, None, None, None, None))
    broken.send(NO_WORKER_LEFT._replace(task_id=held[1].task_id))
    broken.receive(Shutdown)
    for task_id in range(2, 8):
        hub.submit(call(task_id, where, task_id))
    results = outcomes.wait(range(8))
    assert all(outcome.ok and outcome.error is None for outcome in results.values()), results
    assert all(len(outcomes.by_task[i]) == 1 for i in range(8))
    assert [m["block_id"] for m in hub.connected_managers()] == ["healthy"]
    assert hub.managers_lost == 1


def test_with_no_other_manager_a_task_that_cannot_start_fails_with_worker_died_naming_the_node(hub_and_managers,
                                                                                                fakes):
    hub, outcomes, launch = hub_and_managers()
    broken = fakes(hub, "broken")
    hub.submit(call(0, where, 0))
    submit = broken.receive(Submit)
    broken.send(Heartbeat([], 3, [], [0]))
    broken.send(NO_WORKER_LEFT._replace(task_id=submit.task_id))
    (outcome,) = outcomes.wait([0]).values()
    assert isinstance(outcome.error, WorkerDied), outcome  # not ExecutorShutdown: the executor still accepts
    assert "fake-broken" in str(outcome.error) and "no other node manager" in str(outcome.error)
    broken.receive(Shutdown)
    assert hub.connected_managers() == []
    hub.submit(call(1, where, 1))  # waits in the driver for a manager that can run it
    launch("healthy", CPUS[0])
    assert outcomes.wait([1])[1].ok


def test_a_manager_short_of_workers_is_dealt_only_what_its_live_cores_take(hub_and_managers, fakes):
    hub, outcomes, launch = hub_and_managers(prefetch=0)
    fake = fakes(hub, "half", slots=2)
    fake.send(Heartbeat([], 3, [], [1]))  # one of its two cores retired
    assert wait_until(lambda: hub.connected_managers()[0]["retired_slots"] == [1])  # read before the deal
    for task_id in range(3):
        hub.submit(call(task_id, where, task_id))
    first = fake.receive(Submit)
    assert wait_until(lambda: hub.connected_managers()[0]["tasks"] == 1)
    with pytest.raises(AssertionError, match="no Submit"):
        fake.receive(Submit, timeout=1.0)  # room: one live slot, no prefetch
    fake.send(fake.result(first, "done"))
    fake.receive(Submit)


def test_a_draining_manager_finishes_what_it_holds_gets_nothing_new_and_is_released_not_lost(hub_and_managers, fakes,
                                                                                              caplog):
    caplog.set_level(logging.WARNING, logger="scalpel_executor.runtime")
    hub, outcomes, launch = hub_and_managers()
    draining = fakes(hub, "draining")
    for task_id in range(2):  # one for its slot, one prefetched
        hub.submit(call(task_id, where, task_id))
    held = [draining.receive(Submit) for _ in range(2)]
    draining.send(Drain(3600.0))
    assert wait_until(lambda: hub.connected_managers()[0]["draining"])
    hub.submit(call(2, where, 2))
    with pytest.raises(AssertionError, match="no Submit"):
        draining.receive(Submit, timeout=1.0)  # it had room for it before it drained
    draining.send(draining.result(held[0], "first"))
    draining.send(draining.result(held[1], "second"))  # the prefetched one runs there too, as under HTEX
    draining.receive(Shutdown)
    draining.send(Heartbeat([], 0, [], []))  # sent before it read the Shutdown: dropped quietly
    assert [deserialize(outcomes.wait([i])[i].payload) for i in range(2)] == ["first", "second"]
    assert hub.connected_managers() == [] and hub.outstanding == 1  # task 2 waits for a manager
    assert (hub.managers_drained, hub.managers_lost) == (1, 0)
    launch("fresh", CPUS[0])
    assert outcomes.wait([2])[2].ok
    assert all(len(outcomes.by_task[i]) == 1 for i in range(3))
    assert "lost" not in caplog.text and "dropped" not in caplog.text, caplog.text


def test_a_manager_that_drains_holding_nothing_is_released_at_once(hub_and_managers, fakes):
    hub, outcomes, launch = hub_and_managers()
    idle = fakes(hub, "idle")
    idle.send(Drain(10.0))
    idle.receive(Shutdown)
    assert hub.connected_managers() == [] and (hub.managers_drained, hub.managers_lost) == (1, 0)


def test_results_queued_while_the_driver_was_stopped_are_read_before_anyone_is_judged_silent(hub_and_managers,
                                                                                              fakes, monkeypatch):
    hub, outcomes, launch = hub_and_managers(threshold=30.0, period=0.5)
    fake = fakes(hub)
    hub.submit(call(0, where, 0))
    submit = fake.receive(Submit)
    # The driver resumes after a stop longer than heartbeat_threshold: its clock jumped, and the result
    # the manager sent meanwhile is still with libzmq's I/O thread when the hub thread's poll returns.
    offset = [0.0]
    monkeypatch.setattr(hub_module, "time", SimpleNamespace(monotonic=lambda: time.monotonic() + offset[0]))
    poll, resumed = zmq.Poller.poll, threading.Event()

    def poll_across_a_stop(self, timeout=None):
        if threading.current_thread() is hub._thread and not resumed.is_set():
            resumed.set()
            offset[0] = hub.options.heartbeat_threshold + 10
            fake.send(fake.result(submit, "finished before the stop"))  # the test thread waits meanwhile
            return []
        return poll(self, timeout)

    monkeypatch.setattr(zmq.Poller, "poll", poll_across_a_stop)
    (outcome,) = outcomes.wait([0]).values()
    assert resumed.is_set()
    assert outcome.ok and outcome.error is None, outcome.error  # not NodeManagerLost
    assert deserialize(outcome.payload) == "finished before the stop"
    assert hub.managers_lost == 0 and len(hub.connected_managers()) == 1


def deep_header():
    return frame(b'["log",' + b"[" * 100_000 + b"]" * 100_000 + b',"scalpel_executor","x"]')


def frame(header, blob=b""):
    return len(header).to_bytes(4, "big") + header + blob


@pytest.mark.parametrize("malformed", ["deeply nested header", "slot_cpus [5]", "a bug handling it"])
def test_a_malformed_message_from_a_key_holder_loses_only_that_manager(hub_and_managers, fakes, monkeypatch,
                                                                       malformed):
    hub, outcomes, launch = hub_and_managers()
    fake = fakes(hub, "bad")
    for task_id in range(2):
        hub.submit(call(task_id, where, task_id))
    held = [fake.receive(Submit) for _ in range(2)]
    fake.begin(held[0])  # held[1] waits in its scheduler
    launch("healthy", CPUS[0])
    assert registered(hub, 2)
    if malformed == "deeply nested header":
        fake.send_raw(deep_header())
    elif malformed == "slot_cpus [5]":
        fake.send_raw(frame(b'["started",1,[],[5],{},0,0]'))
    else:  # anything a message's handling raises costs that manager only
        def broken(message):
            raise RuntimeError("injected while rebuilding an error")

        monkeypatch.setattr(ledger_module, "rebuild_error", broken)  # the hub settles results there
        fake.send(NO_WORKER_LEFT._replace(task_id=held[0].task_id, slot=0))
    lost = outcomes.wait([m.task_id for m in held])
    began, waiting = lost[held[0].task_id], lost[held[1].task_id]
    assert isinstance(began.error, NodeManagerLost) and "malformed" in str(began.error), began
    assert waiting.ok and deserialize(waiting.payload)[0] == held[1].task_id, waiting  # run by the other, unspent
    for task_id in range(2, 6):
        hub.submit(call(task_id, where, task_id))
    results = outcomes.wait(range(2, 6))
    assert all(outcome.ok for outcome in results.values()), results
    assert hub._thread.is_alive()
    assert all(len(entries) == 1 for entries in outcomes.by_task.values())
    assert [m["block_id"] for m in hub.connected_managers()] == ["healthy"]


def test_a_lost_manager_fails_only_the_tasks_it_began_and_the_others_run_elsewhere_unspent(hub_and_managers, fakes):
    hub, outcomes, launch = hub_and_managers()
    lossy = fakes(hub, "lossy")
    for task_id in range(2):  # one for its slot, one prefetched
        hub.submit(call(task_id, where, task_id))
    held = [lossy.receive(Submit) for _ in range(2)]
    lossy.begin(held[0])
    launch("healthy", CPUS[0])
    assert registered(hub, 2)
    lossy.close()  # its connection drops, as when its node is killed
    ended = outcomes.wait([m.task_id for m in held])
    began, waiting = ended[held[0].task_id], ended[held[1].task_id]
    assert isinstance(began.error, NodeManagerLost) and "fake-lossy" in str(began.error), began
    # Before: NodeManagerLost too, spending a retry on a task that never ran.
    assert waiting.ok and deserialize(waiting.payload)[0] == held[1].task_id, waiting
    assert all(len(entries) == 1 for entries in outcomes.by_task.values()) and hub.managers_lost == 1


def test_a_lost_managers_failures_are_delivered_before_its_block_is_cancelled(hub_and_managers, fakes):
    hub, outcomes, launch = hub_and_managers()
    cancelling, release = threading.Event(), threading.Event()

    def slow_cancel(block_id, cause):  # a provider's cancel (scancel, a shell) may take seconds
        cancelling.set()
        release.wait(GENEROUS)

    hub.cancel_block = slow_cancel
    bad = fakes(hub, "bad")
    hub.submit(call(0, where, 0))
    bad.begin(bad.receive(Submit))
    bad.send_raw(deep_header())
    try:  # before: the failure waited on the completion thread behind the cancel
        lost = outcomes.wait([0])[0]
    finally:
        release.set()
    assert isinstance(lost.error, NodeManagerLost) and "malformed" in str(lost.error), lost
    assert cancelling.wait(GENEROUS)  # the block is still cancelled, after


@pytest.mark.parametrize("block_pending", [True, False])
def test_with_no_other_manager_a_lost_managers_unstarted_tasks_wait_only_while_a_block_is_pending(
        hub_and_managers, fakes, block_pending):
    hub, outcomes, launch = hub_and_managers()
    hub.blocks_pending = lambda: block_pending
    lossy = fakes(hub, "lossy")
    for task_id in range(2):
        hub.submit(call(task_id, where, task_id))
    held = [lossy.receive(Submit) for _ in range(2)]
    lossy.close()
    if block_pending:  # the block brings a manager, which runs both
        assert wait_until(lambda: hub.managers_lost == 1)
        launch("pending", CPUS[0])
        assert all(outcome.ok for outcome in outcomes.wait([m.task_id for m in held]).values())
    else:  # nothing may come for them: they fail as before, and retries= decides
        assert all(isinstance(outcome.error, NodeManagerLost)
                   for outcome in outcomes.wait([m.task_id for m in held]).values())
    assert all(len(entries) == 1 for entries in outcomes.by_task.values())


def rss():
    return psutil.Process().memory_info().rss


def test_a_stranger_announcing_a_huge_frame_is_dropped_before_the_driver_allocates_it(hub_and_managers):
    hub, outcomes, launch = hub_and_managers()
    size = 128 << 20
    before = rss()
    with socket.create_connection(("127.0.0.1", hub.port), timeout=GENEROUS) as stranger:
        # A ZMTP 3.0 greeting asking for CURVE, then, before any handshake, one long command frame
        # announcing 128 MiB and sending all of it but the last byte (libzmq would hold it waiting).
        stranger.sendall(b"\xff" + bytes(8) + b"\x7f" + b"\x03\x00" + b"CURVE".ljust(20, b"\x00") + bytes(32))
        stranger.sendall(b"\x06" + size.to_bytes(8, "big"))
        chunk, sent, dropped = bytes(1 << 20), 0, False
        try:
            while sent < size - 1:
                sent += stranger.send(chunk[:size - 1 - sent])
        except OSError:  # the driver closed the connection after the frame's header
            dropped = True
        grown = rss() - before
    print(f"stranger sent {sent >> 20} MiB before being dropped; driver RSS {grown / 2**20:+.1f} MiB")
    assert dropped and grown < 32 << 20, (sent, grown)
    hub.submit(call(0, where, 0))  # the hub is unharmed
    launch("0", CPUS[0])
    assert outcomes.wait([0])[0].ok


def test_a_key_holder_sending_an_oversized_frame_is_lost_and_large_messages_travel_in_frames(hub_and_managers,
                                                                                             fakes, caplog):
    caplog.set_level(logging.INFO, logger="scalpel_executor")
    hub, outcomes, launch = hub_and_managers()
    fake = fakes(hub, "big")
    hub.submit(call(0, where, 0))
    submit = fake.receive(Submit)
    fake.send_raw(encode(fake.result(submit, "x"))[:10] + bytes(MAX_FRAME + 100))  # one frame over the limit
    (outcome,) = outcomes.wait([0]).values()
    assert isinstance(outcome.error, NodeManagerLost) and "frame over 16 MiB" in str(outcome.error)
    # A real manager's large call and result cross as several frames each
    launch("0", CPUS[0])
    hub.submit(call(1, len, b"a" * (40 << 20)))
    hub.submit(call(2, bytes, 40 << 20))
    results = outcomes.wait([1, 2])
    assert results[1].ok and deserialize(results[1].payload) == 40 << 20
    assert results[2].ok and deserialize(results[2].payload) == bytes(40 << 20)


def test_a_slow_completion_callback_does_not_silence_the_driver(hub_and_managers):
    hub, outcomes, launch = hub_and_managers(threshold=30.0, period=0.5)
    release, slow = threading.Event(), []

    def on_complete(task, outcome):
        if task.id == 0:
            slow.append(time.monotonic())
            release.wait(GENEROUS)  # a user callback that takes its time
        outcomes(task, outcome)

    hub._on_complete = on_complete
    manager = launch("0", CPUS[0], None, "--driver-threshold", "3")
    assert registered(hub, 1)
    hub.submit(call(0, where, 0))
    hub.submit(call(1, where, 1))
    assert wait_until(lambda: slow)
    time.sleep(7.5)  # 2.5 driver thresholds inside the callback: the hub thread pings meanwhile
    assert manager.poll() is None, "the manager ended: it heard nothing from the driver"
    assert len(hub.connected_managers()) == 1 and hub.managers_lost == 0
    release.set()
    assert all(outcome.ok for outcome in outcomes.wait([0, 1]).values())
