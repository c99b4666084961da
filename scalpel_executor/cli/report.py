"""``scalpel report``: what the executor did in a run: a sentence, its tasks, why each started where it
did

Reads the run report ScalpelExecutor writes at dfk.cleanup()
(runinfo/<run>/scalpel-<label>-report.json) and prints the run in one sentence, a table of its tasks
(where and when each ran, its footprint, the seconds it co-ran over its domain's LLC, why it started
where it did) and what each admission reason in it means.

::

    scalpel report runinfo/007/scalpel-scalpel-report.json   one report file
    scalpel report runinfo/007                               every executor's report of that run
    scalpel report runinfo                                   the latest numbered run in it
    scalpel report RUN --gantt run.png                       and a Gantt chart of the run
    scalpel report RUN --json                                the report itself

Each report prints as the sentence the executor logs at cleanup
(:func:`~scalpel_executor.runtime.driver.report.run_summary`), a table of its tasks, and a legend of the
admission reasons that occur in it (:data:`~scalpel_executor.core.admission.REASONS_EXPLAINED`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import textwrap
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from scalpel_executor.cli.common import add_command_parser, cut_keys, status_printer
from scalpel_executor.core import widths
from scalpel_executor.core.admission import REASONS_EXPLAINED
from scalpel_executor.core.cpulist import format_cpu_list
from scalpel_executor.core.units import format_size
from scalpel_executor.experiments.tables import format_table
from scalpel_executor.learning.exchange import read_json_object
from scalpel_executor.runtime.driver.report import corun_footprint, over_cache_coruns, row_span, run_summary

REPORT_FILES = "scalpel-*-report.json"
WRITTEN_WHEN = "the report is written at dfk.cleanup(), by an executor that ran tasks"
#: A row without an admission reason: the run report counts it as ``none``.
NEVER_STARTED = "none"
NEVER_STARTED_EXPLAINED = "it never started: it failed at shutdown, or with its node manager, before a core took it"
HEADERS = ["task", "profile key", "domain/cpu", "width", "waited s", "start s", "end s", "wall s", "footprint",
           "admitted as", "over LLC s", "ended", "admission"]
#: Right-aligned columns: the numbers.
NUMERIC = frozenset({"task", "waited s", "start s", "end s", "wall s", "footprint", "admitted as", "over LLC s"})
#: Columns left out, in this order, until the table fits the terminal; ``--wide`` keeps every one.
#: ``width`` (shown only where a task was malleable) goes late: its rows' reasons are what such a run is read for.
LEFT_OUT_FIRST = ("admitted as", "end s", "waited s", "wall s", "over LLC s", "domain/cpu", "ended", "width")
#: The fewest characters of a profile key a fitted table shows (``cut_keys`` keeps the app and program).
KEY_ROOM = 24
#: Characters past which a fitted table wraps an admission reason (the longest has 46) onto more lines.
REASON_ROOM = 20
#: What the table's columns mean, printed under it.
COLUMNS_EXPLAINED = ("task: its id in Parsl's log and in the errors the executor gives (Parsl's task id; the "
                     "executor's own, marked *, where the executor did not see Parsl's graph). "
                     "Times are seconds since the run's first task started; a task's end is its start plus the wall "
                     "time its worker measured; waited s: from its submit (its inputs ready) to its start, for the "
                     "tasks submitted before the workers were up their start included. "
                     "footprint: what the probe measured (~: an estimate, the task was not "
                     "measured); admitted as: the footprint its start was decided on, the estimate at that moment; "
                     "over LLC s: how long it ran beside tasks whose footprints together overflowed its LLC; "
                     "width (shown when a task was malleable): the cores a malleable task (max_cores) was given and "
                     "why (docs/design.md, \"Widths of malleable tasks\"), - for a task of fixed cores.")


def add_command(commands: argparse._SubParsersAction) -> None:
    parser = add_command_parser(
        commands, "report", __doc__, run,
        epilog=COLUMNS_EXPLAINED)
    parser.add_argument("path", metavar="RUN",
                        help="a report file, a Parsl run directory such as runinfo/007 (one section per executor), "
                        "or runinfo (its latest numbered run)")
    parser.add_argument("--gantt", metavar="PNG", help="also draw a Gantt chart of the run to this file (.png, .svg, .pdf, ...)")
    parser.add_argument("--wide", action="store_true",
                        help="every column and whole profile keys (else the table fits the terminal: keys cut "
                        "where they differ least, the least needed columns left out, each said under it)")
    parser.add_argument("--json", action="store_true",
                        help="print the report as JSON (a list of them when RUN holds several)")


def gantt_target(path: str) -> None:
    """Refuse a ``--gantt`` file that cannot be written, or in a format matplotlib does not draw,
    before the table is printed: said after it, the error read as the report's."""
    from matplotlib.figure import Figure  # only for --gantt

    formats = Figure().canvas.get_supported_filetypes()
    suffix = os.path.splitext(path)[1].lstrip(".").lower()
    if suffix not in formats:
        raise ValueError(f"--gantt {path}: {'no file suffix' if not suffix else f'.{suffix} is not a format matplotlib draws'}; "
                         f"use one of {', '.join('.' + name for name in sorted(formats))} (e.g. run.png)")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise ValueError(f"--gantt {path}: the folder {folder} {'does not exist' if not os.path.isdir(folder) else 'is not writable'}")


def run(args: argparse.Namespace) -> int:
    if args.gantt:
        gantt_target(args.gantt)
    files = report_files(args.path)
    reports = [read_report(path) for path in files]
    if args.json:
        print(json.dumps(reports[0] if len(reports) == 1 else reports, indent=1))
    else:
        width = None if args.wide else shutil.get_terminal_size((120, 24)).columns
        sections = []
        for path, report in zip(files, reports):
            try:
                sections.append("\n".join([str(path), *describe(report, width=width)]))
            except (KeyError, TypeError, AttributeError) as error:  # fields read_report does not check
                raise ValueError(f"{path} is not a complete scalpel run report ({type(error).__name__}: {error}); "
                                 f"expected the {REPORT_FILES} ScalpelExecutor writes, or use --json") from None
        print("\n\n".join(sections))
    if args.gantt:
        status_printer(args.json)(f"Gantt chart: {draw_run(reports, args.gantt)}")
    return 0


def report_files(run: str) -> list[Path]:
    """The report files ``run`` names: itself, the reports in a run directory, or those of the
    latest numbered run in a ``runinfo`` directory. ValueError naming what is missing where."""
    path = Path(run)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ValueError(f"{run}: no such file or directory; expected a run report ({REPORT_FILES}), "
                         "a Parsl run directory such as runinfo/007, or runinfo")
    found = sorted(path.glob(REPORT_FILES))
    if found:
        return found
    if _without_scalpel(path / "parsl.log"):
        raise ValueError(f"no {REPORT_FILES} in {run}: its parsl.log adds no ScalpelExecutor, so the run used "
                         f"other executors (scalpel report reads the runs of a ScalpelExecutor)")
    runs = sorted((child for child in path.iterdir() if child.is_dir() and child.name.isdigit()),
                  key=lambda child: int(child.name))
    if not runs:
        raise ValueError(f"no {REPORT_FILES} in {run}: {WRITTEN_WHEN}")
    found = sorted(runs[-1].glob(REPORT_FILES))
    if not found:
        earlier = next((r for r in reversed(runs[:-1]) if any(r.glob(REPORT_FILES))), None)
        hint = f"; the latest run with one is {earlier}" if earlier is not None else ""
        why = ("its parsl.log adds no ScalpelExecutor, so the run used other executors"
               if _without_scalpel(runs[-1] / "parsl.log") else WRITTEN_WHEN)
        raise ValueError(f"no {REPORT_FILES} in {runs[-1]}, the latest run in {run}: {why}{hint}")
    return found


def _without_scalpel(log: Path) -> bool:
    """Whether ``log``, a run's parsl.log, exists and never added a ScalpelExecutor (Parsl logs each
    executor it adds with its type)."""
    try:
        with log.open(errors="replace") as lines:
            return not any("add_executors" in line and "ScalpelExecutor" in line for line in lines)
    except OSError:
        return False


def read_report(path: Path) -> dict:
    """The run report in ``path``; ValueError when the file is no JSON object or no run report."""
    report = read_json_object(path, "run report")
    missing = [field for field in ("executor", "topology", "tasks", "sources") if field not in report]
    if missing:
        raise ValueError(f"{path} is not a scalpel run report: it has no {', '.join(map(repr, missing))}; "
                         f"expected the {REPORT_FILES} ScalpelExecutor writes in its run directory")
    return report


def describe(report: Mapping, *, width: int | None = None) -> list[str]:
    """The lines ``scalpel report`` prints for one report: the sentence, the task table, the legend.

    ``width``: the characters a line may take (the table is fitted to it by :func:`fit_table`);
    None: every column and whole keys."""
    over = Counter()
    for stretch in over_cache_coruns(report):
        for task_id in stretch.tasks:
            over[task_id] += stretch.end - stretch.start
    rows = sorted(report["tasks"], key=table_order)
    cells = [task_cells(row, over.get(row["task_id"], 0.0)) for row in rows]
    headers = HEADERS
    if not any(row.get("width") for row in rows):  # no malleable task: no width column
        column = HEADERS.index("width")
        headers, cells = [h for h in HEADERS if h != "width"], [row[:column] + row[column + 1:] for row in cells]
    if width is None:
        left_out, wrap = [], None
    else:
        headers, cells, left_out, reason_room = fit_table(headers, cells, width)
        wrap = None if reason_room is None else {headers.index("admission"): reason_room}
    note = textwrap.wrap(f"Left out to fit {width} columns: {', '.join(left_out)} (--wide shows every column and "
                         f"whole keys).", width) if left_out else []
    explained = [COLUMNS_EXPLAINED] if width is None else textwrap.wrap(COLUMNS_EXPLAINED, width)
    reasons = legend([row.get("admission") for row in rows], width)
    sized = [row["width_reason"] for row in rows if row.get("width") and row.get("width_reason")]
    why_wide = ["", *width_legend(sized, width)] if sized else []
    return [run_summary(report, None), "",
            *format_table(headers, cells, right=[i for i, h in enumerate(headers) if h in NUMERIC], wrap=wrap),
            *note, "", *explained, "", *reasons, *why_wide]


def fit_table(headers: Sequence[str], cells: Sequence[Sequence[str]], width: int,
              ) -> tuple[list[str], list[list[str]], list[str], int | None]:
    """``headers`` and ``cells`` (whole profile keys) narrowed to ``width`` characters a line.

    The whole table when it fits; else admission reasons wrap at :data:`REASON_ROOM` and the
    columns of :data:`LEFT_OUT_FIRST` are left out in turn until the key column has
    :data:`KEY_ROOM` (or its longest key), keys cut to the room left
    (:func:`~scalpel_executor.cli.common.cut_keys`). Returns the headers, the cells, the headers
    left out and where reasons wrap (None: they do not). Lines are wider than ``width`` only when
    even the narrowest table is.

    >>> fit_table(["task", "profile key", "end s"], [["1", "pkg.mod.app(~64)", "2.00"]], 34)
    (['task', 'profile key', 'end s'], [['1', 'pkg.mod.app(~64)', '2.00']], [], None)
    >>> fit_table(["task", "profile key", "end s"], [["1", "pkg.mod.app(~64)", "2.00"]], 20)
    (['task', 'profile key'], [['1', 'pkg.mod.app(~64)']], ['end s'], 20)
    """
    key = headers.index("profile key")

    def column_width(column: int, reason_room: int | None) -> int:  # as tabulate lays it out: headers padded by 2
        widest = max((len(row[column]) for row in cells), default=0)
        if headers[column] == "admission" and reason_room is not None:
            widest = min(widest, reason_room)
        return max(len(headers[column]) + 2, widest)

    def room(shown: list[int], reason_room: int | None) -> int:  # what the key column may take
        return width - sum(column_width(column, reason_room) + 2 for column in shown if column != key)

    shown = list(range(len(headers)))
    if room(shown, None) >= column_width(key, None):
        return list(headers), [list(row) for row in cells], [], None
    for dropped in (None, *(header for header in LEFT_OUT_FIRST if header in headers)):
        if dropped is not None:
            shown.remove(headers.index(dropped))
        if room(shown, REASON_ROOM) >= min(KEY_ROOM, column_width(key, REASON_ROOM)):
            break
    keys = cut_keys([row[key] for row in cells], max(room(shown, REASON_ROOM), KEY_ROOM))
    return ([headers[column] for column in shown],
            [[cut if column == key else row[column] for column in shown] for row, cut in zip(cells, keys)],
            [header for column, header in enumerate(headers) if column not in shown], REASON_ROOM)


def table_order(row: Mapping) -> tuple[bool, int]:
    """Where a task's row goes in the table: by Parsl's task id (the report holds them as they
    ended), those the executor numbered itself (:func:`task_label`'s ``*``) after, by theirs.

    >>> sorted([{"task_id": 0, "parsl_task_id": 14}, {"task_id": 1, "parsl_task_id": None},
    ...         {"task_id": 2, "parsl_task_id": 12}], key=table_order)[0]["parsl_task_id"]
    12
    """
    parsl_id = row.get("parsl_task_id")
    return parsl_id is None, row["task_id"] if parsl_id is None else parsl_id


def task_label(row: Mapping) -> str:
    """The task as Parsl's log and the executor's errors name it: Parsl's task id, else (the
    executor did not see Parsl's graph) the executor's own, marked ``*``.

    >>> task_label({"task_id": 0, "parsl_task_id": 3}), task_label({"task_id": 0, "parsl_task_id": None})
    ('3', '0*')
    """
    parsl_id = row.get("parsl_task_id")
    return f"{row['task_id']}*" if parsl_id is None else str(parsl_id)


def task_cells(row: Mapping, over_llc: float) -> list[str]:
    """One task's row of the table (HEADERS), its profile key whole."""
    span = row_span(row)
    where = "-" if span is None else f"{row['domain']}/{format_cpu_list(row.get('cpus') or [row['cpu']])}"
    footprint = format_size(corun_footprint(row))
    wall = row.get("measured_runtime")
    admitted = row.get("scheduled_footprint")
    if admitted is None:
        admitted = row.get("estimated_footprint")
    waited = row.get("waited")
    width = f"{row['width']}: {row.get('width_reason') or '?'}" if row.get("width") else "-"
    return [task_label(row), row["profile_key"] or "-", where, width,
            "-" if waited is None else f"{waited:.2f}",
            *(["-", "-"] if span is None else [f"{moment:.2f}" for moment in span]),
            "-" if wall is None else f"{wall:.2f}",
            footprint if row.get("measured_footprint") else f"~{footprint}",
            "-" if admitted is None or span is None else format_size(admitted),
            f"{over_llc:.2f}" if over_llc else "-", "ok" if row["ok"] else "failed",
            row.get("admission") or NEVER_STARTED]


def legend(reasons: Sequence[str | None], width: int | None = None) -> list[str]:
    """What each admission reason among ``reasons`` means, one entry each, in the order of
    :data:`~scalpel_executor.core.admission.REASONS` (a reason it does not know last, unexplained);
    ``width``: an entry wraps onto more lines past it, under its explanation."""
    return _legend("admission: why each task started where and when it did",
                   [reason or NEVER_STARTED for reason in reasons],
                   {**REASONS_EXPLAINED, NEVER_STARTED: NEVER_STARTED_EXPLAINED}, width)


def width_legend(reasons: Sequence[str], width: int | None = None) -> list[str]:
    """What each width reason among ``reasons`` means (:data:`~scalpel_executor.core.widths.REASONS_EXPLAINED`),
    as :func:`legend` says the admission reasons."""
    return _legend("width: the cores each malleable task started on, and why", reasons, widths.REASONS_EXPLAINED,
                   width)


def _legend(title: str, reasons: Sequence[str], explained: Mapping[str, str], width: int | None) -> list[str]:
    """``title``, then an entry per reason seen, in ``explained``'s order (one it does not hold last,
    unexplained); ``width``: an entry wraps onto more lines past it, under its explanation."""
    seen = set(reasons)
    known = [reason for reason in explained if reason in seen]
    unknown = sorted(seen - set(known))
    column = max(map(len, seen), default=0)
    entries = [f"  {reason:<{column}}  {explained[reason]}" for reason in known] + \
        [f"  {reason:<{column}}  (not a reason this version of scalpel-executor knows)" for reason in unknown]
    if width is not None:
        indent = " " * (column + 4)
        entries = [line for entry in entries for line in textwrap.wrap(entry, width, subsequent_indent=indent)]
    return [title, *entries]


def app_name(key: str) -> str:
    """The app a profile key names, without its module or argument shape, with its program:
    ``generic_shell_app[wfbench:blastall]`` for ``wf.generic_shell_app[wfbench:blastall](str)``.

    >>> app_name("examples.kernels.matmul(~2048)"), app_name("")
    ('matmul', '')
    """
    name = key.partition("(")[0]
    app, bracket, program = name.partition("[")
    return app.rsplit(".", 1)[-1] + bracket + program


def draw_run(reports: Sequence[Mapping], path: str) -> str:
    """A Gantt chart of the reports' runs, one panel each, written to ``path``."""
    from scalpel_executor.experiments.charts import draw_gantt  # matplotlib: only for --gantt

    runs = {}
    for report in reports:
        rows = [{"cpu": row["cpu"], "cpus": row.get("cpus") or [row["cpu"]], "start": span[0], "end": span[1],
                 "footprint": corun_footprint(row),
                 "label": f"{task_label(row)} {app_name(row.get('profile_key') or '')}".strip()}
                for row in report["tasks"] if (span := row_span(row)) is not None]
        if rows:
            runs[f"{report['executor']}: {len(rows)} tasks, {max(r['end'] for r in rows):.2f} s"] = rows
    if not runs:
        raise ValueError(f"no task of the run ever started: no Gantt chart to draw in {path}")
    domains = reports[0]["topology"]["domains"]
    llc = max((domain.get("llc_size") or 0 for report in reports for domain in report["topology"]["domains"]),
              default=0)
    return str(draw_gantt(runs, llc or None, [domain["cpus"] for domain in domains], path,
                          clock="seconds since the run's first task started"))
