"""Parsl's own executor-agnostic test suite (shipped inside the parsl package) with ScalpelExecutor.

It runs twice, once per config: local mode (the executor's workers on this host) and provider mode
(two LocalProvider blocks, each a node manager that connects back over CurveZMQ).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import parsl.tests
import pytest

import scalpel_executor

PARSL_TESTS = os.path.dirname(parsl.tests.__file__)
# The suite's child process, and the managers its blocks start, import the scalpel_executor that
# this process imported: the code under test, wherever the installed package points.
SOURCE_ROOT = str(Path(scalpel_executor.__file__).resolve().parents[1])
# test_stdout_stderr_staging_zip reads the zip file as soon as stdout's DataFuture resolves, while
# stderr's stage-out may still be writing into the same file: it fails now and then under any
# executor (Parsl issue #3467, "bad zip file CI failure"), so it is left out here.
KNOWN_FLAKY = ("test_stdout_stderr_staging_zip",)
# Tests Parsl marks issue_3620 (today test_resource_spec.py::test_resource) assert that only HTEX,
# Work Queue and ThreadPoolExecutor refuse a resource specification key they do not know ('cpus');
# ScalpelExecutor refuses it as HTEX does, so it is left out, as Parsl leaves it out for
# GlobusComputeExecutor (its conftest's marker description).
LEFT_OUT_MARKS = "not issue_3620"
# Per config: its file, and the passes Parsl's ThreadPoolExecutor and HighThroughputExecutor configs
# reach on this kind of machine, less the test left out above. Provider mode passes the same tests
# as local mode: none is left out.
CONFIGS = {
    "local": ("parsl_suite_config.py", 141),
    "provider": ("parsl_suite_provider_config.py", 141),
}


@pytest.mark.parametrize("config, expected_passes", CONFIGS.values(), ids=CONFIGS.keys())
def test_parsl_config_mode_suite_passes(tmp_path, config, expected_passes):
    command = [
        sys.executable, "-m", "pytest", PARSL_TESTS, "--config", str(Path(__file__).with_name(config)),
        "-k", " and ".join(["not cleannet", "not unix_filesystem_permissions_required",
                            *(f"not {name}" for name in KNOWN_FLAKY)]),
        "-m", LEFT_OUT_MARKS,
        "-q", "-p", "no:cacheprovider", "-o", "addopts=",  # keep this project's pytest options out
    ]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [SOURCE_ROOT, os.environ.get("PYTHONPATH")])))
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=1200, env=env)
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr[-2000:]
    assert run.returncode == 0, f"{summary}\n{run.stdout[-6000:]}\n{run.stderr[-3000:]}"
    passed = int(re.search(r"(\d+) passed", summary).group(1))
    assert passed >= expected_passes, summary
    assert " failed" not in summary and "error" not in summary, summary
