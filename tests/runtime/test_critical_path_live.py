"""The critical path, live: real Parsl, real workers, a real SQLite store in a temporary folder.

The workflow is written the way people write it: independent simulations submitted first, then a
short preparation whose result feeds a chain of analyses. Nothing here is timed: what is checked
is the order the executor chose (from its run report) and what it told and learned.
"""

import json
from pathlib import Path

import parsl
import pytest
from parsl import python_app
from parsl.config import Config
from parsl.dataflow.errors import DependencyError

from scalpel_executor import ScalpelExecutor, scalpel_config
import scalpel_executor.runtime.driver.path_learning as path_learning

SIMULATIONS, CHAIN, SECONDS = 6, 3, 0.4


@python_app
def simulate(seed, seconds=SECONDS):
    import time
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return {"seed": seed}


@python_app
def read_settings():
    return {"fail": False}


@python_app
def prepare(settings, fail=False):
    if fail or settings["fail"]:
        raise ValueError("bad input")
    return 1


@python_app
def analyse(x, seconds=SECONDS):
    import time
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return x + 1


def _run(config, fail=False):
    dfk = parsl.load(config)
    try:
        sims = [simulate(i) for i in range(SIMULATIONS)]
        # The preparation reads its settings first: it is launched once they are read, after the
        # chain below was invoked. (A task launched before its children are invoked cannot see
        # them: docs/critical-path.md, "Limits".)
        x = prepare(read_settings(), fail)
        for _ in range(CHAIN):
            x = analyse(x)
        seeds = [s.result()["seed"] for s in sims]
        if fail:
            with pytest.raises(DependencyError):
                x.result()
            result = None
        else:
            result = x.result()
    finally:
        dfk.cleanup()
        parsl.clear()
    assert seeds == list(range(SIMULATIONS))
    report = json.loads(next(Path(dfk.run_dir).glob("scalpel-*-report.json")).read_text())
    return result, report


def _rows(report, name):
    return [row for row in report["tasks"] if f".{name}(" in row["profile_key"]]


def test_the_graph_starts_the_chain_first_and_a_later_run_without_it_uses_what_was_learned(tmp_path, monkeypatch):
    store = tmp_path / "profiles.db"
    result, report = _run(scalpel_config(run_dir=str(tmp_path / "run1"), profiles=str(store)))
    assert result == 1 + CHAIN
    assert report["critical_path"]["graph_seen"] and report["critical_path"]["tails_stored"] > 0
    (prep,) = _rows(report, "prepare")
    assert prep["tail_source"] == "graph" and prep["tail"] > 0 and "critical path" in prep["critical_path"]
    sims = _rows(report, "simulate")
    # on 2 cores: the preparation starts at the first free core after its settings are read, ahead
    # of the simulations still waiting (HTEX starts it after all of them)
    assert sum(sim["started"] < prep["started"] for sim in sims) <= 2

    # A plain Config whose memoizer cannot be wrapped: the graph is not seen, the learned tail is used.
    monkeypatch.setattr(path_learning, "see_graph", lambda dfk: False)
    result, report = _run(Config(executors=[ScalpelExecutor(profiles=str(store))], run_dir=str(tmp_path / "run2")))
    assert result == 1 + CHAIN
    assert not report["critical_path"]["graph_seen"] and "not_learned" in report["critical_path"]
    (prep,) = _rows(report, "prepare")
    assert prep["tail_source"] == "learned" and prep["tail"] > SECONDS
    assert all(row["parsl_task_id"] is None for row in report["tasks"])  # the graph unseen: Parsl's ids unknown
    assert sum(sim["started"] < prep["started"] for sim in _rows(report, "simulate")) <= 2


def test_a_plain_config_sees_the_graph_from_its_second_task(tmp_path):
    result, report = _run(Config(executors=[ScalpelExecutor(profiles=str(tmp_path / "p.db"))],
                                 run_dir=str(tmp_path / "run")))
    assert result == 1 + CHAIN and report["critical_path"]["graph_seen"]
    assert report["critical_path"]["tails_told"].get("graph", 0) >= 1
    # its first call's Parsl id is read from the DataFlowKernel's records: every row names its task as Parsl does
    parsl_ids = [row["parsl_task_id"] for row in report["tasks"]]
    assert None not in parsl_ids and sorted(parsl_ids) == list(range(len(parsl_ids))), parsl_ids


def test_a_plain_configs_first_call_is_told_the_chain_invoked_behind_it(tmp_path, monkeypatch):
    """The first call of a plain Config reaches the executor before the graph is installed; it was
    told no chain (0) whatever the workflow had invoked behind it. Now it sees the graph as far as
    the workflow has invoked it, as the later calls do: here the whole chain, invoked before the
    call reaches the executor (held until then, so the test does not race the launch thread)."""
    import threading

    install, invoked = path_learning.see_graph, threading.Event()

    def installed_once_invoked(dfk):
        invoked.wait(60)
        return install(dfk)

    monkeypatch.setattr(path_learning, "see_graph", installed_once_invoked)
    dfk = parsl.load(Config(executors=[ScalpelExecutor(profiles=str(tmp_path / "p.db"))], run_dir=str(tmp_path / "run")))
    try:
        x = prepare(read_settings())
        for _ in range(CHAIN):
            x = analyse(x, 0.05)
        invoked.set()
        assert x.result() == 1 + CHAIN
    finally:
        invoked.set()
        dfk.cleanup()
        parsl.clear()
    report = json.loads(next(Path(dfk.run_dir).glob("scalpel-*-report.json")).read_text())
    (first,) = _rows(report, "read_settings")
    assert first["parsl_task_id"] == 0 and first["tail_source"] == "graph"
    assert first["tail"] > 0 and "critical path" in first["critical_path"]


def test_a_task_whose_children_are_invoked_after_it_reached_the_executor_is_told_its_chain(tmp_path):
    """Parsl launches a task with no inputs as soon as it is invoked: the executor has it before the
    script invokes its children, and tells it no chain. A later submit's sighting shows them, and
    the task, still waiting behind another on the one core, is told its chain: it starts ahead of
    an independent task that reached the executor before it (arrival order otherwise)."""
    from parsl.dataflow.states import States
    from tests.runtime.helpers import GENEROUS, wait_until

    executor = ScalpelExecutor(profiles=str(tmp_path / "p.db"), topology="1x1:32MiB")
    dfk = parsl.load(Config(executors=[executor], run_dir=str(tmp_path / "run")))

    def launched(future):
        assert wait_until(lambda: dfk.tasks[future.tid]["status"] in (States.launched, States.running_ended,
                                                                      States.exec_done), GENEROUS)
    try:
        blocker = simulate(0, 1.0)  # holds the one core
        launched(blocker)
        other = simulate(1, 0.05)
        launched(other)
        settings = read_settings()
        launched(settings)  # told no chain: nothing depends on it yet
        x = prepare(settings)
        for _ in range(CHAIN):
            x = analyse(x, 0.05)
        later = simulate(2, 0.05)  # its submit's sighting shows the chain behind the settings
        assert x.result() == 1 + CHAIN and [f.result()["seed"] for f in (blocker, other, later)] == [0, 1, 2]
    finally:
        dfk.cleanup()
        parsl.clear()
    report = json.loads(next(Path(dfk.run_dir).glob("scalpel-*-report.json")).read_text())
    assert report["critical_path"]["tails_lengthened"] == 1
    (told,) = _rows(report, "read_settings")
    assert told["tail_source"] == "graph" and told["tail"] > 0 and "critical path" in told["critical_path"]
    started = {row["parsl_task_id"]: row["started"] for row in report["tasks"]}
    assert started[settings.tid] < started[other.tid]


def test_every_waiting_root_of_a_reduce_invoked_after_them_is_told_its_chain(tmp_path):
    """Twelve simulations reach the executor and wait behind a blocker on the one core, told no
    chain; the script then invokes a reduce over all of them and one more task: its submit tells
    every one of the twelve the chain behind it (the edges the script added, not the latest few)."""
    from parsl.dataflow.states import States
    from tests.runtime.helpers import GENEROUS, wait_until

    @python_app
    def total(*results):
        return sum(result["seed"] for result in results)

    executor = ScalpelExecutor(profiles=str(tmp_path / "p.db"), topology="1x1:32MiB")
    dfk = parsl.load(Config(executors=[executor], run_dir=str(tmp_path / "run")))
    try:
        blocker = simulate(-1, 1.0)
        roots = [simulate(seed, 0.01) for seed in range(12)]
        assert wait_until(lambda: all(dfk.tasks[f.tid]["status"] in (States.launched, States.running_ended,
                                                                     States.exec_done) for f in roots), GENEROUS)
        reduced = total(*roots)
        later = simulate(99, 0.01)
        assert reduced.result() == sum(range(12)) and later.result()["seed"] == 99 and blocker.result()
    finally:
        dfk.cleanup()
        parsl.clear()
    report = json.loads(next(Path(dfk.run_dir).glob("scalpel-*-report.json")).read_text())
    assert report["critical_path"]["tails_lengthened"] == 12
    told = {row["parsl_task_id"]: row for row in report["tasks"]}
    assert all(told[f.tid]["tail_source"] == "graph" and told[f.tid]["tail"] > 0 for f in roots)


def test_a_failed_preparation_fails_its_chain_and_teaches_nothing_about_its_key(tmp_path):
    from scalpel_executor.learning.critical_path import CriticalPathStore
    store = tmp_path / "profiles.db"
    result, report = _run(scalpel_config(run_dir=str(tmp_path / "run"), profiles=str(store)), fail=True)
    assert result is None
    (prep,) = _rows(report, "prepare")
    assert not prep["ok"]
    learned = CriticalPathStore(store).rows()
    assert not any(".prepare(" in key for key in learned)
    assert any(".simulate(" in key for key in learned)


def test_each_report_row_names_its_parsl_task_as_parsls_log_does_after_a_refused_submit(tmp_path):
    """A submit refused for a bad hint takes a Parsl task id but no executor id: from then on the
    two differ, and each row's ``parsl_task_id`` is the one Parsl's log launched it as."""
    import re

    dfk = parsl.load(scalpel_config(run_dir=str(tmp_path / "run"), profiles=str(tmp_path / "p.db")))
    try:
        refused = simulate(-1, parsl_resource_specification={"cores": "two"})
        futures = [simulate(seed, 0.05) for seed in range(4)]
        too_wide = simulate(-2, parsl_resource_specification={"cores": 1000})
        with pytest.raises(Exception, match="cores"):
            refused.result()
        # a refusal names the task as Parsl's log does, not by the executor's id
        with pytest.raises(Exception, match=rf"^task {too_wide.tid} \(simulate\) asks for 1000 cores; this node has"):
            too_wide.result()
        assert [f.result()["seed"] for f in futures] == list(range(4))
    finally:
        dfk.cleanup()
        parsl.clear()
    report = json.loads(next(Path(dfk.run_dir).glob("scalpel-*-report.json")).read_text())
    launched = {int(executor_id): int(task_id) for task_id, executor_id in re.findall(
        r"Parsl task (\d+) try \d+ launched on executor \S+ with executor id (\d+)",
        (Path(dfk.run_dir) / "parsl.log").read_text())}
    rows = {row["task_id"]: row["parsl_task_id"] for row in report["tasks"]}
    assert len(rows) == 4 and rows == launched, (rows, launched)
    assert all(parsl_id != executor_id for executor_id, parsl_id in rows.items())
