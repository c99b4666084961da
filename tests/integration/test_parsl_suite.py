"""Parsl's own executor-agnostic test suite (shipped inside the parsl package) with ScalpelExecutor."""

import os
import re
import subprocess
import sys
from pathlib import Path

import parsl.tests

CONFIG = Path(__file__).with_name("parsl_suite_config.py")
PARSL_TESTS = os.path.dirname(parsl.tests.__file__)
# Parsl's ThreadPoolExecutor and HighThroughputExecutor configs pass this many on this kind of machine.
EXPECTED_PASSES = 142
# test_stdout_stderr_staging_zip reads the zip file as soon as stdout's DataFuture resolves, while
# stderr's stage-out may still be writing into the same file: it fails now and then under any
# executor (Parsl issue #3467, "bad zip file CI failure"), so it is left out here.
KNOWN_FLAKY = ("test_stdout_stderr_staging_zip",)


def test_parsl_config_mode_suite_passes(tmp_path):
    command = [
        sys.executable, "-m", "pytest", PARSL_TESTS, "--config", str(CONFIG),
        "-k", " and ".join(["not cleannet", "not unix_filesystem_permissions_required",
                            *(f"not {name}" for name in KNOWN_FLAKY)]),
        "-q", "-p", "no:cacheprovider", "-o", "addopts=",  # keep this project's pytest options out
    ]
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=1200)
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr[-2000:]
    assert run.returncode == 0, f"{summary}\n{run.stdout[-6000:]}\n{run.stderr[-3000:]}"
    passed = int(re.search(r"(\d+) passed", summary).group(1))
    assert passed >= EXPECTED_PASSES, summary
    assert " failed" not in summary and "error" not in summary, summary
