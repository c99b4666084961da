"""The example notebook executes headless, start to finish: two runs on one profile store (the
first measures, the second reads what it stored), a plot, the run reports, and nothing left behind."""

import ast
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "notebook.ipynb"
RUN_1, RUN_2 = "run 1 (fresh store, measures)", "run 2 (same store, uses what run 1 learned)"


def sources(text: str, run: str, estimate: str) -> dict:
    """The ``sources`` count the notebook printed for one run and one estimate (footprint, run-time)."""
    found = re.search(re.escape(run) + r":\n(?:  .*\n)*?  " + estimate + r" estimates from (\{.*\})", text)
    assert found, f"no {estimate} sources printed for {run!r}"
    return ast.literal_eval(found.group(1))


def test_example_notebook_learns_across_two_runs_and_leaves_nothing_behind(tmp_path, monkeypatch):
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

    for run in (RUN_1, RUN_2):
        assert f"{run}: 4/4 tasks done" in text
        assert re.search(re.escape(run) + r": makespan \d+\.\d+ s", text)
        assert re.search(re.escape(run) + r": tasks whose footprints overflow the 32 MiB LLC ran together for "
                         r"\d+\.\d+ s of \d+\.\d+ s", text)
    assert any("image/png" in output.get("data", {}) for output in outputs), "no plot was drawn"

    # run 1 had nothing to read; run 2 read the store run 1 wrote
    for estimate in ("footprint", "run-time"):
        assert "store" not in sources(text, RUN_1, estimate)
        assert sum(sources(text, RUN_1, estimate).values()) == 4
    assert sources(text, RUN_2, "run-time") == {"store": 4}
    assert "store" in sources(text, RUN_2, "footprint")

    workdir = re.search(r"working in (\S+)", text).group(1)
    assert Path(workdir).parent == temp
    assert not Path(workdir).exists()
    assert f"removed {workdir}: True" in text
    assert list(temp.glob("scalpel-notebook-*")) == []
