"""Hints a script keeps when it goes back to HTEX: one script with ``@app_hints`` run, unchanged
but for its executor, under Parsl's HighThroughputExecutor and under ScalpelExecutor, each in a
process of its own as a user runs it; and HTEX's own arguments, given to ScalpelExecutor, answered
with what does their work here."""

import json
import subprocess
import sys
import textwrap

import pytest

from scalpel_executor import ScalpelExecutor

SCRIPT = textwrap.dedent('''
    import json, sys
    import parsl
    from parsl import python_app
    from parsl.config import Config
    from parsl.executors import HighThroughputExecutor
    from parsl.providers import LocalProvider
    from scalpel_executor import ScalpelExecutor, app_hints

    @python_app
    @app_hints(footprint="3MiB", runtime=0.5, size_free=("seed",))
    def sample(n, seed):
        import random
        return {"n": n, "seed": seed, "value": random.Random(seed).random()}

    which, run_dir = sys.argv[1], sys.argv[2]
    executor = (HighThroughputExecutor(label="htex", max_workers_per_node=2, provider=LocalProvider(init_blocks=1))
                if which == "htex" else ScalpelExecutor(label="scalpel", profiles=False))
    with parsl.load(Config(executors=[executor], run_dir=run_dir, strategy="none")):
        results = [sample(64, seed).result(timeout=120) for seed in range(100, 106)]
    print(json.dumps(results))
''')


@pytest.mark.parametrize("which", ["htex", "scalpel"])
def test_a_script_with_app_hints_runs_unchanged_on_htex_and_here(which, tmp_path):
    script = tmp_path / "workflow.py"
    script.write_text(SCRIPT)
    run = subprocess.run([sys.executable, str(script), which, str(tmp_path / "runinfo")], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(run.stdout.strip().splitlines()[-1])
    assert [r["seed"] for r in results] == list(range(100, 106)) and all(0 <= r["value"] < 1 for r in results)
    if which == "scalpel":  # the app's hints reached the scheduler, and its seeds share one key
        report = json.loads(next((tmp_path / "runinfo").glob("*/scalpel-scalpel-report.json")).read_text())
        rows = report["tasks"]
        assert {row["footprint_source"] for row in rows} == {"hint"} and {row["runtime_source"] for row in rows} == {"hint"}
        assert {row["estimated_footprint"] for row in rows} == {3 * 2**20}
        assert {row["profile_key"] for row in rows} == {"__main__.sample(~64,*)"}
        # no `if __name__ == "__main__":` in it: its import would run the workflow, so no script to import
        assert report["script"] is None


def test_htex_arguments_are_answered_with_what_does_their_work_here():
    with pytest.raises(TypeError) as raised:
        ScalpelExecutor(cpu_affinity="block", mem_per_worker=4)
    message = str(raised.value)
    assert "cpu_affinity= is HighThroughputExecutor's" in message and "pin='domain'" in message
    assert "mem_per_worker= is HighThroughputExecutor's" in message and "mem_per_task=" in message


def test_an_unknown_argument_is_answered_with_the_one_it_likely_means():
    with pytest.raises(TypeError, match=r"an unexpected keyword argument: profile_store= \(did you mean profiles=\?\)$"):
        ScalpelExecutor(profile_store="runs.db")
    with pytest.raises(TypeError) as raised:  # both named at once, the nearest spelling for a typo
        ScalpelExecutor(cores_per_tsk=2, frobnicate=True)
    assert str(raised.value) == ("ScalpelExecutor got unexpected keyword arguments: cores_per_tsk= (did you mean "
                                 "cores_per_task= or mem_per_task=?), frobnicate=")
    from parsl.providers import LocalProvider
    with pytest.raises(TypeError, match=r"gpus= \(did you mean available_accelerators=\?\)"):  # provider mode too
        ScalpelExecutor(provider=LocalProvider(), gpus=2)

    class Labelled(ScalpelExecutor):  # a subclass passing its keywords on is checked by its parent's __init__
        def __init__(self, note="", **kwargs):
            super().__init__(**kwargs)
            self.note = note
    assert Labelled(note="x", label="mine").label == "mine"
