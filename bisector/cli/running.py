"""Running a bisection from a command and printing what it found: ``start``, ``resume`` and
``demo`` hand one application call (``app/bisections.start`` or ``carry_on``) to
:func:`carry_out`, which draws the progress, turns Ctrl-C and SIGTERM into "interrupted; to
resume: ..." and prints the result; ``show`` prints a stored one with :func:`print_show`.

Imported by those commands' bodies only: it loads rich and the application.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import click

from bisector.app import bisections
from bisector.app.report import show as report
from bisector.app.report import views
from bisector.base.errors import EndpointError, InterruptedBisection
from bisector.base.escape import safe_text
from bisector.base.events import Events
from bisector.cli.console import err, escape, interruptible
from bisector.cli.progress import RichEvents
from bisector.store.db import Store

Call = Callable[[Events, bisections.Begun], bisections.Ran]


def carry_out(call: Call, json_out: bool, db_flag: str) -> dict[str, Any]:
    """Run ``call`` with a live display, then print the bisection as ``show`` does and the
    reports' paths; exit with the state's code (an unsure answer, "no regression").
    ``db_flag``: what the resume line must repeat (`` --db URL``, or nothing)."""
    events = RichEvents(err)
    begun: list[int] = []

    def said(store: Store, bisection_id: int) -> None:
        begun.append(bisection_id)
        err.print(f"bisection [bold]{bisection_id}[/] (store: {escape(store.url)})")

    try:
        with interruptible():
            ran = call(events, said)
    except KeyboardInterrupt:
        if not begun:  # stopped before anything was stored: nothing to resume
            raise
        raise InterruptedBisection(
            f"interrupted; every finished probe is stored. To resume: "
            f"bisect{db_flag} resume {begun[0]}") from None
    except EndpointError as e:
        if not begun:
            raise
        # The stored message is what `show` prints, so it cannot point at `show` itself; the
        # line here, printed once, can.
        raise EndpointError(f"{e.message} (every probe and its output: bisect{db_flag} show "
                            f"{begun[0]})") from None
    finally:
        events.close()
    print_data(ran.shown, json_out)
    if ran.reports is not None:
        md, html = ran.reports
        err.print(f"issue report: {escape(str(md))}; HTML report: {escape(str(html))}")
    if ran.exit_code:  # an answer openly unsure, or "no regression": its own code, never 0
        sys.exit(ran.exit_code)
    return ran.shown


def print_data(data: dict[str, Any], json_out: bool) -> None:
    """A bisection's view as ``show`` prints it: the Markdown record, or JSON."""
    if json_out:
        click.echo(json.dumps(data, indent=2, default=str))
    else:
        click.echo(safe_text(report.show_markdown(data)))


def print_show(store: Store, bisection_id: int, json_out: bool,
               fmt: str = "markdown") -> dict[str, Any] | None:
    """``bisect show``: the record, the paste-ready issue, the HTML report or JSON; returns
    the view it rendered the record or JSON from (None for the issue and HTML)."""
    if fmt == "issue":
        click.echo(safe_text(views.issue_report(store, bisection_id)), nl=False)
    elif fmt == "html":
        click.echo(safe_text(views.html_report(store, bisection_id)), nl=False)
    else:
        data = views.show(store, bisection_id)
        print_data(data, json_out or fmt == "json")
        return data
    return None
