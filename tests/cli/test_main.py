"""The ``scalpel`` command as a whole: every command is listed and explains itself; option types."""

import argparse
import subprocess
import sys

import pytest

from scalpel_executor.cli import COMMANDS, build_parser
from scalpel_executor.cli.common import at_least, comma_list
from scalpel_executor.experiments.plans import BENCH, BENCH_SMOKE, DEMO, DEMO_QUICK

NAMES = ("topology", "simulate", "demo", "bench", "calibrate", "profile", "report")


def test_console_script_help_lists_every_command():
    out = subprocess.run([sys.executable, "-m", "scalpel_executor.cli", "--help"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    for command in NAMES:
        assert command in out.stdout
    demo = subprocess.run([sys.executable, "-m", "scalpel_executor.cli", "demo", "--help"], capture_output=True,
                          text=True, timeout=120)
    assert "--quick" in demo.stdout and "--llc" in demo.stdout and "HighThroughputExecutor" in demo.stdout


def test_version_prints_the_package_version():
    from scalpel_executor import __version__

    out = subprocess.run([sys.executable, "-m", "scalpel_executor.cli", "--version"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"scalpel {__version__}"


def test_help_loads_neither_parsl_nor_numpy():
    code = ("import sys; from scalpel_executor.cli import build_parser; build_parser(); "
            "print(sorted({'parsl', 'numpy', 'matplotlib', 'pyperf'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stderr


@pytest.mark.parametrize("command", NAMES)
def test_every_command_explains_itself(command, capsys):
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args([command, "--help"])
    assert done.value.code == 0
    assert f"usage: scalpel {command}" in capsys.readouterr().out


def test_the_help_states_the_defaults_the_plans_hold(capsys):
    for command in ("demo", "bench"):
        with pytest.raises(SystemExit):
            build_parser().parse_args([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"(default {DEMO.repeats}; {DEMO_QUICK.repeats} with --quick)" in text
    assert f"(default {BENCH.repeats}; {BENCH_SMOKE.repeats} with --smoke)" in text
    assert f"(default {BENCH.noop_tasks}; {BENCH_SMOKE.noop_tasks} with --smoke)" in text


def test_each_command_module_adds_one_command():
    assert [module.__name__.rsplit(".", 1)[1] for module in COMMANDS] == list(NAMES)


@pytest.mark.parametrize("argv", [["demo", "--repeats", "0"], ["demo", "--tasks", "1"], ["bench", "--noop-tasks", "x"],
                                  ["simulate", "--repeats", "-1"]])
def test_counts_below_their_least_are_refused_with_the_option_named(argv, capsys):
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(argv)
    assert done.value.code == 2
    assert f"argument {argv[1]}:" in capsys.readouterr().err


def test_option_types_name_the_bad_value():
    assert at_least(2)("3") == 3
    with pytest.raises(argparse.ArgumentTypeError, match="must be at least 2, got 1"):
        at_least(2)("1")
    assert comma_list("b, a,b", ("a", "b"), option="--x", noun="thing") == ["b", "a"]
    with pytest.raises(ValueError, match=r"unknown thing 'c' in --x; choose from a, b"):
        comma_list("a,c", ("a", "b"), option="--x", noun="thing")
    with pytest.raises(ValueError, match=r"--x names no thing"):
        comma_list(" , ", ("a", "b"), option="--x", noun="thing")
    assert comma_list("all", ("a", "b"), option="--x", noun="thing", expand={"all": ["a", "b"]}) == ["a", "b"]
