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


RANGE_OPTIONS = [
    click.option("--repo", default=".", show_default=True, type=click.Path(path_type=Path),
                 help="Path of the git clone."),
    click.option("--good", required=True,
                 help="A ref where the oracle passes (tag, branch, sha)."),
    click.option("--bad", required=True, help="A ref where the oracle fails."),
    click.option("--oracle", required=True,
                 help="Oracle name from `bisect oracles`, or a path."),
    click.option("--find-fix", is_flag=True, help="Look for the first commit that fixed it: "
                 "--good is the older broken ref, --bad the newer fixed one."),
    click.option("--regress", type=click.Choice([p.value for p in Polarity]), default=None,
                 help="What counts as regressed: the oracle failing (default) or succeeding "
                 "(seed-style repro scripts that exit 0 when the bug reproduces)."),
    click.option("--ancestry-path", is_flag=True, help="Walk every commit on the ancestry "
                 "path instead of first-parent."),
    click.option("--profile", default=None, help="Project profile (default: detected)."),
    click.option("--python", "python", default=sys.executable, show_default=True,
                 help="Interpreter for builds and probe environments."),
    click.option("--offline", is_flag=True,
                 help="No index at all: uv uses its cache, no prebuilt wheels are listed."),
    click.option("--build-timeout", default=3600.0, show_default=True,
                 help="Seconds per build."),
    click.option("--no-prebuilt", is_flag=True,
                 help="Do not use prebuilt wheels or overlays: build every probe."),
    click.option("--nightly-index", default=None, metavar="URL",
                 help="Simple index of nightly wheels (default: the profile's, e.g. "
                 "PyTorch's whl/nightly/<variant>); '' turns nightlies off."),
    click.option("--release-index", default=None, metavar="URL",
                 help="Simple index of release wheels (default for PyTorch: the index pip/uv "
                 "are configured with)."),
    click.option("--variant", default=None, help="Wheel variant: cu128, cu126, cpu ... "
                 "(default: the profile's)."),
    click.option("--executor", type=click.Choice(["local", "docker"]), default="local",
                 show_default=True, help="Where oracles run: a local uv virtualenv, or one "
                 "container per probe of the runtime image."),
    click.option("--image", default=None, help="Runtime image for --executor docker "
                 "(default bisector/runtime:latest, from `make images`)."),
    click.option("--gpus", default=None, help="GPUs for the container: all, or 0,1 "
                 "(NVIDIA container toolkit)."),
    click.option("--memory", default="16g", show_default=True,
                 help="Memory limit of each oracle container."),
    click.option("--pids", default=4096, show_default=True,
                 help="Process limit of each oracle container."),
    click.option("--build-in", type=click.Choice(["host", "docker"]), default=None,
                 help="Where source builds run: this machine, or the builder image with a "
                 "ccache volume per repository (default: docker with --executor docker)."),
    click.option("--builder-image", default=None, help="Builder image for --build-in docker "
                 "(default bisector/builder:latest, from `make images`)."),
    click.option("--cuda-arch", default=None, metavar="LIST", help="TORCH_CUDA_ARCH_LIST for "
                 "source builds (default: the GPUs of --gpus / this machine, else 8.0;8.6;9.0)."),
    click.option("--max-jobs", type=int, default=None,
                 help="MAX_JOBS for source builds (default: all cores)."),
    click.option("--build-env", multiple=True, metavar="KEY=VALUE", help="Override a build "
                 "variable of the profile, e.g. USE_DISTRIBUTED=1 (part of the build's key)."),
    click.option("--installed-base", default=None, metavar="REF",
                 help="The torch installed for --python was built from REF: use it as the "
                 "prebuilt base for overlays (a GPU box with no index)."),
]


def range_options(f: Any) -> Any:
    for opt in reversed(RANGE_OPTIONS):
        f = opt(f)
    return f


def _start_options(kw: dict[str, Any]) -> Any:
    from bisector.service import StartOptions

    return StartOptions(
        repo=kw["repo"], good=kw["good"], bad=kw["bad"], oracle=kw["oracle"],
        find_fix=kw["find_fix"], regress=Polarity(kw["regress"]) if kw["regress"] else None,
        first_parent=not kw["ancestry_path"], profile=kw["profile"], python=kw["python"],
        offline=kw["offline"], build_timeout=kw["build_timeout"],
        prebuilt=not kw["no_prebuilt"], nightly_index=kw["nightly_index"],
        release_index=kw["release_index"], variant=kw["variant"],
        installed_base=kw["installed_base"], executor=kw["executor"], image=kw["image"],
        gpus=kw["gpus"], memory=kw["memory"], pids=kw["pids"], build_in=kw["build_in"],
        builder_image=kw["builder_image"], cuda_arch=kw["cuda_arch"], max_jobs=kw["max_jobs"],
        build_env=tuple(kw["build_env"]),
    )


@cli.command()
@range_options
@click.option("--json", "json_out", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def start(c: Ctx, /, json_out: bool, **kw: Any) -> None:
    """Start a bisection and run it to the end."""
    from bisector.service import discover, prepare, record

    prepared = prepare(_start_options(kw))  # inputs are checked before the store is opened
    prepared = discover(c.store(), prepared)  # index problems stop here, before any record
    bisection_id = record(c.store(), prepared)
    _run_and_report(c, bisection_id, json_out, resume=False)


@cli.command()
@range_options
@click.option("--cost", "costs", multiple=True, metavar="STEP=SECONDS",
              help="Override a per-step cost: oracle, cached, prebuilt, overlay, build.")
@click.option("--json", "json_out", is_flag=True, help="Print the plan as JSON.")
@click.pass_obj
def plan(c: Ctx, /, json_out: bool, costs: tuple[str, ...], **kw: Any) -> None:
    """Explain a range before searching it: candidates, prebuilt wheels (and expired ones),
    overlay-eligible commits, expected source builds and a projected wall time."""
    from bisector.plan import human, parse_costs
    from bisector.service import plan_range_costs

    cost_table = parse_costs(costs)
    rep = plan_range_costs(c.store(), _start_options(kw), cost_table)
    if json_out:
        click.echo(json.dumps(rep.as_dict(), indent=2, default=str))
        return
    for note in rep.notes:
        err.print(f"[yellow]note:[/] {escape(note)}")
    k = rep.kinds
    out.print(f"[bold]{rep.candidates}[/] candidate commits")
    out.print(f"  prebuilt wheels inside the range: {len(rep.prebuilt)}")
    for pb in rep.prebuilt[:20]:
        where = "-" if pb["position"] is None else pb["position"]
        out.print(f"    {where:>6}  {pb['commit'][:12]}  {pb['kind']:<9} "
                  f"{escape(pb['filename'])}")
    if len(rep.prebuilt) > 20:
        out.print(f"    ... {len(rep.prebuilt) - 20} more")
    out.print(f"  prebuilt wheels gone from the index: {len(rep.missing)}")
    for name in rep.missing[:10]:
        out.print(f"    {escape(name)}")
    out.print(f"  overlay-eligible commits: {k.get('overlay', 0)}")
    out.print(f"  already built (cached): {k.get('cached', 0)}; known not to build: "
              f"{k.get('broken', 0)}")
    out.print(f"  commits that would need a source build: {k.get('build', 0)}")
    out.print(f"  oracle runs: {rep.probes_mean:.1f} on average, at most {rep.probes_max}")
    out.print(f"  expected source builds: {rep.builds_mean:.1f} on average, at most "
              f"{rep.builds_max}")
    out.print(f"  projected wall time: {human(rep.seconds_mean)} on average, at most "
              f"{human(rep.seconds_max)}")
    per = ", ".join(f"{n}={v:g}s" for n, v in rep.costs.items())
    out.print(f"  (per-step costs: {per}; change with --cost STEP=SECONDS)")


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
@click.option("--build", "build_roles", multiple=True, type=click.Choice(["runtime", "builder"]),
              help="Build this image (repeatable) before listing.")
@click.option("--base", default=None, metavar="IMAGE", help="BASE_IMAGE build argument "
              "(default: the Dockerfile's official CUDA image).")
@click.option("--json", "json_out", is_flag=True)
def images(build_roles: tuple[str, ...], base: str | None, json_out: bool) -> None:
    """Build (--build) and list bisector's images with their digests."""
    from dataclasses import asdict

    from bisector import images as img

    for role in build_roles:
        err.print(f"building {img.IMAGES[role]} on {base or 'the default CUDA base'} ...")
        img.build(role, base)
    infos = [img.inspect(role) for role in img.IMAGES]
    volumes = img.ccache_volumes()
    if json_out:
        click.echo(json.dumps({"images": [asdict(i) for i in infos],
                               "ccache_volumes": [asdict(v) for v in volumes]}, indent=2))
        return
    for i in infos:
        state = f"{i.id}  {(i.size or 0) / 2**20:.0f} MiB  {i.created}" if i.id else \
            "missing: run `make images`"
        out.print(f"{i.role:<8} {i.tag:<26} {state}")
    for v in volumes:
        out.print(f"ccache   {v.name:<26} repository root {v.repository[:12]}  {v.created}")


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
