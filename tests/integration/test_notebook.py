"""The example notebook executes headless, start to finish: pairs of runs on one profile store each
(the first measures, the second reads what it stored), a chart, the run reports, a closing sentence
computed from the runs, and nothing left behind."""

import ast
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "notebook.ipynb"
RUN_1, RUN_2 = "run 1 (fresh store)", "run 2 (run 1's store)"
REPEATS = 2
SECONDS = r"\d+\.\d+ s"


def sources(text: str, run: str, estimate: str) -> dict:
    """The ``sources`` count the notebook printed for one run and one estimate (footprint, run-time)."""
    found = re.search(re.escape(run) + r":\n(?:  .*\n)*?  " + estimate + r" estimates from (\{.*\})", text)
    assert found, f"no {estimate} sources printed for {run!r}"
    return ast.literal_eval(found.group(1))


def test_example_notebook_learns_across_runs_says_whether_it_paid_and_leaves_nothing_behind(tmp_path, monkeypatch):
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))  # the kernel inherits it: its temporary folder lands here
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    try:
        client.execute()
    except Exception as error:  # the cell's traceback is the useful part
        pytest.fail(f"the notebook failed: {error}")
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])]
    text = "".join(output.get("text", "") for output in outputs)

    for repeat in range(1, REPEATS + 1):
        for phase in (RUN_1, RUN_2):
            run = f"{phase}, repeat {repeat}"
            assert re.search(re.escape(run) + rf": 4/4 tasks done, makespan {SECONDS}", text)
            assert re.search(re.escape(run) + rf": tasks whose footprints overflow the 32.0 MiB LLC ran together "
                             rf"for {SECONDS} of the {SECONDS} its tasks ran", text)
        # run 1 had nothing to read; run 2 read the store run 1 wrote
        for estimate in ("footprint", "run-time"):
            assert "store" not in sources(text, f"{RUN_1}, repeat {repeat}", estimate)
            assert sum(sources(text, f"{RUN_1}, repeat {repeat}", estimate).values()) == 4
        assert sources(text, f"{RUN_2}, repeat {repeat}", "run-time") == {"store": 4}
        assert "store" in sources(text, f"{RUN_2}, repeat {repeat}", "footprint")
    assert any("image/png" in output.get("data", {}) for output in outputs), "no chart was drawn"
    pair = rf"{SECONDS} and {SECONDS}"
    assert re.search(rf"In this execution \(repeat by repeat\), run 2 ran over-cache tasks together for {pair} "
                     rf"against {pair} in run 1, ran its tasks for {pair} against {pair}, and ended {pair} against "
                     rf"{pair} after submission: less co-run in \d of {REPEATS} repeats, tasks run in less time in "
                     rf"\d, ended sooner in \d\.", text)
    assert re.search(r"On this host \(2 cores sharing one 32.0 MiB LLC\), .*\.\n", text)

    workdir = re.search(r"working in (\S+)", text).group(1)
    assert Path(workdir).parent == temp
    assert not Path(workdir).exists()
    assert f"removed {workdir}: True" in text
    assert list(temp.glob("scalpel-notebook-*")) == []
