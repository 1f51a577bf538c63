"""``bisect list``, ``show`` and ``log`` the quick way, on a SQLite store at this bisector's
schema: rows read with the standard library (store/peek.py), the culprits' pull requests from
one ``git log`` per clone (project/pr.py), a finished bisection's view from its snapshot
(app/report/snapshots.py). Each function returns None (or False) when it cannot answer exactly
as the full path would: a server store, another schema, a running bisection, no snapshot yet.
The command then opens the store as before. ``BISECTOR_QUICK_READS=0`` turns the quick way off.

Nothing here imports SQLAlchemy, GitPython or the renderers (make bench, section 16).
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from typing import Any

import click

from bisector.app.report import snapshots
from bisector.base.escape import safe_text
from bisector.base.kinds import State
from bisector.infra.owner import owner_alive
from bisector.project.pr import prs
from bisector.store import peek


def enabled() -> bool:
    return os.environ.get("BISECTOR_QUICK_READS", "1") != "0"


def newest(db: str) -> int | None:
    """``last``: the newest bisection's id, or None (the full path says why there is none)."""
    return peek.newest_id(db) if enabled() else None


def show(db: str, bisection_id: int, json_out: bool) -> bool:
    """Print ``show`` (Markdown or JSON) from the snapshot; False: not served."""
    snap = snapshots.served(db, bisection_id) if enabled() else None
    if snap is None:
        return False
    if json_out:
        click.echo(json.dumps(snap.data, indent=2, default=str))
    else:
        click.echo(safe_text(snap.markdown))
    return True


def log(db: str, bisection_id: int, json_out: bool) -> bool:
    """Print ``log`` (text or JSON) from the snapshot; False: not served."""
    snap = snapshots.served(db, bisection_id) if enabled() else None
    if snap is None:
        return False
    if json_out:
        click.echo(json.dumps(snap.log_data, indent=2))
    else:
        click.echo(safe_text(snap.log))
    return True


def list_rows(db: str, limit: int, offset: int = 0) -> list[dict[str, Any]] | None:
    """``list``'s rows (a page, no filter) as app/list_rows.list_data makes them, or None."""
    rows = peek.listing(db, limit, offset) if enabled() else None
    if rows is None:
        return None
    out = [_row(r) for r in rows]
    culprits: dict[str, list[str]] = {}
    for row in out:
        if row["culprit"]:
            culprits.setdefault(row["repo"], []).append(row["culprit"])
    for repo, shas in culprits.items():
        found = prs(repo, sorted(set(shas)))
        for row in out:
            if row["repo"] == repo and row["culprit"]:
                row["culprit_pr"] = found.get(row["culprit"])
    return out


def _row(r: dict[str, object]) -> dict[str, Any]:
    result = json.loads(str(r["result"])) if r["result"] else {}
    state = str(r["state"])
    if state == State.RUNNING.value and not owner_alive(
            str(r["owner"]) if r["owner"] else None, _when(r["heartbeat_at"])):
        state = State.INTERRUPTED.value  # its controller is gone (kill -9, a crash)
    created = _when(r["created_at"]) or datetime.now(UTC)
    return {
        "id": int(str(r["id"])),
        "repo": str(r["repo_path"]),
        "range": f"{r['good_ref']}..{r['bad_ref']}",
        "oracle": str(r["oracle_name"]),
        "state": state,
        "culprit": str(r["culprit_sha"]) if r["culprit_sha"] else None,
        "culprit_pr": None,
        "inside": ((result or {}).get("into_merge") or {}).get("sha"),
        "created": created.isoformat(timespec="seconds"),
    }


def _when(value: object) -> datetime | None:
    """A time as SQLite keeps it (SQLAlchemy's text, UTC without a zone)."""
    if not value:
        return None
    t = datetime.fromisoformat(str(value))
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t
