"""The scripts in benchmarks/ run as their docs' commands do: each answers --help, and the policy
study runs a batch end to end (its run command once called study() with a keyword it had not)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import scalpel_executor

SOURCE_ROOT = Path(scalpel_executor.__file__).resolve().parents[1]
SCRIPTS = sorted((SOURCE_ROOT / "benchmarks").glob("*.py"))


def run(*args, timeout=120):
    return subprocess.run([sys.executable, *map(str, args)], cwd=SOURCE_ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("script", SCRIPTS, ids=[path.name for path in SCRIPTS])
def test_every_benchmark_script_answers_help(script):
    done = run(script, "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout


def test_the_policy_study_runs_a_batch_and_records_it(tmp_path):
    out = tmp_path / "study.json"
    done = run(SOURCE_ROOT / "benchmarks" / "policy_study.py", "run", "--machine", "paper", "--sizes", "6",
               "--repeats", "1", "--ls-evals", "0", "--bnb-max-tasks", "0", "--estimate-noise", "0.3",
               "--policies", "longest_first,scalpel", "--out", out)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(out.read_text())
    assert record["estimate_spread"] == 0.3 and record["machine"] == "paper"
