"""The run report's point of comparison: the run's own tasks replayed through the model in
submission order and under the run's policy, beside what the run achieved."""

import parsl
import pytest
from parsl.app.app import python_app
from parsl.config import Config

from scalpel_executor import ScalpelExecutor
from scalpel_executor.runtime.driver import model_point as module
from scalpel_executor.runtime.driver.model_point import model_point, model_words
from scalpel_executor.runtime.driver.report import run_summary

MiB = 2**20


def row(task_id, footprint, started, finished, waited=None):
    return {"task_id": task_id, "ok": True, "started": started, "finished": finished,
            "waited": started if waited is None else waited, "measured_runtime": finished - started,
            "measured_footprint": footprint, "estimated_footprint": footprint, "estimated_runtime": 1.0, "cores": 1}


def report_of(policy, rows, llc=32 * MiB, cpus=(0, 1)):
    return {"executor": "scalpel", "policy": policy, "tasks_finished": len(rows), "tasks_failed": 0,
            "topology": {"total_cores": len(cpus), "domains": [{"index": 0, "cpus": list(cpus), "llc_size": llc}]},
            "contention_model": {"planned_with": {"capacity_fraction": 0.5, "sensitivity": 1.0}},
            "sources": {"footprint": {"store": len(rows)}, "runtime": {"store": len(rows)}}, "tasks": rows}


# Two tasks that overflow the LLC together were submitted first, then two small ones: in submission
# order the large ones share the LLC; the default policy pairs each with a small one.
SUBMITTED_BADLY = [row(1, 30 * MiB, 0.0, 1.0), row(2, 30 * MiB, 0.0, 1.0),
                   row(3, 1 * MiB, 0.0, 1.0, waited=0.0), row(4, 1 * MiB, 0.0, 1.0, waited=0.0)]


def test_the_model_says_the_policy_ends_sooner_than_submission_order_where_large_tasks_were_submitted_together():
    point = model_point(report_of("scalpel", SUBMITTED_BADLY))
    assert point["tasks"] == 4 and point["skipped"] is None
    assert point["submission_order"] > point["policy"] >= 2.0  # four one-second tasks on two cores
    assert point["achieved"] == 1.0


def test_a_fifo_run_gets_the_submission_order_figure_alone_and_arrivals_come_from_the_run():
    rows = [row(1, MiB, 0.0, 1.0, waited=0.0), row(2, MiB, 5.0, 6.0, waited=1.0)]  # handed over 4 s after the first
    point = model_point(report_of("fifo", rows))
    assert point["policy"] is None
    assert point["submission_order"] == pytest.approx(5.0)  # arrives at 4, lasts 1
    assert point["achieved"] == 6.0
    words = model_words(point, "fifo")
    assert words == "model figures, these tasks replayed: 5.00 s in submission order; achieved 6.00 s"


def test_nothing_is_replayed_without_an_llc_size_a_start_or_under_the_cap(monkeypatch):
    assert model_point(report_of("scalpel", SUBMITTED_BADLY, llc=None))["skipped"] == "the LLC size is unknown"
    never = [{**row(1, MiB, 0.0, 1.0), "started": None}]
    assert model_point(report_of("scalpel", never))["skipped"] == "no task started"
    monkeypatch.setattr(module, "MODEL_TASKS", 3)
    skipped = model_point(report_of("scalpel", SUBMITTED_BADLY))
    assert skipped["skipped"] == "4 tasks, over the 3 replayed at shutdown" and skipped["submission_order"] is None
    assert model_words(skipped, "scalpel") is None


def test_a_malleable_task_is_replayed_at_the_width_it_ran_at():
    wide = {**row(1, MiB, 0.0, 2.0), "cores": 1, "width": 2}  # asked 1 to 2 cores, ran on 2 for 2 s
    point = model_point(report_of("fifo", [wide, row(2, MiB, 0.0, 2.0, waited=0.0)]))
    assert point["submission_order"] == pytest.approx(4.0)  # it holds both cores: the other waits for it


def test_the_closing_line_says_the_model_figures_as_model_figures():
    report = report_of("scalpel", SUBMITTED_BADLY)
    report["model"] = model_point(report)
    line = run_summary(report, None)
    assert "model figures, these tasks replayed: " in line and " under scalpel (" in line and "achieved 1.00 s" in line
    del report["model"]  # a report from before the section says nothing of it
    assert "model figures" not in run_summary(report, None)


def test_the_closing_line_says_how_long_the_driver_was_pinned():
    report = report_of("scalpel", SUBMITTED_BADLY)
    assert "driver's threads" not in run_summary(report, None)  # a report from before the field
    report["driver_pin"] = {"mode": "busy", "cpu": 3, "engaged": 0, "seconds": 0.0}
    assert "driver's threads" not in run_summary(report, None)  # never pinned: nothing to say
    report["driver_pin"] = {"mode": "busy", "cpu": 3, "engaged": 1, "seconds": 4.25}
    assert "the driver's threads on CPU 3 for 4.2 s, in 1 burst (pin_driver='busy')" in run_summary(report, None)
    report["driver_pin"] = {"mode": "run", "cpu": 0, "engaged": 1, "seconds": None}
    assert "the driver's threads on CPU 0 (pin_driver)" in run_summary(report, None)


@python_app
def work(seed):
    return sum(i * seed for i in range(20_000))


def test_a_real_run_reports_its_model_point(tmp_path):
    executor = ScalpelExecutor(label="scalpel", topology="1x2:32MiB", profiles=str(tmp_path / "profiles.sqlite"))
    dfk = parsl.load(Config(executors=[executor], run_dir=str(tmp_path / "runinfo"), strategy="none"))
    try:
        assert [work(i).result() for i in range(6)] == [sum(i * s for i in range(20_000)) for s in range(6)]
        point = executor.run_report()["model"]
    finally:
        dfk.cleanup()
        parsl.clear()
    assert point["tasks"] == 6 and point["skipped"] is None
    assert point["submission_order"] > 0 and point["policy"] > 0 and point["achieved"] > 0
