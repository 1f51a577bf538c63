"""The command line: parse options into a typed Request, call one function of ``app``, render.

Errors are one line on stderr (``error: ...`` with what to do) and an exit code from
bisector.base.errors; ``--debug`` shows the traceback. Progress goes to stderr, results to stdout,
so ``--json`` output can be piped; with ``--json`` an error is also one JSON object on stdout.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from bisector.base import redact
from bisector.base.errors import UsageError
from bisector.base.escape import safe_text
from bisector.cli import config_file, disk, failures, queries, tools, trust, watch, workers
from bisector.cli.config_file import ConfiguredGroup
from bisector.cli.console import err, escape, is_quiet, set_quiet
from bisector.cli.context import Ctx
from bisector.cli.options import (
    BISECTION_REF,
    FROM_LOG,
    FROM_REPORT,
    JOBS,
    LAST,
    range_options,
)
from bisector.store.location import default_db

# `bisect --help`, `bisect list` on an empty store and every TAB completion must start in a
# few times `import click`'s time (make bench, section 12): what follows loads SQLAlchemy,
# Alembic, GitPython or rich, so each command imports it in its body ("# lazy: ..." lines).
if TYPE_CHECKING:
    from bisector.run.request import Request
    from bisector.store.db import Store


@click.group(cls=ConfiguredGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", default=None, metavar="URL|PATH", help="Database (default: $BISECTOR_DB "
              "or bisector.db in the user data directory). Any SQLAlchemy URL.")
@click.option("--artifacts", default=None, metavar="s3://BUCKET/PREFIX",
              help="A team's object store for wheels (default: $BISECTOR_ARTIFACTS, else "
              "[artifacts] url in your bisector.toml); endpoint from AWS_ENDPOINT_URL, "
              "credentials from the AWS chain.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@click.option("-q", "--quiet", is_flag=True, help="No progress, notes or warnings on stderr: "
              "only the result (stdout) and errors.")
@click.version_option(package_name="bisector")
@click.pass_context
def cli(ctx: click.Context, db: str | None, artifacts: str | None, debug: bool,
        quiet: bool) -> None:
    """Find the commit that broke PyTorch (or any Python project).

    Defaults for every option come from bisector.toml (the user's, then the repository's):
    see `--help` of each command for the values in force."""
    set_quiet(quiet)  # every time: tests run many commands in one process
    found = config_file.files()  # each file read once, here, for the whole command
    loaded = config_file.load(cli, found)
    # lazy: a small module; a URL's parser is loaded only when a URL is given
    from bisector.run.policy import resolve

    # The one place --artifacts, $BISECTOR_ARTIFACTS and the user's file are weighed: the
    # command's use cases are handed this value (never a variable set for ourselves to read).
    policy = resolve(artifacts, os.environ, loaded.artifacts)
    if artifacts is not None:
        from bisector.base.extras import require  # lazy: as above

        require("s3")
    ctx.obj = Ctx(db=db or default_db(), debug=debug, policy=policy, config_files=found)
    if ctx.invoked_subcommand != "trust":
        for line in loaded.notes():
            _note(line)
    if loaded.default_map:
        ctx.default_map = loaded.default_map
        ctx.meta[config_file.META_KEY] = loaded.sources


def _note(line: str) -> None:
    """A line on stderr that ``-q`` silences, printed without loading rich."""
    if not is_quiet():
        click.echo(line, err=True)


def _which(store: Store, bisection_id: int) -> int:
    """``last`` (no id given) as the store's newest bisection."""
    if bisection_id != LAST:
        return bisection_id
    # lazy: `bisect --help` and completion import none of this
    from bisector.store import bisections as stored

    newest = stored.listing(store, 1)
    if not newest:
        raise UsageError("no bisection in this store yet: start one with bisect start "
                         "(or pass --db of the store that has it)")
    return newest[0].id


def _db_flag(c: Ctx) -> str:
    return "" if c.db == default_db() else f" --db {c.db}"


def _request(kw: dict[str, Any]) -> Request:
    """The request of ``start``/``plan``, without configured defaults that do not apply."""
    # lazy: `bisect --help` and completion import none of this
    from bisector.run.config import request_from

    return request_from(tools.unconfigured(click.get_current_context(), kw))


@cli.command()
@range_options
@FROM_LOG
@workers.ENQUEUE
@click.option("--json", "json_out", is_flag=True, help="Print the result as JSON.")
@FROM_REPORT
@click.pass_obj
def start(c: Ctx, /, json_out: bool, enqueue: bool | None, from_report: str | None,
          **kw: Any) -> None:
    """Start a bisection and run it to the end."""
    # lazy: `bisect --help` and completion import none of this
    from bisector.app import bisections
    from bisector.cli.running import carry_out

    # Inputs are checked before the store is opened: a refused start leaves no database.
    workers.check_enqueue(c.db, enqueue)
    req = _request(kw)
    if from_report is not None:
        from bisector.cli.from_report import start_all  # lazy: as above

        start_all(c, req, from_report, json_out, enqueue, _db_flag(c))
        return
    carry_out(lambda events, begun: bisections.start(c.store, req, events, enqueue,
                                                     begun=begun, policy=c.policy),
              json_out, _db_flag(c))


@cli.command()
@range_options
@click.option("--cost", "costs", multiple=True, metavar="STEP=SECONDS",
              help="Override a per-step cost: oracle, cached, prebuilt, overlay, build.")
@click.option("--json", "json_out", is_flag=True, help="Print the plan as JSON.")
@FROM_REPORT
@click.pass_obj
def plan(c: Ctx, /, json_out: bool, costs: tuple[str, ...], from_report: str | None,
         **kw: Any) -> None:
    """Explain a range before searching it: candidates, prebuilt wheels (and expired ones),
    overlay-eligible commits, verdicts already stored, expected source builds and a projected
    wall time priced with what steps took on this repository."""
    # lazy: `bisect --help` and completion import none of this
    from bisector.app import plan as planning
    from bisector.app.plan import parse_costs
    from bisector.cli.plans import print_plan
    from bisector.cli.progress import waiting

    overrides = parse_costs(costs)
    req = _request(kw)
    if from_report is not None:
        from bisector.cli.from_report import plan_all  # lazy: as above

        plan_all(c, req, from_report, overrides, json_out)
        return
    req.check()
    with waiting() as events:
        rep = planning.plan_for(c.store(), req, overrides, events, policy=c.policy)
    print_plan(rep, json_out)


@cli.command()
@click.argument("bisection_id", type=BISECTION_REF, default="last", metavar="[ID|last]")
@workers.ENQUEUE
@click.option("--json", "json_out", is_flag=True)
@click.pass_obj
def resume(c: Ctx, bisection_id: int, enqueue: bool | None, json_out: bool) -> None:
    """Finish an interrupted bisection (default: the newest) after Ctrl-C, kill -9, a crash or
    bisect cancel."""
    # lazy: `bisect --help` and completion import none of this
    from bisector.app import bisections
    from bisector.cli.running import carry_out

    workers.check_enqueue(c.db, enqueue)
    store = c.store(create=False)
    which = _which(store, bisection_id)
    carry_out(lambda events, begun: bisections.carry_on(store, which, events, enqueue, begun,
                                                        policy=c.policy),
              json_out, _db_flag(c))


@cli.command()
@click.argument("bisection_id", type=BISECTION_REF, default="last", metavar="[ID|last]")
@click.option("--format", "fmt", type=click.Choice(["markdown", "issue", "html", "json"]),
              default="markdown", show_default=True,
              help="markdown: the full record; issue: paste-ready for a GitHub issue (no local "
              "paths); html: one self-contained file with the timeline; json: every field.")
@click.option("--json", "json_out", is_flag=True, help="The same as --format json.")
@click.pass_obj
def show(c: Ctx, bisection_id: int, fmt: str, json_out: bool) -> None:
    """Show a bisection (default: the newest): culprit, PR, every probe, output of failures,
    reproduce command."""
    # lazy: `bisect --help` and completion import none of this
    from bisector.cli import quick

    quickly = quick.newest(c.db) if bisection_id == LAST else bisection_id
    if quickly is not None and fmt in ("markdown", "json") and quick.show(
            c.db, quickly, json_out or fmt == "json"):
        return  # a finished bisection's snapshot (app/report/snapshots.py)
    from bisector.app.report import views  # lazy: the full path
    from bisector.cli.running import print_show  # lazy: as above

    store = c.store(create=False, reads_only=True)
    which = _which(store, bisection_id)
    shown = print_show(store, which, json_out, fmt)
    if shown is not None:
        views.keep_snapshot(store, which, shown)  # the next show or log of it reads this


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; anything but localhost shows the store to the network.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.pass_obj
def serve(c: Ctx, host: str, port: int) -> None:
    """A read-only web view of the store: bisections, timelines, probes, logs, issue reports."""
    # lazy: `bisect --help` and completion import none of this
    from bisector.web import server as web

    store = c.store(create=False, reads_only=True)
    web.check_bind(host, port)  # a busy port or a host that does not resolve: one line first
    if host not in ("127.0.0.1", "localhost", "::1"):
        err.print(f"[yellow]note:[/] listening on {escape(host)}: anyone who can reach this "
                  f"port can read every bisection, log and oracle in the store (no login); "
                  f"requests must name {escape(', '.join(web.bound_names(host)))} as their "
                  f"Host")
    err.print(f"serving {escape(store.url)} read-only at http://{escape(host)}:{port}/ "
              f"(Ctrl-C stops)")
    web.serve(store, host, port)


@cli.command()
@click.argument("bisection_id", type=BISECTION_REF, default="last", metavar="[ID|last]")
@click.option("--json", "json_out", is_flag=True)
@click.pass_obj
def log(c: Ctx, bisection_id: int, json_out: bool) -> None:
    """Print the probes like `git bisect log` (replayable with `git bisect replay`); default:
    the newest bisection."""
    # lazy: `bisect --help` and completion import none of this
    from bisector.cli import quick

    quickly = quick.newest(c.db) if bisection_id == LAST else bisection_id
    if quickly is not None and quick.log(c.db, quickly, json_out):
        return  # a finished bisection's snapshot (app/report/snapshots.py)
    from bisector.app.report import views  # lazy: the full path

    store = c.store(create=False, reads_only=True)
    bisection_id = _which(store, bisection_id)
    if json_out:
        click.echo(json.dumps(views.log_data(store, bisection_id), indent=2))
    else:
        click.echo(safe_text(views.log(store, bisection_id)))

@cli.command()
@click.option("--dir", "directory", type=click.Path(path_type=Path), default=None,
              help="Where to write the demo history (default: the data directory).")
@click.option("--jobs", type=JOBS, default=None, help="Probes at once (no GPU needed).")
@click.option("--nightlies", is_flag=True, help="The nightly path, offline: the history's "
              "nightly wheels served from 127.0.0.1, the range given as two dates, probes on "
              "nightlies and overlays on them, in a store of its own made anew (nightlies.db "
              "beside the history) unless --db or $BISECTOR_DB names one.")
@click.option("--json", "json_out", is_flag=True)
@click.pass_obj
def demo(c: Ctx, directory: Path | None, jobs: int | None, nightlies: bool,
         json_out: bool) -> None:
    """Generate the bundled torchlet history (240 commits, a planted regression, broken builds,
    release tags on release branches) and bisect it v0.1.0..v0.2.0 end to end; with
    --nightlies, by dates over its nightly wheels."""
    # lazy: `bisect --help` and completion import none of this
    from bisector.app import bisections
    from bisector.app.demo.setup import demo as ready
    from bisector.app.report import issue
    from bisector.cli.running import carry_out

    # --db or $BISECTOR_DB: the user's store, else the nightly demo's own (app/demo/setup.py).
    own = c.db == default_db() and not os.environ.get("BISECTOR_DB")
    with ready(directory, jobs, nightlies, err.print, own_store=own) as d:
        if d.store is not None:
            c = Ctx(db=d.store, debug=c.debug, policy=c.policy)
        data = carry_out(lambda events, begun: bisections.start(c.store, d.request, events,
                                                                begun=begun, policy=c.policy),
                         json_out, _db_flag(c))
    found = (data["culprit"] or {}).get("sha")
    pair = issue.between(data)
    if nightlies and pair is not None:
        err.print(f"regressed between nightly {pair[0]['version']} and nightly "
                  f"{pair[1]['version']}")
    err.print("[green]found the planted regression[/]" if found == d.hist.culprit
              else "[red]did not find the planted regression[/]")
    if found != d.hist.culprit:
        sys.exit(1)


for command in (tools.oracles, tools.check, tools.oracle, tools.images):
    cli.add_command(command)
cli.add_command(queries.list_cmd)
cli.add_command(queries.commit)
cli.add_command(disk.du)
cli.add_command(trust.trust)
cli.add_command(disk.gc)
cli.add_command(watch.tick)
cli.add_command(watch.watch)
cli.add_command(workers.worker)
cli.add_command(workers.workers_cmd)
cli.add_command(workers.cancel)


def main(args: list[str] | None = None, prog_name: str | None = None) -> None:
    """The ``bisect`` command: ``args`` default to the process's own (tests pass theirs, and
    run it in-process through click's CliRunner). Every failure a user can act on is one line
    and an exit code (cli/failures.py)."""
    # A secret variable's value inherited by every oracle is masked wherever output shows.
    # (Paths are no credentials: SSH_AUTH_SOCK's would mask a socket's path everywhere.)
    redact.remember(redact.secrets_of(f"{k}={v}" for k, v in os.environ.items()
                                      if not v.startswith("/")))
    try:
        failures.run(cli, sys.argv[1:] if args is None else args, prog_name,
                     lambda: Ctx.last_db or default_db())
    finally:
        if args is None:  # the process's own command line: the process ends with it
            ending()


def ending() -> None:
    """Before the interpreter exits: the command's store closed (SQLite folds its WAL back
    into the file, as when the collector closed it), then every object left frozen. The
    interpreter's last collections walk every object the command loaded (SQLAlchemy's, the
    models', GitPython's: ~100,000), a quarter of a second after every command here, none of
    it needed: the process ends. Only for a process's own command line; a caller running
    commands in its own process (the tests) keeps its collector."""
    close_store()
    gc.freeze()


def close_store() -> None:
    """The store the command opened, closed (SQLite folds its WAL back into the file); also
    after each command a caller runs in its own process (the tests), so no connection of a
    finished command stays open on a file."""
    store, Ctx.opened = Ctx.opened, None
    if store is not None:
        # A server gone meanwhile: the exit code stays the command's.
        with contextlib.suppress(Exception):
            store.engine.dispose()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
