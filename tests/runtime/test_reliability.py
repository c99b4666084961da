"""Reliability of ScalpelExecutor: crashes, hangs, bad input, shutdown, soak, no network socket.

Real Parsl, real worker processes. No timed assertion is tighter than a generous bound: the
figures (respawn time, soak rates) are printed and reported in docs/reliability.md.
"""

import ast
import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import threading
import time

import parsl
import psutil
import pytest
from parsl import python_app
from parsl.app.errors import AppTimeout
from parsl.config import Config
from parsl.executors.errors import InvalidResourceSpecification
from parsl.executors.high_throughput.errors import WorkerLost

from scalpel_executor import Batching, ExecutorShutdown, ScalpelExecutor, WorkerDied
from scalpel_executor.stress import soak
from tests.runtime import helpers
from tests.runtime.helpers import GENEROUS, gone, wait_until
from scalpel_executor.runtime.errors import WalltimeExceeded

ROOT = pathlib.Path(__file__).resolve().parents[2]


def retry_only_transient(error, task_record):
    """Parsl retry handler: only apps whose name ends in ``_once`` are worth a second try."""
    return 1 if task_record["func_name"].endswith("_once") else 100


@pytest.fixture(scope="module")
def dfk(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("run")
    executor = ScalpelExecutor(label="scalpel", batching=Batching(window=0.002), profiles=False)
    loaded = parsl.load(Config(executors=[executor], run_dir=str(run_dir), retries=1,
                               retry_handler=retry_only_transient))
    assert executor.pool.wait_started(GENEROUS)  # load() returns before the workers; these tests count them
    yield loaded
    pids = executor.pool.worker_pids
    loaded.cleanup()
    assert not [p for p in pids if psutil.pid_exists(p)], "workers outlived dfk.cleanup()"


def node_of(dfk):
    return dfk.executors["scalpel"].pool


def all_workers_ready(node):
    return len(node.worker_pids) == len(node.slot_cpus_map) and len(node.respawn_seconds) >= node.respawns


@python_app(executors=["scalpel"])
def whoami(x=0):
    import os

    return x, os.getpid(), sorted(os.sched_getaffinity(0))


crash = python_app(helpers.crash, executors=["scalpel"])
segfault_once = python_app(helpers.segfault_once, executors=["scalpel"])


@python_app(executors=["scalpel"])
def out_of_memory(headroom):
    import os
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as statm:
        in_use = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    resource.setrlimit(resource.RLIMIT_AS, (in_use + headroom, hard))
    try:
        return len(bytearray(1 << 30))
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@python_app(executors=["scalpel"])
def blocked_in_c(seconds, walltime=None):
    import time

    time.sleep(seconds)  # one C call: Parsl's walltime exception waits for it to return
    return seconds


@python_app(executors=["scalpel"])
def raise_unpicklable_exception():
    class Unpicklable(Exception):  # a local class: cannot be pickled by reference
        pass

    raise Unpicklable("made inside the task")


@python_app(executors=["scalpel"])
def return_generator():
    return (i for i in range(3))


@python_app(executors=["scalpel"])
def echo(value):
    return value


@python_app(executors=["scalpel"])
def big_result(n_bytes):
    return b"x" * n_bytes


# -- worker death --------------------------------------------------------------------------------


@pytest.mark.parametrize("how, cause", [("exit", "exit code 3"), ("segfault", "SIGSEGV"), ("sigkill", "SIGKILL")])
def test_a_crashing_task_fails_alone_names_task_core_and_cause_and_its_core_gets_a_new_worker(dfk, how, cause):
    node = node_of(dfk)
    assert wait_until(lambda: all_workers_ready(node))
    before_respawns, before_pids = node.respawns, set(node.worker_pids)
    others = [whoami(i) for i in range(8)]
    doomed = crash(how)
    with pytest.raises(WorkerDied) as caught:
        doomed.result(timeout=GENEROUS)
    error = caught.value
    assert isinstance(error, WorkerLost)  # Parsl users' `except WorkerLost` clauses keep working
    assert cause in str(error) and f"task {error.task_id}" in str(error)
    assert f"core {','.join(map(str, error.cpus))}" in str(error) and error.cause.endswith(cause.split()[-1])
    assert [f.result(timeout=GENEROUS)[0] for f in others] == list(range(8))
    assert wait_until(lambda: node.respawns == before_respawns + 1 and all_workers_ready(node))
    replacement = set(node.worker_pids) - before_pids
    assert len(replacement) == 1
    assert psutil.Process(replacement.pop()).cpu_affinity() == list(error.cpus)  # the same core


def test_a_worker_killed_from_outside_fails_its_task_and_is_replaced_on_its_core(dfk, tmp_path):
    node = node_of(dfk)
    assert wait_until(lambda: all_workers_ready(node))
    pid_file = str(tmp_path / "pid")
    doomed = crash("wait", pid_file)
    assert wait_until(lambda: os.path.exists(pid_file))
    victim = int(pathlib.Path(pid_file).read_text())
    cpus = psutil.Process(victim).cpu_affinity()
    respawned_before = len(node.respawn_seconds)
    killed_at = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    with pytest.raises(WorkerDied, match="SIGKILL"):
        doomed.result(timeout=GENEROUS)
    assert wait_until(lambda: len(node.respawn_seconds) > respawned_before)
    ready_after = time.monotonic() - killed_at
    # until the new worker has run a task on that core (it imports Parsl on its first task)
    assert wait_until(lambda: any(f.result(timeout=GENEROUS)[2] == cpus for f in [whoami(i) for i in range(4)]),
                      timeout=GENEROUS)
    first_task_after = time.monotonic() - killed_at
    print(f"\nrespawn: ready {ready_after:.2f} s after SIGKILL (node measured {node.respawn_seconds[-1]:.2f} s); "
          f"a task ran on CPUs {cpus} {first_task_after:.2f} s after SIGKILL")
    assert victim not in node.worker_pids and ready_after < GENEROUS


def test_an_out_of_memory_task_fails_alone_with_memory_error(dfk):
    with pytest.raises(MemoryError):
        out_of_memory(64 * 2**20).result(timeout=GENEROUS)
    assert big_result(100 * 2**20).result(timeout=GENEROUS) == b"x" * (100 * 2**20)


def test_parsl_retries_rerun_a_task_after_a_transient_crash(dfk, tmp_path):
    node = node_of(dfk)
    before = node.respawns
    assert segfault_once(str(tmp_path / "crashed-once")).result(timeout=GENEROUS) == "recovered"
    assert node.respawns == before + 1


# -- hanging tasks ----------------------------------------------------------------------------


def test_a_task_blocked_in_c_past_its_walltime_is_killed_and_its_core_reused(dfk):
    node = node_of(dfk)
    assert wait_until(lambda: all_workers_ready(node))
    before = node.respawns
    started = time.monotonic()
    with pytest.raises(WalltimeExceeded) as caught:
        blocked_in_c(120, walltime=1).result(timeout=GENEROUS)
    assert time.monotonic() - started < GENEROUS
    assert isinstance(caught.value, AppTimeout)  # one `except AppTimeout` covers both kinds of timeout
    assert "walltime of 1 s" in str(caught.value) and "core" in str(caught.value)
    assert wait_until(lambda: node.respawns == before + 1 and all_workers_ready(node))
    assert sorted(f.result(timeout=GENEROUS)[0] for f in [whoami(i) for i in range(6)]) == list(range(6))


def test_a_task_that_ends_within_its_walltime_is_not_killed(dfk):
    before = node_of(dfk).respawns
    assert blocked_in_c(0.2, walltime=5).result(timeout=GENEROUS) == 0.2
    assert node_of(dfk).respawns == before


# -- task-level errors ------------------------------------------------------------------------


def test_task_errors_are_clear_and_the_run_goes_on(dfk):
    with pytest.raises(Exception, match="made inside the task"):
        raise_unpicklable_exception().result(timeout=GENEROUS)
    with pytest.raises(TypeError, match="result of type generator cannot be serialized"):
        return_generator().result(timeout=GENEROUS)
    with pytest.raises(TypeError, match="cannot be serialized for a worker.*generator"):
        echo(i for i in range(3)).result(timeout=GENEROUS)
    with pytest.raises(TypeError, match=r"argument 1 holds a Future: Parsl waits only for Futures passed as "
                                        r"arguments themselves .*pass them one by one \(\*futures\)"):
        echo([echo(1), echo(2)]).result(timeout=GENEROUS)  # a list of futures: Parsl does not look inside it
    assert echo(5).result(timeout=GENEROUS) == 5


def test_a_result_of_200_mib_arrives_whole(dfk):
    n_bytes = 200 * 2**20
    result = big_result(n_bytes).result(timeout=120)
    assert len(result) == n_bytes and result[:1] == result[-1:] == b"x"
    assert echo(1).result(timeout=GENEROUS) == 1


# -- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, message",
    [({"footprint": -3}, "footprint.*got -3"), ({"footprint": float("nan")}, "footprint.*nan"),
     ({"footprint": "lots"}, "footprint.*'lots'"), ({"footprint": "-1MiB"}, "footprint.*'-1MiB'"),
     ({"footprint": True}, "footprint.*bool"), ({"footprint": [1]}, "footprint.*list"),
     ({"runtime": -1}, "runtime.*-1"), ({"runtime": float("inf")}, "runtime.*inf"), ({"runtime": "1s"}, "runtime.*'1s'"),
     ({"priority": "high"}, "priority.*'high'"), ({"priority": float("nan")}, "priority.*nan"),
     ({"profile_key": 7}, "profile_key.*7"), ({"profile_key": ""}, "profile_key.*''"),
     ([], r"must be a dict.*\[\]"), ("footprint=1", "must be a dict.*'footprint=1'")],
)
def test_bad_resource_specifications_fail_at_submit_naming_the_value(dfk, spec, message):
    executor = dfk.executors["scalpel"]
    with pytest.raises(InvalidResourceSpecification, match=message):
        executor.submit(len, spec, "abc")


@pytest.mark.parametrize("walltime", [-1, 0, float("nan"), "10", True])
def test_bad_walltimes_fail_at_submit_naming_the_value(dfk, walltime):
    with pytest.raises(ValueError, match=f"walltime must be a positive number of seconds.*got {walltime!r}"):
        dfk.executors["scalpel"].submit(len, {}, "abc", walltime=walltime)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [({"policy": "lpt"}, ValueError, "unknown scheduling policy 'lpt'"), ({"policy": ""}, ValueError, "policy ''"),
     ({"pin": "socket"}, ValueError, "'socket'"), ({"label": " "}, ValueError, "label.*' '"),
     ({"default_runtime": -1}, ValueError, "default_runtime.*-1"),
     ({"default_footprint": "huge"}, ValueError, "default_footprint.*'huge'"),
     ({"topology": [[0, 99999]]}, ValueError, "CPU 99999"), ({"topology": [[]]}, ValueError, "domain 0.*empty"),
     ({"topology": []}, ValueError, "cpu_lists is empty"), ({"topology": [[0, 0]]}, ValueError, "CPU 0.*twice"),
     ({"topology": [[0], [0]]}, ValueError, "CPU 0 in domain 1.*domain 0 too"),
     ({"topology": [[-1]]}, ValueError, "CPU -1 is negative"), ({"topology": "2x0"}, ValueError, "'2x0'"),
     ({"topology": "banana"}, ValueError, "'banana'")],
)
def test_bad_construction_fails_naming_the_value(kwargs, error, message):
    with pytest.raises(error, match=message):
        ScalpelExecutor(profiles=False, **kwargs)


@pytest.mark.parametrize(
    "fields, error, message",
    [({"window": -1}, ValueError, "window.*-1"), ({"window": float("nan")}, ValueError, "nan"),
     ({"quiet": float("inf")}, ValueError, "quiet.*inf"), ({"max_batch": 0}, ValueError, "max_batch.*0"),
     ({"max_batch": -5}, ValueError, "max_batch.*-5"), ({"max_batch": True}, TypeError, "max_batch.*True")],
)
def test_a_bad_batch_rule_fails_naming_the_value(fields, error, message):
    with pytest.raises(error, match=message):
        ScalpelExecutor(profiles=False, batching=Batching(**fields))


# -- shutdown ---------------------------------------------------------------------------------

DRIVER = textwrap.dedent("""
    import atexit, json, sys, time
    import parsl
    from parsl import python_app
    from parsl.config import Config
    from scalpel_executor import Batching, ScalpelExecutor

    futures = []
    # Registered before parsl.load, so it runs after the executor's own exit handler.
    atexit.register(lambda: print(json.dumps({"pending": sum(not f.done() for f in futures)}), flush=True))

    @python_app
    def nap(seconds):
        import time
        time.sleep(seconds)
        return seconds

    executor = ScalpelExecutor(batching=Batching(window=0), profiles=False)
    dfk = parsl.load(Config(executors=[executor], run_dir=sys.argv[2], retries=0, initialize_logging=False))
    executor.pool.wait_started(60)
    futures.extend(nap(60) for _ in range(6))  # two run, four wait
    time.sleep(1.5)  # a batch window of 0: the first two are on their workers long before this
    print(json.dumps({"workers": executor.pool.worker_pids}), flush=True)
    if sys.argv[1] == "cleanup":
        dfk.cleanup()
        errors = [type(f.exception(timeout=30)).__name__ for f in futures]
        print(json.dumps({"errors": errors}), flush=True)
    else:
        [f.result() for f in futures]  # until Ctrl-C or SIGKILL
""")


def start_driver(mode, tmp_path):
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    driver = subprocess.Popen([sys.executable, str(script), mode, str(tmp_path / "runinfo")], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    line = driver.stdout.readline()
    assert line, driver.stderr.read()
    return driver, json.loads(line)["workers"]


def test_dfk_cleanup_fails_running_and_queued_tasks_and_leaves_no_worker(tmp_path):
    driver, workers = start_driver("cleanup", tmp_path)
    out, err = driver.communicate(timeout=60)
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[0]["errors"] == ["ExecutorShutdown"] * 6, err
    assert lines[-1] == {"pending": 0}
    assert driver.returncode == 0 and len(workers) == 2 and gone(workers)


def test_ctrl_c_of_the_driving_script_ends_every_task_and_worker(tmp_path):
    driver, workers = start_driver("wait", tmp_path)
    assert not gone(workers)
    # each worker in a group of its own, the Ctrl-C's group not among them, in the script's session:
    # not a session of its own, where the kernel would give each its own share of CPU time (OWN_GROUP)
    assert [(os.getsid(pid), os.getpgid(pid)) for pid in workers] == [(driver.pid, pid) for pid in workers]
    os.killpg(driver.pid, signal.SIGINT)  # what a terminal's Ctrl-C does to the foreground group
    out, err = driver.communicate(timeout=60)
    assert json.loads(out.splitlines()[-1]) == {"pending": 0}, err
    assert "KeyboardInterrupt" in err
    assert gone(workers)


def test_workers_exit_when_the_driving_process_is_killed(tmp_path):
    driver, workers = start_driver("wait", tmp_path)
    killed_at = time.monotonic()
    driver.kill()
    driver.communicate(timeout=60)
    assert wait_until(lambda: gone(workers), timeout=GENEROUS)
    print(f"\nworkers gone {time.monotonic() - killed_at:.2f} s after the driver was killed")


# -- soak -------------------------------------------------------------------------------------


def test_soak_every_future_resolves_exactly_the_crashes_fail_and_nothing_leaks(tmp_path):
    report = soak.run_tasks(1000, crash_every=100, sample_every=250, run_dir=str(tmp_path), log=lambda *a: None)
    assert report["pending"] == 0 and report["other_failures"] == 0
    assert report["worker_died"] == report["crashes_injected"] == 10
    assert report["succeeded"] == 990
    assert report["workers_at_end"] == report["workers_at_start"] and report["respawns"] == 10
    assert report["workers_left_after_cleanup"] == 0
    # A leak grows with the crashes; other tests' objects collected meanwhile may only shrink it.
    assert report["settled"]["fds"] <= report["before"]["fds"], report  # no replacement mid-spawn
    fds = [s["fds"] for s in report["samples"]]
    assert max(fds) <= report["before"]["fds"] + 5, report["samples"]  # socket pair, pipe, /dev/null mid-spawn
    print(f"\nsoak: 1000 tasks, 10 crashes, {report['tasks_per_second']:.0f} tasks/s, respawn median "
          f"{report['respawn_median_s']:.2f} s, RSS {[round(s['rss'] / 2**20) for s in report['samples']]} MiB")


def test_start_stop_cycles_leak_no_descriptor_thread_or_process():
    report = soak.run_cycles(10, tasks_per_cycle=1, log=lambda *a: None)
    baseline = report["baseline"]
    assert report["workers_surviving_shutdown"] == 0
    for after in report["after"]:
        assert (after["fds"], after["threads"], after["children"]) == \
            (baseline["fds"], baseline["threads"], baseline["children"])


# -- security ---------------------------------------------------------------------------------


def test_no_process_of_the_executor_opens_a_network_socket():
    with ScalpelExecutor(profiles=False) as executor:
        executor.start()
        assert executor.submit(len, {}, "abc").result(timeout=GENEROUS) == 3
        me = psutil.Process()
        listening = [c for c in me.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
        assert not listening
        for pid in executor.pool.worker_pids:
            worker = psutil.Process(pid)
            for process in [worker, *worker.children(recursive=True)]:
                assert process.net_connections(kind="inet") == [], process  # no TCP or UDP at all
                assert process.net_connections(kind="unix")  # only the private socket pair


def test_nothing_read_from_disk_is_unpickled():
    """Only bytes from a worker's private socket pair are unpickled (the worker protocol's decode)."""
    unpicklers = {"load", "loads", "Unpickler"}
    for path in (ROOT / "scalpel_executor").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                assert not {"shelve", "marshal", "dill", "cloudpickle"} & set(names), (path, node.lineno)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "pickle":
                assert node.attr in unpicklers | {"dumps", "HIGHEST_PROTOCOL"}, (path, node.lineno)
                if node.attr in unpicklers:
                    assert node.attr == "loads" and path.name == "worker_messages.py", (path, node.lineno)


def test_worker_died_pickles_and_keeps_its_fields():
    import pickle

    error = WorkerDied("task 3 was lost", task_id=3, pid=42, cpus=(1,), cause="signal SIGKILL")
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == "task 3 was lost" and (copy.task_id, copy.cpus, copy.cause) == (3, (1,), "signal SIGKILL")
    assert isinstance(copy, WorkerLost) and isinstance(copy, RuntimeError)


def test_an_executor_error_is_renamed_to_parsls_name_of_its_task_and_nothing_else_is():
    from scalpel_executor.runtime.errors import NodeManagerLost, named

    died = named(WorkerDied("task 3 was lost while task 30 ran", task_id=3), 3, "task 7 (fit)")
    assert str(died) == "task 7 (fit) was lost while task 30 ran" and died.task_id == 3
    lost = pickle_round_trip(named(NodeManagerLost("task 3 was lost with its node manager", task_id=3, pid=9), 3,
                                   "task 7 (fit)"))
    assert str(lost) == "task 7 (fit) was lost with its node manager" and lost.task_id == 3
    own = ValueError("task 3 was lost")  # the task's own exception keeps its own words
    assert str(named(own, 3, "task 7 (fit)")) == "task 3 was lost"
    assert str(named(ExecutorShutdown("task 3 had not started"), 3, None)) == "task 3 had not started"
    assert str(named(ExecutorShutdown(r"task 3 had not started"), 3, r"task 7 (a\1)")) == r"task 7 (a\1) had not started"


def pickle_round_trip(error):
    import pickle

    return pickle.loads(pickle.dumps(error))


def test_shutdown_leaves_no_future_pending_with_a_thread_submitting_concurrently():
    executor = ScalpelExecutor(batching=Batching(window=0), profiles=False)
    executor.start()
    futures, refused = [], []

    def submit_forever():
        while True:  # as Parsl's launch thread: after shutdown, each task is refused with a failed future
            future = executor.submit(len, {}, "ab")
            if future.done() and "before this task was handed to it" in str(future.exception()):
                refused.append(future)
                return
            futures.append(future)

    submitter = threading.Thread(target=submit_forever)
    submitter.start()
    time.sleep(0.5)
    executor.shutdown()
    submitter.join(GENEROUS)
    assert refused and futures
    assert all(f.done() for f in futures)
    assert {type(f.exception()) for f in futures if f.exception()} <= {ExecutorShutdown}


def _crash_after(seconds, marker=None):
    import os
    import time

    if marker:
        open(marker, "w").close()
    time.sleep(seconds)
    os._exit(5)


@pytest.mark.parametrize("node_manager", [True, False])
def test_a_core_whose_replacements_cannot_start_is_retired_and_the_rest_carry_on(tmp_path, node_manager):
    site = tmp_path / "site"
    site.mkdir()
    broken = tmp_path / "broken"  # once it exists, no new worker gets as far as "ready"
    (site / "sitecustomize.py").write_text(f"import os\nif os.path.exists({str(broken)!r}):\n    os._exit(7)\n")
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    executor = ScalpelExecutor(batching=Batching(window=0), profiles=False, probe=False, worker_env={"PYTHONPATH": path},
                               node_manager=node_manager)
    executor.start()
    try:
        node = executor.pool
        if node_manager:  # start() returned before the workers: break only their replacements
            assert node.wait_started(GENEROUS)
        broken.touch()
        with pytest.raises(WorkerDied, match="exit code 5"):
            executor.submit(_crash_after, {}, 0).result(timeout=GENEROUS)
        assert wait_until(lambda: len(node.retired_slots) == 1)
        assert [executor.submit(len, {}, "ab").result(timeout=GENEROUS) for _ in range(3)] == [2, 2, 2]
        running = tmp_path / "running"
        last = executor.submit(_crash_after, {}, 0.5, str(running))
        assert wait_until(running.exists)  # so the tasks below queue behind it on the last core
        queued = [executor.submit(len, {}, "ab") for _ in range(3)]
        with pytest.raises(WorkerDied, match="exit code 5"):
            last.result(timeout=GENEROUS)
        for future in queued:
            with pytest.raises(WorkerDied, match="no worker could be started on any core"):
                future.result(timeout=GENEROUS)
        with pytest.raises(ExecutorShutdown, match="no worker could be started"):
            executor.submit(len, {}, "ab")
    finally:
        executor.shutdown()


# -- faults a user found: an idle worker's death, BaseException in a task, a broken dispatch thread --


def _exit_with(code):
    import sys

    sys.exit(code)


def _raise_keyboard_interrupt():
    raise KeyboardInterrupt


def test_an_idle_workers_death_replaces_it_and_later_tasks_run():
    executor = ScalpelExecutor(profiles=False)
    executor.start()
    try:
        assert executor.submit(len, {}, "a").result(timeout=GENEROUS) == 1
        node = executor.pool
        victim = node.worker_pids[0]
        os.kill(victim, signal.SIGKILL)
        assert wait_until(lambda: victim not in node.worker_pids and all_workers_ready(node))
        assert [executor.submit(len, {}, "ab").result(timeout=GENEROUS) for _ in range(6)] == [2] * 6
        assert node.respawns == 1 and len(node.worker_pids) == 2
    finally:
        executor.shutdown()


@pytest.mark.parametrize("task, args, names", [
    (_exit_with, (3,), "sys.exit().*SystemExit\\(3\\)"),
    (_raise_keyboard_interrupt, (), "KeyboardInterrupt"),
])
def test_sys_exit_or_keyboard_interrupt_in_a_task_fails_it_with_task_exit_and_the_next_completes(dfk, task, args, names):
    from scalpel_executor import TaskExit

    bad = python_app(task, executors=["scalpel"])(*args)
    with pytest.raises(TaskExit, match=names) as caught:
        bad.result(timeout=GENEROUS)
    assert isinstance(caught.value.exception, (SystemExit, KeyboardInterrupt))
    assert echo(1).result(timeout=GENEROUS) == 1


class _ExitsWhenUnpickled:
    """A result whose unpickling, in the driver, calls sys.exit(3) (pickled fine in the worker)."""

    def __reduce__(self):
        import sys

        return (sys.exit, (3,))


def _result_that_exits_when_unpickled():
    return _ExitsWhenUnpickled()


@pytest.mark.parametrize("node_manager", [True, False])
def test_a_result_whose_unpickling_calls_sys_exit_fails_its_own_future_and_the_next_completes(node_manager):
    from scalpel_executor import TaskExit

    executor = ScalpelExecutor(batching=Batching(window=0), profiles=False, probe=False, node_manager=node_manager)
    executor.start()
    try:
        future = executor.submit(_result_that_exits_when_unpickled, {})
        error = future.exception(timeout=GENEROUS)  # was pending forever, even after shutdown()
        assert isinstance(error, TaskExit) and isinstance(error.exception, SystemExit), error
        assert "deserialized in the driver" in str(error) and "SystemExit(3)" in str(error)
        assert executor.submit(len, {}, "ab").result(timeout=GENEROUS) == 2
    finally:
        executor.shutdown()


def test_a_failing_dispatch_thread_fails_every_task_naming_what_broke():
    from scalpel_executor import ExecutorFailed

    executor = ScalpelExecutor(profiles=False, node_manager=False)  # a bug injected into this process's pool
    executor.start()
    try:
        def broken(now=None):
            raise ValueError("injected scheduler bug")

        executor.pool._scheduler.dispatch = broken
        future = executor.submit(len, {}, "ab")
        with pytest.raises(ExecutorFailed, match="dispatch thread failed with ValueError\\('injected scheduler bug'\\)"):
            future.result(timeout=GENEROUS)
        with pytest.raises(ExecutorFailed, match="injected scheduler bug"):
            executor.submit(len, {}, "ab")
    finally:
        executor.shutdown()
