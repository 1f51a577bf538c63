"""``bisect tick`` and ``bisect watch``: the nightly watch from the command line.

The operating system schedules (``deploy/systemd/bisector-tick.timer`` runs ``bisect tick``
daily); ``bisect tick --every "0 3 * * *"`` is the same schedule in the foreground, for trying
it out. The configuration is read and checked before the store is opened, so a typo in
``bisector.toml`` stops the tick with one line and leaves the store as it was.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from bisector.base.errors import InterruptedBisection, UsageError
from bisector.base.escape import line as one_line
from bisector.base.escape import safe
from bisector.cli import complete, config_file
from bisector.cli.console import err, escape, interruptible, out
from bisector.cli.context import Ctx

if TYPE_CHECKING:
    from bisector.app.watch.config import WatchConfig
    from bisector.run.policy import Policy
    from bisector.store.db import Store

STYLE = {"good": "green", "bad": "red", "skip": "yellow", "running": "cyan",
         "measured": "default"}


def next_time(every: str, after: datetime) -> datetime:
    """The next time the cron expression ``every`` names after ``after`` (local time)."""
    from croniter import CroniterError, croniter

    if not croniter.is_valid(every):
        raise UsageError(f"--every {every!r}: not a cron expression; write five fields "
                         f"(minute hour day month weekday), e.g. \"0 3 * * *\" for 03:00 daily")
    try:
        nxt: datetime = croniter(every, after).get_next(datetime)
    except (CroniterError, ValueError, OverflowError):
        # Valid fields that name no date ("0 0 31 2 *": February 31st) never fire.
        raise UsageError(f"--every {every!r} never fires (no date matches it): write a "
                         f"schedule that does, e.g. \"0 3 * * *\" for 03:00 daily") from None
    return nxt


@click.command()
@click.option("--config", "config_path", type=click.Path(path_type=Path, dir_okay=False),
              default=None, help="Read the watch from this file only (default: the user's "
              "bisector.toml, then the repository's).")
@click.option("--bisect/--no-bisect", "bisect", default=None,
              help="Run a flip's bisection inside this tick (default: [watch] bisect, else "
              "yes); --no-bisect records results and stores the bisection for `bisect resume` "
              "or a later tick.")
@click.option("--suite", "only", multiple=True, metavar="NAME", shell_complete=complete.suites,
              help="Only this suite (repeatable).")
@click.option("--every", default=None, metavar="CRON", help="Stay in the foreground and tick "
              "on this cron schedule, e.g. \"0 3 * * *\" (use the systemd timer on a server).")
@click.pass_obj
def tick(c: Ctx, config_path: Path | None, bisect: bool | None, only: tuple[str, ...],
         every: str | None) -> None:
    """One idempotent pass of the nightly watch: run each suite's oracles once against its
    newest torch, record the results, and start one bisection per flip (good -> bad or
    bad -> good between a suite's last two results), then announce it."""
    # lazy: `bisect --help` and completion import none of this
    from bisector.app.watch.config import load

    if every is not None:  # a bad schedule fails first, before any file or the store
        next_time(every, datetime.now().astimezone())
    # Only trusted files: a suite runs oracles, an index is a host, a notifier a program.
    # The files as the group read them, not read again.
    found = ([config_file.given(config_path)] if config_path
             else config_file.trusted(c.config_files))
    paths = [f.path for f in found]
    cfg = load(paths, [f.content for f in found])
    if not cfg.suites:
        where = ", ".join(map(str, paths)) or f"{config_file.user_file()} (absent)"
        raise UsageError(f"no [[suite]] to watch in {where}: add one (see docs/watch.md, "
                         f"\"Nightly watch\") or pass --config FILE")
    unknown = sorted(set(only) - {s.name for s in cfg.suites})
    if unknown:
        raise UsageError(f"--suite {unknown[0]}: no such suite; configured: "
                         f"{', '.join(s.name for s in cfg.suites)}")
    store = c.store()
    run_bisect = cfg.bisect if bisect is None else bisect
    with interruptible():
        if every is None:
            _pass(store, cfg, run_bisect, only, fail=True, policy=c.policy)
            return
        while True:
            when = next_time(every, datetime.now().astimezone())
            err.print(f"next tick at {when.isoformat(timespec='minutes')} (Ctrl-C stops)")
            while (left := (when - datetime.now().astimezone()).total_seconds()) > 0:
                time.sleep(min(left, 30.0))
            _pass(store, cfg, run_bisect, only, fail=False, policy=c.policy)


def _pass(store: Store, cfg: WatchConfig, run_bisect: bool, only: tuple[str, ...],
          fail: bool, policy: Policy) -> None:
    # lazy: `bisect --help` and completion import none of this
    from bisector.app.watch import tick as watch_tick
    from bisector.cli.progress import RichEvents

    events = RichEvents(err)
    try:
        report = watch_tick.tick(store, cfg, bisect=run_bisect, events=events, only=only,
                                 policy=policy,
                          say=lambda line: err.print(escape(line), soft_wrap=True))
    except KeyboardInterrupt:
        raise InterruptedBisection("interrupted; every result and probe finished so far is "
                                   "stored, and the next `bisect tick` goes on from them "
                                   "(`bisect resume ID` finishes a bisection)") from None
    finally:
        events.close()
    summary = (f"tick: {report.ran} oracle run(s), {len(report.started)} bisection(s) "
               f"started, {len(report.finished)} finished, {len(report.errors)} suite(s) "
               f"failed")
    click.echo(summary)
    if report.errors and fail:
        first = report.errors[0]
        raise type(first)(f"{len(report.errors)} suite(s) failed; first: {first.message}")


@click.command()
@click.option("--json", "json_out", is_flag=True, help="The table as JSON (as /api/watch).")
@click.option("--columns", default=14, show_default=True, type=click.IntRange(1, 200),
              help="How many torches (newest first) to show per suite.")
@click.pass_obj
def watch(c: Ctx, json_out: bool, columns: int) -> None:
    """The nightly watch's table: per suite, each oracle against each torch (good / bad /
    skip), the flips, and the bisections they started."""
    # lazy: `bisect --help` and completion import none of this
    from bisector.app.watch import table as wt

    # Every string as data (an oracle's metric or unit may hold a newline or an escape that
    # would write a line of its choosing into the table), redacted, in both renderings.
    data = safe(wt.table_data(c.store(create=False, reads_only=True), columns))
    if json_out:
        click.echo(json.dumps(data, indent=2))
        return
    if not out.is_terminal:
        click.echo("\n".join(wt.text_lines(data)))
        return
    # lazy: rich's table, once there is a table to show
    from rich.table import Table

    if not data["suites"]:
        out.print("the watch has recorded nothing yet: run `bisect tick`")
    for s in data["suites"]:
        t = Table("oracle", *(escape(x["version"]) for x in s["torches"]),
                  title=f"suite {escape(s['name'])}")
        for r in s["rows"]:
            t.add_row(escape(r["oracle"]), *(
                f"[{STYLE.get(str((cell or {}).get('verdict')), 'dim')}]"
                f"{escape(one_line(wt.cell_text(cell)))}[/]" for cell in r["cells"]))
        out.print(t)
        for f in s["flips"]:
            out.print("  " + escape(one_line(wt.flip_text(f))))
        for series in s["series"]:
            for line in wt.series_lines(series):
                out.print(escape(one_line(line)), soft_wrap=True)
