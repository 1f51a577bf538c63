"""A watch suite of dashboard reports (``reports = "FOLDER"``): each tick reads every HUD
regression report (``*.json``) in the folder and starts a bisection for each regressed range
and metric not bisected yet (``app/from_report.py``: the same ranges and oracles as ``bisect
start --from-report``), then, unless ``--no-bisect``, runs those nobody alive runs.

Nothing is kept but the store: a range is "bisected yet" when the store has a bisection with
its oracle and endpoints, so a report dropped into the folder twice, or read by two ticks one
after the other, starts one bisection (the second finds the first's). Two ticks reading a new
report at the same instant may each start one: run ticks from one timer (the systemd unit
does). A range whose bisection failed or was cancelled counts as bisected (``bisect resume
ID`` takes it up again); an interrupted one is run again by the next tick. A report that
cannot be read is one line of the tick, the others go on.
"""

from __future__ import annotations

from pathlib import Path

from bisector.app import bisections as app
from bisector.app import from_report
from bisector.app.watch.config import Suite
from bisector.app.watch.context import Pass
from bisector.app.watch.starts import run_one
from bisector.base.errors import BisectorError
from bisector.run.config import Request

MAX_FILES = 200  # reports read a tick, newest first: an old folder does not slow every tick


def base_request(suite: Suite) -> Request:
    """What every range's request shares: the suite's clone, Python, index and options; the
    rest resolved as ``bisect start --from-report`` resolves it."""
    return Request(good="", bad="", repo=suite.repo, python=suite.python,
                   profile=suite.profile, variant=suite.variant,
                   nightly_index=suite.index if suite.torch == "nightly" else None,
                   release_index=suite.index if suite.torch == "release" else None,
                   **suite.start)


def _mtime(f: Path) -> float:
    try:
        return f.stat().st_mtime
    except OSError:  # removed while the tick looked: read as the oldest (then unreadable)
        return 0.0


def report_pass(p: Pass, suite: Suite, bisect: bool) -> None:
    """Start (and with ``bisect`` run) a bisection for every range of the suite's reports."""
    folder = suite.reports
    assert folder is not None
    if not folder.is_dir():
        p.say(f"{suite.name}: no reports folder {folder} yet")
        return
    files = sorted(folder.glob("*.json"), key=_mtime, reverse=True)[:MAX_FILES]
    base = base_request(suite)
    for f in files:
        try:
            planned = from_report.requests(base, from_report.read_text(str(f)))
        except BisectorError as e:
            p.say(f"{suite.name}: {f.name}: {e.message}")
            continue
        for step in from_report.each_range(lambda: p.store, planned):
            found = step.found
            if found is None:
                try:
                    _store, found = app.create(lambda: p.store, step.request)
                except BisectorError as e:
                    p.say(f"{suite.name}: {f.name}: {step.said}: {e.message}")
                    continue
                p.report.started.append(found)
                p.say(f"{suite.name}: {f.name}: started bisection {found} for {step.said}")
            if bisect:
                run_one(p, found, f"{suite.name}: {f.name}")
