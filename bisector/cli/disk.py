"""``bisect du`` and ``bisect gc``: what bisector keeps on disk, and getting space back."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from bisector.base.errors import StoreError, UsageError
from bisector.cli.console import err, escape, out
from bisector.cli.context import Ctx
from bisector.store.location import absent

if TYPE_CHECKING:
    from bisector.store.db import Store


@click.command()
@click.option("--json", "json_out", is_flag=True)
@click.pass_obj
def du(c: Ctx, json_out: bool) -> None:
    """Disk usage by kind: wheels, overlays, environments, uv's cache, oracle copies, logs,
    ccache, scratch folders, reports, with the oldest and newest last use of each."""
    # lazy: `bisect --help` and completion import none of this
    from bisector.app import disk
    from bisector.app.disk import human

    try:
        store: Store | None = c.store(create=False, reads_only=True)
    except StoreError as e:
        store = None  # the files alone still say what is there
        if not absent(c.db):  # a store that is there but cannot be read is said, not skipped
            err.print(f"[yellow]note:[/] {escape(e.message)}; sizes below are from the files "
                      f"alone (nothing said of which bisection uses what)")
    data = disk.du(store)
    if store is not None:
        # lazy: the object store's rows, read only by du and gc
        from bisector.app import remote_gc

        if (bucket := remote_gc.du(store, c.policy)) is not None:
            data["bucket"] = bucket
    if json_out:
        click.echo(json.dumps(data, indent=2))
        return
    # lazy: rich's table, once there is a table to show
    from rich.table import Table

    t = Table("kind", "size", "items", "oldest use", "newest use", "what")
    for k in data["kinds"]:
        t.add_row(k["kind"], human(k["bytes"]), str(k["items"]),
                  (k["oldest_use"] or "-")[:10], (k["newest_use"] or "-")[:10], k["what"])
    out.print(t)
    out.print(f"total {human(data['total_bytes'])}; caches in {escape(data['cache_dir'])}, "
              f"logs and reports in {escape(data['data_dir'])}")
    if (b := data.get("bucket")) is not None:
        out.print(f"the team's object store {escape(b['bucket'])}: {b['objects']} wheel(s), "
                  f"{human(b['bytes'])} recorded in the store (bisect gc --remote cleans it)")


@click.command()
@click.option("--max-size", default=None, metavar="SIZE",
              help="Remove least recently used wheels, overlays, environments and uv's cache "
              "until they fit, e.g. 50G (K, M, G, T: powers of 1024). Default: "
              "$BISECTOR_MAX_CACHE when set.")
@click.option("--older-than", default=None, metavar="AGE",
              help="Remove what was last used longer ago than AGE, logs included, e.g. 30d "
              "(s, m, h, d, w).")
@click.option("--dry-run", is_flag=True, help="Print what would go and the bytes freed; "
              "remove nothing.")
@click.option("--remote", is_flag=True, help="Clean the team's object store (--artifacts) "
              "instead of this box's cache, by the same rules.")
@click.option("--json", "json_out", is_flag=True)
@click.pass_obj
def gc(c: Ctx, max_size: str | None, older_than: str | None, dry_run: bool, remote: bool,
       json_out: bool) -> None:
    """Remove least recently used artifacts that no unfinished bisection needs.

    Running and interrupted bisections of this store keep the wheels, overlays, environments
    and logs of their candidate commits; logs go only with --older-than."""
    # lazy: `bisect --help` and completion import none of this
    from bisector.app import gc as cleanup
    from bisector.app.disk import parse_age, parse_size
    from bisector.app.gc import configured_cap, describe

    cap = max_size or (None if remote else configured_cap())
    limit = parse_size(cap, "--max-size" if max_size else "BISECTOR_MAX_CACHE") if cap else None
    age = parse_age(older_than) if older_than is not None else None
    if limit is None and age is None:
        raise UsageError("say what to remove: --max-size SIZE or --older-than AGE, e.g. "
                         "bisect gc --max-size 50G --dry-run")
    if remote:
        # lazy: only gc --remote loads the object store's rules
        from bisector.app import remote_gc

        removal = remote_gc.collect(c.store(create=False), remote_gc.configured(
            c.policy, lambda line: err.print(f"[yellow]warning:[/] {escape(line)}")),
            max_size=limit, older_than_s=age, dry_run=dry_run)
    else:
        removal = cleanup.collect(c.store(create=False), max_size=limit, older_than_s=age,
                                  dry_run=dry_run)
    if json_out:
        click.echo(json.dumps(removal.as_dict(), indent=2))
        return
    for line in describe(removal):
        (err if line.startswith("error:") else out).print(escape(line), soft_wrap=True)

