"""The node manager process and its driver-side client: real processes, real pinning, real kills.

No timed assertion is tighter than a generous bound: how long things took is printed.
"""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest
from parsl.executors.high_throughput.errors import ManagerLost

from scalpel_executor.host.sysfs import resolve_topology
from scalpel_executor.runtime.driver import manager_client
from scalpel_executor.runtime.errors import ExecutorFailed, ExecutorShutdown, NodeManagerLost
from scalpel_executor.runtime.driver.manager_client import ManagerClient
from scalpel_executor.runtime.wire.manager_messages import Configure, ManagerConfig, Result, encode
from scalpel_executor.runtime.options import PoolOptions
from tests.runtime.helpers import Outcomes, alive, call, sleep_after_marking, wait_until, where

@pytest.fixture
def make_client():
    clients = []

    def make(env=None, **options):
        outcomes = Outcomes()
        client = ManagerClient(resolve_topology(None), PoolOptions(**options), outcomes, env=env)
        clients.append(client)
        return client, outcomes

    yield make
    for client in clients:
        client.shutdown()


def big(n):
    return bytes(range(256)) * (n // 256)


def start_running(client, tmp_path, first_id, count, seconds=60):
    """Submit ``count`` tasks that mark a file once running; return their ids once all run."""
    ids = list(range(first_id, first_id + count))
    for i in ids:
        client.submit(call(i, sleep_after_marking, str(tmp_path / f"running-{i}"), seconds))
    assert wait_until(lambda: all((tmp_path / f"running-{i}").exists() for i in ids)), "tasks did not start"
    return ids


# -- running tasks ----------------------------------------------------------------------------


def test_the_manager_runs_tasks_on_its_pinned_workers_and_reports_where(make_client):
    client, outcomes = make_client()
    client.start()
    manager = psutil.Process(client.pid)
    assert client.pid != os.getpid() and manager.ppid() == os.getpid()
    assert sorted(client.worker_pids) == sorted(child.pid for child in manager.children())
    assert len(client.slot_cpus_map) == len(client.worker_pids)
    tasks = [call(i, where, i) for i in range(8)]
    for task in tasks:
        client.submit(task)
    outcomes.wait(range(8))
    for task in tasks:
        x, pid, affinity = outcomes.value(task.id)
        job = task.payload
        assert x == task.id and pid in client.worker_pids
        assert affinity == list(client.slot_cpus_map[job.slot]) and job.cpu == affinity[0]
        assert job.domain is not None and job.started is not None
    assert outcomes.by_task[0][0][1].stats["wall"] >= 0  # measurements come back with results


def test_a_task_result_larger_than_a_socket_buffer_arrives_intact(make_client):
    client, outcomes = make_client()
    client.start()
    client.submit(call(1, big, 50 * 2**20))
    outcomes.wait([1], timeout=120)
    assert outcomes.value(1) == big(50 * 2**20)


def test_a_task_argument_of_50_mib_arrives_intact(make_client):
    client, outcomes = make_client()
    client.start()
    payload = big(50 * 2**20)
    client.submit(call(1, len, payload))
    outcomes.wait([1], timeout=120)
    assert outcomes.value(1) == len(payload)


def test_a_worker_death_inside_the_manager_comes_back_as_worker_died(make_client):
    from parsl.executors.high_throughput.errors import WorkerLost

    client, outcomes = make_client()
    client.start()
    client.submit(call(1, os._exit, 3))
    error = outcomes.wait([1])[1].error
    assert isinstance(error, WorkerLost) and "exit code 3" in str(error) and error.task_id == 1
    client.submit(call(2, where, 2))  # the manager replaced the worker
    outcomes.wait([2])
    assert outcomes.value(2)[0] == 2


def test_a_task_past_its_walltime_comes_back_as_walltime_exceeded(make_client):
    from parsl.app.errors import AppTimeout

    client, outcomes = make_client(walltime_grace=0.2)
    client.start()
    client.submit(call(1, time.sleep, 60, walltime=0.5))
    error = outcomes.wait([1])[1].error
    assert isinstance(error, AppTimeout) and error.walltime == 0.5 and "walltime" in str(error)


# -- the manager dies ------------------------------------------------------------------------


def test_a_manager_killed_while_idle_is_replaced_and_its_workers_exit(make_client):
    client, outcomes = make_client()
    client.start()
    lost_pid, workers = client.pid, client.worker_pids
    killed_at = time.monotonic()
    os.kill(lost_pid, signal.SIGKILL)
    assert wait_until(lambda: not alive(workers)), alive(workers)
    print(f"\nworkers gone {time.monotonic() - killed_at:.2f} s after their manager was killed")
    assert wait_until(lambda: client.managers_lost == 1 and client.pid != lost_pid)
    client.submit(call(1, where, 1))
    outcomes.wait([1])
    assert outcomes.value(1)[1] not in workers and client.pid != lost_pid


def test_a_manager_killed_while_tasks_run_fails_those_it_began_and_its_replacement_runs_the_rest_unspent(
        make_client, tmp_path):
    client, outcomes = make_client()
    client.start()
    lost_pid, workers = client.pid, client.worker_pids
    running = start_running(client, tmp_path, 0, len(workers))
    queued = list(range(100, 104))  # every core is busy: these wait in the manager, never begun
    for i in queued:
        client.submit(call(i, where, i))
    os.kill(lost_pid, signal.SIGKILL)
    ended = outcomes.wait(running + queued)
    for i in running:
        error = ended[i].error
        assert isinstance(error, ManagerLost) and isinstance(error, NodeManagerLost), error
        assert f"task {i} was lost with its node manager (pid {lost_pid})" in str(error)
        assert "SIGKILL" in str(error) and error.task_id == i
    for i in queued:  # run by the replacement without a retry (before: each failed with NodeManagerLost too)
        value, pid, _ = outcomes.value(i)
        assert value == i and pid not in workers
    assert wait_until(lambda: not alive(workers)), alive(workers)
    for i in running:  # what retries= does: submit again, to the replacement
        client.submit(call(1000 + i, where, i))
    outcomes.wait([1000 + i for i in running])
    time.sleep(0.5)  # nothing may arrive twice, however late
    assert all(len(outcomes.by_task[i]) == 1 for i in running + queued + [1000 + i for i in running])
    assert client.managers_lost == 1


def lose_the_manager_and_kill_replacements(make_client, monkeypatch, count, backoff):
    """A started client whose node manager is SIGKILLed, and the replacement managers it launches,
    ``backoff`` seconds apart: the first ``count`` are SIGKILLed as soon as they are launched, long
    before they could report Started (a kill during start, a node's OOM killer). Returns the client,
    its outcomes and the replacements' pids as they are launched, once the first one has been."""
    monkeypatch.setattr(manager_client, "REPLACEMENT_BACKOFF", backoff)
    client, outcomes = make_client()
    client.start()
    launched = []
    launch = client._launch

    def launch_and_maybe_kill():
        manager = launch()
        launched.append(manager.pid)
        if len(launched) <= count:
            os.kill(manager.pid, signal.SIGKILL)
        return manager

    monkeypatch.setattr(client, "_launch", launch_and_maybe_kill)
    os.kill(client.pid, signal.SIGKILL)
    assert wait_until(lambda: launched)
    return client, outcomes, launched


def test_replacements_killed_while_they_start_are_started_again_and_their_tasks_run_unspent(make_client,
                                                                                            monkeypatch):
    client, outcomes, launched = lose_the_manager_and_kill_replacements(make_client, monkeypatch, 2, backoff=0.05)
    client.submit(call(1, where, 1))  # sent to the first replacement, which never starts
    outcomes.wait([1])
    assert outcomes.value(1)[0] == 1  # not NodeManagerLost: no manager that ran it was lost
    assert len(launched) == 3 and client.pid == launched[2] and client.managers_lost == 1
    for i in range(2, 6):  # later tasks run on the third replacement (was: ExecutorFailed for good)
        client.submit(call(i, where, i))
    outcomes.wait(range(2, 6))
    assert all(outcomes.value(i)[0] == i and len(outcomes.by_task[i]) == 1 for i in range(1, 6))


def test_after_five_replacements_in_a_row_fail_to_start_the_client_gives_up_naming_why(make_client, monkeypatch):
    client, outcomes, launched = lose_the_manager_and_kill_replacements(make_client, monkeypatch, 99, backoff=0.01)
    client.submit(call(1, where, 1))
    error = outcomes.wait([1])[1].error
    assert isinstance(error, ExecutorFailed), error
    assert f"{manager_client.MAX_REPLACEMENT_STARTS} node managers in a row could not start" in str(error)
    assert "SIGKILL" in str(error) and len(launched) == manager_client.MAX_REPLACEMENT_STARTS
    with pytest.raises(ExecutorFailed, match="no new tasks are accepted"):
        client.submit(call(2, where, 2))
    assert not alive(launched)


def test_a_silent_manager_is_declared_lost_after_the_heartbeat_threshold(make_client, tmp_path):
    client, outcomes = make_client(heartbeat_period=0.2, heartbeat_threshold=2.0)
    client.start()
    stopped_pid, workers = client.pid, client.worker_pids
    running = start_running(client, tmp_path, 0, 1)
    os.kill(stopped_pid, signal.SIGSTOP)  # alive but silent: only the heartbeat can tell
    error = outcomes.wait(running)[0].error
    assert isinstance(error, ManagerLost) and "silent" in str(error), error
    assert not alive([stopped_pid]) and wait_until(lambda: not alive(workers)), alive(workers)


def test_a_result_for_a_task_that_is_not_outstanding_is_dropped_and_logged(make_client, caplog):
    client, outcomes = make_client()
    client.start()
    client._handle(client._manager, Result(77, True, {}, 0, 0, 0, 0.0, b""))
    assert not outcomes.by_task and "dropped a result" in caplog.text and "task 77" in caplog.text


def test_the_manager_and_its_workers_exit_when_the_driver_is_killed(tmp_path):
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent("""
        import json, sys, time
        from parsl.serialize import pack_apply_message
        from scalpel_executor.core.tasks import Task
        from scalpel_executor.host.sysfs import resolve_topology
        from scalpel_executor.runtime.driver.manager_client import ManagerClient
        from scalpel_executor.runtime.options import PoolOptions
        from scalpel_executor.runtime.contract import Job

        client = ManagerClient(resolve_topology(None), PoolOptions(), lambda task, outcome: None)
        client.start()
        client.submit(Task(1, payload=Job(pack_apply_message(time.sleep, (60,), {}))))
        print(json.dumps({"manager": client.pid, "workers": client.worker_pids}), flush=True)
        time.sleep(600)
    """))
    driver = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, start_new_session=True)
    line = driver.stdout.readline()
    assert line, driver.stderr.read()
    started = json.loads(line)
    time.sleep(0.5)  # the task is running
    killed_at = time.monotonic()
    driver.kill()
    driver.communicate(timeout=60)
    everything = [started["manager"], *started["workers"]]
    assert wait_until(lambda: not alive(everything)), alive(everything)
    print(f"\nmanager and workers gone {time.monotonic() - killed_at:.2f} s after the driver was killed")


# -- start and shutdown ----------------------------------------------------------------------


def test_a_manager_that_rejects_its_configuration_fails_start_naming_why(make_client):
    client, _ = make_client()
    # What a driver of another version would send: options the manager does not know (PoolOptions
    # checks its own fields in the driver, so a bad policy never gets this far).
    client._configure = encode(Configure(ManagerConfig.of_driver(client.topology).to_dict(),
                                         {**client.options.to_dict(), "gpus": 2}))
    with pytest.raises(RuntimeError, match=r"could not start: .*unknown keys \['gpus'\].*same scalpel-executor"):
        client.start()
    assert not alive([client.pid])
    with pytest.raises(ExecutorFailed, match=r"could not start: .*unknown keys \['gpus'\]"):
        client.submit(call(1, where, 1))


def test_a_start_that_does_not_wait_returns_before_the_workers_and_holds_tasks_until_they_are_warm(make_client):
    client, outcomes = make_client()
    client.start(wait=False)
    assert client.pid is not None and not client.worker_pids  # launched; no Started read yet
    client.submit(call(1, where, 1))  # sent at once: the manager holds it until its workers are warm
    outcomes.wait([1])
    assert outcomes.value(1)[0] == 1
    assert client.wait_started(0) and client.worker_pids


def test_a_first_manager_killed_before_it_started_is_replaced_and_its_tasks_run_unspent(make_client):
    client, outcomes = make_client()
    client.start(wait=False)
    client.submit(call(1, where, 1))
    os.kill(client.pid, signal.SIGKILL)  # bad luck (an OOM kill, a stray signal), not its configuration
    outcomes.wait([1])
    assert outcomes.value(1)[0] == 1 and client.wait_started(0)


def test_a_manager_that_cannot_start_after_a_start_that_did_not_wait_fails_its_tasks_naming_why(make_client):
    client, outcomes = make_client(env=dict(os.environ, PYTHONHOME="/nonexistent-python-home"))
    client.start(wait=False)
    client.submit(call(1, where, 1))
    (outcome,) = outcomes.wait([1]).values()
    assert isinstance(outcome.error, ExecutorFailed)
    assert re.search(r"(?s)could not start: it exited with code 1 before it started; its last error output:.*"
                     r"(Python|encodings)", str(outcome.error)), outcome.error
    with pytest.raises(RuntimeError, match="exited with code 1 before it started"):
        client.wait_started()
    with pytest.raises(ExecutorFailed):
        client.submit(call(2, where, 2))


def test_a_manager_that_cannot_run_fails_start_with_its_exit_code_and_error_output(make_client):
    client, _ = make_client(env=dict(os.environ, PYTHONHOME="/nonexistent-python-home"))
    with pytest.raises(RuntimeError, match=r"(?s)exited with code 1 before it started; its last error output:.*"
                                           r"(Python|encodings)"):
        client.start()


def test_workers_that_cannot_start_fail_the_managers_start_naming_their_cpus(make_client):
    client, _ = make_client(worker_env={"PYTHONHOME": "/nonexistent-python-home"})
    with pytest.raises(RuntimeError, match=r"could not start its workers: the worker for CPUs .* failed to start"):
        client.start()
    assert not alive([client.pid])


def test_tasks_sent_before_workers_fail_to_start_fail_with_the_cause(make_client):
    client, outcomes = make_client(worker_env={"PYTHONHOME": "/nonexistent-python-home"})
    client.start(wait=False)
    client.submit(call(1, where, 1))  # sent before Started: it waits in the manager
    (outcome,) = outcomes.wait([1]).values()
    assert isinstance(outcome.error, ExecutorFailed), outcome.error  # not ExecutorShutdown: nobody shut it down
    assert "could not start its workers: the worker for CPUs" in str(outcome.error)


def test_shutdown_fails_running_and_queued_tasks_once_and_leaves_no_process(make_client, tmp_path):
    client, outcomes = make_client()
    client.start()
    everything = [client.pid, *client.worker_pids]
    running = start_running(client, tmp_path, 0, len(client.worker_pids))
    queued = list(range(100, 106))
    for i in queued:
        client.submit(call(i, where, i))
    client.shutdown()
    failed = outcomes.wait(running + queued, timeout=0)  # all delivered before shutdown returned
    for i, outcome in failed.items():
        assert isinstance(outcome.error, ExecutorShutdown), outcome
        assert len(outcomes.by_task[i]) == 1
    assert not alive(everything)
    with pytest.raises(ExecutorShutdown, match="shut down"):
        client.submit(call(200, where, 1))
    client.shutdown()  # idempotent


def test_shutdown_before_start_and_twice_is_harmless(make_client):
    children = {child.pid for child in psutil.Process().children(recursive=True)}
    client, outcomes = make_client()
    client.shutdown()
    client.shutdown()
    # Neither call started a manager, delivered an outcome or left the client half open.
    assert client.pid is None and client.worker_pids == []
    assert {child.pid for child in psutil.Process().children(recursive=True)} <= children
    assert not outcomes.by_task
    with pytest.raises(ExecutorShutdown, match="shut down"):
        client.submit(call(1, where, 1))


# -- no network ------------------------------------------------------------------------------


def test_the_manager_opens_no_network_or_listening_socket(make_client):
    client, outcomes = make_client()
    client.start()
    client.submit(call(1, where, 1))
    outcomes.wait([1])
    manager = psutil.Process(client.pid)
    for process in [manager, *manager.children(recursive=True)]:
        assert process.net_connections(kind="inet") == [], process  # no TCP or UDP at all
        assert all(c.status != psutil.CONN_LISTEN for c in process.net_connections(kind="all")), process
    assert manager.net_connections(kind="unix")  # its channels are socket pairs
    me = psutil.Process()
    assert not [c for c in me.net_connections(kind="all") if c.status == psutil.CONN_LISTEN]


def test_a_huge_stderr_line_is_forwarded_in_chunks_and_kept_only_by_its_start(monkeypatch):
    import io
    import sys
    from collections import deque

    from scalpel_executor.runtime.driver.manager_process import STDERR_CHUNK, forward_stderr

    class Sink(io.StringIO):
        buffer = io.BytesIO()

    sink = Sink()
    monkeypatch.setattr(sys, "stderr", sink)
    huge = b"x" * (40 * STDERR_CHUNK) + b"\n"
    tail: deque = deque(maxlen=5)
    forward_stderr(io.BytesIO(b"first\n" + huge + b"last\n"), tail)
    assert sink.buffer.getvalue() == b"first\n" + huge + b"last\n"  # every byte forwarded
    assert list(tail) == ["first\n", "x" * STDERR_CHUNK + " [...]\n", "last\n"]  # a chunk kept of the huge one
