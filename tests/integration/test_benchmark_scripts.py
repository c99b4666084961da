"""The scripts in benchmarks/ run as their docs' commands do: each answers --help. The finished
studies in benchmarks/archive/ are kept as measured, not run."""

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



def test_node_check_prints_an_earlier_records_tables(tmp_path):
    record = {"format": "scalpel-node-check/1", "seconds": 400.0,
              "plan": {"budget": 420.0, "tasks": 3000, "pings": 200},
              "machine": {"cpu_model": "Example CPU", "cpus": 16, "cores": 16, "memory_bytes": 64 * 2**30,
                          "llc_domains": [{"cpus": list(range(16)), "llc_bytes": 32 * 2**20}], "python": "3.12.1",
                          "parsl": "2026.10.26", "platform": "Linux", "load_average": [0.5, 0.5, 0.5]}}
    path = tmp_path / "node-check.json"
    path.write_text(json.dumps(record))
    done = run(SOURCE_ROOT / "benchmarks" / "node_check.py", "--report", path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Example CPU, 16 CPUs, 16 cores" in done.stdout and "CPUs 0-15: 32.0 MiB" in done.stdout
    bad = run(SOURCE_ROOT / "benchmarks" / "throughput.py", "--workers", "0")
    assert bad.returncode != 0 and "--workers takes positive widths" in bad.stderr


def test_driver_cpu_reports_the_drivers_cost_frames_and_round_trip_and_refuses_no_workers(tmp_path):
    record = tmp_path / "cpu.json"
    done = run(SOURCE_ROOT / "benchmarks" / "driver_cpu.py", "--executors", "scalpel,scalpel-pin,scalpel-unpinned",
               "--tasks", "40",
               "--warm", "55", "--workers", "3", "--rounds", "2", "--json", str(record), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("scalpel"))
    assert "us/task" in line and "frames read per task" in line and "lone round trip" in line
    assert "state lock found held" in done.stdout and "messages a frame" in done.stdout
    assert "over 2 interleaved rounds" in done.stdout
    for kind in ("scalpel-pin", "scalpel-unpinned"):
        assert any(line.startswith(kind) and "us/task" in line for line in done.stdout.splitlines())
    samples = json.loads(record.read_text())["samples"]
    kinds = ("scalpel", "scalpel-pin", "scalpel-unpinned")
    assert [(row["round"], row["executor"]) for row in samples] == [(r, kind) for r in (0, 1) for kind in kinds]
    # each of 40 tasks ends in a Result, and a Began names it: at least one message a frame
    assert all(row["messages_per_frame"] >= 1.0 and row["state_lock_contended_per_task"] >= 0 for row in samples)
    bad = run(SOURCE_ROOT / "benchmarks" / "driver_cpu.py", "--workers", "0")
    assert bad.returncode != 0 and "--workers must be at least 1, got 0" in bad.stderr
    bad = run(SOURCE_ROOT / "benchmarks" / "driver_cpu.py", "--rounds", "0")
    assert bad.returncode != 0 and "--rounds must be at least 1, got 0" in bad.stderr
    bad = run(SOURCE_ROOT / "benchmarks" / "driver_cpu.py", "--executors", "scalpel,dask")
    assert bad.returncode != 0 and \
        "--executors takes scalpel, scalpel-pin, scalpel-unpinned and htex, got dask" in bad.stderr


def test_plan_cost_prints_the_cost_of_a_start_and_the_rate_per_shape_and_refuses_a_bad_shape():
    done = run(SOURCE_ROOT / "benchmarks" / "plan_cost.py", "--shapes", "1x2,1x16", "--tasks", "8", "--repeats", "1",
               "--starts", "500")
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()[1:]}
    assert set(rows) == {"1x2", "1x16"}
    assert int(rows["1x2"][2]) > 0 and float(rows["1x2"][3]) > 0  # starts simulated, microseconds each
    assert (rows["1x2"][4], rows["1x16"][4]) == ("800", "200")  # the narrow domain's allowance is 4x the wide one's
    bad = run(SOURCE_ROOT / "benchmarks" / "plan_cost.py", "--shapes", "2y4")
    assert bad.returncode != 0 and "DOMAINSxCORES" in bad.stderr and "'2y4'" in bad.stderr
