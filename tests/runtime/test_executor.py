"""ScalpelExecutor through real Parsl, real worker processes and real pinning."""

import os
import time

import parsl
import psutil
import pytest
from parsl import bash_app, join_app, python_app
from parsl.app.errors import AppTimeout
from parsl.config import Config
from parsl.executors.errors import InvalidResourceSpecification

from scalpel_executor import Batching, ExecutorShutdown, ScalpelExecutor, WorkerDied
from scalpel_executor.core.grouping import group_tasks
from tests.runtime import helpers
from tests.runtime.helpers import GENEROUS, sleep_after_marking, wait_until


@pytest.fixture(scope="module")
def dfk(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("run")
    executor = ScalpelExecutor(label="scalpel", batching=Batching(window=0.002))
    loaded = parsl.load(Config(executors=[executor], run_dir=str(run_dir), retries=1))
    yield loaded
    pids = executor.pool.worker_pids
    loaded.cleanup()
    assert not [p for p in pids if psutil.pid_exists(p)], "workers outlived dfk.cleanup()"


def executor_of(dfk):
    return dfk.executors["scalpel"]


@python_app(executors=["scalpel"])
def where(x, parsl_resource_specification={}):
    import os

    return x * 2, sorted(os.sched_getaffinity(0)), os.getpid()


@python_app(executors=["scalpel"])
def fail_with(message):
    def deep_inside():
        raise KeyError(message)

    deep_inside()


crash = python_app(helpers.crash, executors=["scalpel"])
segfault_once = python_app(helpers.segfault_once, executors=["scalpel"])


@bash_app(executors=["scalpel"])
def affinity_in_shell(stdout=None):
    return "python3 -c 'import os; print(sorted(os.sched_getaffinity(0)))'"


@python_app(executors=["scalpel"])
def sleep_for(seconds, walltime=None):
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:  # Parsl's walltime interrupts Python bytecode, not a C-level sleep
        time.sleep(0.01)
    return seconds


@join_app
def fan_out(n):
    return [where(i) for i in range(n)][-1]


def test_results_and_each_worker_pinned_to_its_core(dfk):
    results = [f.result() for f in [where(i) for i in range(20)]]
    assert [r[0] for r in results] == [2 * i for i in range(20)]
    node = executor_of(dfk).pool
    allowed = set(os.sched_getaffinity(0))
    for pid, cpus in zip(node.worker_pids, node.slot_cpus_map):
        assert psutil.Process(pid).cpu_affinity() == list(cpus)
        assert len(cpus) == 1 and set(cpus) <= allowed
    assert sorted(c for cpus in node.slot_cpus_map for c in cpus) == sorted(executor_of(dfk).resolved_topology.cpus)
    assert all(len(r[1]) == 1 for r in results)


def test_a_fault_in_the_run_reports_bookkeeping_costs_a_row_never_the_result(dfk, monkeypatch, caplog):
    from scalpel_executor.runtime.driver import executor as module

    def broken(**fields):
        raise TypeError("a record that cannot be built")

    monkeypatch.setattr(module, "TaskRecord", broken)
    with caplog.at_level("ERROR", logger=module.__name__):
        assert where(21).result(timeout=GENEROUS)[0] == 42
    assert "its result is delivered all the same" in caplog.text


def test_bash_app_inherits_the_pinning(dfk, tmp_path):
    out = tmp_path / "affinity.txt"
    assert affinity_in_shell(stdout=str(out)).result() == 0
    cpus = eval(out.read_text())
    assert len(cpus) == 1 and cpus[0] in os.sched_getaffinity(0)


def test_join_app(dfk):
    assert fan_out(5).result()[0] == 8


def test_user_exception_reaches_caller_with_remote_traceback(dfk):
    future = fail_with("no such sample")
    with pytest.raises(KeyError, match="no such sample") as error:
        future.result()
    import traceback

    text = "".join(traceback.format_exception(error.value))
    assert "deep_inside" in text  # the frame from the worker
    # A python_app returns its exception wrapped; the run counts it as a failure and learns nothing.
    record = next(r for r in executor_of(dfk).records if r.task_id == future.task_record["exec_fu"].parsl_executor_task_id)
    row = next(r for r in executor_of(dfk).run_report()["tasks"] if r["task_id"] == record.task_id)
    assert not record.ok and row["ok"] is False and row["finished"] >= row["started"] >= 0


@pytest.mark.parametrize("how, cause", [("exit", "exit code 3"), ("segfault", "SIGSEGV"), ("sigkill", "SIGKILL")])
def test_dead_worker_fails_only_its_task_and_is_replaced(dfk, how, cause):
    node = executor_of(dfk).pool
    before = node.respawns
    others = [where(i) for i in range(6)]
    doomed = crash(how)
    with pytest.raises(WorkerDied) as error:
        doomed.result(timeout=60)
    message = str(error.value)
    assert cause in message and "core" in message
    assert [f.result(timeout=60)[0] for f in others] == [0, 2, 4, 6, 8, 10]
    wait_until(lambda: node.respawns >= before + 2, timeout=10)
    assert node.respawns == before + 2  # the first try and its retry both died, each replaced
    assert len(node.worker_pids) == len(node.slot_cpus_map)
    assert where(1).result(timeout=60)[0] == 2  # the replacement works


def test_retry_succeeds_after_a_transient_crash(dfk, tmp_path):
    assert segfault_once(str(tmp_path / "crashed-once")).result(timeout=60) == "recovered"


def test_walltime_ends_a_hanging_task_and_the_core_is_reused(dfk):
    with pytest.raises(AppTimeout):
        sleep_for(30, walltime=0.5).result(timeout=60)
    assert sleep_for(0.01).result(timeout=60) == 0.01


@pytest.mark.parametrize(
    "spec, key",
    [({"footprint": -3}, "footprint"), ({"footprint": "lots"}, "footprint"), ({"runtime": float("nan")}, "runtime"),
     ({"runtime": "1s"}, "runtime"), ({"priority": "high"}, "priority"), ({"profile_key": 7}, "profile_key")],
)
def test_bad_hints_are_clear_errors_naming_the_key(dfk, spec, key):
    with pytest.raises(InvalidResourceSpecification, match=key):
        where(1, parsl_resource_specification=spec).result(timeout=60)


def test_keys_of_other_executors_are_accepted_with_one_warning(dfk, caplog):
    with caplog.at_level("WARNING", logger="scalpel_executor"):
        a = where(1, parsl_resource_specification={"cores": 1, "footprint": "1MiB"})
        b = where(2, parsl_resource_specification={"cores": 1})
        assert a.result()[0] == 2 and b.result()[0] == 4
    assert sum("'cores'" in r.getMessage() for r in caplog.records) <= 1


def test_single_node_mode_listens_on_no_network_socket(dfk):
    where(0).result()
    me = psutil.Process()
    for process in [me, *me.children(recursive=True)]:
        try:
            connections = process.net_connections(kind="inet")
        except psutil.NoSuchProcess:
            continue
        assert not [c for c in connections if c.status == psutil.CONN_LISTEN], process


def test_futures_carry_task_ids(dfk):
    executor = executor_of(dfk)
    future = executor.submit(lambda: 1, {})
    assert isinstance(future.parsl_executor_task_id, int) and future.result(timeout=60) == 1


# -- without a DFK ------------------------------------------------------------------------------


def _sleep(seconds):
    import time

    time.sleep(seconds)
    return seconds


def test_shutdown_is_idempotent_and_safe_before_start():
    executor = ScalpelExecutor()
    executor.shutdown()
    executor.shutdown()
    with pytest.raises(ExecutorShutdown, match="was shut down before this task was handed to it"):
        executor.submit(_sleep, {}, 0).result(timeout=0)  # failed, not raised: Parsl logs no launch traceback


def test_submit_before_start_is_a_clear_error():
    with pytest.raises(ExecutorShutdown, match="not been started"):
        ScalpelExecutor().submit(_sleep, {}, 0)


def test_shutdown_fails_running_and_queued_tasks_and_leaves_no_worker(tmp_path):
    executor = ScalpelExecutor(batching=Batching(window=0))
    executor.start()
    assert executor.pool.wait_started(GENEROUS)  # start() returns before the workers; this reads their pids
    pids = executor.pool.worker_pids
    futures = [executor.submit(sleep_after_marking, {}, str(tmp_path / f"started-{i}"), 30) for i in range(5)]
    running = min(len(futures), len(pids))  # one task a worker; the rest wait
    assert wait_until(lambda: len(list(tmp_path.glob("started-*"))) == running), "the workers did not start their tasks"
    started = time.monotonic()
    executor.shutdown()
    assert time.monotonic() - started < 10
    for future in futures:
        with pytest.raises(ExecutorShutdown):
            future.result(timeout=5)
    assert not [p for p in pids if psutil.pid_exists(p)]
    executor.shutdown()


def test_a_lone_task_waits_for_the_quiet_period_not_the_whole_window():
    executor = ScalpelExecutor(batching=Batching(window=30, quiet=0.01), profiles=False)
    executor.start()
    try:
        started = time.monotonic()
        assert executor.submit(_sleep, {}, 0.01).result(timeout=60) == 0.01
        assert time.monotonic() - started < 20  # a 30 s window alone would have held it
    finally:
        executor.shutdown()


def test_context_manager_shuts_down():
    with ScalpelExecutor() as executor:
        executor.start()
        assert executor.submit(_sleep, {}, 0.01).result(timeout=60) == 0.01
        pids = executor.pool.worker_pids
    assert not [p for p in pids if psutil.pid_exists(p)]


@pytest.mark.parametrize(
    "kwargs, message",
    [({"policy": "lpt"}, "unknown scheduling policy 'lpt'"), ({"pin": "socket"}, "pin"),
     ({"topology": [[0, 99999]]}, "99999"), ({"topology": "2x"}, "2x"),
     ({"default_footprint": "huge"}, "default_footprint")],
)
def test_bad_construction_is_a_clear_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ScalpelExecutor(**kwargs)


def test_fake_2x4_topology_dispatches_by_the_two_level_schedule():
    footprints = [13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1]
    executor = ScalpelExecutor(topology="2x4:12MiB", policy="scalpel-paper", batching=Batching(window=0.3, quiet=0.3))
    executor.start()
    try:
        futures = [
            executor.submit(_sleep, {"footprint": f, "runtime": 1.0}, 0.3) for f in footprints
        ]
        for future in futures:
            future.result(timeout=120)
    finally:
        executor.shutdown()
    records = sorted(executor.records, key=lambda r: r.started)
    first_wave = records[:8]
    by_domain = {d: {r.task_id for r in first_wave if r.domain == d} for d in (0, 1)}
    groups = [set(g) for g in group_tasks(footprints, 2, 4)]
    full = [g for g in groups if len(g) == 4]
    assert sorted(by_domain.values(), key=min) == sorted(full, key=min)  # full groups first, one per domain
    assert {r.task_id for r in records[8:]} == set().union(*[g for g in groups if len(g) < 4])
