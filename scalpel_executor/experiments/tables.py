"""The one table format of everything ``scalpel`` prints: aligned plain text, or Markdown.

Cells arrive as the strings the caller wants shown (units, ``x`` suffixes, ``-`` for nothing):
each table decides how its numbers read, and ``tabulate`` only aligns them.
"""

from __future__ import annotations

from collections.abc import Sequence

from tabulate import tabulate


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]], *, right: Sequence[int] = (),
                 markdown: bool = False, wrap: dict[int, int] | None = None) -> list[str]:
    """The lines of a table: ``headers`` over ``rows``, columns numbered in ``right`` aligned right;
    ``wrap``: column number -> the characters past which its cells wrap onto more lines.

    Plain: the header underlined column by column. Markdown: a pipe table whose separator row
    carries the alignment.

    >>> print("\\n".join(format_table(["policy", "s"], [["fifo", "1.50"], ["scalpel", "1.25"]], right=[1])))
    policy       s
    --------  ----
    fifo      1.50
    scalpel   1.25
    """
    align = ["right" if column in right else "left" for column in range(len(headers))]
    text = tabulate([[str(cell) for cell in row] for row in rows], headers=list(headers),
                    tablefmt="pipe" if markdown else "simple", colalign=align, disable_numparse=True,
                    maxcolwidths=[(wrap or {}).get(column) for column in range(len(headers))] if wrap else None)
    return text.splitlines()
