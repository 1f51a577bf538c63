"""What the CLI and the web view read of a stored bisection: show, list, log, the issue text and
the HTML report, each from the store alone, and the two reports written when a bisection ends.

This is the one way out of the store for a bisection: every view is redacted
(:mod:`bisector.base.redact`: index URLs' credentials and tokens, secret variables) and its
strings hold no control character (:mod:`bisector.base.escape`), whatever renders it next. The
store keeps the raw values, which a resumed run needs.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from bisector.app import disk, list_rows
from bisector.app.report import log_text, snapshots
from bisector.app.report import show as report
from bisector.app.report.html import render_report
from bisector.app.report.issue import issue_markdown
from bisector.base import escape, redact
from bisector.base.kinds import State
from bisector.base.paths import data_dir
from bisector.run.factory import stored_config
from bisector.store import bisections, queries, runs
from bisector.store.db import Store
from bisector.store.queries import Filters


def show(store: Store, bisection_id: int) -> dict[str, Any]:
    cfg = stored_config(store, bisection_id)
    req = cfg.request
    # Its secret values are masked wherever an output shows them (an oracle printing
    # $MY_API_KEY), in this view and everything rendered from it.
    redact.remember(redact.secrets_of([*req.env, *req.build_env],
                                      [req.nightly_index, req.release_index]))
    # Logs removed by `bisect gc` are named as such, so no rendering points at a missing file.
    d: dict[str, Any] = escape.safe(disk.mark_removed_logs(
        report.show_data(store, bisection_id, cfg)))
    return d


def issue_report(store: Store, bisection_id: int, d: dict[str, Any] | None = None) -> str:
    """The paste-ready GitHub issue text (no local paths, no secrets); ``d``: :func:`show`'s
    data when the caller has it already."""
    return redact.text(issue_markdown(show(store, bisection_id) if d is None else d,
                                      stored_config(store, bisection_id).request))


def html_report(store: Store, bisection_id: int, d: dict[str, Any] | None = None,
                issue: str | None = None) -> str:
    """One self-contained HTML file: timeline, probes with their output, facts; for a
    bisection the nightly watch started at a performance step, the series with its steps.
    ``d`` and ``issue``: :func:`show`'s data and the issue text when the caller has them."""
    d = show(store, bisection_id) if d is None else d
    issue = issue_report(store, bisection_id, d) if issue is None else issue
    return redact.text(render_report(d, issue=issue,
                                     series=series_picture(store, bisection_id)))


def series_picture(store: Store, bisection_id: int) -> str | None:
    """The SVG of the watch's series a bisection was started from (a performance step), or
    None for any other bisection."""
    from bisector.store import watch as ws  # lazy: the watch's tables, for its reports only

    flip = ws.flip_of_bisection(store, bisection_id)
    if flip is None or not flip.performance:
        return None
    # The series' change points need ruptures and SciPy (a second and more to import),
    # which the report of an ordinary bisection never uses.
    from bisector.app.watch.series import flip_picture  # lazy: only now

    return flip_picture(store, flip)


def progress(store: Store, bisection_id: int) -> dict[str, Any]:
    """What a running bisection's page polls: its state and how many probes it has, from two
    small reads (not ``show``'s git look-ups, which a page asking every two seconds would pay
    for each time)."""
    b = bisections.get(store, bisection_id)
    return {"id": b.id, "state": list_rows.effective_state(b),
            "probes": len(runs.probes(store, bisection_id))}


def listing(store: Store, where: Filters | None = None) -> list[dict[str, Any]]:
    """One page of ``bisect list`` (the filters answered by the store), as it may leave."""
    rows: list[dict[str, Any]] = escape.safe(list_rows.list_data(store, where))
    return rows


def oracle_names(store: Store) -> list[str]:
    names: list[str] = escape.safe(queries.oracle_names(store))
    return names


def log(store: Store, bisection_id: int) -> str:
    return log_text.log_text(show(store, bisection_id))


def log_data(store: Store, bisection_id: int) -> list[dict[str, Any]]:
    return log_text.log_data(show(store, bisection_id))


def report_paths(store: Store, bisection_id: int) -> tuple[Path, Path]:
    """Where a finished bisection's issue report (Markdown) and HTML report are written: named
    by the store too, since ids repeat across stores (a team's PostgreSQL and a local file)."""
    tag = hashlib.sha256(store.url.encode()).hexdigest()[:8]
    folder = data_dir() / "reports"
    stem = f"bisection-{bisection_id}-{tag}"
    return folder / f"{stem}.md", folder / f"{stem}.html"


def write_reports(store: Store, bisection_id: int) -> tuple[Path, Path]:
    """Write both reports at the end of a bisection, so they exist without anyone asking."""
    md, html = report_paths(store, bisection_id)
    md.parent.mkdir(parents=True, exist_ok=True)
    # The data and the issue text once for both (each is a dozen store reads and git look-ups).
    d = show(store, bisection_id)
    issue = issue_report(store, bisection_id, d)
    md.write_text(issue, encoding="utf-8")
    html.write_text(html_report(store, bisection_id, d, issue), encoding="utf-8")
    keep_snapshot(store, bisection_id, d)
    return md, html


def keep_snapshot(store: Store, bisection_id: int, d: dict[str, Any] | None = None) -> None:
    """A finished bisection's view as ``show`` and ``log`` print it (app/report/snapshots.py): the
    next ``show``, ``show --json``, ``log`` read it instead of rendering. Printed text is kept
    masked and escaped, as the commands print it."""
    d = show(store, bisection_id) if d is None else d
    if not State(d["state"]).finished:
        return
    snapshots.keep(store.url, bisection_id, snapshots.Snapshot(
        d, escape.safe_text(report.show_markdown(d)), escape.safe_text(log_text.log_text(d)),
        log_text.log_data(d)))
