"""A benchmark's JSON record: written where ``--out`` says, the one way every script in
``benchmarks/`` keeps its figures (indented JSON, its folder made if missing); and the scratch
folder its runs' stores live in (:func:`scratch_folder`).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path


def write_record(record: Mapping, path: str | os.PathLike) -> Path:
    """Write ``record`` to ``path`` as JSON indented by one space, making its folder; the path written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1))
    return path


def write_and_report(record: Mapping, path: str | os.PathLike, print_report: Callable[[Mapping], None]) -> None:
    """The end of a simulated study's run: its ``record`` written to ``path`` first (a report that
    fails loses no run), then ``print_report(record)``, the tables its ``--report`` prints from the
    file, then where the record went."""
    written = write_record(record, path)
    print_report(record)
    print(f"wrote {written}")


def scratch_folder(prefix: str) -> tempfile.TemporaryDirectory:
    """A temporary folder for a benchmark's runs (their profile stores, run directories) that a
    failure to remove never costs the record: a Scalpel run's detached host refit may still write
    its store's journal after the run's process has exited, and removing the folder under it raised
    at the end of ``width_live`` (``Directory not empty``), after five repetitions, before the record
    was written."""
    return tempfile.TemporaryDirectory(prefix=prefix, ignore_cleanup_errors=True)
