"""``bisect list`` and ``bisect commit``: the questions asked of past bisections, each answered
by the store (app/queries.py reads the filters, store/queries.py and store/commits.py ask).

A list with no filter is read the quick way (cli/quick.py: no ORM, a page of one table); any
filter takes the full path, whose one query the store answers from its indexes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from bisector.base import defaults
from bisector.base.errors import StoreError
from bisector.cli import listing
from bisector.cli.config_file import ConfiguredCommand
from bisector.cli.context import Ctx
from bisector.cli.options import Whole
from bisector.store.location import absent, default_db, sqlite_path

FORMATS = ("table", "json", "jsonl", "csv")


def _note(line: str) -> None:
    """A line on stderr that ``-q`` silences, printed without loading rich."""
    from bisector.cli.console import is_quiet  # lazy: as cli/__init__._note

    if not is_quiet():
        click.echo(line, err=True)


def _filter(name: str, metavar: str, text: str) -> Callable[[Callable[..., Any]],
                                                        Callable[..., Any]]:
    return click.option(f"--{name}", name, default=None, metavar=metavar, help=text)


@click.command(name="list", cls=ConfiguredCommand)
@_filter("state", "STATE", "Only this state (running, interrupted, done, failed, ...).")
@_filter("oracle", "NAME|SHA", "Only this oracle: its name, or a prefix of its sha256.")
@_filter("repo", "TEXT", "Only clones whose path holds TEXT (any case).")
@_filter("culprit", "SHA|#PR", "Only this culprit: a sha prefix (4 hex digits or more; the "
         "commit inside a merge too) or its pull request.")
@_filter("pr", "N", "Only culprits of this pull request (the same as --culprit '#N').")
@_filter("touching", "PATH", "Only culprits that changed PATH (a file, or a folder above "
         "one), as git said when they were named.")
@_filter("author", "TEXT", "Only culprits whose author's name or email holds TEXT.")
@_filter("since", "DATE", "Started at or after DATE (UTC): 2026-11-01, 2026-11-01T14:30, or "
         "an age: 12h, 7d, 2w.")
@_filter("until", "DATE", "Started before DATE (a day alone: up to its end).")
@_filter("text", "TEXT", "A bad probe's failure (its reason or output) holds TEXT, any case.")
@click.option("--disagree", is_flag=True, help="Only bisections another one of the same oracle "
              "disagrees with: one named X, the other's range holds X and it said no "
              "regression or named another commit.")
@click.option("--limit", default=50, show_default=True, type=Whole(1, defaults.MAX_LIMIT))
@click.option("--offset", default=0, show_default=True, type=Whole(0, defaults.MAX_ID),
              help="Skip this many matching bisections (the next page).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table",
              show_default=True, help="table: for a person; json, jsonl (a row a line), csv.")
@click.option("--json", "json_out", is_flag=True, help="The same as --format json.")
@click.option("--wide", is_flag=True, help="Full values (culprit sha, repo, range) on a terminal "
              "too; output that is not a terminal always has them.")
@click.option("--all", "show_all", is_flag=True, help="Also the bisections that stopped at "
              "their endpoints before the newest one (hidden from the table by default).")
@click.pass_obj
def list_cmd(c: Ctx, /, limit: int, offset: int, fmt: str, json_out: bool, wide: bool,
             show_all: bool, **words: str | None) -> None:
    """List past and running bisections, newest first, filtered by the store (on a terminal,
    one line each: long values end in an ellipsis; --wide or a pipe shows them whole). Starts
    that stopped at their endpoints (a wrong ref, an oracle that could not run) are hidden
    from the table but for the newest: --all shows them; json, jsonl and csv have every
    row."""
    fmt = "json" if json_out else fmt
    where = None
    if any(words.values()):
        from bisector.app import queries  # lazy: SQLAlchemy, for a filtered list only

        where = queries.parse(words, limit, offset)  # bad values: one line, before the store
    if absent(c.db):
        # Nothing was ever stored there: say so without creating the file (or loading the
        # store's code); a --db or $BISECTOR_DB that names no file is more likely a typo.
        if c.db != default_db():
            raise StoreError(f"no bisector database at {sqlite_path(c.db)}: run a bisection "
                             f"first or fix --db")
        rows: list[dict[str, Any]] = []
    else:
        rows = _rows(c, where, limit, offset)
    if fmt != "table":
        listing.print_data(rows, fmt)
        return
    if not rows:
        _note("no bisection matches these filters" if where else "no bisections in this store "
              "yet: start one with bisect start (bisect demo shows one)")
        return
    shown, hidden = listing.without_failed_starts(rows, show_all)
    listing.print_rows(shown, wide)
    if hidden:
        _note(f"{hidden} older bisection(s) that stopped at their endpoints are not shown: "
              f"bisect list --all")
    if len(rows) == limit:
        _note(f"more may match: bisect list ... --offset {offset + limit}")


def _rows(c: Ctx, where: Any, limit: int, offset: int) -> list[dict[str, Any]]:
    from bisector.base import escape  # lazy: `bisect --help` and completion skip it
    from bisector.cli import quick  # lazy: as above

    found = quick.list_rows(c.db, limit, offset) if where is None else None
    if found is not None:  # a SQLite store, a page read without the ORM
        rows: list[dict[str, Any]] = escape.safe(found)
        return rows
    # Not the reports' code either (app/list_rows.py): list starts 15 % sooner.
    from bisector.app import list_rows  # lazy: as above
    from bisector.store.queries import Filters  # lazy: as above

    store = c.store(create=False, reads_only=True)
    rows = escape.safe(list_rows.list_data(store, where or Filters(limit=limit, offset=offset)))
    if where is not None and (where.author or where.touching or where.pr is not None):
        from bisector.store import commits  # lazy: as above

        if n := commits.culprits_without_facts(store):
            _note(f"{n} culprit(s) were named before bisector kept their author, pull request "
                  f"and paths: --author, --touching and --culprit #PR cannot find those")
    return rows


@click.command(name="commit", cls=ConfiguredCommand)
@click.argument("ref", metavar="REF")
@click.option("--repo", default=None, metavar="PATH", help="The clone that resolves a REF "
              "that is not a sha prefix (a tag, a branch, HEAD~3); default: the current "
              "folder.")
@click.option("--json", "json_out", is_flag=True)
@click.pass_obj
def commit(c: Ctx, ref: str, repo: str | None, json_out: bool) -> None:
    """Everything the store knows of one commit: every verdict any oracle got there (oracle,
    environment, when, bisection, outcome and reason), whether it was named a culprit,
    whether a wheel of it is cached and whether its build failed. REF: a sha prefix the
    store knows, else a ref of --repo."""
    # lazy: `bisect --help` and completion import none of this
    from bisector.app import commit_view

    store = c.store(create=False, reads_only=True)
    data = commit_view.commit_data(store, ref, repo)
    if json_out:
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(listing.commit_text(data))

