"""benchmarks/cpu_share.py: busy processes started both ways the executor could start its workers
(a session of their own, a process group of the caller's session), timed by their own CPU time.
Where the executor's processes start is checked in tests/runtime/test_reliability.py."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "cpu_share.py"


def load():
    spec = importlib.util.spec_from_file_location("cpu_share", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_round_of_each_way_prints_each_ways_cpu_seconds_and_the_ratio(capsys):
    cpu_share = load()
    assert cpu_share.main(["--rounds", "2", "--seconds", "0.3", "--workers", "1", "--load", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("sched_autogroup_enabled: ")
    assert "1 workers beside a load of 1, 0.3 s each way" in lines[0]
    assert [line.split(":")[0] for line in lines[1:3]] == ["round 1", "round 2"]
    taken = [float(word) for line in lines[1:3] for word in line.replace(",", "").split()[3::2]]
    assert len(taken) == 4 and all(0.0 < cpu <= 0.3 * 1.5 for cpu in taken), lines  # at most its CPU for 0.3 s
    assert lines[3].startswith("medians: session ") and "session / group " in lines[3]


@pytest.mark.parametrize("args", [["--rounds", "0"], ["--workers", "0"], ["--seconds", "0"], ["--load", "-1"]])
def test_a_bad_value_is_named(args, capsys):
    with pytest.raises(SystemExit) as ended:
        load().main(args)
    assert ended.value.code == 2 and args[0] in capsys.readouterr().err
