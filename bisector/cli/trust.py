"""``bisect trust``: let a repository's ``bisector.toml`` set every key, for its exact content.

The decision itself (what is recorded, when it is void) is app/trust.py's; this is the click
layer: which file is meant, and what to print.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from bisector.base.errors import UsageError
from bisector.cli import config_file
from bisector.cli.console import out


@click.command(name="trust")
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("--list", "list_", is_flag=True, help="The trusted files and whether each is "
              "still what was trusted.")
@click.option("--revoke", is_flag=True, help="Forget PATH: its keys beyond the inert ones stop "
              "applying.")
@click.option("--json", "json_out", is_flag=True)
def trust(path: Path | None, list_: bool, revoke: bool, json_out: bool) -> None:
    """Trust a repository's bisector.toml (default: the one at the root of this clone).

    Until then only its inert keys apply (the range, the search, output); keys that run a
    program, name a host, path, image or database, or weaken isolation are ignored. Trust
    holds for the file's exact content: any change voids it."""
    # lazy: `bisect --help` and completion import none of this
    from bisector.app import trust as trusting

    if list_:
        if path is not None or revoke:
            raise UsageError("--list takes no PATH and no --revoke: run bisect trust --list")
        rows = trusting.listing()
        if json_out:
            click.echo(json.dumps([{"path": str(t.path), "sha256": t.sha256, "state": t.state}
                                   for t in rows], indent=2))
            return
        if not rows:
            out.print("no repository file is trusted")
        for t in rows:
            state = {"trusted": "trusted", "changed": "changed since trusted: not trusted",
                     "missing": "missing"}[t.state]
            click.echo(f"{t.path}  {t.sha256[:12]}  {state}")
        return
    if path is None:
        path = config_file.repo_file(Path.cwd())
        if path is None:
            raise UsageError("no bisector.toml at the root of this git clone: pass its PATH")
    if revoke:
        if not trusting.revoke(path):
            raise UsageError(f"{path} is not trusted: nothing to revoke (bisect trust --list)")
        click.echo(f"revoked {path}: only its inert keys apply now")
        return
    t = trusting.trust(path)
    if json_out:
        click.echo(json.dumps({"path": str(t.path), "sha256": t.sha256, "state": t.state}))
        return
    click.echo(f"trusted {t.path} (sha256 {t.sha256[:12]}): every key applies until the file "
               f"changes")
