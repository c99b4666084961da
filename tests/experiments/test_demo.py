"""`scalpel demo`: the mechanics / policy / total split, its intervals, the solo-time bound, and a
tiny plan run end to end under real Parsl."""

import json
import math
import os
import statistics
import subprocess
import sys

import pytest

from scalpel_executor.experiments.demo import (HTEX, MECHANICS, RunResult, executor_names, print_summary, split,
                                               summarise)
from scalpel_executor.experiments.plans import DEMO, DEMO_QUICK, with_given
from scalpel_executor.experiments.solo_times import distinct_cases
from scalpel_executor.workloads.kernels.cases import KernelCase

POLICY = "scalpel:scalpel"
# A newcomer's run of the full demo: the quietest repeat tied, and HTEX / scalpel alone read 1.5x.
MAKESPANS = {HTEX: [31.3, 30.4, 16.2], MECHANICS: [21.7, 29.0, 16.1], POLICY: [20.3, 30.1, 16.0]}


def runs(makespans=MAKESPANS):
    return [RunResult(name, repeat, seconds)
            for name, times in makespans.items() for repeat, seconds in enumerate(times)]


def by_share(rows):
    return {row["share"]: row for row in rows}


def test_the_split_separates_mechanics_from_policy_and_they_multiply_to_the_total():
    rows = by_share(split(runs(), resamples=2000))
    assert list(rows) == ["mechanics", "policy", "total"]
    median = {name: statistics.median(times) for name, times in MAKESPANS.items()}
    assert (rows["mechanics"]["reference"], rows["mechanics"]["executor"]) == (HTEX, MECHANICS)
    assert (rows["policy"]["reference"], rows["policy"]["executor"]) == (MECHANICS, POLICY)
    assert (rows["total"]["reference"], rows["total"]["executor"]) == (HTEX, POLICY)
    assert rows["mechanics"]["ratio"] == pytest.approx(median[HTEX] / median[MECHANICS])
    assert rows["policy"]["ratio"] == pytest.approx(median[MECHANICS] / median[POLICY])
    assert rows["total"]["ratio"] == pytest.approx(rows["mechanics"]["ratio"] * rows["policy"]["ratio"])
    # the policy's own share is far below the 1.5x that HTEX / scalpel alone suggests
    assert rows["policy"]["ratio"] == pytest.approx(1.07, abs=0.005) and rows["total"]["ratio"] > 1.45


def test_each_ratio_has_a_paired_interval_over_the_repeats():
    for row in split(runs(), resamples=2000):
        assert row["paired_runs"] == 3
        assert row["ci_low"] <= row["ratio"] <= row["ci_high"]
        reference, other = MAKESPANS[row["reference"]], MAKESPANS[row["executor"]]
        assert row["per_repeat"] == pytest.approx([a / b for a, b in zip(reference, other)])
        # a paired resample of 3 repeats cannot leave the range its per-repeat medians span
        assert min(row["per_repeat"]) * 0.5 < row["ci_low"] and row["ci_high"] < max(row["per_repeat"]) * 2
    # the tied quietest repeat keeps the total's interval wide rather than hiding it
    total = by_share(split(runs(), resamples=2000))["total"]
    assert total["ci_low"] < 1.05 < 1.4 < total["ci_high"]


def test_one_repeat_gives_a_point_and_no_spread():
    one = {name: times[:1] for name, times in MAKESPANS.items()}
    for row in split(runs(one), resamples=200):
        assert row["ci_low"] == row["ratio"] == row["ci_high"]
        assert row["paired_runs"] == 1


def test_comparisons_whose_executor_did_not_run_are_left_out():
    without_fifo = {name: times for name, times in MAKESPANS.items() if name != MECHANICS}
    assert [row["share"] for row in split(runs(without_fifo), resamples=100)] == ["total"]
    without_htex = {name: times for name, times in MAKESPANS.items() if name != HTEX}
    assert [row["share"] for row in split(runs(without_htex), resamples=100)] == ["policy"]
    two_policies = {**MAKESPANS, "scalpel:scalpel-paper": [25.0, 28.0, 17.0]}
    assert [(row["share"], row["executor"]) for row in split(runs(two_policies), resamples=100)] == [
        ("mechanics", MECHANICS), ("policy", POLICY), ("total", POLICY),
        ("policy", "scalpel:scalpel-paper"), ("total", "scalpel:scalpel-paper")]


def test_the_plan_runs_htex_then_the_mechanics_then_the_policies():
    assert executor_names(DEMO) == [HTEX, MECHANICS, POLICY]
    assert executor_names(DEMO_QUICK) == [HTEX, MECHANICS, POLICY]
    assert executor_names(with_given(DEMO, include_htex=False, policies=("longest_first", "fifo"))) == [
        MECHANICS, "scalpel:longest_first"]


def test_the_solo_time_bound_is_an_estimate_and_runs_below_it_are_counted():
    task = {"case": "spmv", "seconds": 1.0}
    results = [RunResult(HTEX, 0, 2.1, [task, task]), RunResult(POLICY, 0, 1.9, [task, task])]
    summary = summarise(results, {"spmv": 1.0}, cores=1, order=[HTEX, MECHANICS, POLICY])
    assert summary["bound"]["seconds"] == 2.0
    assert (summary["bound"]["runs_below"], summary["bound"]["runs"]) == (1, 2)
    assert "an estimate" in summary["bound"]["name"]
    assert [row["executor"] for row in summary["executors"]] == [HTEX, POLICY]  # fifo did not run
    assert summary["executors"][1]["makespan_over_bound"] == pytest.approx(0.95)


def demo(out, *options, store):
    """``scalpel demo --quick`` into ``out``, keeping solo times in ``store``: the finished process."""
    return subprocess.run(
        [sys.executable, "-m", "scalpel_executor.cli", "demo", "--quick", *options, "--out", str(out), "--json"],
        capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "SCALPEL_PROFILE_STORE": str(store)},
    )


def solo_tasks(out):
    """The kernel tasks the demo in ``out`` ran alone (its solo executor's report), or None: no solo pass."""
    reports = list((out / "runinfo").glob("*/scalpel-solo-report.json"))
    assert len(reports) <= 1
    if not reports:
        return None
    return [t for t in json.loads(reports[0].read_text())["tasks"] if ".timed_kernel(" in t["profile_key"]]


def test_a_tiny_plan_runs_end_to_end_with_the_split(tmp_path):
    out = tmp_path / "demo"
    repeats = 2
    completed = demo(out, "--repeats", str(repeats), store=tmp_path / "profiles.sqlite")
    assert completed.returncode == 0, completed.stderr[-3000:]
    record = json.loads(completed.stdout)
    assert (out / "scalpel-demo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "scalpel-demo.json").read_text())["split"] == record["split"]
    names = [HTEX, MECHANICS, POLICY]
    assert [row["executor"] for row in record["summary"]["executors"]] == names
    assert [row["share"] for row in record["split"]] == ["mechanics", "policy", "total"]
    shares = by_share(record["split"])
    for row in record["split"]:
        assert row["paired_runs"] == repeats and len(row["per_repeat"]) == repeats
        assert row["ci_low"] <= row["ratio"] <= row["ci_high"]
    assert shares["total"]["ratio"] == pytest.approx(shares["mechanics"]["ratio"] * shares["policy"]["ratio"])
    assert len(record["batch"]) == 4
    assert sorted((run["executor"], run["repeat"]) for run in record["runs"]) == sorted(
        (name, r) for name in names for r in range(repeats))
    for run in record["runs"]:
        assert len(run["tasks"]) == 4
        assert all(task["end"] > task["start"] for task in run["tasks"])
    # the solo pass ran once, before the repeats: one Parsl run directory for it, one per executor run
    run_dirs = [d for d in (out / "runinfo").iterdir() if d.is_dir()]
    assert len(run_dirs) == 1 + len(names) * repeats
    assert record["solo_passes"] == 1
    # ... over the distinct cases, each once (tasks of one exact profile key share their case: steps
    # under 16, which a busy machine's step times give, make exact keys apart within one shape key)
    distinct = distinct_cases([KernelCase(c["kernel"], c["size"], c["steps"]) for c in record["batch"]])
    assert len(solo_tasks(out)) == len(distinct) == record["solo"]["measured"] == record["solo"]["cases"]
    assert record["solo"]["reused"] == 0 and record["machine"]["fingerprint"]
    assert "this will take about" in completed.stderr and "0 of" in completed.stderr
    # the solo pass taught the store, so Scalpel's runs used stored estimates, not the prior (a task
    # shorter than the probe's first window teaches its run time but no footprint: its app's, or the prior)
    for run in record["runs"]:
        if run["executor"].startswith("scalpel:"):
            assert run["report_sources"]["runtime"] == {"store": 4}
            assert set(run["report_sources"]["footprint"]) <= {"store", "app", "prior"}
    assert record["machine"]["llc"] > 0 and "Scalpel plans with it" in completed.stderr
    bound = record["summary"]["bound"]
    assert bound["runs"] == len(names) * repeats and 0 <= bound["runs_below"] <= bound["runs"]
    assert math.isfinite(bound["seconds"]) and bound["seconds"] > 0

    lines = []
    print_summary({**record, "files": {"png": "demo.png", "json": "demo.json"}}, lines.append)
    text = "\n".join(lines)
    for word in ("mechanics", "policy", "total", "95% interval", "htex / scalpel:fifo",
                 "scalpel:fifo / scalpel:scalpel", "solo-time bound, an estimate: measured solo times can be beaten"):
        assert word in text
    assert "vs HTEX" not in text and "lower bound" not in text
    # one verdict on the split, naming the machine and how many runs other work disturbed
    assert record["verdict"].startswith(f"On this machine ({record['machine']['words']}): ")
    assert record["verdict"] in text and "inside noise" in text
    for run in record["runs"]:
        assert run["other_work_per_core"] is None or run["other_work_per_core"] >= 0
    if any(run["other_work_per_core"] is not None for run in record["runs"]):
        assert "runs ran while other work used more than" in record["verdict"] or "None of the" in record["verdict"]


def test_a_second_demo_reuses_the_solo_times_and_fresh_solo_measures_them_again(tmp_path):
    store = tmp_path / "profiles.sqlite"
    first = demo(tmp_path / "first", "--repeats", "1", "--no-htex", "--policies", "scalpel", store=store)
    assert first.returncode == 0, first.stderr[-3000:]
    cases = json.loads(first.stdout)["solo"]["cases"]
    assert len(solo_tasks(tmp_path / "first")) == cases
    second = demo(tmp_path / "second", "--repeats", "1", "--no-htex", "--policies", "scalpel", store=store)
    assert second.returncode == 0, second.stderr[-3000:]
    record = json.loads(second.stdout)
    assert solo_tasks(tmp_path / "second") is None  # nothing ran alone: no solo executor at all
    assert (record["solo"]["measured"], record["solo"]["reused"]) == (0, cases)
    assert f"solo times for {cases} of {cases} distinct cases already measured" in second.stderr
    # the reused cases taught the fresh store what the first run's pass did: the same batch, from the store
    assert [c["case"] for c in record["batch"]] == [c["case"] for c in json.loads(first.stdout)["batch"]]
    (run,) = record["runs"]
    assert run["report_sources"]["runtime"] == {"store": 4}
    assert set(run["report_sources"]["footprint"]) <= {"store", "app", "prior"}
    fresh = demo(tmp_path / "fresh", "--repeats", "1", "--no-htex", "--policies", "scalpel", "--fresh-solo",
                 store=store)
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    # --fresh-solo times the kernels' steps again too, so the batch (and its distinct cases) may differ
    measured = json.loads(fresh.stdout)["solo"]
    assert len(solo_tasks(tmp_path / "fresh")) == measured["cases"] == measured["measured"]
    assert measured["reused"] == 0


def test_demo_rejects_bad_arguments_with_a_message(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "scalpel_executor.cli", "demo", "--policies", "fastest", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert completed.returncode == 2
    assert "unknown policy 'fastest'" in completed.stderr
