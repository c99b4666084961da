"""ScalpelExecutor(node_manager=True) through real Parsl: the pool runs in a node manager process."""

import os
import signal
import time

import parsl
import psutil
import pytest
from parsl import python_app
from parsl.config import Config
from parsl.executors.high_throughput.errors import ManagerLost

from scalpel_executor import Batching, ExecutorShutdown, ScalpelExecutor, WorkerDied
from scalpel_executor.runtime.errors import ExecutorFailed, NodeManagerLost
from scalpel_executor.runtime.driver.manager_client import ManagerClient
from tests.runtime.helpers import GENEROUS, alive, wait_until


@pytest.fixture
def dfk(tmp_path):
    executor = ScalpelExecutor(label="scalpel", node_manager=True, batching=Batching(window=0.002), profiles=False)
    loaded = parsl.load(Config(executors=[executor], run_dir=str(tmp_path / "run"), retries=1))
    assert executor.pool.wait_started(GENEROUS)  # load() returns before the workers; these tests read their pids
    yield loaded
    processes = [executor.pool.pid, *executor.pool.worker_pids]
    loaded.cleanup()
    assert not alive(processes), "the manager or a worker outlived dfk.cleanup()"


@python_app(executors=["scalpel"])
def where(x):
    import os

    return x, os.getpid(), sorted(os.sched_getaffinity(0))


@python_app(executors=["scalpel"])
def wait_for_file(path, x):
    import os
    import time

    while not os.path.exists(path):
        time.sleep(0.02)
    return x


@python_app(executors=["scalpel"])
def die():
    import os

    os._exit(5)


def test_tasks_run_in_the_managers_workers_and_the_run_report_says_where(dfk):
    executor = dfk.executors["scalpel"]
    assert isinstance(executor.pool, ManagerClient)
    assert psutil.Process(executor.pool.pid).ppid() == os.getpid()
    results = [f.result(timeout=GENEROUS) for f in [where(i) for i in range(10)]]
    assert [x for x, _, _ in results] == list(range(10))
    assert {pid for _, pid, _ in results} <= set(executor.pool.worker_pids)
    report = executor.run_report()
    assert report["tasks_finished"] == 10 and report["tasks_failed"] == 0
    for row in report["tasks"]:
        assert row["cpu"] in executor.pool.slot_cpus_map[row["slot"]] and row["measured_runtime"] is not None


def test_a_worker_death_fails_its_task_with_worker_died(dfk):
    with pytest.raises(WorkerDied, match="exit code 5"):
        die().result(timeout=GENEROUS)
    assert where(1).result(timeout=GENEROUS)[0] == 1


@python_app(executors=["scalpel"])
def mark_then_wait(marker, release, x):
    import os
    import time

    open(marker, "w").close()
    while not os.path.exists(release):
        time.sleep(0.02)
    return x


def test_a_killed_manager_fails_the_tasks_it_began_once_and_the_replacement_runs_the_rest_unspent(dfk, tmp_path):
    executor = dfk.executors["scalpel"]
    lost_pid, workers = executor.pool.pid, executor.pool.worker_pids
    release = tmp_path / "release"
    futures = [mark_then_wait(str(tmp_path / f"began-{i}"), str(release), i) for i in range(len(workers) + 2)]
    assert wait_until(lambda: len(list(tmp_path.glob("began-*"))) == len(workers))  # two wait in the manager
    began = sorted(tmp_path.glob("began-*"))
    os.kill(lost_pid, signal.SIGKILL)
    assert wait_until(lambda: executor.pool.managers_lost > 0), "the killed manager was not declared lost"
    release.touch()
    assert [f.result(timeout=GENEROUS) for f in futures] == list(range(len(futures)))  # retries=1 reran the begun
    report = executor.run_report()  # those begun failed once (ManagerLost); the others ran once, unspent
    assert (report["tasks_failed"], report["tasks_finished"]) == (len(began), len(futures) + len(began))
    assert {i for i, f in enumerate(futures) if f.task_record["fail_count"]} == {int(p.stem[6:]) for p in began}
    assert executor.pool.pid != lost_pid and not alive([lost_pid, *workers])


def test_replacements_killed_while_they_start_cost_no_task_a_retry_does_not_cover(dfk, tmp_path, monkeypatch):
    # Issue 26, item 6: a replacement killed while it started ended the executor for good (2,438 of
    # 3,000 tasks failed with retries=3). Here the first two replacements are SIGKILLed at launch.
    from scalpel_executor.runtime.driver import manager_client

    monkeypatch.setattr(manager_client, "REPLACEMENT_BACKOFF", 0.05)
    executor = dfk.executors["scalpel"]
    client = executor.pool
    launched, launch = [], client._launch

    def launch_and_kill_the_first_two():
        manager = launch()
        launched.append(manager.pid)
        if len(launched) <= 2:
            os.kill(manager.pid, signal.SIGKILL)
        return manager

    monkeypatch.setattr(client, "_launch", launch_and_kill_the_first_two)
    release = tmp_path / "release"
    futures = [wait_for_file(str(release), i) for i in range(6)]
    lost_pid = client.pid
    time.sleep(0.5)  # the tasks reached the manager: two run, four wait there
    os.kill(lost_pid, signal.SIGKILL)
    deadline = time.monotonic() + GENEROUS
    while len(launched) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    release.touch()
    assert [f.result(timeout=GENEROUS) for f in futures] == list(range(6))  # retries=1 was enough
    later = [where(i) for i in range(6, 10)]
    assert [f.result(timeout=GENEROUS)[0] for f in later] == list(range(6, 10))
    assert len(launched) == 3 and client.pid == launched[2] and client.managers_lost == 1


def test_without_retries_a_lost_managers_tasks_end_with_manager_lost(tmp_path):
    executor = ScalpelExecutor(label="scalpel", node_manager=True, profiles=False)
    with parsl.load(Config(executors=[executor], run_dir=str(tmp_path / "run"))):
        future = wait_for_file(str(tmp_path / "never"), 1)
        assert executor.pool.wait_started(GENEROUS)
        time.sleep(0.5)
        os.kill(executor.pool.pid, signal.SIGKILL)
        with pytest.raises(ManagerLost, match="was lost with its node manager"):
            future.result(timeout=GENEROUS)
        assert where(2).result(timeout=GENEROUS)[0] == 2  # the replacement takes new tasks


def test_shutdown_fails_unfinished_tasks_with_executor_shutdown(tmp_path):
    executor = ScalpelExecutor(label="scalpel", node_manager=True, profiles=False)
    executor.start()
    assert executor.pool.wait_started(GENEROUS)
    processes = [executor.pool.pid, *executor.pool.worker_pids]
    futures = [executor.submit(time.sleep, {}, 60) for _ in range(5)]
    executor.shutdown()
    for future in futures:
        with pytest.raises(ExecutorShutdown):
            future.result(timeout=0)
    assert not alive(processes)


def test_the_heartbeat_settings_reach_local_modes_manager():
    # With the default 120 s threshold a stopped manager would outlast GENEROUS: only the
    # executor's heartbeat_threshold, passed on to the local manager's client, ends this in time.
    executor = ScalpelExecutor(label="scalpel", node_manager=True, profiles=False, heartbeat_period=0.2,
                               heartbeat_threshold=2.0)
    executor.start()
    try:
        assert executor.pool.wait_started(GENEROUS)  # a manager stopped before it started waits for START_TIMEOUT
        assert (executor.pool.options.heartbeat_period, executor.pool.options.heartbeat_threshold) == (0.2, 2.0)
        future = executor.submit(time.sleep, {}, 60)
        time.sleep(0.5)  # sent, and running in one of the manager's workers
        stopped = executor.pool.pid
        os.kill(stopped, signal.SIGSTOP)  # alive but silent: only the threshold can tell
        with pytest.raises(NodeManagerLost, match="was silent for 2 s"):
            future.result(timeout=GENEROUS)
        assert executor.pool.pid != stopped and not alive([stopped])
    finally:
        executor.shutdown()


@python_app(executors=["scalpel"])
def initialised():
    import os

    return os.environ.get("SCALPEL_TEST_INIT")


def test_worker_init_runs_before_the_node_manager_and_its_workers(tmp_path):
    executor = ScalpelExecutor(label="scalpel", profiles=False, worker_init="export SCALPEL_TEST_INIT=ready")
    dfk = parsl.load(Config(executors=[executor], run_dir=str(tmp_path / "run")))
    try:
        assert initialised().result(timeout=120) == "ready"
    finally:
        dfk.cleanup()
        parsl.clear()


def test_a_worker_init_slower_than_the_start_timeout_starts_once(monkeypatch):
    from scalpel_executor.runtime.driver import manager_client

    # The manager's own start, once worker_init is done: under a loaded CI machine its imports and its
    # workers' start took over 5 s (it was killed and launched again), so 15, and an init longer still.
    monkeypatch.setattr(manager_client, "START_TIMEOUT", 15.0)
    launches = []
    launch = ManagerClient._launch
    monkeypatch.setattr(ManagerClient, "_launch", lambda self: launches.append(1) or launch(self))
    executor = ScalpelExecutor(label="scalpel", profiles=False, worker_init="sleep 17")
    executor.start()
    try:
        assert executor.submit(len, {}, "abc").result(timeout=120) == 3  # as HTEX, it waits for the init
    finally:
        executor.shutdown()
    assert len(launches) == 1  # never killed and tried again meanwhile


def _sleeping(seconds: str) -> list:
    return [p for p in psutil.process_iter(["cmdline"]) if (p.info["cmdline"] or [])[:2] == ["sleep", seconds]]


def test_a_shutdown_during_worker_init_leaves_none_of_its_commands_running():
    executor = ScalpelExecutor(label="scalpel", profiles=False, worker_init="sleep 297.25")
    executor.start()
    future = executor.submit(len, {}, "abc")
    assert wait_until(lambda: _sleeping("297.25"), timeout=GENEROUS)
    executor.shutdown()
    assert isinstance(future.exception(timeout=GENEROUS), ExecutorShutdown)
    assert wait_until(lambda: not _sleeping("297.25"), timeout=10)  # its process group ended with the manager's shell


def test_a_failing_worker_init_fails_the_tasks_with_its_output_and_it_is_local_mode_only():
    executor = ScalpelExecutor(label="scalpel", profiles=False, worker_init="echo 'no module gcc' >&2; exit 3")
    executor.start()  # returns before the manager starts, as HTEX's: its tasks say what went wrong
    with pytest.raises(ExecutorFailed, match="(?s)could not start: it exited with code 3 .*no module gcc"):
        executor.submit(len, {}, "ab").result(timeout=120)
    executor.shutdown()
    with pytest.raises(ValueError, match="worker_init='x' runs before local mode's node manager starts; it needs "
                                         "node_manager=True"):
        ScalpelExecutor(worker_init="x", node_manager=False)
