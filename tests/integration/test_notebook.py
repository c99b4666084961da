"""The example notebook executes headless, start to finish, and plots its outcome."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "notebook.ipynb"


def test_example_notebook_runs_and_plots(tmp_path):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    try:
        client.execute()
    except Exception as error:  # the cell's traceback is the useful part
        pytest.fail(f"the notebook failed: {error}")
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])]
    text = "".join(output.get("text", "") for output in outputs)
    assert "makespan" in text and "4/4 tasks done" in text
    assert any("image/png" in output.get("data", {}) for output in outputs), "no plot was drawn"
    assert "footprint estimates came from" in text
