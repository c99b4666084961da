"""A benchmark's JSON record: written where ``--out`` says, the one way every script in
``benchmarks/`` keeps its figures (indented JSON, its folder made if missing).
"""

from __future__ import annotations

import json
import os
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
