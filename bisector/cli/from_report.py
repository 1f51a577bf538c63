"""``--from-report`` on ``start`` and ``plan``: each range of a HUD regression report as its own
bisection (``app/from_report.py``), one after the other, each printed as ``start`` prints one.
The exit code is the highest of theirs: one openly unsure answer is not hidden by the next.
What the report says (its id, a series' names) is printed as one line of data: control
characters visible, no markup (:func:`_shown`)."""

from __future__ import annotations

import sys
from functools import partial
from typing import Any

from bisector.base.escape import line
from bisector.cli.console import err, escape
from bisector.cli.context import Ctx
from bisector.run.request import Request


def _shown(text: str) -> str:
    """A report's text in a markup line: one line, every control character visible."""
    return escape(line(text))


def _planned(req: Request, source: str) -> Any:
    # lazy: `bisect --help` and completion import none of this
    from bisector.app import from_report

    planned = from_report.requests(req, from_report.read_text(source))
    for note in planned.skipped:
        err.print(f"[yellow]note:[/] not bisected: {_shown(note)}")
    return planned


def _one(c: Ctx, req: Request, enqueue: bool | None, events: Any, begun: Any) -> Any:
    # lazy: `bisect --help` and completion import none of this
    from bisector.app import bisections

    return bisections.start(c.store, req, events, enqueue, begun=begun, policy=c.policy)


def start_all(c: Ctx, req: Request, source: str, json_out: bool, enqueue: bool | None,
              db_flag: str) -> None:
    # lazy: `bisect --help` and completion import none of this
    from bisector.app import from_report
    from bisector.cli.running import carry_out

    planned = _planned(req, source)
    worst = 0
    for step in from_report.each_range(c.store, planned):
        err.print(f"[bold]range {step.number} of {step.total}[/] of report "
                  f"{_shown(planned.report_id or '?')}: {_shown(step.said)}")
        if step.found is not None:
            err.print(f"  already bisected as #{step.found}: bisect show {step.found}")
            continue
        try:
            carry_out(partial(_one, c, step.request, enqueue), json_out, db_flag)
        except SystemExit as e:  # an unsure answer's own code: the next range still runs
            worst = max(worst, int(e.code or 0))
    if worst:
        sys.exit(worst)


def plan_all(c: Ctx, req: Request, source: str, overrides: dict[str, float],
             json_out: bool) -> None:
    # lazy: `bisect --help` and completion import none of this
    from bisector.app import from_report
    from bisector.app import plan as planning
    from bisector.cli.plans import print_plan
    from bisector.cli.progress import waiting

    planned = _planned(req, source)
    for i, (r, one) in enumerate(planned.items, 1):
        err.print(f"[bold]range {i} of {len(planned.items)}[/]: "
                  f"{_shown(from_report.describe(r))}")
        one.check()
        with waiting() as events:
            print_plan(planning.plan_for(c.store(), one, overrides, events, policy=c.policy),
                       json_out)
