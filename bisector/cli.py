"""The command line: parse, build settings, call one service function, render.

Errors are one line on stderr (``error: ...`` with what to do) and an exit code from
bisector.errors; ``--debug`` shows the traceback. Progress goes to stderr, results to stdout, so
``--json`` output can be piped.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bisector import report
from bisector.errors import BisectorError, InterruptedBisection
from bisector.oracle import Polarity, list_oracles
from bisector.search import Verdict
from bisector.store.db import Store, default_db, open_store

err = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)


@dataclass
class Ctx:
    db: str
    debug: bool
    _store: Store | None = None

    def store(self, create: bool = True) -> Store:
        if self._store is None:
            self._store = open_store(self.db, create=create)
        return self._store


class RichEvents:
    """Live progress: one line per probe, a spinner while a build or an oracle runs."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.status: Any = None

    def note(self, text: str) -> None:
        self.console.print(f"[yellow]note:[/] {escape(text)}")

    def probe_start(self, seq: int, position: int, sha: str, subject: str, left: int) -> None:
        self.console.print(
            f"[bold]probe {seq}[/] (about {left} left): [cyan]{sha[:12]}[/] {escape(subject[:70])}"
        )

    def phase(self, text: str) -> None:
        if self.status is None:
            self.status = self.console.status(escape(text))
            self.status.start()
        else:
            self.status.update(escape(text))

    def probe_done(
        self, position: int, sha: str, verdict: Verdict, reason: str, seconds: float, reused: bool
    ) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None
        colour = {Verdict.GOOD: "green", Verdict.BAD: "red", Verdict.SKIP: "yellow"}[verdict]
        how = "reused verdict" if reused else f"{seconds:.1f}s"
        self.console.print(
            f"  [{colour}]{verdict.value}[/] [cyan]{sha[:12]}[/] ({how}; {escape(reason)})"
        )

    def close(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None


def _sigterm(_signum: int, _frame: Any) -> NoReturn:
    raise KeyboardInterrupt


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", default=None, metavar="URL|PATH", help="Database (default: $BISECTOR_DB "
              "or bisector.db in the user data directory). Any SQLAlchemy URL.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@click.version_option(package_name="bisector")
@click.pass_context
def cli(ctx: click.Context, db: str | None, debug: bool) -> None:
    """Find the commit that broke PyTorch (or any Python project)."""
    ctx.obj = Ctx(db=db or default_db(), debug=debug)


def _db_flag(c: Ctx) -> str:
    return "" if c.db == default_db() else f" --db {c.db}"


def _run_and_report(c: Ctx, bisection_id: int, json_out: bool, resume: bool) -> dict[str, Any]:
    from bisector.service import Runner, resume_bisection

    events = RichEvents(err)
    runner = Runner(c.store(), bisection_id, events)  # raises for an unknown id
    err.print(f"bisection [bold]{bisection_id}[/] (store: {c.store().url})")
    # SIGINT may start out ignored (a background job of a non-interactive shell); a bisection
    # must always stop cleanly and say how to resume, so both signals are handled explicitly.
    old = signal.signal(signal.SIGTERM, _sigterm)
    old_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        if resume:
            resume_bisection(runner)
        else:
            runner.run()
    except KeyboardInterrupt:
        events.close()
        raise InterruptedBisection(
            f"interrupted; every finished probe is stored. To resume: "
            f"bisect{_db_flag(c)} resume {bisection_id}"
        ) from None
    finally:
        events.close()
        signal.signal(signal.SIGTERM, old)
        signal.signal(signal.SIGINT, old_int)
    return _print_show(c, bisection_id, json_out)


def _print_show(c: Ctx, bisection_id: int, json_out: bool) -> dict[str, Any]:
    data = report.show_data(c.store(), bisection_id)
    if json_out:
        click.echo(json.dumps(data, indent=2, default=str))
    else:
        click.echo(report.show_markdown(data))
    return data


@cli.command()
@click.option("--repo", default=".", show_default=True, type=click.Path(path_type=Path),
              help="Path of the git clone.")
@click.option("--good", required=True, help="A ref where the oracle passes (tag, branch, sha).")
@click.option("--bad", required=True, help="A ref where the oracle fails.")
@click.option("--oracle", required=True, help="Oracle name from `bisect oracles`, or a path.")
@click.option("--find-fix", is_flag=True, help="Look for the first commit that fixed it: "
              "--good is the older broken ref, --bad the newer fixed one.")
@click.option("--regress", type=click.Choice([p.value for p in Polarity]), default=None,
              help="What counts as regressed: the oracle failing (default) or succeeding "
              "(seed-style repro scripts that exit 0 when the bug reproduces).")
@click.option("--ancestry-path", is_flag=True, help="Walk every commit on the ancestry path "
              "instead of first-parent.")
@click.option("--profile", default=None, help="Project profile (default: detected).")
@click.option("--python", "python", default=sys.executable, show_default=True,
              help="Interpreter for builds and probe environments.")
@click.option("--offline", is_flag=True, help="Let uv use its cache only (no index).")
@click.option("--build-timeout", default=3600.0, show_default=True, help="Seconds per build.")
@click.option("--json", "json_out", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def start(c: Ctx, repo: Path, good: str, bad: str, oracle: str, find_fix: bool,
          regress: str | None, ancestry_path: bool, profile: str | None, python: str,
          offline: bool, build_timeout: float, json_out: bool) -> None:
    """Start a bisection and run it to the end."""
    from bisector.service import StartOptions, prepare, record

    opts = StartOptions(
        repo=repo, good=good, bad=bad, oracle=oracle, find_fix=find_fix,
        regress=Polarity(regress) if regress else None, first_parent=not ancestry_path,
        profile=profile, python=python, offline=offline, build_timeout=build_timeout,
    )
    prepared = prepare(opts)  # every input is checked before the store is even opened
    bisection_id = record(c.store(), prepared)
    _run_and_report(c, bisection_id, json_out, resume=False)


@cli.command()
@click.argument("bisection_id", type=int)
@click.option("--json", "json_out", is_flag=True)
@click.pass_obj
def resume(c: Ctx, bisection_id: int, json_out: bool) -> None:
    """Finish an interrupted bisection (after Ctrl-C, kill -9, a crash)."""
    c.store(create=False)
    _run_and_report(c, bisection_id, json_out, resume=True)


@cli.command(name="list")
@click.option("--json", "json_out", is_flag=True)
@click.option("--limit", default=50, show_default=True)
@click.pass_obj
def list_cmd(c: Ctx, json_out: bool, limit: int) -> None:
    """List past and running bisections."""
    rows = report.list_data(c.store(create=False), limit)
    if json_out:
        click.echo(json.dumps(rows, indent=2))
        return
    t = Table("id", "repo", "range", "oracle", "state", "culprit", "when")
    for r in rows:
        t.add_row(str(r["id"]), r["repo"], r["range"], r["oracle"], r["state"],
                  (r["culprit"] or "")[:12], r["created"])
    out.print(t)


@cli.command()
@click.argument("bisection_id", type=int)
@click.option("--json", "json_out", is_flag=True)
@click.pass_obj
def show(c: Ctx, bisection_id: int, json_out: bool) -> None:
    """Show a bisection: culprit, PR, every probe, build logs of skips, reproduce command."""
    c.store(create=False)
    _print_show(c, bisection_id, json_out)


@cli.command()
@click.argument("bisection_id", type=int)
@click.option("--json", "json_out", is_flag=True)
@click.pass_obj
def log(c: Ctx, bisection_id: int, json_out: bool) -> None:
    """Print the probes like `git bisect log` (replayable with `git bisect replay`)."""
    store = c.store(create=False)
    if json_out:
        click.echo(json.dumps(report.log_data(store, bisection_id), indent=2))
    else:
        click.echo(report.log_text(store, bisection_id))


@cli.command()
@click.option("--json", "json_out", is_flag=True)
def oracles(json_out: bool) -> None:
    """List the bundled oracles with their one-line descriptions."""
    found = list_oracles()
    if json_out:
        click.echo(json.dumps([{"name": o.name, "description": o.meta.description,
                                "sha256": o.sha256, "path": str(o.path)} for o in found],
                              indent=2))
        return
    t = Table("name", "description", "gpu")
    for o in found:
        t.add_row(o.name, o.meta.description, "yes" if o.meta.needs_gpu else "")
    out.print(t)


@cli.command()
@click.option("--oracle", required=True, help="Oracle name from `bisect oracles`, or a path.")
@click.option("--env", "env_kind", type=click.Choice(["system"]), default=None,
              help="Use the Python and torch already installed here (the default).")
@click.option("--wheel", type=click.Path(path_type=Path), default=None,
              help="Install this wheel into a fresh uv environment and run there.")
@click.option("--commit", default=None, help="Build this commit of --repo and run there.")
@click.option("--repo", default=".", show_default=True, type=click.Path(path_type=Path))
@click.option("--profile", default="pytorch", show_default=True)
@click.option("--python", "python", default=sys.executable, show_default=True)
@click.option("--regress", type=click.Choice([p.value for p in Polarity]), default=None)
@click.option("--json", "json_out", is_flag=True)
def check(oracle: str, env_kind: str | None, wheel: Path | None, commit: str | None, repo: Path,
          profile: str, python: str, regress: str | None, json_out: bool) -> None:
    """Run one oracle once and print its verdict with the environment facts it ran under."""
    from bisector.check import check as run_check

    system = env_kind == "system" or (wheel is None and commit is None)
    res = run_check(oracle, python=python, system=system, wheel=wheel, commit=commit, repo=repo,
                    profile_name=profile, regress=Polarity(regress) if regress else None)
    data = res.as_dict()
    if json_out:
        click.echo(json.dumps(data, indent=2, default=str))
    else:
        colour = {"good": "green", "bad": "red", "skip": "yellow"}[data["verdict"]]
        out.print(f"[bold]{escape(res.oracle.name)}[/]: [{colour}]{data['verdict']}[/] "
                  f"({escape(data['reason'])}, {data['duration_s']:.1f}s) "
                  f"on {escape(res.environment)}")
        t = Table("fact", "value")
        for k, v in sorted(data["facts"].items()):
            t.add_row(k, escape(json.dumps(v) if isinstance(v, dict) else str(v)))
        out.print(t)
        if data["output_tail"]:
            out.print("[bold]output (tail):[/]")
            out.print(escape(data["output_tail"]))
    sys.exit({"good": 0, "bad": 1, "skip": 125}[data["verdict"]])


@cli.group()
def oracle() -> None:
    """Write new oracles."""


@oracle.command(name="new")
@click.argument("name")
@click.option("--from-repro", "repro", required=True, type=click.Path(path_type=Path),
              help="The reproduction script from the bug report.")
@click.option("--match", default=None, metavar="REGEX", help="The bug reproduced when the "
              "script's output matches REGEX (default: when it exits non-zero).")
@click.option("--description", default=None, help="One line for `bisect oracles`.")
@click.option("--gpu/--no-gpu", "needs_gpu", default=None,
              help="Whether it needs CUDA (default: detected from the script).")
@click.option("--timeout", default=900.0, show_default=True)
@click.option("--dir", "directory", type=click.Path(path_type=Path), default=None,
              help="Where to write it (default: the oracles directory).")
@click.option("--force", is_flag=True, help="Overwrite an existing oracle of that name.")
def oracle_new(name: str, repro: Path, match: str | None, description: str | None,
               needs_gpu: bool | None, timeout: float, directory: Path | None,
               force: bool) -> None:
    """Turn a seed-style repro script into an oracle with the right polarity and metadata."""
    from bisector.oracle import default_oracles_dir
    from bisector.oracle_new import create

    made = create(name, repro, directory=directory or default_oracles_dir(), match=match,
                  description=description, needs_gpu=needs_gpu, timeout=timeout, force=force)
    out.print(f"wrote {made.path}: bad when the repro {escape(made.rule)}; skips when "
              f"{', '.join(made.requires) or 'nothing'} cannot be imported"
              f"{' or CUDA is missing' if made.needs_gpu else ''}")
    out.print(f"try it: bisect check --oracle {made.path}")


@cli.command()
@click.option("--dir", "directory", type=click.Path(path_type=Path), default=None,
              help="Where to write the demo history (default: the data directory).")
@click.option("--json", "json_out", is_flag=True)
@click.pass_obj
def demo(c: Ctx, directory: Path | None, json_out: bool) -> None:
    """Generate the bundled torchlet history (240 commits, a planted regression, broken builds,
    release tags on release branches) and bisect it v0.1.0..v0.2.0 end to end."""
    import shutil

    from bisector.service import StartOptions, start_bisection
    from bisector.settings import data_dir
    from bisector.synthetic import generate

    path = directory or data_dir() / "demo" / "torchlet"
    if path.exists():
        shutil.rmtree(path)
    hist = generate(path)
    err.print(f"demo history: {len(hist.main)} commits on main in {path}; the planted regression "
              f"is {hist.culprit[:12]} (the bisection does not know that)")
    opts = StartOptions(repo=path, good="v0.1.0", bad="v0.2.0", oracle="torchlet_norm")
    bisection_id = start_bisection(c.store(), opts)
    data = _run_and_report(c, bisection_id, json_out, resume=False)
    found = (data["culprit"] or {}).get("sha")
    err.print("[green]found the planted regression[/]" if found == hist.culprit
               else "[red]did not find the planted regression[/]")
    if found != hist.culprit:
        sys.exit(1)


def main() -> None:
    debug = "--debug" in sys.argv
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        err.print("error: aborted")
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except BisectorError as e:
        if debug:
            err.print_exception()
        err.print(f"[red]error:[/] {escape(e.message)}", soft_wrap=True)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        err.print("error: interrupted")
        sys.exit(130)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
