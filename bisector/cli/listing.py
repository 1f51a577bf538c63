"""``bisect list``'s output: whole values in plain columns for a pipe or ``--wide``, else a
table that keeps one line per bisection on any terminal width.

Apart from the command so that ``bisect --help`` and completion load neither rich nor git;
rich comes only for a terminal's table."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from bisector.base.escape import line as printable
from bisector.base.escape import safe_line
from bisector.cli.console import out

LIST_COLUMNS = ("id", "repo", "range", "oracle", "state", "culprit", "when")


def culprit(row: dict[str, Any], width: int) -> str:
    """The culprit column: the first-parent culprit, then (``merge > commit``) the commit
    inside it that the search into a merge named."""
    if not row["culprit"]:
        return ""
    inside = row.get("inside")
    return f"{row['culprit'][:width]}" + (f" > {inside[:width]}" if inside else "")
LONG_COLUMNS = ("repo", "range", "oracle")  # what a terminal's table cuts to fit
ORACLE_KEPT = 16  # an oracle name up to this long is never cut in `list`'s table


def without_failed_starts(rows: list[dict[str, Any]], show_all: bool
                          ) -> tuple[list[dict[str, Any]], int]:
    """The rows a person sees, and how many are hidden: a start that stopped at its endpoints
    (``failed``) says nothing worth a line once a newer bisection exists, and a few wrong
    refs filled the table with them. The newest row always stays."""
    if show_all or not rows:
        return rows, 0
    newest = max(int(r["id"]) for r in rows)
    kept = [r for r in rows if r.get("state") != "failed" or int(r["id"]) == newest]
    return kept, len(rows) - len(kept)


def print_rows(rows: list[dict[str, Any]], wide: bool) -> None:
    """The rows of ``app/views.listing`` on standard output."""
    if wide or not (sys.stdout.isatty() or os.environ.get("TTY_COMPATIBLE") == "1"):
        # A pipe or a file wants whole values (a 12-character sha cannot be pasted into
        # `git show` in every repository) in lines no table border or wrap cuts apart.
        cells = [list(LIST_COLUMNS)] + [
            [printable(str(culprit(r, 40) if k == "culprit" else r[k] or "-"))
             for k in ("id", "repo", "range", "oracle", "state", "culprit", "created")]
            for r in rows]
        widths = [max(len(line[i]) for line in cells) for i in range(len(LIST_COLUMNS) - 1)]
        for line in cells:
            click.echo("  ".join([*(v.ljust(w) for v, w in zip(line, widths, strict=False)),
                                  line[-1]]))
        return
    # lazy: rich, for a terminal's table only (a pipe's lines need none of it)
    from rich.table import Table
    from rich.text import Text

    # One line per bisection on any width: the short columns keep their width, and a long
    # repo, range or command oracle is cut to what is left and ends in an ellipsis rather
    # than wrapping. The widths are worked out here (rich's own shrinking depends on the
    # lengths of this machine's folders): a short oracle name stays whole, the paths give way.
    values = [[str(r["id"]), safe_line(r["repo"]), safe_line(r["range"]),
               safe_line(r["oracle"]), r["state"], culprit(r, 12),
               r["created"][:16].replace("T", " ")] for r in rows]
    need = [max(len(h), *(len(v[i]) for v in values)) for i, h in enumerate(LIST_COLUMNS)]
    long_at = [LIST_COLUMNS.index(h) for h in LONG_COLUMNS]
    room = max(18, out.width - 3 * len(LIST_COLUMNS) - 1
               - sum(w for i, w in enumerate(need) if i not in long_at))
    repo_i, range_i, oracle_i = long_at
    cols = dict(enumerate(need))
    cols[oracle_i] = min(need[oracle_i], max(ORACLE_KEPT, room // 3))
    rest = room - cols[oracle_i]
    cols[repo_i] = min(need[repo_i], max(6, rest // 2))
    cols[range_i] = min(need[range_i], max(6, rest - cols[repo_i]))

    def cut(value: str, width: int) -> str:  # refs and paths come from users: no markup
        return value if len(value) <= width else value[:width - 1] + "…"

    t = Table(*LIST_COLUMNS)
    for i, column in enumerate(t.columns):
        column.no_wrap, column.width = True, cols[i]
    for v in values:
        t.add_row(*(Text(cut(x, cols[i])) for i, x in enumerate(v)))
    out.print(t)
