"""The sampling decision end to end: the driver decides, the Run message carries it, the worker measures only then."""

import os

import pytest

from scalpel_executor import Batching, Sampling, ScalpelExecutor
from scalpel_executor.runtime.node.processes import WorkerClient
from scalpel_executor.runtime.wire.worker_messages import WorkerResult, Run, encode

NOT_MEASURED = "unavailable: not measured (sampling)"
ONE_CPU = [[min(os.sched_getaffinity(0))]]


def nap(seconds):
    import time

    time.sleep(seconds)
    return seconds


def _was_measured(stats):
    """A measured task carries the probe's report (its windows), an unmeasured one says why not."""
    return "windows" in stats and stats["footprint_source"] != NOT_MEASURED


def test_a_worker_starts_its_probe_only_for_a_run_that_asks():
    from parsl.serialize import pack_apply_message

    with WorkerClient() as worker:
        answers = []
        for task_id, measure in enumerate((False, True, False)):
            worker.connection.send_bytes(encode(Run(task_id, pack_apply_message(nap, (0.01,), {}), measure)))
            answers.append(worker.receive())
    assert all(isinstance(a, WorkerResult) and a.ok for a in answers)
    assert [_was_measured(a.stats) for a in answers] == [False, True, False]
    assert answers[0].stats["footprint"] is None and answers[0].stats["footprint_source"] == NOT_MEASURED
    for answer in answers:  # wall and CPU time come from every task
        assert {"wall", "cpu", "max_rss", "children_cpu"} <= set(answer.stats)
        assert answer.stats["wall"] >= 0.01


def test_an_executor_measures_the_first_tasks_of_a_key_and_every_kth_after():
    executor = ScalpelExecutor(profiles=False, topology=ONE_CPU, batching=Batching(window=0.0),
                               sampling=Sampling(measure_first=2, measure_every=3, remeasure_drift=None))
    executor.start()
    try:
        for _ in range(8):
            executor.submit(nap, {"profile_key": "steady"}, 0.001).result(timeout=60)
        executor.submit(nap, {"profile_key": "other"}, 0.001).result(timeout=60)
    finally:
        executor.shutdown()
    records = sorted(executor.records, key=lambda record: record.task_id)
    steady = [record for record in records if record.profile_key == "steady"]
    assert [r.measured for r in steady] == [True, True, False, False, True, False, False, True]
    assert [_was_measured(r.stats) for r in steady] == [r.measured for r in steady]
    assert [r.measured for r in records if r.profile_key == "other"] == [True]  # its own first task
    report = executor.run_report()
    assert report["tasks_measured"] == 5 and report["drifts"] == 0
    assert [t["measured"] for t in report["tasks"]] == [r.measured for r in records]


def test_a_task_that_drifts_from_its_key_makes_the_next_one_measured():
    executor = ScalpelExecutor(profiles=False, topology=ONE_CPU, batching=Batching(window=0.0),
                               sampling=Sampling(measure_first=1, measure_every=0, remeasure_drift=5.0))
    executor.start()
    try:
        # the worker's first call of nap imports this module: slow enough to read as a drift itself
        executor.submit(nap, {"profile_key": "warm-up"}, 0.0).result(timeout=60)
        for seconds in (0.02, 0.02, 0.02, 0.5, 0.5, 0.5):
            executor.submit(nap, {"profile_key": "changing"}, seconds).result(timeout=60)
    finally:
        executor.shutdown()
    records = sorted((r for r in executor.records if r.profile_key == "changing"), key=lambda record: record.task_id)
    # the first 0.5 s task runs 25 times the learned 0.02 s, unmeasured: the one after it is measured;
    # the last is within 5 times the run time learned by then (0.27 s)
    assert [r.measured for r in records] == [True, False, False, False, True, False]
    assert executor.run_report()["drifts"] == 1


def test_probe_false_measures_nothing_whatever_the_sampling():
    executor = ScalpelExecutor(profiles=False, topology=ONE_CPU, batching=Batching(window=0.0), probe=False,
                               sampling=Sampling(measure_every=1))
    executor.start()
    try:
        assert [executor.submit(nap, {}, 0.001).result(timeout=60) for _ in range(3)] == [0.001] * 3
    finally:
        executor.shutdown()
    assert not any(record.measured for record in executor.records)
    assert {record.stats["footprint_source"] for record in executor.records} == {"unavailable: probe off"}


@pytest.mark.parametrize("kwargs, message", [
    ({"measure_first": -2}, "measure_first must be a whole number of tasks >= 0, got -2"),
    ({"measure_every": -1}, "measure_every must be a whole number of tasks >= 0, got -1"),
    ({"remeasure_drift": 0.9}, r"remeasure_drift must be a factor > 1 .* got 0.9"),
])
def test_bad_sampling_options_fail_at_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ScalpelExecutor(profiles=False, topology=ONE_CPU, sampling=Sampling(**kwargs))


def importing(name):
    import importlib

    importlib.import_module(name)
    return name


def test_a_worker_says_which_of_its_calls_paid_for_imports():
    from parsl.serialize import pack_apply_message

    with WorkerClient() as worker:
        answers = []
        for task_id, module in enumerate(("colorsys", "colorsys", "sched")):
            worker.connection.send_bytes(encode(Run(task_id, pack_apply_message(importing, (module,), {}), False)))
            answers.append(worker.receive())
    assert all(a.ok for a in answers)
    assert [a.stats["cold"] for a in answers] == [True, False, True]  # the first call of each import is cold


def touch_mib(mib, seconds):
    import time

    data = bytearray(mib * 2**20)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        data[::4096] = bytes(len(range(0, len(data), 4096)))
    return len(data)


def test_admitted_as_is_the_footprint_the_start_was_decided_on_not_one_learned_later():
    executor = ScalpelExecutor(profiles=False, topology=ONE_CPU, batching=Batching(window=0.0))
    executor.start()
    try:
        assert executor.submit(touch_mib, {}, 24, 1.0).result(timeout=120) == 24 * 2**20
    finally:
        executor.shutdown()
    (row,) = executor.run_report()["tasks"]
    assert row["measured_footprint"] and row["measured_footprint"] > 8 * 2**20  # the probe read it while it ran
    assert row["scheduled_footprint"] == row["estimated_footprint"] == 0.0  # started on the prior's 0 B
