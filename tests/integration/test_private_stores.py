"""Parsl's suite configs and the benchmarks never write into the user's own profile store.

The session's fixture (tests/conftest.py) points ``$SCALPEL_PROFILE_STORE`` at a throwaway file,
which is what hid the suite configs writing into the default store when run by hand; these tests
run them as a person would, with that variable and ``$XDG_DATA_HOME`` unset and ``$HOME`` a folder
of the test's own.
"""

import ast
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import scalpel_executor

HERE = Path(__file__).resolve().parent
SOURCE_ROOT = str(Path(scalpel_executor.__file__).resolve().parents[1])
BENCHMARKS = Path(SOURCE_ROOT) / "benchmarks"

# Loads a suite config as Parsl's suite does (fresh_config()), runs a few apps, prints the store's path.
CHILD = textwrap.dedent(
    """
    import importlib.util, sys
    import parsl
    from parsl import python_app

    spec = importlib.util.spec_from_file_location("suite_config", sys.argv[1])
    config_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(config_module)

    @python_app
    def double(x):
        return 2 * x

    if __name__ == "__main__":
        config = config_module.fresh_config()
        with parsl.load(config):
            assert [double(i).result(timeout=120) for i in range(3)] == [0, 2, 4]
        print(config.executors[0].run_report()["profile_store"]["path"])
    """
)


@pytest.mark.parametrize("config", ["parsl_suite_config.py", "parsl_suite_provider_config.py"])
def test_the_parsl_suite_configs_leave_the_users_store_alone(tmp_path, config):
    home = tmp_path / "home"
    home.mkdir()
    env = {name: value for name, value in os.environ.items() if name not in ("SCALPEL_PROFILE_STORE", "XDG_DATA_HOME")}
    env.update(HOME=str(home), PYTHONPATH=os.pathsep.join(filter(None, [SOURCE_ROOT, os.environ.get("PYTHONPATH")])))
    run = subprocess.run([sys.executable, "-c", CHILD, str(HERE / config)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    store = Path(run.stdout.strip().splitlines()[-1])
    assert not (home / ".local" / "share" / "scalpel-executor").exists()  # the default store's folder
    assert home not in store.parents and store.name == "profiles.sqlite", store
    assert not store.parent.exists(), f"{store.parent} outlived the suite's process"


def _executor_calls(text):
    """Each ``ScalpelExecutor(...)`` call in ``text`` (code, not prose), as (its keywords, its source)."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "ScalpelExecutor":
            yield {keyword.arg for keyword in node.keywords}, ast.get_source_segment(text, node)


# The scripts, and the package's modules that run experiments and stress harnesses for them
# (benchmarks/ holds scripts; what they run lives in scalpel_executor.experiments and .stress).
SCRIPTS = sorted([*BENCHMARKS.glob("*.py"), *(Path(SOURCE_ROOT) / "scalpel_executor" / "experiments").rglob("*.py"),
                  *(Path(SOURCE_ROOT) / "scalpel_executor" / "stress").rglob("*.py")])


@pytest.mark.parametrize("script", SCRIPTS, ids=[str(path.relative_to(SOURCE_ROOT)) for path in SCRIPTS])
def test_benchmarks_give_every_executor_a_store_of_their_own(script):
    """Each ScalpelExecutor a benchmark builds gets ``profiles=`` (False or a path), or its process
    gets ``SCALPEL_PROFILE_STORE`` from the module."""
    text = script.read_text()
    sets_store = re.search(r"SCALPEL_PROFILE_STORE\s*=", text) is not None
    for keywords, call in _executor_calls(text):
        assert "profiles" in keywords or sets_store, f"{script.name}: {call}"
