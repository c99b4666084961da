"""ScalpelExecutor(contention_model=...): the model the scalpel policy plans with, in every mode."""

import json
import sqlite3

import parsl
import pytest
from parsl import python_app
from parsl.config import Config

from scalpel_executor import ContentionModel
from scalpel_executor.core.domains import Topology
from scalpel_executor.learning import host_model
from scalpel_executor.learning.host_model import MIN_OBSERVATIONS, HostModelStore, TaskSpan, host_id
from scalpel_executor.runtime.driver.executor import ScalpelExecutor
from scalpel_executor.runtime.options import PoolOptions

MiB = 2**20


@pytest.mark.parametrize("given", [True, False])
def test_the_width_rule_counts_the_cache_only_with_a_measured_model(given):
    """A narrow width's crowding takes the model for the truth: counted with a model given (or
    fitted on the host), not with the default's guess (which, on a host that showed little
    contention, sent learned widths wider for co-runners it did not slow)."""
    executor = ScalpelExecutor(topology=Topology.from_spec("1x2:32MiB"), node_manager=False, profiles=False,
                               contention_model=ContentionModel(0.9, 0.2) if given else None)
    executor.start()
    try:
        assert executor.submit(len, {}, "ab").result(timeout=60) == 2
        scheduler = executor.pool._scheduler
        assert executor.pool.options.model_measured is given
        assert (scheduler._crowding((), 1, 8 * MiB) is not None) is given
    finally:
        executor.shutdown()


@pytest.mark.parametrize("node_manager", [True, False])
def test_a_calibration_file_becomes_the_planning_model(tmp_path, node_manager):
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"capacity_fraction": 0.892, "sensitivity": 0.179}))
    executor = ScalpelExecutor(topology=[[0]], contention_model=str(path), node_manager=node_manager)
    assert executor.contention_model == ContentionModel(0.892, 0.179)
    executor.start()
    try:
        assert executor.submit(len, {}, "ab").result(timeout=60) == 2
        if node_manager:  # what the manager's pool plans with (test_the_node_manager_is_told_the_model)
            assert executor.pool.options.contention_model == ContentionModel(0.892, 0.179)
        else:
            assert executor.pool._scheduler._context.model == ContentionModel(0.892, 0.179)
    finally:
        executor.shutdown()


def test_the_default_and_an_object_are_taken_as_they_are():
    assert ScalpelExecutor(topology=[[0]]).contention_model == ContentionModel()
    model = ContentionModel(0.3, 2.0)
    assert ScalpelExecutor(topology=[[0]], contention_model=model).contention_model is model


@pytest.mark.parametrize("content, message", [
    (None, "cannot read"),
    ("{not json", "is not JSON"),
    (json.dumps({"capacity_fraction": 0.5}), "not a calibration document"),
    (json.dumps({"capacity_fraction": "x", "sensitivity": 1}), "capacity_fraction must be a finite number"),
])
def test_a_bad_calibration_file_is_named(tmp_path, content, message):
    path = tmp_path / "model.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ValueError, match=message) as raised:
        ScalpelExecutor(topology=[[0]], contention_model=path)
    assert str(path) in str(raised.value) and "contention_model" in str(raised.value)


def test_the_node_manager_is_told_the_model():
    document = PoolOptions(contention_model=ContentionModel(0.9, 0.2)).to_dict()
    assert document["contention_model"] == {"capacity_fraction": 0.9, "sensitivity": 0.2}  # calibrate's format
    assert PoolOptions.from_dict(document).contention_model == ContentionModel(0.9, 0.2)
    assert PoolOptions().contention_model == ContentionModel()
    measured = PoolOptions(contention_model=ContentionModel(0.9, 0.2), model_measured=True).to_dict()
    assert PoolOptions.from_dict(measured).model_measured is True and PoolOptions().model_measured is False
    with pytest.raises(TypeError, match="model_measured must be True or False, got 'yes'"):
        PoolOptions(model_measured="yes")


@python_app(executors=["scalpel"])
def square(x, parsl_resource_specification={}):
    return x * x


def test_the_run_report_says_where_the_model_came_from(tmp_path, monkeypatch):
    monkeypatch.setattr(host_model, "BUSY_OTHERS", float("inf"))  # the test machine's other work must not stop learning
    monkeypatch.setattr(host_model, "BUSY_LOAD", float("inf"))
    topology = Topology.from_spec("1x2:56MiB")
    store = tmp_path / "profiles.sqlite"
    host = host_id(topology)
    assert ScalpelExecutor(topology=topology, profiles=str(store)).run_report()["contention_model"]["source"] == \
        "default"
    assert ScalpelExecutor(topology=topology, contention_model=ContentionModel(0.3, 2.0)).run_report()[
        "contention_model"]["source"] == "given"
    # Earlier runs on this host: each key alone once, then equal pairs, timed as a model that is not the default says.
    truth, spans, t = ContentionModel(0.9, 0.2), [], 0.0
    for size in (16, 32, 48):
        spans.append(TaskSpan(f"k{size}", 0, t, t + 1.0, 1.0, size * MiB))
        t += 2.0
    for _ in range(4):
        for size in (16, 32, 48):
            wall = truth.slowdowns([size * MiB] * 2, [0.2] * 2, 56 * MiB)[0]
            spans += [TaskSpan(f"k{size}", 0, t, t + wall, wall, size * MiB)] * 2
            t += 2.0
    seeded = HostModelStore(store)
    fit = seeded.learn(host, 56 * MiB, spans)
    seeded.close()
    assert fit.observations >= MIN_OBSERVATIONS

    executor = ScalpelExecutor(label="scalpel", topology=topology, profiles=str(store), node_manager=False)
    dfk = parsl.load(Config(executors=[executor], run_dir=str(tmp_path / "run")))
    try:
        assert [f.result(timeout=60) for f in [square(i) for i in range(3)]] == [0, 1, 4]
        assert executor.pool._scheduler._context.model == fit.model
    finally:
        dfk.cleanup()
        parsl.clear()
    report = executor.run_report()["contention_model"]
    assert report["source"] == "fitted on this host" and report["host"] == host
    assert report["planned_with"] == {"capacity_fraction": fit.model.capacity_fraction,
                                      "sensitivity": fit.model.sensitivity}
    # The three no-ops are mostly too short to be co-runs; on a loaded machine two of them can run
    # past 0.05 s beside different co-runners, and count beyond the first (their key is never seen alone).
    assert fit.observations <= report["fitted"]["observations"] <= fit.observations + 2
    written = json.loads((tmp_path / "run" / "000" / "scalpel-scalpel-report.json").read_text())
    assert written["contention_model"]["source"] == "fitted on this host"


def test_a_run_on_a_busy_host_adds_nothing_to_the_hosts_fit(tmp_path, monkeypatch):
    monkeypatch.setattr(host_model, "BUSY_OTHERS", -1.0)  # any other work is too much: as on a busy host
    monkeypatch.setattr(host_model, "BUSY_LOAD", -1.0)
    store = tmp_path / "profiles.sqlite"
    executor = ScalpelExecutor(label="scalpel", topology="1x2:56MiB", profiles=str(store), node_manager=False)
    dfk = parsl.load(Config(executors=[executor], run_dir=str(tmp_path / "run")))
    try:
        assert [f.result(timeout=60) for f in [square(i) for i in range(3)]] == [0, 1, 4]
    finally:
        dfk.cleanup()
        parsl.clear()
    report = executor.run_report()["contention_model"]
    assert report["not_learned"].startswith("the host was busy with other work ("), report
    assert report["fitted"] is None
    with sqlite3.connect(store) as connection:
        assert connection.execute("SELECT COUNT(*) FROM host_coruns").fetchone() == (0,)
        assert connection.execute("SELECT COUNT(*) FROM host_solo").fetchone() == (0,)

