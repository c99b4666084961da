"""The dispatch examples (many short tasks) run as a user runs them, whole processes, and give the
same result under ScalpelExecutor (its defaults, ``pin_driver="auto"``, ``pin_driver=None``) and under HTEX."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "dispatch"


def _run(script, tmp_path, executor, *extra):
    env = dict(os.environ, SCALPEL_PROFILE_STORE=str(tmp_path / f"{executor}.sqlite"))  # never the user's store
    done = subprocess.run([sys.executable, str(EXAMPLES / script), "--executor", executor, "--run-dir",
                           str(tmp_path / f"{script}-{executor}"), *extra],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("script, extra, n", [("sweep.py", ("--points", "20"), 20),
                                              ("chain.py", ("--samples", "12"), 12),
                                              ("tiles.py", ("--tiles", "60", "--pixels", "200"), 60),
                                              ("bootstrap.py", ("--resamples", "150", "--n", "300"), 2)])
def test_a_dispatch_example_gives_one_result_under_every_executor(tmp_path, script, extra, n):
    executors = ("scalpel", "scalpel-pin", "scalpel-unpinned", "htex")
    runs = {executor: _run(script, tmp_path, executor, *extra) for executor in executors}
    assert len({json.dumps(run["summary"], sort_keys=True) for run in runs.values()}) == 1
    assert runs["scalpel"]["summary"][{"tiles.py": "tiles", "bootstrap.py": "batches"}.get(script, "n")] == n
    assert all(run["seconds"] > 0 and run["executor"] == executor for executor, run in runs.items())
    if script == "sweep.py":
        assert (tmp_path / "sweep.py-htex" / "done.txt").read_text() == f"{n} points\n"  # the bash step ran
    if script == "tiles.py":
        assert (tmp_path / "tiles.py-scalpel" / "summary.txt").read_text() == f"{n} tiles\n"
        assert runs["scalpel"]["summary"]["pixels"] == n * 200
    if script == "bootstrap.py":
        low, high = runs["htex"]["summary"]["low"], runs["htex"]["summary"]["high"]
        assert low < high
        assert (tmp_path / "bootstrap.py-htex" / "interval.txt").read_text() == f"95% interval {low} {high}\n"


def test_a_dispatch_example_refuses_an_empty_workflow(tmp_path):
    done = subprocess.run([sys.executable, str(EXAMPLES / "sweep.py"), "--points", "0"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode != 0 and "--points must be at least 1, got 0" in done.stderr
