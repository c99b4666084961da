"""Per-task cores, memory and accelerators on the live executor, in both local modes: read from
each task's own affinity, threads, environment and timestamps, not from what the scheduler says."""

import os
import re

import parsl
import pytest
from parsl import python_app
from parsl.config import Config

from scalpel_executor import ResourcesUnavailable, ScalpelExecutor
from scalpel_executor.runtime.driver.report import run_summary

GiB = 2**30


@python_app(executors=["scalpel"])
def where(seconds, parsl_resource_specification={}):
    """Where and how the task ran: its CPUs, its BLAS threads, its devices, when."""
    import os
    import time

    from threadpoolctl import threadpool_info

    import numpy  # noqa: F401 - loads the BLAS whose threads are read

    began = time.time()
    time.sleep(seconds)
    blas = {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}
    return {"cpus": sorted(os.sched_getaffinity(0)), "blas": sorted(blas), "omp": os.environ.get("OMP_NUM_THREADS"),
            "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), "rocr": os.environ.get("ROCR_VISIBLE_DEVICES"),
            "begin": began, "end": time.time()}


def load(tmp_path, node_manager, **options):
    executor = ScalpelExecutor(label="scalpel", topology="1x2:32MiB", profiles=False, node_manager=node_manager,
                               probe=False, **options)
    return executor, parsl.load(Config(executors=[executor], run_dir=str(tmp_path / "run")))


def overlaps(a, b) -> bool:
    return a["begin"] < b["end"] and b["begin"] < a["end"]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
@pytest.mark.parametrize("node_manager", [True, False])
def test_mixed_core_counts_never_share_a_cpu_and_a_wide_task_gets_both(tmp_path, node_manager):
    executor, dfk = load(tmp_path, node_manager)
    try:
        narrow = [where(0.3) for _ in range(4)]
        wide = [where(0.3, parsl_resource_specification={"cores": 2}) for _ in range(2)]
        narrow += [where(0.3) for _ in range(4)]
        runs = [f.result(timeout=120) for f in narrow + wide]
        report = executor.run_report()
    finally:
        dfk.cleanup()
        parsl.clear()
    for run in runs[-2:]:
        assert len(run["cpus"]) == 2 and run["blas"] == [2] and run["omp"] == "2", run
    for run in runs[:-2]:
        assert len(run["cpus"]) == 1 and run["blas"] == [1] and run["omp"] == "1", run
    for i, a in enumerate(runs):  # no CPU in two tasks' affinity at one time
        for b in runs[i + 1:]:
            if overlaps(a, b):
                assert not set(a["cpus"]) & set(b["cpus"]), (a, b)
    rows = [r for r in report["tasks"] if r["cores"] == 2]
    assert len(rows) == 2 and all(len(r["cpus"]) == 2 for r in rows)


@pytest.mark.parametrize("node_manager", [True, False])
def test_declared_memory_keeps_two_large_tasks_apart_and_a_request_past_the_node_fails_at_once(tmp_path,
                                                                                               node_manager):
    executor, dfk = load(tmp_path, node_manager, memory_budget="24GiB")
    try:
        big = [where(0.5, parsl_resource_specification={"memory": 15 * 1024}) for _ in range(2)]
        with pytest.raises(ResourcesUnavailable, match=r"asks for 64.0 GiB of memory; this node's budget is 24.0 GiB"):
            where(0, parsl_resource_specification={"memory": "64GiB"}).result(timeout=60)
        with pytest.raises(ResourcesUnavailable, match=r"asks for 1 accelerator; this node has 0"):
            where(0, parsl_resource_specification={"gpus": 1}).result(timeout=60)
        too_wide = where(0, parsl_resource_specification={"cores": 3})
        with pytest.raises(ResourcesUnavailable, match=rf"^task {too_wide.tid} \(where\) asks for 3 cores; this node has 2"):
            too_wide.result(timeout=60)  # named as Parsl's log names it
        a, b = [f.result(timeout=120) for f in big]
        report = executor.run_report()
    finally:
        dfk.cleanup()
        parsl.clear()
    assert not overlaps(a, b), (a, b)
    # the three refusals never became tasks: the report counts them apart, and the closing line says so
    assert (report["tasks_rejected"], report["tasks_finished"], report["tasks_failed"]) == (3, 2, 0)
    assert "2 tasks (0 failed; 3 more refused at submit, each future holding why)" in run_summary(report, None)


@pytest.mark.parametrize("node_manager", [True, False])
def test_concurrent_gpu_tasks_see_distinct_devices_and_cpu_tasks_none(tmp_path, node_manager):
    executor, dfk = load(tmp_path, node_manager, available_accelerators=["0", "1"])
    try:
        gpu = [where(0.5, parsl_resource_specification={"gpus": 1}) for _ in range(2)]
        cpu = where(0)
        runs = [f.result(timeout=120) for f in gpu]
        plain = cpu.result(timeout=120)
        with pytest.raises(ResourcesUnavailable, match="asks for 3 accelerators; this node has 2"):
            where(0, parsl_resource_specification={"gpus": 3}).result(timeout=60)
    finally:
        dfk.cleanup()
        parsl.clear()
    assert {run["cuda"] for run in runs} == {"0", "1"} and all(run["rocr"] == run["cuda"] for run in runs)
    assert overlaps(*runs)  # both ran at once, each on its own device
    assert plain["cuda"] == ""


def test_bad_resource_options_name_the_value():
    with pytest.raises(ValueError, match="cores_per_task must be a whole number >= 1, got 0"):
        ScalpelExecutor(cores_per_task=0)
    with pytest.raises(ValueError, match="available_accelerators names device '0' twice"):
        ScalpelExecutor(available_accelerators=["0", "0"])
    with pytest.raises(ValueError, match="mem_per_task must be a number of MiB >= 0"):
        ScalpelExecutor(mem_per_task=-1)


@python_app(executors=["scalpel"])
def hold(path, seconds, parsl_resource_specification={}):
    """Say where it runs (its pid, in ``path``), then sleep: a task to be killed mid-run."""
    import os
    import time

    with open(path, "w") as handle:
        handle.write(str(os.getpid()))
    time.sleep(seconds)
    return sorted(os.sched_getaffinity(0))


def killed_mid_task(path):
    import signal
    import time

    deadline = time.monotonic() + 60
    while not (path.exists() and path.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(int(path.read_text()), signal.SIGKILL)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
@pytest.mark.parametrize("node_manager", [True, False])
def test_a_wide_task_whose_worker_is_killed_frees_all_its_cores_once(tmp_path, node_manager):
    from scalpel_executor import WorkerDied

    executor, dfk = load(tmp_path, node_manager)
    try:
        victim = hold(str(tmp_path / "pid"), 60, parsl_resource_specification={"cores": 2})
        killed_mid_task(tmp_path / "pid")
        with pytest.raises(WorkerDied) as died:
            victim.result(timeout=120)
        assert sorted(died.value.cpus) == [0, 1] and "on cores 0,1 died" in str(died.value)  # every core it held
        again = where(0.2, parsl_resource_specification={"cores": 2})  # needs both cores: both were freed
        narrow = [where(0.2) for _ in range(3)]
        assert len(again.result(timeout=120)["cpus"]) == 2
        assert all(len(f.result(timeout=120)["cpus"]) == 1 for f in narrow)
        report = executor.run_report()
    finally:
        dfk.cleanup()
        parsl.clear()
    assert report["tasks_failed"] == 1 and report["tasks_finished"] == 5
    (lost,) = [row for row in report["tasks"] if not row["ok"]]  # where and why it ran, though it never returned
    assert sorted(lost["cpus"]) == [0, 1] and lost["admission"] is not None


@pytest.mark.parametrize("node_manager", [True, False])
def test_a_memory_blocked_queue_goes_on_after_the_holder_is_killed_and_its_worker_respawned(tmp_path, node_manager):
    from scalpel_executor import WorkerDied

    executor, dfk = load(tmp_path, node_manager, memory_budget="24GiB")
    try:
        refused = where(0, parsl_resource_specification={"cores": "two"})  # a Parsl id, no executor id
        holder = hold(str(tmp_path / "pid"), 60, parsl_resource_specification={"memory": "15GiB"})
        waiting = [where(0.2, parsl_resource_specification={"memory": "15GiB"}) for _ in range(2)]
        killed_mid_task(tmp_path / "pid")
        with pytest.raises(WorkerDied) as died:
            holder.result(timeout=120)
        a, b = [f.result(timeout=120) for f in waiting]
    finally:
        dfk.cleanup()
        parsl.clear()
    assert not overlaps(a, b), (a, b)
    assert refused.exception() is not None and (holder.tid, died.value.task_id) == (1, 0)
    # named as Parsl's log names it (the executor's first call too), its executor id kept in task_id
    assert str(died.value).startswith("task 1 (hold) was lost: its worker"), str(died.value)


@python_app(executors=["scalpel"])
def allocate(mib, parsl_resource_specification={}):
    data = bytearray(mib << 20)
    return len(data) >> 20


@pytest.mark.parametrize("node_manager", [True, False])
def test_enforce_memory_fails_a_task_past_its_declaration_alone(tmp_path, node_manager):
    from scalpel_executor import MemoryExceeded

    executor, dfk = load(tmp_path, node_manager, enforce_memory=True)
    try:
        refused = allocate(1, parsl_resource_specification={"cores": 0})  # a Parsl id, no executor id
        over = allocate(2048, parsl_resource_specification={"memory": 100})
        within = allocate(50, parsl_resource_specification={"memory": 100})
        assert refused.exception() is not None
        with pytest.raises(MemoryExceeded, match=rf"^task {over.tid} \(allocate\) allocated past its declared memory of 100 MiB "
                                                  r"\(enforce_memory=True: (cgroup v[12]|RLIMIT_AS) limit of"):
            over.result(timeout=120)
        assert within.result(timeout=120) == 50
        after = allocate(2048)  # the worker's limit was lifted after the task
        assert after.result(timeout=120) == 2048
    finally:
        dfk.cleanup()
        parsl.clear()


def test_an_undeclared_task_is_admitted_with_its_keys_learned_peak_rss_capped_at_the_budget(tmp_path):
    from scalpel_executor.learning.estimates import Estimate

    executor = ScalpelExecutor(topology="1x2:32MiB", profiles=False, memory_budget="4GiB")
    executor._pool_options()  # local mode fixes the node's budget here, as start() does
    learned = Estimate("k", "app", 0.0, 1.0, "prior", "prior", memory=3 * GiB)
    assert executor._fit.learned_memory(learned) == 3 * GiB
    assert executor._fit.learned_memory(Estimate("k", "app", 0.0, 1.0, "prior", "prior", memory=64 * GiB)) == 4 * GiB
    assert executor._fit.learned_memory(Estimate("k", "app", 0.0, 1.0, "prior", "prior")) == 0.0


def test_provider_mode_counts_learned_memory_at_most_each_nodes_budget_and_declared_memory_in_full():
    from scalpel_executor.core.tasks import Task
    from scalpel_executor.runtime.driver.hub import RemoteManager
    from scalpel_executor.runtime.contract import Job

    node = RemoteManager(b"m", "0", "node", 1, [0, 1], 0.0, slots=2, slot_cpus=[[0], [1]], memory=4 * GiB)
    learned = Task(1, memory=64 * GiB, payload=Job(b"", memory_limit=0.0))  # the key's peak RSS, not declared
    declared = Task(2, memory=64 * GiB, payload=Job(b"", memory_limit=64 * GiB))
    assert node.could_run(learned) and not node.could_run(declared)


@pytest.mark.parametrize("options, named", [({"cores_per_task": 3}, "cores_per_task=3 is more than this node's 2 cores"),
                                            ({"mem_per_task": "2TiB"}, "mem_per_task='2TiB' (2097152 MiB) is more than")])
def test_task_defaults_no_task_could_run_with_are_refused_at_start_naming_the_option(options, named):
    import psutil

    before = {child.pid for child in psutil.Process().children(recursive=True)}
    executor = ScalpelExecutor(label="scalpel", topology="1x2:32MiB", profiles=False, probe=False, **options)
    with pytest.raises(ValueError, match=re.escape(named)):
        executor.start()
    assert {child.pid for child in psutil.Process().children(recursive=True)} <= before  # nothing was started


def test_a_memory_budget_beyond_the_nodes_memory_is_named_in_a_warning(caplog):
    import psutil

    from scalpel_executor.runtime.options import PoolOptions, memory_budget

    total = psutil.virtual_memory().total
    assert memory_budget(PoolOptions(memory_budget=total // 2)) == total // 2 and "memory_budget" not in caplog.text
    assert memory_budget(PoolOptions(memory_budget=100 * 2**40)) == 100 * 2**40  # the user's figure stands
    assert "memory_budget of 104857600 MiB is more than this node's" in caplog.text


def test_max_workers_per_node_keeps_local_modes_workers_as_in_htex(tmp_path):
    wide = ScalpelExecutor(label="scalpel", topology="2x2:32MiB", profiles=False, max_workers_per_node=3)
    assert [domain["cpus"] for domain in wide.run_report()["topology"]["domains"]] == [[0, 1], [2]]
    executor, dfk = load(tmp_path, False, max_workers_per_node=1)  # was: ignored, both cores ran tasks
    try:
        ran = [where(0.2) for _ in range(3)]
        assert {tuple(f.result(timeout=120)["cpus"]) for f in ran} == {(0,)}
        assert len(executor.pool.worker_pids) == 1
    finally:
        dfk.cleanup()
        parsl.clear()
