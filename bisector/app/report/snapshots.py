"""A finished bisection's view kept as ``show`` and ``log`` print it, so reading it again costs
a file and two small queries, not the store's ORM, git and the renderers (a read command must
start in a few times ``import click``'s time: make bench, section 16).

Written beside the reports when a bisection ends (and by a ``show`` that had to render it), in
the data folder's ``reports/``, named by the SQLite file and the id. Served only while
everything it was rendered from is unchanged: the record's identity and its probes
(``store/peek.identity``), the code that rendered it (:func:`code_stamp`), and no log of it
removed by ``bisect gc`` since (the full view then
says "log removed by gc"). A server store, a store at another schema, a running bisection or
any doubt: the command renders from the store as before.

Light on purpose: the standard library, store/peek.py and the gc ledger, nothing else.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bisector.app.removed import removed_logs
from bisector.base.paths import data_dir
from bisector.store import peek
from bisector.store.location import sqlite_path

VERSION = 1  # of the file's layout: another is never served
PACKAGE = Path(__file__).resolve().parents[2]  # bisector/


def code_stamp() -> str:
    """What rendered the snapshot: every module of bisector, by name, size and modification
    time (about 200 stats). Another bisector (an upgrade, a checkout of other code) renders
    afresh instead of serving text an older one wrote."""
    h = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        try:
            st = path.stat()
        except OSError:
            continue
        h.update(f"{path.relative_to(PACKAGE)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


@dataclass(frozen=True)
class Snapshot:
    data: dict[str, Any]  # ``show --json``
    markdown: str  # ``show``
    log: str  # ``log``
    log_data: list[dict[str, Any]]  # ``log --json``


def location(db: str, bisection_id: int) -> Path | None:
    """Where the snapshot of a SQLite store's bisection lives; None for a server store."""
    path = sqlite_path(db)
    if path is None:
        return None
    tag = hashlib.sha256(str(path.expanduser().resolve()).encode()).hexdigest()[:8]
    return data_dir(create=False) / "reports" / f"bisection-{int(bisection_id)}-{tag}.view.json"


def keep(db: str, bisection_id: int, snap: Snapshot) -> None:
    """Write the snapshot of a finished bisection, atomically (a reader never sees half of
    it); never raises: a snapshot is only a shortcut."""
    where = location(db, bisection_id)
    identity = peek.identity(db, bisection_id)
    if where is None or identity is None:
        return
    logs = sorted({str(p[s]) for p in snap.data.get("probes", [])
                   for s in ("stdout", "stderr", "build_log") if p.get(s)})
    body = {"version": VERSION, "identity": identity, "code": code_stamp(), "logs": logs,
            "data": snap.data,
            "markdown": snap.markdown, "log": snap.log, "log_data": snap.log_data}
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=where.parent, prefix=".view-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(body, f, default=str)
        os.replace(tmp, where)
    except OSError:
        return


def served(db: str, bisection_id: int) -> Snapshot | None:
    """The snapshot, when it still says what rendering the store would (else None)."""
    where = location(db, bisection_id)
    if where is None or not where.is_file():
        return None
    try:
        body = json.loads(where.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(body, dict) or body.get("version") != VERSION:
        return None
    if body.get("identity") != peek.identity(db, bisection_id) or body.get("code") != code_stamp():
        return None
    gone = removed_logs()
    if gone and any(str(q) in gone for log in body.get("logs", [])
                    for q in (Path(log), *Path(log).parents)):
        return None  # the full view names the logs gc removed
    try:
        return Snapshot(body["data"], body["markdown"], body["log"], body["log_data"])
    except KeyError:
        return None
