"""Montage itself: whether MontagePy and astropy import, calling a step, its status, its ASCII tables.

Every call into MontagePy happens in a worker, so :func:`_montage_function` imports it where it
is called; :func:`require_montage` checks the imports up front, in the submitting process.
"""

from __future__ import annotations

import importlib
import itertools
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


# scalpel-executor is not on the package index: its "montage" extra installs from a checkout.
INSTALL_HINT = 'python3 -m pip install -e ".[montage]" in a scalpel-executor checkout (or pip install MontagePy astropy)'


class MontageUnavailable(ImportError):
    """MontagePy or astropy cannot be imported; the message says what to install."""


class MontageStepFailed(RuntimeError):
    """A MontagePy call returned an error status; the message names the step, its input and why."""


def require_montage() -> None:
    """Import MontagePy and astropy, or raise :class:`MontageUnavailable` naming what is missing.

    Call it before loading Parsl, so a missing package is one clear line, not a failed task.
    """
    missing = []
    for module in ("MontagePy.main", "astropy.io.fits", "astropy.wcs"):
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module.split(".")[0])
    if missing:
        names = ", ".join(dict.fromkeys(missing))
        raise MontageUnavailable(
            f"the Montage pipeline needs MontagePy and astropy (missing: {names}): {INSTALL_HINT}"
        )


def _montage_function(name: str) -> Callable[..., dict[str, Any]]:
    """``MontagePy.main.<name>``, imported where it is called (in a worker)."""
    try:
        from MontagePy import main as montage
    except ImportError as error:
        raise MontageUnavailable(
            f"the Montage pipeline needs MontagePy and astropy (missing: MontagePy): {INSTALL_HINT}"
        ) from error
    return getattr(montage, name)


def _checked(step: str, subject: str, result: dict[str, Any]) -> dict[str, Any]:
    """Return a MontagePy result dict, or raise :class:`MontageStepFailed` if its status is not 0."""
    if str(result.get("status")) != "0":
        message = result.get("msg", "")
        if isinstance(message, bytes):
            message = message.decode(errors="replace")
        raise MontageStepFailed(f"{step} failed on {subject}: {message or result}")
    return result


# --------------------------------------------------------------------------------------------
# Montage's ASCII tables.
# --------------------------------------------------------------------------------------------


def read_montage_table(path: str | os.PathLike) -> list[dict[str, str]]:
    """The rows of a Montage (IPAC-style) ASCII table as dicts of column name to text.

    The first ``|``-delimited line names the columns, and its bars mark where each column's text
    lies (values may hold spaces, such as ``11h 59m 51.57s``; empty ones read as ``""``); the last
    column runs to the end of the line, since long file names overflow it. Type lines and ``\\``
    keyword lines are skipped.
    """
    names: list[str] | None = None
    bars: list[int] = []
    rows = []
    with open(path) as table:
        for line in table:
            line = line.rstrip("\n")
            if line.startswith("\\") or not line.strip():
                continue
            if line.startswith("|"):
                if names is None:
                    bars = [i for i, char in enumerate(line) if char == "|"]
                    names = [line[a + 1:b].strip() for a, b in itertools.pairwise(bars)]
                continue
            if names is None:
                raise ValueError(f"{path}: a data line comes before the column names: {line!r}")
            edges = bars[:-1] + [len(line)]
            rows.append({name: line[a:b].strip() for name, a, b in zip(names, edges, edges[1:])})
    return rows


_FIT_COLUMNS = (
    ("plus", "%9d"), ("minus", "%9d"), ("a", "%16.5e"), ("b", "%16.5e"), ("c", "%16.5e"),
    ("crpix1", "%14.2f"), ("crpix2", "%14.2f"), ("xmin", "%10d"), ("xmax", "%10d"), ("ymin", "%10d"),
    ("ymax", "%10d"), ("xcenter", "%13.2f"), ("ycenter", "%13.2f"), ("npixel", "%13.0f"),
    ("rms", "%16.5e"), ("boxx", "%16.1f"), ("boxy", "%16.1f"), ("boxwidth", "%16.1f"),
    ("boxheight", "%16.1f"), ("boxang", "%16.1f"),
)


def write_fit_table(fits: Sequence[dict[str, Any]], path: str | os.PathLike) -> None:
    """Write ``mDiffFit`` results as the fit table ``mBgModel`` reads (what mDiffFitExec writes).

    Each dict holds ``plus`` and ``minus`` (the two images' ``cntr`` in the projected image table)
    and ``mDiffFit``'s returned fields ``a`` ... ``boxang``.
    """
    # Montage reads a column between the header's bars: each value sits under its name.
    header = "|" + "|".join(name.rjust(len(fmt % 0)) for name, fmt in _FIT_COLUMNS) + "|\n"
    lines = [header]
    for fit in fits:
        missing = [name for name, _ in _FIT_COLUMNS if name not in fit]
        if missing:
            raise ValueError(f"fit for pair {fit.get('plus')}-{fit.get('minus')} lacks {missing}: is it an mDiffFit result?")
        values = [fmt % (int(fit[name]) if fmt.endswith("d") else float(fit[name])) for name, fmt in _FIT_COLUMNS]
        lines.append(" " + " ".join(values) + " \n")
    Path(path).write_text("".join(lines))
