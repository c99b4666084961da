import json
import subprocess
import sys

import pytest

from scalpel_executor.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_topology_json_describes_this_machine(capsys):
    code, out, _ = run(capsys, "topology", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["total_cores"] >= 1 and doc["domains"]


def test_topology_spec(capsys):
    code, out, _ = run(capsys, "topology", "--spec", "2x4:12MiB")
    assert code == 0 and "12.0 MiB" in out


def test_malformed_spec_is_a_clear_error(capsys):
    code, _, err = run(capsys, "topology", "--spec", "2x")
    assert code == 2 and "2x" in err


def test_simulate_reports_every_policy_against_fifo(capsys):
    code, out, _ = run(capsys, "simulate", "--tasks", "8,16", "--repeats", "2", "--json")
    doc = json.loads(out)
    assert code == 0
    assert {(r["tasks"], r["policy"]) for r in doc["rows"]} >= {(16, "scalpel"), (16, "fifo"), (8, "di")}
    assert all(r["mean_makespan"] >= r["mean_lower_bound"] * 0.999 for r in doc["rows"])


def test_simulate_unknown_policy(capsys):
    with pytest.raises(SystemExit, match="unknown policy 'lpt'"):
        main(["simulate", "--policies", "lpt"])


def test_simulate_unknown_profile(capsys):
    code, _, err = run(capsys, "simulate", "--profile", "nope")
    assert code == 2 and "polybench-xeon-e5620" in err


def test_console_script_help_lists_every_command():
    out = subprocess.run(
        [sys.executable, "-m", "scalpel_executor.cli", "--help"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    for command in ("topology", "simulate", "demo", "profile"):
        assert command in out.stdout
    demo = subprocess.run(
        [sys.executable, "-m", "scalpel_executor.cli", "demo", "--help"], capture_output=True, text=True, timeout=120
    )
    assert "--quick" in demo.stdout and "--llc" in demo.stdout and "HighThroughputExecutor" in demo.stdout
