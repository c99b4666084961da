"""The benchmark's summary as a table: one row per (mix, peer), plain for a terminal or Markdown."""

from __future__ import annotations

from collections.abc import Sequence

from scalpel_executor.experiments.plans import REFERENCE
from scalpel_executor.experiments.tables import format_table


def summary_table(rows: Sequence[dict], *, markdown: bool = False, reference: str = REFERENCE) -> list[str]:
    """The lines of the summary table of ``rows`` (a bench record's ``summary``).

    Raises ValueError naming the row (``summary row #3 ...``) that is not an object, lacks a field
    or holds one of the wrong type, so an edited or truncated record is named, not a traceback.
    """
    cells = []
    for position, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ValueError(f"summary row #{position} must be a JSON object, got {repr(row)[:80]}")
        try:
            cells.append(_cells(row, markdown))
        except KeyError as error:
            raise ValueError(f"summary row #{position} lacks the field {error}") from None
        except (TypeError, ValueError) as error:
            raise ValueError(f"summary row #{position} has a field of the wrong type ({error})") from None
    headers = ["mix", "peer", "runs", "median s", f"vs {reference}", "95% CI", "/ lower bound", "gap closed", "note"]
    return format_table(headers, cells, right=range(2, 8), markdown=markdown)


def _cells(row: dict, markdown: bool) -> list[str]:
    peer = f"`{row['peer']}`" if markdown else row["peer"]
    if "median" not in row:
        return [row["mix"], peer, "0", "-", "-", "-", "-", "-", f"failed: {'; '.join(row['errors'])}"]
    note = []
    if "tasks_per_second" in row:
        note.append(f"{row['tasks_per_second']:.0f} tasks/s")
    if "median_latency_ms" in row:
        note.append(f"{row['median_latency_ms']:.2f} ms median, {row['p99_latency_ms']:.2f} ms p99")
    if markdown and "mean_slowdown_vs_solo" in row:  # a report has the width a terminal lacks
        note.append(f"mean slowdown vs solo {row['mean_slowdown_vs_solo']:.3f}")
    if row.get("peer") == "oracle" and row.get("oracle_method"):
        note.append(f"order by {row['oracle_method']} in the model")
    if row["failed"]:
        note.append(f"{row['failed']} failed")
    return [
        row["mix"], peer, str(row["runs"]), f"{row['median']:.3f}",
        f"{row['vs_reference']:.3f}x" if "vs_reference" in row else "-",
        f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}]" if "ci_low" in row else "-",
        f"{row['over_lower_bound']:.3f}" if "over_lower_bound" in row else "-",
        f"{100 * row['gap_captured']:.0f}%" if row.get("gap_captured") is not None else "-",
        ", ".join(note),
    ]


def paired_table(rows: Sequence[dict], reference: str, *, markdown: bool = False) -> list[str]:
    """The lines of ``bench --report --against``: each peer's paired ratio to ``reference``."""
    cells = []
    for row in rows:
        peer = f"`{row['peer']}`" if markdown else row["peer"]
        cells.append([row["mix"], peer, str(row["runs"]), f"{row['ratio']:.3f}x",
                      f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}]", " ".join(f"{r:.2f}" for r in row["per_repeat"])])
    ref = f"`{reference}`" if markdown else reference
    headers = ["mix", "peer", "runs", f"{ref} / peer", "95% CI", f"per repetition ({ref} / peer)"]
    return format_table(headers, cells, right=range(2, 5), markdown=markdown)
