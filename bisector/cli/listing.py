"""``bisect list``'s and ``bisect commit``'s output: whole values in plain columns for a pipe
or ``--wide``, else a table that keeps one line per bisection on any terminal width; json,
jsonl and csv for programs; a commit's record as plain lines.

Apart from the command so that ``bisect --help`` and completion load neither rich nor git;
rich comes only for a terminal's table."""

from __future__ import annotations

import csv
import json
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
    """The rows of ``app/report/views.listing`` on standard output."""
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


CSV_COLUMNS = ("id", "repo", "range", "oracle", "state", "culprit", "culprit_pr", "inside",
               "created")


def print_data(rows: list[dict[str, Any]], fmt: str) -> None:
    """Rows for a program: one JSON array, a JSON object a line, or CSV with a header."""
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2))
    elif fmt == "jsonl":
        for r in rows:
            click.echo(json.dumps(r))
    else:
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(CSV_COLUMNS)
        w.writerows([("" if r.get(k) is None else r[k]) for k in CSV_COLUMNS] for r in rows)


def commit_text(d: dict[str, Any]) -> str:
    """``bisect commit``'s record of one commit (app/commit_view.py's data) as plain lines."""
    lines = [f"commit {d['sha']}" + (f"  {d['subject']}" if d["subject"] else "")]
    if d["author"]:
        pr = f", pull request #{d['pr']}" if d["pr"] else ""
        lines.append(f"author {d['author']} <{d['author_email']}>, "
                     f"{(d['authored_at'] or '')[:10]}{pr}")
    named = ", ".join(f"#{n['bisection']} ({n['state']}, {n['oracle']})"
                      for n in d["culprit_of"])
    lines.append(f"culprit of: {named or 'no bisection'}")
    if d["files"]:
        more = f" and {len(d['files']) - 5} more" if len(d["files"]) > 5 else ""
        lines.append(f"changed: {', '.join(d['files'][:5])}{more}")
    lines.append(f"wheel: {_wheel(d)}")
    lines.append(f"verdicts ({len(d['verdicts'])}):" if d["verdicts"] else
                 "verdicts: none stored (no oracle ran at this commit)")
    cells = [("when", "oracle", "environment", "bisection", "verdict", "outcome", "reason")]
    cells += [(v["at"][:16].replace("T", " "), v["oracle"],
               f"{v['environment'][:8]} {v['executor']}".strip(),
               f"#{v['bisection']}" if v["bisection"] else "-", v["verdict"] or "-",
               v["outcome"], printable(v["reason"])[:60] or "-") for v in d["verdicts"]]
    if d["verdicts"]:
        widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]) - 1)]
        lines += ["  " + "  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)),
                                    row[-1]]).rstrip() for row in cells]
    for x in d["disagreements"]:
        ends = "; ".join(f"{o} in {', '.join(e[:8] for e in s['environments'])}"
                         for o, s in x["outcomes"].items())
        lines.append(f"disagreement: {x['oracle']} ended {ends}")
    return "\n".join(lines)


def _wheel(d: dict[str, Any]) -> str:
    said = []
    for b in d["builds"]:
        if b["status"] == "ok":
            where = ("here" if b["here"] else "") + (
                f"{' and ' if b['here'] else ''}in {', '.join(b['buckets'])}"
                if b["buckets"] else "")
            said.append(f"{b['kind']} {'cached ' + where if where else 'made, since removed'}")
        else:
            said.append(f"{b['kind']} build {b['status']} {b['at'][:10]}")
    return "; ".join(said) or "never built or fetched by the store's bisections"
