"""Commands around bisections: list and check oracles, write one, build images."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from bisector.base.errors import UsageError
from bisector.base.escape import safe
from bisector.cli import complete
from bisector.cli.config_file import ConfiguredCommand, ConfiguredGroup
from bisector.cli.console import err, escape, out
from bisector.cli.context import Ctx
from bisector.cli.options import SECONDS, check_options
from bisector.oracle.names import team_oracles_dir


@click.command(cls=ConfiguredCommand)
@click.option("--json", "json_out", is_flag=True)
def oracles(json_out: bool) -> None:
    """List the oracles --oracle NAME can find ($BISECTOR_ORACLES_DIR's, then the bundled ones)
    with their one-line descriptions."""
    # lazy: `bisect --help` and completion import none of this
    from rich.table import Table

    # lazy: reading every oracle's metadata is this command's work, not every command's
    from bisector.oracle.script import list_oracles

    found = list_oracles()
    if json_out:
        click.echo(json.dumps([{"name": o.name, "description": o.meta.description,
                                "sha256": o.sha256, "path": str(o.path)} for o in found],
                              indent=2))
        return
    team = team_oracles_dir()
    t = Table("name", "description", "gpu", "from")
    for o in found:
        where = "$BISECTOR_ORACLES_DIR" if team and o.path.parent == team.resolve() else "bundled"
        t.add_row(escape(o.name), escape(o.meta.description), "yes" if o.meta.needs_gpu else "",
                  where)
    out.print(t)


def outside_paths(command: tuple[str, ...]) -> tuple[str, ...]:
    """A command oracle's words that leave the tree (``../x.py``, which works in ``git bisect
    run`` since it runs where the user stands) made absolute from where the user stands: the
    command runs in each probed commit's own tree, where ``../x.py`` names nothing, and every
    probe failed ("good is already bad"). One that names nothing from here is refused."""
    out = []
    for word in command:
        if word.startswith("../"):
            found = (Path.cwd() / word).resolve()
            if not found.exists():
                raise UsageError(f"-- ... {word}: no such file from here, and the command runs "
                                 f"in each commit's tree: give its absolute path")
            word = str(found)
        out.append(word)
    return tuple(out)


def unconfigured(ctx: click.Context, kw: dict[str, Any]) -> dict[str, Any]:
    """Options whose bisector.toml default does not apply to this oracle, dropped: an
    ``oracle`` when a command is typed after --, a ``timeout`` or ``dependency`` when there is
    none (those belong to command oracles). Typed on the line, they are usage errors."""
    def configured(name: str) -> bool:
        return ctx.get_parameter_source(name) is ParameterSource.DEFAULT_MAP

    if kw.get("command"):
        kw = {**kw, "command": outside_paths(tuple(kw["command"]))}
    drop = ["oracle"] if kw.get("command") else ["timeout", "dependency"]
    if kw.get("from_log"):  # the log's range, unless typed on the line
        drop += ["good", "bad"]
    return {**kw, **{k: None if k != "dependency" else () for k in drop if configured(k)}}


@click.command(cls=ConfiguredCommand)
@check_options
@click.option("--env", "env_words", multiple=True, metavar="system|NAME=VALUE",
              help="system: use the Python and torch already installed here (the default). "
              "NAME=VALUE: a variable for the oracle run, e.g. TORCH_LOGS=recompiles "
              "(repeatable; recorded with the TORCH_*, TORCHINDUCTOR_*, ... variables it "
              "inherits).")
@click.option("--wheel", type=click.Path(path_type=Path), default=None,
              help="Install this wheel into a fresh uv environment and run there.")
@click.option("--commit", default=None, help="Build this commit of --repo and run there.")
@click.option("--gpu", default=None, help="Run on this GPU index alone (CUDA_VISIBLE_DEVICES).")
@click.option("--json", "json_out", is_flag=True)
@click.pass_obj
def check(c: Ctx, /, env_words: tuple[str, ...], json_out: bool, **kw: Any) -> None:
    """Run one oracle (or a command, in --commit's tree or here) once and print its verdict
    with the environment facts it ran under."""
    # lazy: `bisect --help` and completion import none of this
    from bisector.app.check import check as run_check
    from bisector.cli.progress import waiting
    from bisector.run.config import check_request_from

    kw = unconfigured(click.get_current_context(), kw)
    # --env is both the place (system) and the oracle's variables (NAME=VALUE).
    env_kind = "system" if "system" in env_words else None
    pairs = tuple(w for w in env_words if w != "system")
    system = env_kind == "system" or (kw["wheel"] is None and kw["commit"] is None)
    req = check_request_from({**kw, "system": system, "env": pairs})
    with waiting(err, probe_lines=False) as events:  # the verdict is said below, once
        res = run_check(req, note=lambda text: err.print(f"[yellow]note:[/] {escape(text)}"),
                        events=events, store=c.store, policy=c.policy)
    data = safe(res.as_dict())  # its output and facts: redacted, printable
    if json_out:
        click.echo(json.dumps(data, indent=2, default=str))
    else:
        colour = {"good": "green", "bad": "red", "skip": "yellow"}[data["verdict"]]
        out.print(f"[bold]{escape(res.oracle.name)}[/]: [{colour}]{data['verdict']}[/] "
                  f"({escape(data['reason'])}, {data['duration_s']:.1f}s) "
                  f"on {escape(res.environment)}")
        # lazy: rich's table, once there is a table to show
        from rich.table import Table

        t = Table("fact", "value")
        for k, v in sorted(data["facts"].items()):
            t.add_row(k, escape(json.dumps(v) if isinstance(v, dict) else str(v)))
        out.print(t)
        if data["output_tail"]:
            out.print("[bold]output (tail):[/]")
            out.print(escape(data["output_tail"]))
    sys.exit({"good": 0, "bad": 1, "skip": 125}[data["verdict"]])


@click.group(cls=ConfiguredGroup)
def oracle() -> None:
    """Write new oracles."""


@oracle.command(name="new")
@click.argument("name")
@click.option("--from-repro", "repro", required=True, type=click.Path(path_type=Path),
              help="The reproduction script from the bug report.")
@click.option("--match", default=None, metavar="REGEX", help="The signature of the bug's "
              "failure: a failure without it is a skip, and output matching it is the bug even "
              "at exit 0 (default: found by --traceback, or by one run here).")
@click.option("--traceback", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help="A pasted traceback of the bug: its exception line becomes the signature "
              "(escaped, numbers and addresses generalised).")
@click.option("--run/--no-run", "run_here", default=True, show_default=True,
              help="Without --match or --traceback, run the repro once here (at most 120 s, "
              "only with an interpreter that imports what it imports) and take the signature "
              "from its failure.")
@click.option("--at", "at_ref", default=None, metavar="REF", shell_complete=complete.refs,
              help="Run the repro once at this "
              "commit of --repo (your bad ref: built or fetched and installed, as bisect check "
              "--commit does) and take the signature of its failure there.")
@click.option("--repo", default=".", show_default=True, type=click.Path(path_type=Path),
              help="The clone --at names a commit of.")
@click.option("--python", "python", default=None, help="Interpreter for that run (default: "
              "the first python3 on PATH that imports what the repro imports).")
@click.option("--description", default=None, help="One line for `bisect oracles`.")
@click.option("--gpu/--no-gpu", "needs_gpu", default=None,
              help="Whether it needs CUDA (default: detected from the script).")
@click.option("--timeout", type=SECONDS, default=900.0, show_default=True)
@click.option("--dir", "directory", type=click.Path(path_type=Path), default=None,
              help="Where to write it (default: $BISECTOR_ORACLES_DIR when set, else the "
              "current directory).")
@click.option("--force", is_flag=True, help="Overwrite an existing oracle of that name.")
# Above ruff's limits on purpose: a click command: one parameter per option.
@click.pass_obj
def oracle_new(c: Ctx, /, name: str, repro: Path, match: str | None,  # noqa: PLR0913
               traceback: Path | None, run_here: bool, at_ref: str | None, repo: Path,
               python: str | None, description: str | None,
               needs_gpu: bool | None, timeout: float, directory: Path | None,
               force: bool) -> None:
    """Turn a seed-style repro script into an oracle with the right polarity and metadata.

    It is written where the user works (or the team's $BISECTOR_ORACLES_DIR), never into
    bisector's install folder: that one is replaced on upgrade and often not writable.
    """
    # lazy: `bisect --help` and completion import none of this
    from bisector.app.oracle_new import create

    made = create(name, repro, directory=directory or team_oracles_dir() or Path.cwd(),
                  match=match, description=description, needs_gpu=needs_gpu, timeout=timeout,
                  force=force, traceback=traceback, run_here=run_here, python=python,
                  at=(repo, at_ref) if at_ref else None, store=c.store, policy=c.policy)
    path = shlex.quote(str(made.path.resolve()))
    out.print(f"wrote {escape(path)}: bad when the repro {escape(made.rule)}; skips when "
              f"{', '.join(made.requires) or 'nothing'} cannot be imported"
              f"{' or CUDA is missing' if made.needs_gpu else ''}")
    if made.signature is not None:
        out.print(f"signature: {escape(made.signature)} ({escape(made.found)})")
    else:
        out.print(f"no signature ({escape(made.found)}): any failure counts as the bug; give "
                  f"--traceback FILE or --match REGEX to tell it from other failures")
    out.print(f"try it: bisect check --oracle {escape(path)}")
    out.print(f"bisect with it: bisect start --oracle {escape(path)} --repo DIR --good REF "
              f"--bad REF")


@click.command(cls=ConfiguredCommand)
@click.option("--build", "build_roles", multiple=True, type=click.Choice(["runtime", "builder"]),
              help="Build this image (repeatable) before listing.")
@click.option("--base", default=None, metavar="IMAGE", help="BASE_IMAGE build argument "
              "(default: the Dockerfile's official CUDA image).")
@click.option("--json", "json_out", is_flag=True)
def images(build_roles: tuple[str, ...], base: str | None, json_out: bool) -> None:
    """Build (--build) and list bisector's images with their digests."""
    from dataclasses import asdict

    # lazy: `bisect --help` and completion import none of this
    from bisector.app import images as img

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
