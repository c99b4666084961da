"""Batch profiles on disk: JSON files of tasks with solo run times and footprints.

Format ``scalpel-profile/1``::

    {"format": "scalpel-profile/1", "name": "...", "description": "...",
     "machine": {"spec": "2x4:12MiB"},             # where the figures were measured
     "tasks": [{"name": "adi", "runtime": 41.47, "footprint": 1693562}, ...]}

``runtime`` is seconds when running alone; ``footprint`` is bytes (a number, or a size string such
as "24MiB"); ``sensitivity`` (optional) is the task's σ in the contention model of
:mod:`scalpel_executor.simulate`. Profiles shipped with the package live in the top-level
``profiles/`` folder and are found by name.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from scalpel_executor.simulate import SimTask
from scalpel_executor.units import parse_size

FORMAT = "scalpel-profile/1"


def shipped_profiles() -> list[str]:
    """Names of the profiles that come with the package."""
    folder = resources.files("scalpel_executor.profiles")
    return sorted(p.name[: -len(".json")] for p in folder.iterdir() if p.name.endswith(".json"))


def _shipped_text(name: str) -> str:
    shipped = resources.files("scalpel_executor.profiles").joinpath(f"{name}.json")
    if not shipped.is_file():
        raise FileNotFoundError(
            f"no profile file or shipped profile named {name!r}; shipped profiles: {', '.join(shipped_profiles())}"
        )
    return shipped.read_text()


def shipped_document(name: str) -> dict:
    """The JSON document of a shipped profile, by name (FileNotFoundError lists the names)."""
    return json.loads(_shipped_text(name))


def load_profile(name_or_path: str | Path) -> tuple[dict, list[SimTask]]:
    """Read a profile by shipped name or file path; returns (document, tasks).

    Raises ValueError naming the file and the bad entry for malformed content, and
    FileNotFoundError listing the shipped names when neither a name nor a file matches.
    """
    path = Path(name_or_path)
    if path.is_file():
        text, where = path.read_text(), str(path)
    else:
        text, where = _shipped_text(str(name_or_path)), f"shipped profile {name_or_path!r}"
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{where} is not valid JSON: {error}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"{where} must be a JSON object with \"format\": \"{FORMAT}\"")
    entries = document.get("tasks")
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"{where} must have a non-empty list \"tasks\"")
    tasks = []
    for position, entry in enumerate(entries):
        try:
            tasks.append(
                SimTask(
                    name=str(entry["name"]),
                    solo_time=float(entry["runtime"]),
                    footprint=float(parse_size(entry.get("footprint", 0), what="footprint")),
                    sensitivity=None if entry.get("sensitivity") is None else float(entry["sensitivity"]),
                )
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"{where}: task #{position} ({entry!r}) is malformed: {error}") from None
    return document, tasks
