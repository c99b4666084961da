"""How a run ends as a user sees it: the closing line, the report without cleanup(), tasks still queued at cleanup."""

import json
import os
import subprocess
import sys
import time

import parsl
import pytest
from parsl import python_app
from parsl.config import Config
from parsl.dataflow.states import States

from scalpel_executor.runtime.errors import ExecutorShutdown
from scalpel_executor.runtime.driver.executor import ScalpelExecutor
from tests.runtime.helpers import GENEROUS


def closing_sentences(err: str) -> list[str]:
    """The closing sentences on a terminal: each line that starts one, with the indented lines a
    long one continues on (summary_words.SUMMARY_WIDTH), joined as one line."""
    sentences: list[str] = []
    for line in err.splitlines():
        if line.startswith("scalpel: "):
            sentences.append(line)
        elif sentences and line.startswith("  ") and sentences[-1].endswith(";"):
            sentences[-1] += " " + line.strip()
    return sentences


@python_app(executors=["scalpel"])
def square(x):
    return x * x


@pytest.mark.parametrize("node_manager", [True, False])
def test_cleanup_says_in_one_line_what_ran_and_where_the_report_is(tmp_path, capfd, node_manager):
    executor = ScalpelExecutor(label="scalpel", profiles=False, node_manager=node_manager)
    dfk = parsl.load(Config(executors=[executor], run_dir=str(tmp_path / "runinfo")))
    try:
        assert [f.result(timeout=GENEROUS) for f in [square(i) for i in range(5)]] == [0, 1, 4, 9, 16]
    finally:
        dfk.cleanup()
        parsl.clear()
    report = tmp_path / "runinfo" / "000" / "scalpel-scalpel-report.json"
    lines = closing_sentences(capfd.readouterr().err)
    assert len(lines) == 1, lines  # on the terminal, once
    assert lines[0].startswith("scalpel: 5 tasks (0 failed)") and str(report.name) in lines[0], lines[0]
    assert "scalpel report " in lines[0]
    logged = (tmp_path / "runinfo" / "000" / "parsl.log").read_text()
    assert logged.count("scalpel: 5 tasks (0 failed)") == 1  # and in parsl.log, once
    assert json.loads(report.read_text())["tasks_finished"] == 5


A_SCRIPT_THAT_LOGS = """
import logging, sys
import parsl
from parsl import python_app
from parsl.config import Config
from scalpel_executor.runtime.driver.executor import ScalpelExecutor

if sys.argv[2] == "basicConfig":
    logging.basicConfig(level=logging.INFO)
elif sys.argv[2] == "set_stream_logger":
    parsl.set_stream_logger(level=logging.INFO)
elif sys.argv[2] == "stdout":
    logging.basicConfig(level=logging.INFO, stream=sys.stdout)

@python_app
def square(x):
    return x * x

dfk = parsl.load(Config(executors=[ScalpelExecutor(label="scalpel", profiles=False, node_manager=False)],
                        run_dir=sys.argv[1]))
print([square(i).result(timeout=60) for i in range(3)])
dfk.cleanup()
"""


@pytest.mark.parametrize("logging_setup", ["none", "basicConfig", "set_stream_logger", "stdout", "warning"])
def test_the_closing_line_reaches_the_terminal_once_however_the_script_set_up_logging(tmp_path, logging_setup):
    """A script's ``logging.basicConfig(level=logging.INFO)`` (or Parsl's stream logger) prints the
    closing line itself: the executor's own stderr line is then left out. So does one set to WARNING:
    a logger's level does not stop what propagates to its handlers from below."""
    script = tmp_path / "script.py"
    script.write_text(A_SCRIPT_THAT_LOGS if logging_setup != "warning" else A_SCRIPT_THAT_LOGS.replace(
        'if sys.argv[2] == "basicConfig":', 'logging.basicConfig(level=logging.WARNING)\nif False:'))
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "runinfo"), logging_setup],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    closing = [line for line in (done.stdout + done.stderr).splitlines() if "scalpel: 3 tasks (0 failed)" in line]
    assert len(closing) == 1, closing


@python_app(executors=["scalpel"])
def nap(seconds):
    import time
    time.sleep(seconds)
    return seconds


def test_the_closing_line_says_how_many_tasks_shutdown_cut_short_and_what_to_do(tmp_path, capfd):
    executor = ScalpelExecutor(label="scalpel", profiles=False, node_manager=False)
    dfk = parsl.load(Config(executors=[executor], run_dir=str(tmp_path / "runinfo")))
    try:
        assert nap(0).result(timeout=GENEROUS) == 0
        long = nap(60)  # as a script that leaves `with parsl.load()` without waiting
        deadline = time.monotonic() + GENEROUS
        while long.task_record["status"] != States.launched and time.monotonic() < deadline:
            time.sleep(0.01)  # handed to the executor (not refused after shutdown from Parsl's launch queue)
    finally:
        dfk.cleanup()
        parsl.clear()
    assert isinstance(long.exception(timeout=GENEROUS), ExecutorShutdown)
    lines = closing_sentences(capfd.readouterr().err)
    assert len(lines) == 1, lines
    assert lines[0].startswith("scalpel: 2 tasks (1 failed, 1 of them unfinished when the executor shut down: "
                               "wait for results before dfk.cleanup()"), lines[0]
    report = json.loads((tmp_path / "runinfo" / "000" / "scalpel-scalpel-report.json").read_text())
    assert (report["tasks_finished"], report["tasks_failed"], report["tasks_cut_short"]) == (2, 1, 1)


A_RUN_THAT_ENDS = """
import os, signal, sys
import parsl
from parsl import python_app
from parsl.config import Config
from scalpel_executor.learning import host_model
from scalpel_executor.runtime.driver.executor import ScalpelExecutor

host_model.BUSY_OTHERS = host_model.BUSY_LOAD = float("inf")  # the test machine's other work must not stop learning

@python_app
def nap(seconds, parsl_resource_specification={}):
    import time
    time.sleep(seconds)
    return seconds

executor = ScalpelExecutor(label="scalpel", topology="1x2:56MiB", profiles=sys.argv[1], policy="fifo")
dfk = parsl.load(Config(executors=[executor], run_dir=sys.argv[2]))
spec = {"footprint": "40MiB", "runtime": 0.3}
print([f.result(timeout=60) for f in [nap(0.3, parsl_resource_specification=spec) for _ in range(4)]])
if sys.argv[3] == "killed-after-cleanup":
    dfk.cleanup()
    os.kill(os.getpid(), signal.SIGKILL)  # right after cleanup() returned: no refit of its finishes
# "no-cleanup": the script just ends (Parsl only warns at exit)
"""


def run_script(tmp_path, how):
    """Run :data:`A_RUN_THAT_ENDS` so (``how``); its store and run directory, and how it ended."""
    script = tmp_path / "script.py"
    script.write_text(A_RUN_THAT_ENDS)
    store, run_dir = tmp_path / "profiles.sqlite", tmp_path / "runinfo"
    done = subprocess.run([sys.executable, str(script), str(store), str(run_dir), how], capture_output=True,
                          text=True, timeout=120)
    return store, run_dir, done


def stored_coruns(store):
    import sqlite3

    with sqlite3.connect(store) as connection:
        return connection.execute("SELECT COUNT(*) FROM host_coruns").fetchone()[0]


def test_a_script_that_ends_without_cleanup_still_writes_its_report_and_keeps_what_it_learned(tmp_path):
    import sqlite3

    store, run_dir, done = run_script(tmp_path, "no-cleanup")
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((run_dir / "000" / "scalpel-scalpel-report.json").read_text())
    assert report["tasks_finished"] == 4
    assert "scalpel: 4 tasks (0 failed)" in done.stderr
    with sqlite3.connect(store) as connection:
        assert connection.execute("SELECT SUM(runs) FROM profiles").fetchone()[0] >= 4  # run times learned
    assert stored_coruns(store) >= 2  # two pairs of 0.3 s tasks, side by side on the one domain


def test_a_process_killed_right_after_cleanup_keeps_its_runs_co_runs(tmp_path):
    import signal

    from scalpel_executor.core.domains import Topology
    from scalpel_executor.learning.host_model import HostModelStore, host_id

    store, _, done = run_script(tmp_path, "killed-after-cleanup")
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    coruns = stored_coruns(store)
    assert coruns >= 2
    models = HostModelStore(store)
    try:
        assert len(models.history(host_id(Topology.from_spec("1x2:56MiB")))[0]) == coruns
    finally:
        models.close()


def _slow_key(func, args, kwargs):
    """A profile key function that takes 3 ms: each submit does, so Parsl's launch queue is still
    full when the script calls cleanup, however fast the host invokes the apps."""
    time.sleep(0.003)
    return None


def test_tasks_parsl_hands_over_after_shutdown_fail_at_once_said_once(tmp_path):
    executor = ScalpelExecutor(label="scalpel", profiles=False, node_manager=False, profile_key=_slow_key)
    dfk = parsl.load(Config(executors=[executor], run_dir=str(tmp_path / "runinfo")))
    futures = [square(i) for i in range(3000)]  # cleanup at once: most are still in Parsl's launch queue
    dfk.cleanup()
    parsl.clear()
    ended = [f.exception(timeout=GENEROUS) for f in futures]  # every future ends: none is left hanging
    refused = [e for e in ended if isinstance(e, ExecutorShutdown)]
    assert refused, "cleanup came after every task had run: submit more"
    assert all(e is None or isinstance(e, ExecutorShutdown) for e in ended)
    logged = (tmp_path / "runinfo" / "000" / "parsl.log").read_text()
    assert logged.count("the tasks Parsl still hands it fail with ExecutorShutdown") == 1
    assert "Got an exception launching task" not in logged  # no launch traceback per task


def test_provider_mode_refuses_a_task_handed_over_after_shutdown_with_one_failed_future():
    """Parsl hands over tasks still in its launch queue after ``cleanup()``: in provider mode each
    failed with ``AttributeError: 'Future' object has no attribute 'parsl_executor_task_id'`` (two
    tracebacks a task) where local mode's fail with ExecutorShutdown."""
    from parsl.providers import LocalProvider

    executor = ScalpelExecutor(label="provider", provider=LocalProvider(init_blocks=0), profiles=False)
    executor._shut_down = True  # as after shutdown(), which never ran a block here
    future = executor.submit(lambda: 0, {})
    assert isinstance(future.exception(timeout=1), ExecutorShutdown)
    assert executor.outstanding() == 0


def test_a_report_written_at_exit_names_the_script_as_typed_from_where_it_started(tmp_path):
    """Python drops ``__main__.__file__`` once a script ends, before a report written at exit (no
    ``cleanup()``) is built: the script is read while it runs, and named from the directory it was
    started in (``scripts/fit.py``: what ``scalpel profile run`` imports it as, from there)."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "fit.py").write_text(
        "import parsl\nfrom parsl import python_app\nfrom parsl.config import Config\n"
        "from scalpel_executor.runtime.driver.executor import ScalpelExecutor\n\n"
        "@python_app\ndef double(x):\n    return 2 * x\n\n"
        "if __name__ == '__main__':\n"
        "    parsl.load(Config(executors=[ScalpelExecutor(label='scalpel', topology='1x2:56MiB', profiles=False)],"
        " run_dir='runinfo'))\n"
        "    print(double(21).result(timeout=60))\n")
    done = subprocess.run([sys.executable, "scripts/fit.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert done.returncode == 0 and done.stdout.strip() == "42", done.stderr[-2000:]
    report = json.loads((tmp_path / "runinfo" / "000" / "scalpel-scalpel-report.json").read_text())
    assert report["script"] == os.path.join("scripts", "fit.py")
