"""Per-key interference, live: the host's refit stores its choice, the next run's tasks are told their
key's terms (in this process's pool, and in a Submit to the node manager) and the run report says
which model planned and why, once. Real SQLite in a temporary folder, real workers."""

import dataclasses
import json
import sqlite3

import pytest

from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.domains import Topology
from scalpel_executor.learning import host_model
from scalpel_executor.learning.host_model import HostModelStore, host_id
from scalpel_executor.runtime.driver import manager_client
from scalpel_executor.runtime.driver.executor import ScalpelExecutor
from scalpel_executor.runtime.driver.report import run_summary
from scalpel_executor.runtime.wire.manager_messages import decode_frame, encode_frame, task_of
from tests.learning.test_host_model import planted_spans
from tests.runtime.helpers import GENEROUS

MiB = 2**20
TOPOLOGY = Topology.from_spec("1x2:64MiB")


@pytest.fixture(autouse=True)
def learn_nothing(monkeypatch):
    """This run's own co-runs are not stored (nor a refit started): what is checked is what the
    store held before it, as any other work on the test machine would count as busy."""
    monkeypatch.setattr(host_model, "BUSY_OTHERS", -1.0)
    monkeypatch.setattr(host_model, "BUSY_LOAD", -1.0)


def seeded_store(path, pressure, rounds):
    """The store as earlier runs on this host left it: their co-runs, refitted."""
    store = HostModelStore(path)
    store.record(host_id(TOPOLOGY), planted_spans(pressure, 0, rounds=rounds, llc=TOPOLOGY.llc_size))
    store.refit(host_id(TOPOLOGY), TOPOLOGY.llc_size)
    stored = store.interference(host_id(TOPOLOGY))
    store.close()
    return stored


def told_terms(executor, monkeypatch, node_manager, field="interference"):
    """Each task's ``interference`` (or another ``field``) as its pool is handed it: the Task in this
    process's pool, or as the node manager rebuilds it from the Submit message on the wire."""
    told = []
    if node_manager:
        row = manager_client.submit_row

        def submit_row(task):
            message = row(task)
            told.append((task.key, getattr(task_of(decode_frame(encode_frame([message]))[0]), field)))
            return message

        monkeypatch.setattr(manager_client, "submit_row", submit_row)
    else:
        submit = executor.pool.submit

        def recording(task):
            told.append((task.key, getattr(task, field)))
            submit(task)

        monkeypatch.setattr(executor.pool, "submit", recording)
    return told


def run(executor, monkeypatch, node_manager, keys, field="interference", hints=None):
    executor.start()
    try:
        told = told_terms(executor, monkeypatch, node_manager, field)
        futures = [executor.submit(len, {"profile_key": key, **(hints[i] if hints else {})}, "ab")
                   for i, key in enumerate(keys)]
        assert [f.result(timeout=GENEROUS) for f in futures] == [2] * len(keys)
        return told, executor.run_report()["contention_model"]["interference"]
    finally:
        executor.shutdown()


@pytest.mark.parametrize("node_manager", [False, True])
def test_tasks_are_told_the_terms_their_key_learned(tmp_path, monkeypatch, node_manager):
    path = tmp_path / "profiles.sqlite"
    stored = seeded_store(path, {"stream": 0.5}, rounds=60)
    assert stored.per_key and stored.terms["stream"][1] == pytest.approx(0.5, abs=0.1)
    executor = ScalpelExecutor(label="scalpel", topology=TOPOLOGY, profiles=str(path), node_manager=node_manager)
    told, report = run(executor, monkeypatch, node_manager, ["stream", "lookup", "never-seen", "stream"])
    assert told == [("stream", stored.terms["stream"]), ("lookup", stored.terms["lookup"]), ("never-seen", None),
                    ("stream", stored.terms["stream"])]
    assert report == {"planned_with": "per-key interference", "reason": stored.reason, "keys": len(stored.terms),
                      "tasks": 3}
    assert report["reason"].startswith("per-key model (refitted on all 240 co-runs): ")


@pytest.mark.parametrize("node_manager", [False, True])
def test_a_task_told_terms_is_planned_with_its_key_s_solo_time_and_the_report_says_so(tmp_path, monkeypatch,
                                                                                      node_manager):
    path = tmp_path / "profiles.sqlite"
    stored = seeded_store(path, {"stream": 0.5}, rounds=60)
    told = dataclasses.replace(stored, solo={"stream": 3.25})  # "lookup" has terms and no solo time
    store = HostModelStore(path)
    store.tell(host_id(TOPOLOGY), told)
    store.close()
    executor = ScalpelExecutor(label="scalpel", topology=TOPOLOGY, profiles=str(path), node_manager=node_manager)
    runtimes, _ = run(executor, monkeypatch, node_manager, ["stream", "lookup", "never-seen", "stream"], "runtime",
                      [{}, {}, {}, {"runtime": 7.5}])
    # The stream: not the mean of the walls its co-runs held; the lookup and the key never seen: the
    # executor's estimate (the prior here); a run time the user hinted wins over the solo time.
    assert [seconds for _, seconds in runtimes] == [3.25, runtimes[1][1], runtimes[1][1], 7.5]
    assert runtimes[1][1] != 3.25
    report = executor.run_report()
    assert "run times: 1 from hints, 2 guessed, 1 from the per-key interference fit's solo times" in run_summary(
        report, None)
    rows = sorted(report["tasks"], key=lambda row: row["task_id"])
    assert [(row["profile_key"], row["estimated_runtime"], row["runtime_source"]) for row in rows] == [
        ("stream", 3.25, "solo"), ("lookup", runtimes[1][1], "prior"), ("never-seen", runtimes[1][1], "prior"),
        ("stream", 7.5, "hint")]


@pytest.mark.parametrize("node_manager", [False, True])
def test_a_store_with_too_few_co_runs_changes_nothing_and_the_report_says_why_once(tmp_path, monkeypatch,
                                                                                     node_manager):
    path = tmp_path / "profiles.sqlite"
    stored = seeded_store(path, {"stream": 0.5}, rounds=4)
    assert not stored.per_key
    executor = ScalpelExecutor(label="scalpel", topology=TOPOLOGY, profiles=str(path), node_manager=node_manager)
    told, report = run(executor, monkeypatch, node_manager, ["stream", "lookup", "stream"])
    assert told == [("stream", None), ("lookup", None), ("stream", None)]
    assert report["planned_with"] == "footprint" and report["tasks"] == 0
    assert report["reason"] == ("footprint-only: 16 co-runs with known keys, too few to test a per-key model on "
                                "(it needs 30)")
    assert json.dumps(executor.run_report()).count("too few to test a per-key model") == 1  # once, not per task


def test_terms_of_another_footprint_model_are_not_planned_with(tmp_path, monkeypatch):
    path = tmp_path / "profiles.sqlite"
    seeded_store(path, {"stream": 0.5}, rounds=60)
    with sqlite3.connect(path) as connection:  # residuals of a model this run does not plan with
        connection.execute("UPDATE host_interference_choice SET capacity_fraction = 0.123")
    executor = ScalpelExecutor(label="scalpel", topology=TOPOLOGY, profiles=str(path), node_manager=False)
    told, report = run(executor, monkeypatch, False, ["stream"])
    assert told == [("stream", None)] and report["planned_with"] == "footprint"
    assert "residuals of another footprint model" in report["reason"]


def test_the_report_says_why_no_terms_were_read():
    given = ScalpelExecutor(topology=TOPOLOGY, contention_model=ContentionModel(0.3, 2.0))
    assert given.run_report()["contention_model"]["interference"] == {
        "planned_with": "footprint", "keys": 0, "tasks": 0,
        "reason": "footprint-only: the contention model was given, and per-key terms are residuals of the host's own"}


def test_a_host_with_no_stored_choice_plans_footprint_only(tmp_path, monkeypatch):
    executor = ScalpelExecutor(label="scalpel", topology=TOPOLOGY, profiles=str(tmp_path / "profiles.sqlite"),
                               node_manager=False)
    told, report = run(executor, monkeypatch, False, ["stream"])
    assert told == [("stream", None)]
    assert report["planned_with"] == "footprint" and report["reason"].startswith(
        "footprint-only: no per-key choice is stored for this host yet")


def contradicting_spans():
    """A streaming key hurting its co-runners by half in the host's older runs and not at all in its
    newer ones: what one pair was seen to cost is contradicted by what it was seen to cost later."""
    older = planted_spans({"stream": 0.5}, 0, rounds=40, llc=TOPOLOGY.llc_size)
    after = max(span.end for span in older) + 10.0
    newer = planted_spans({}, 1, rounds=40, llc=TOPOLOGY.llc_size)
    return older + [dataclasses.replace(span, start=span.start + after, end=span.end + after) for span in newer]


STORES = {  # co-runs a store may hold that must change no plan
    "contradicting": contradicting_spans,
    "footprint is the truth": lambda: planted_spans({}, 0, rounds=60, llc=TOPOLOGY.llc_size),
}


@pytest.mark.parametrize("node_manager", [False, True])
@pytest.mark.parametrize("history", sorted(STORES))
def test_co_runs_that_contradict_or_add_nothing_to_footprints_change_nothing_and_the_report_says_so_once(
        tmp_path, monkeypatch, node_manager, history):
    path = tmp_path / "profiles.sqlite"
    store = HostModelStore(path)
    store.record(host_id(TOPOLOGY), STORES[history]())
    store.refit(host_id(TOPOLOGY), TOPOLOGY.llc_size)
    stored = store.interference(host_id(TOPOLOGY))
    store.close()
    assert not stored.per_key and stored.reason.startswith("footprint-only: fitted on the older ")
    executor = ScalpelExecutor(label="scalpel", topology=TOPOLOGY, profiles=str(path), node_manager=node_manager)
    told, report = run(executor, monkeypatch, node_manager, ["stream", "lookup", "stream"])
    assert told == [("stream", None), ("lookup", None), ("stream", None)]  # no task told a term
    assert report == {"planned_with": "footprint", "reason": stored.reason, "keys": 0, "tasks": 0}
    assert json.dumps(executor.run_report()).count(stored.reason) == 1  # said once, not per task
