"""The scripts in benchmarks/ run as their docs' commands do: each answers --help. The finished
studies in benchmarks/archive/ are kept as measured, not run."""

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

