"""Batch profiles on disk: JSON files of tasks with solo run times and footprints.

Format ``scalpel-profile/1``::

    {"format": "scalpel-profile/1", "name": "...", "description": "...",
     "machine": {"spec": "2x4:12MiB"},             # where the figures were measured
     "tasks": [{"name": "adi", "runtime": 41.47, "footprint": 1693562}, ...]}

``runtime`` is seconds when running alone; ``footprint`` is bytes (a number, or a size string such
as "24MiB"); ``sensitivity`` (optional) is the task's σ in the contention model of
:mod:`scalpel_executor.core.simulate`; ``cores``, ``memory`` (MiB, or a size) and ``gpus``
(optional, as the resource hints read them) are what the task holds while it runs. Profiles shipped with the package live in the top-level
``profiles/`` folder and are found by name. The profile store exports to and imports from the same
format (:func:`store_document`, :func:`document_rows`); its rows carry ``refines`` and ``split``
for keys split by small integers (``docs/profiles.md``).
"""

from __future__ import annotations

import gzip
import json
import math
import numbers
import time
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scalpel_executor.core.units import parse_mebibytes, parse_size, show

if TYPE_CHECKING:
    from scalpel_executor.core.simulate import SimTask

FORMAT = "scalpel-profile/1"


_JSON_KINDS = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "true or false",
               type(None): "null"}


def read_json_object(path: str | Path, what: str) -> dict:
    """The JSON object in the file ``path`` (gzip-compressed when the name ends in ``.gz``).

    Raises ValueError, one line naming the file and what is wrong with it, for a missing file, a
    directory, an unreadable or empty file, bytes that are not UTF-8 JSON, and JSON that is not an
    object (an array, a number, ...). ``what`` names the document, e.g. ``"bench record"``.
    """
    path = str(path)
    if Path(path).is_dir():
        raise ValueError(f"{path} is a directory; give the {what} file itself")
    try:
        with (gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8")) as handle:
            text = handle.read()
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file (expected a JSON {what})") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not a JSON {what}: byte {error.start} is not UTF-8 text") from None
    except (OSError, EOFError) as error:  # unreadable, or a .gz that is not gzip
        raise ValueError(f"cannot read {path} as a JSON {what}: {getattr(error, 'strerror', None) or error}") from None
    if not text.strip():
        raise ValueError(f"{path} is empty; expected a JSON {what}")
    try:
        document = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as error:
        raise ValueError(f"{path} is not a JSON {what}: {error}") from None
    if not isinstance(document, dict):
        raise ValueError(f"{path} is not a {what}: expected a JSON object {{...}}, got "
                         f"{_JSON_KINDS.get(type(document), type(document).__name__)}")
    return document


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


def _whole(value: Any, field: str, lowest: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
        raise ValueError(f"{field} must be a whole number >= {lowest}, got {value!r}")
    return value


def load_profile(name_or_path: str | Path) -> tuple[dict, list[SimTask]]:
    """Read a profile by shipped name or file path; returns (document, tasks).

    Raises ValueError naming the file and the bad entry for malformed content, and
    FileNotFoundError listing the shipped names when neither a name nor a file matches.
    """
    # Here, not at the top: only a simulation reads a profile's tasks, and the profile store, which
    # imports this module, must not load the simulator, the scheduler and the planner with it.
    from scalpel_executor.core.simulate import SimTask

    path = Path(name_or_path)
    if path.exists():  # a file (or a directory: read_json_object says so); else a shipped name
        document, where = read_json_object(path, "profile"), str(path)
    else:
        document, where = json.loads(_shipped_text(str(name_or_path))), f"shipped profile {name_or_path!r}"
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"{where} must be a JSON object with \"format\": \"{FORMAT}\"")
    entries = document.get("tasks")
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"{where} must have a non-empty list \"tasks\"")
    machine = document.get("machine")
    if machine is not None and not (isinstance(machine, dict) and isinstance(machine.get("spec", ""), str)):
        raise ValueError(f"{where}: \"machine\" must be an object such as {{\"spec\": \"2x4:12MiB\"}}, got {machine!r}")
    tasks = []
    for position, entry in enumerate(entries):
        try:
            if not isinstance(entry, dict):
                raise TypeError("a task must be a JSON object such as {\"name\": \"adi\", \"runtime\": 41.5}")
            for field in ("runtime", "sensitivity"):
                value = entry.get(field)
                if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                          or not math.isfinite(value) or value < 0):
                    raise ValueError(f"{field} must be a finite number >= 0, got {value!r}")
            tasks.append(
                SimTask(
                    name=str(entry["name"]),
                    solo_time=float(entry["runtime"]),
                    footprint=float(parse_size(entry.get("footprint", 0), what="footprint")),
                    sensitivity=None if entry.get("sensitivity") is None else float(entry["sensitivity"]),
                    cores=_whole(entry.get("cores", 1), "cores", 1),
                    memory=parse_mebibytes(entry.get("memory", 0), what="memory"),
                    gpus=_whole(entry.get("gpus", 0), "gpus", 0),
                )
            )
        except KeyError as error:
            raise ValueError(f"{where}: task #{position} ({show(entry, 120)}) is malformed: it needs a field {error}") from None
        except (TypeError, ValueError) as error:
            raise ValueError(f"{where}: task #{position} ({show(entry, 120)}) is malformed: {error}") from None
    return document, tasks


# -- documents to and from the profile store (learning.store keeps the rows) ---------------------


def finite(value: float | None, minimum: float = 0.0) -> float | None:
    """``value`` as a float when it is a finite number >= ``minimum``, else None (bool: None)."""
    if value is None or isinstance(value, bool):
        return None
    value = float(value)
    return value if math.isfinite(value) and value >= minimum else None


def _number_field(entry: dict, name: str, *, required: bool = False) -> float | None:
    """A numeric field of an imported task: a number (not bool) or absent; negative or non-finite
    numbers count as absent. TypeError naming the field for anything else."""
    value = entry[name] if required else entry.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {value!r} of type {type(value).__name__}")
    try:
        return finite(value)
    except OverflowError:
        return None


def _count_field(entry: dict, name: str, default: int) -> int:
    value = entry.get(name, default)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"{name} must be a whole number >= 0, got {value!r}")
    return int(value)


def _store_row(entry: object, prefix: str, origin: str, now: float) -> tuple:
    if not isinstance(entry, dict):
        raise TypeError("a task must be a JSON object such as {\"name\": \"adi\", \"runtime\": 41.5}")
    key = prefix + str(entry["name"])
    runtime = _number_field(entry, "runtime", required=True)
    footprint = entry.get("footprint")
    if isinstance(footprint, str):
        footprint = float(parse_size(footprint, what="footprint"))
    footprint = _number_field({"footprint": footprint}, "footprint")
    runs = _count_field(entry, "runs", 1)
    fp_runs = _count_field(entry, "footprint_runs", runs if footprint is not None else 0)
    if runtime is None:
        raise ValueError(f"runtime must be a finite number of seconds >= 0, got {entry['runtime']!r}")
    refines, split = entry.get("refines"), entry.get("split", False)
    if refines is not None and not isinstance(refines, str):
        raise TypeError(f"refines must name the profile key this key was split from, got {refines!r}")
    if not isinstance(split, bool):
        raise TypeError(f"split must be true or false, got {split!r}")

    def m2(std_key: str, count: int) -> float:
        std = _number_field(entry, std_key)
        return std * std * (count - 1) if std is not None and count > 1 else 0.0

    return (
        key, str(entry.get("app", key)), runs,
        _number_field(entry, "runtime_mean") or runtime, m2("runtime_std", runs), runtime,
        fp_runs, None if footprint is None else (_number_field(entry, "footprint_mean") or footprint),
        None if footprint is None else m2("footprint_std", fp_runs), footprint,
        _number_field(entry, "peak_rss"), _number_field(entry, "llc_miss_rate"), origin, now,
        None if refines is None else prefix + refines, int(split),
    )


def document_rows(document: dict, prefix: str = "", origin: str | None = None) -> list[tuple]:
    """A ``scalpel-profile/1`` document as profile-store rows (every column, in the store's order).

    Raises ValueError naming the bad entry.
    """
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"a profile document must be a JSON object with \"format\": \"{FORMAT}\"")
    entries = document.get("tasks")
    if not isinstance(entries, list):
        raise ValueError("a profile document needs a list \"tasks\"")
    origin = origin or f"imported:{document.get('name', 'unnamed')}"
    now = time.time()
    rows = []
    for position, entry in enumerate(entries):
        try:
            rows.append(_store_row(entry, prefix, origin, now))
        except KeyError as error:
            raise ValueError(f"task #{position} ({show(entry, 120)}) is malformed: it needs a field {error}") from None
        except (TypeError, ValueError) as error:
            raise ValueError(f"task #{position} ({show(entry, 120)}) is malformed: {error}") from None
    return rows


def store_document(profiles: Iterable, name: str, description: str) -> dict:
    """Profiles (``learning.store.Profile``) as a ``scalpel-profile/1`` document, JSON-ready."""
    tasks = []
    for profile in profiles:
        entry = {"name": profile.key, "app": profile.app, "runs": profile.runs}
        for field in ("runtime", "runtime_mean", "runtime_std", "footprint", "footprint_mean", "footprint_std",
                      "peak_rss", "llc_miss_rate"):
            value = getattr(profile, field)
            if value is not None:
                entry[field] = value
        entry["footprint_runs"] = profile.footprint_runs
        if profile.refines is not None:
            entry["refines"] = profile.refines
        if profile.split:
            entry["split"] = True
        if "runtime" not in entry:
            entry["runtime"] = 0.0
        tasks.append(entry)
    return {"format": FORMAT, "name": name, "description": description, "exported": time.time(), "tasks": tasks}
