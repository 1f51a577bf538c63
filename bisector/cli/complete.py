"""TAB completion of values (click's shell completion): bisection ids, oracle names, git refs
and watch suites.

Completion runs on every TAB, so each source is cheap (a read-only peek at the store, a folder
listing, one ``git for-each-ref``, the TOML files) and never fails loudly: any error means no
suggestions, never a traceback in the user's prompt. Nothing here imports SQLAlchemy, rich or
GitPython for a SQLite store (tests/unit/test_cli_imports.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from click.shell_completion import CompletionItem

from bisector.base.escape import safe_line

GIT_TIMEOUT_S = 2.0
MAX_REFS = 500  # a clone of PyTorch has thousands of tags: the newest names come first anyway


def _root_param(ctx: click.Context, name: str) -> Any:
    """An option of the ``bisect`` group itself (``--db``), as typed before the command."""
    return ctx.find_root().params.get(name)


def bisection_ids(ctx: click.Context, incomplete: str, last: bool) -> list[CompletionItem]:
    """The store's newest bisections (``--db`` as typed, else the default store), newest
    first, with ``last`` in front when the command takes it."""
    try:
        # lazy: only an id's completion peeks at the store
        from bisector.store.location import default_db
        from bisector.store.peek import recent

        db = _root_param(ctx, "db") or default_db()
        items = [CompletionItem(str(r.id), help=safe_line(f"{r.state} {r.good}..{r.bad}"))
                 for r in recent(str(db)) if str(r.id).startswith(incomplete)]
    except Exception:
        items = []
    if last and "last".startswith(incomplete.lower()):
        items.insert(0, CompletionItem("last", help="the newest bisection"))
    return items


def oracles(ctx: click.Context, param: click.Parameter, incomplete: str
            ) -> list[CompletionItem]:
    """Oracle names ``--oracle`` finds ($BISECTOR_ORACLES_DIR's, the bundled ones); a path
    (or nothing matching) is left to the shell's file completion."""
    try:
        # lazy: only --oracle's completion lists the oracle folders
        from bisector.oracle.names import oracle_names

        names = [n for n in oracle_names() if n.startswith(incomplete)]
    except Exception:
        names = []
    if names and not incomplete.startswith((".", "/", "~")):
        return [CompletionItem(n) for n in names]
    return [CompletionItem(incomplete, type="file")]


def refs(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Branches and tags (local and remote branches, tags) of ``--repo`` as typed, else of the
    current folder's clone."""
    # lazy: only a ref's completion runs a process
    import subprocess

    repo = ctx.params.get("repo") or Path(".")
    try:
        r = subprocess.run(
            ["git", "-C", str(repo), "for-each-ref", "--format=%(refname:short)",
             "refs/heads", "refs/tags", "refs/remotes"],
            capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False,
            stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError, ValueError):
        return []
    if r.returncode != 0:
        return []
    names = [n for n in r.stdout.splitlines() if n.startswith(incomplete) and
             not n.endswith("/HEAD") and safe_line(n) == n]
    return [CompletionItem(n) for n in names[:MAX_REFS]]


def suites(ctx: click.Context, param: click.Parameter, incomplete: str
           ) -> list[CompletionItem]:
    """Suite names of the watch (``--config`` as typed, else the trusted bisector.toml files
    that `bisect tick` reads), as written in their ``[[suite]]`` tables."""
    try:
        # lazy: only --suite's completion reads the configuration files
        from bisector.base.paths import read_toml
        from bisector.cli import config_file

        given = ctx.params.get("config_path")
        found = ([config_file.given(Path(given))] if given
                 else config_file.trusted(config_file.files()))
        names: list[str] = []
        for f in found:
            data = read_toml(f.path, "", f.content)
            for key in ("suite", "suites"):
                tables = data.get(key)
                for t in tables if isinstance(tables, list) else []:
                    name = t.get("name") if isinstance(t, dict) else None
                    if isinstance(name, str) and name not in names:
                        names.append(name)
    except Exception:
        return []
    return [CompletionItem(n) for n in names if n.startswith(incomplete)]
