"""benchmarks/whole_process.py: a round of fresh processes records every phase and Scalpel's
wall over HTEX's, and the full store it builds holds a whole host history. Timings are not checked."""

import json
import subprocess
import sys
from pathlib import Path

from scalpel_executor.learning.host_model import MAX_CORUNS, HostModelStore

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "whole_process.py"


def test_one_round_records_every_phase_and_the_ratio_to_htex(tmp_path):
    out = tmp_path / "whole-process.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--rounds", "1", "--workflows", "short", "--stores", "empty",
                           "--tasks", "4", "--out", str(out)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(out.read_text())
    samples = record["samples"]
    assert sorted((s["contender"], s["state"]) for s in samples) == [("htex", None), ("scalpel", "empty")]
    for sample in samples:
        assert "error" not in sample, sample
        for phase in ("process_wall", "wall", "import", "load", "work", "cleanup", "other", "startup", "exit"):
            assert sample[phase] >= 0 or phase == "other", (phase, sample)
        assert len(sample["load_average_before"]) == len(sample["load_average_after"]) == 3
    rows = {row["executor"]: row for row in record["summary"]}
    assert set(rows) == {"htex", "scalpel/empty"}
    ratio = rows["scalpel/empty"]["wall_vs_htex"]
    assert ratio["low"] <= ratio["ratio"] <= ratio["high"] and ratio["rounds"] == 1
    assert "wall / HTEX" in done.stdout and "scalpel/empty" in done.stdout
    assert "round 1/1 short htex: wall" in done.stderr


def test_the_full_store_holds_max_coruns_and_a_fresh_fit(tmp_path, load_benchmark):
    script = load_benchmark("whole_process")
    store, host = tmp_path / "profiles.sqlite", "test-host 1x2:32.0 MiB"
    filled = script.fill_host_history(store, host, 32 << 20)
    assert filled["coruns"] == MAX_CORUNS and filled["solo_keys"] == len(script.EARLIER_APPS)
    assert filled["fit"] is not None
    models = HostModelStore(store)
    try:
        assert not models.stale(host)
    finally:
        models.close()
    assert script.fill_host_history(store, host, 32 << 20)["coruns"] == MAX_CORUNS  # full stays full


def test_the_host_history_is_the_same_for_the_same_seed(load_benchmark):
    script = load_benchmark("whole_process")
    apps = [("a", 1e6, 0.5), ("b", 3e7, 1.0)]
    spans = script.host_history_spans(apps, 10, 32 << 20, seed=3)
    assert spans == script.host_history_spans(apps, 10, 32 << 20, seed=3)
