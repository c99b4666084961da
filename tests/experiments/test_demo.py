"""`scalpel demo --quick`: the main job runs end to end, under real Parsl, and writes its chart and record."""

import json
import subprocess
import sys


def test_quick_demo_writes_chart_and_record(tmp_path):
    out = tmp_path / "demo"
    completed = subprocess.run(
        [sys.executable, "-m", "scalpel_executor.cli", "demo", "--quick", "--out", str(out), "--json"],
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    record = json.loads(completed.stdout)
    assert (out / "scalpel-demo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "scalpel-demo.json").read_text())["summary"] == record["summary"]
    executors = {row["executor"] for row in record["summary"]}
    assert executors == {"scalpel:scalpel", "htex"}
    assert len(record["batch"]) == 4
    for run in record["runs"]:
        assert len(run["tasks"]) == 4
        assert all(task["end"] > task["start"] for task in run["tasks"])
    # the solo pass taught the store, so Scalpel's run used stored estimates, not the prior (a task
    # shorter than the probe's first window teaches its run time but no footprint)
    scalpel_runs = [run for run in record["runs"] if run["executor"] == "scalpel:scalpel"]
    assert scalpel_runs[0]["report_sources"]["runtime"] == {"store": 4}
    assert set(scalpel_runs[0]["report_sources"]["footprint"]) <= {"store", "prior"}
    assert "machine:" in completed.stderr


def test_demo_rejects_bad_arguments_with_a_message(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "scalpel_executor.cli", "demo", "--policies", "fastest", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert completed.returncode == 2
    assert "unknown policy 'fastest'" in completed.stderr
