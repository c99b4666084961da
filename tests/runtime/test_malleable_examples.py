"""The malleable example workflows run as a user runs them (whole processes), give the same
result at every width and on HTEX, and say the widths the executor chose."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "malleable"


def _run(script, tmp_path, width, *extra, executor="scalpel"):
    done = subprocess.run([sys.executable, str(EXAMPLES / script), "--executor", executor, "--width", width,
                           "--store", str(tmp_path / f"{script}.sqlite"),
                           "--run-dir", str(tmp_path / f"{script}-{executor}-{width}"), *extra],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("script, extra, malleable", [
    ("covariance.py", ("--tiles", "3", "--size", "64", "--sweeps", "2"), 7),  # 3 + 3 + the reduce
    ("ensemble.py", ("--members", "3", "--size", "64"), 7),
    ("fits.py", ("--regions", "3", "--rows", "300", "--basis", "40"), 4),  # 3 + the reduce
])
def test_a_malleable_example_gives_one_result_at_every_width_and_says_its_widths(tmp_path, script, extra, malleable):
    chosen, fixed = _run(script, tmp_path, "auto", *extra), _run(script, tmp_path, "1", *extra)
    assert chosen["checksum"] == fixed["checksum"] and chosen["makespan"] > 0
    assert sum(chosen["widths"].values()) == sum(fixed["widths"].values()) == malleable
    assert set(fixed["widths"]) == {"1: fixed"} and all(": fixed" not in kind for kind in chosen["widths"])
    for run in (chosen, fixed):  # the core-seconds held: some, and never more than every core for the makespan
        assert 0 < run["busy_core_seconds"] <= run["cores"] * run["makespan"] * 1.001
    htex = _run(script, tmp_path, "auto", *extra, executor="htex")  # the same workflow on Parsl's HTEX
    assert htex["checksum"] == chosen["checksum"] and htex["makespan"] is None and htex["widths"] == {}


def test_a_width_on_htex_is_refused_with_the_option_named(tmp_path):
    done = subprocess.run([sys.executable, str(EXAMPLES / "covariance.py"), "--executor", "htex", "--width", "2"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--width 2 is for --executor scalpel" in done.stderr


def test_a_fit_with_fewer_rows_than_features_is_refused_with_both_named(tmp_path):
    done = subprocess.run([sys.executable, str(EXAMPLES / "fits.py"), "--rows", "10", "--basis", "40"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--rows (10) must be at least --basis (40)" in done.stderr


@pytest.mark.parametrize("script, option", [("covariance.py", "--tiles"), ("ensemble.py", "--members"),
                                            ("fits.py", "--regions")])
def test_a_count_below_one_is_refused_with_the_option_and_value_named(script, option):
    done = subprocess.run([sys.executable, str(EXAMPLES / script), option, "0"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and f"{option} must be at least 1, got 0" in done.stderr
