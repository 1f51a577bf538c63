"""`bisect list`'s filters as one SQL query: the store answers which bisections match, a page
at a time, so a year of bisections is never read into Python to throw most of it away.

Each filter is a condition the database serves from an index (migration 0013): the state, the
oracle's name or its sha256's prefix, the culprit's sha prefix and the time range are ranges
or equalities on ``bisection``; the author, the pull request and the paths come from the facts
git gave when the culprit was named (``git_commit``, ``commit_path``); the failure text from
each bisection's document of its bad probes' runs (store/bisection_text.py). Only
``--repo`` (a substring of a path, in any case) is read row by row. What the filters mean:
docs/store.md, "Querying".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Connection, Select, and_, false, or_, select

from bisector.base import defaults
from bisector.base.kinds import State
from bisector.store import bisection_text, disagree, fulltext
from bisector.store import models as m
from bisector.store.bisections import _record
from bisector.store.db import Store
from bisector.store.records import BisectionRecord


@dataclass(frozen=True)
class Filters:
    """What to list; an empty field matches everything. Values are checked by the caller
    (app/queries.py parses and explains them): here they are only turned into SQL."""

    state: str = ""  # a State value; running and interrupted as the list shows them
    oracle: str = ""  # a name, or a prefix of the oracle's sha256 (4 hex digits or more)
    repo: str = ""  # a part of the clone's path, in any case
    culprit: str = ""  # a prefix of the culprit's sha (or of the commit inside a merge)
    pr: int | None = None  # the culprit's pull request (with ``culprit``: either matches)
    touching: str = ""  # a path the culprit changed, or a folder above one
    author: str = ""  # a part of the culprit's author's name or email, in any case
    since: datetime | None = None  # created at or after
    until: datetime | None = None  # created before
    text: str = ""  # in the reason or output of a run one of its bad probes used
    disagree: bool = False  # another bisection of its oracle disagrees (store/disagree.py)
    limit: int = 50
    offset: int = 0

    @property
    def any(self) -> bool:
        """Anything but paging: the full path's query (store/peek.py lists only pages)."""
        return any((self.state, self.oracle, self.repo, self.culprit, self.pr is not None,
                    self.touching, self.author, self.since, self.until, self.text,
                    self.disagree))


def upper_bound(prefix: str) -> str:
    """The first string after every string that starts with ``prefix``: ``prefix <= x <
    upper_bound(prefix)`` is a prefix match an index serves under any collation."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def _prefix(col: Any, prefix: str) -> ColumnElement[bool]:
    return and_(col >= prefix, col < upper_bound(prefix))


def _like(text: str) -> str:
    return f"%{fulltext.escape_like(text)}%"


def conditions(f: Filters, conn: Connection, now: datetime | None = None
               ) -> list[ColumnElement[bool]]:
    """The WHERE of :func:`statement`, one condition per filter given."""
    b = m.Bisection
    where: list[ColumnElement[bool]] = []
    if f.state:
        where.append(_state(f.state, now or datetime.now(UTC)))
    if f.oracle:
        by_sha = _prefix(b.oracle_sha256, f.oracle.lower()) if _hex(f.oracle) else false()
        where.append(or_(b.oracle_name == f.oracle, by_sha))
    if f.repo:
        where.append(b.repo_path.ilike(_like(f.repo), escape="\\"))
    culprit: list[ColumnElement[bool]] = []
    if f.culprit:
        culprit += [_prefix(b.culprit_sha, f.culprit), _prefix(b.culprit_inside, f.culprit)]
    if f.pr is not None:
        culprit.append(b.culprit_sha.in_(select(m.GitCommit.sha)
                                         .where(m.GitCommit.pr == f.pr)))
    if culprit:
        where.append(or_(*culprit))
    if f.touching:
        where.append(b.culprit_sha.in_(select(m.CommitPath.sha)
                                       .where(m.CommitPath.path == f.touching)))
    if f.author:
        g = m.GitCommit
        where.append(b.culprit_sha.in_(select(g.sha).where(or_(
            g.author.ilike(_like(f.author), escape="\\"),
            g.author_email.ilike(_like(f.author), escape="\\")))))
    if f.since is not None:
        where.append(b.created_at >= f.since)
    if f.until is not None:
        where.append(b.created_at < f.until)
    if f.text and not bisection_text.made(conn):  # else statement() asks the documents
        r = m.RunRow
        where.append(b.id.in_(
            select(m.Probe.bisection_id).join(r, r.id == m.Probe.run_id)
            .where(m.Probe.verdict == "bad",
                   fulltext.matching(conn, r.id, r.reason, r.output_tail, f.text))))
    if f.disagree:
        where.append(disagree.condition(b.id))
    return where


def _hex(value: str) -> bool:
    return len(value) >= 4 and all(c in "0123456789abcdef" for c in value.lower())


def _state(state: str, now: datetime) -> ColumnElement[bool]:
    """A running bisection whose heartbeat stopped is listed as interrupted (its controller
    is gone): the store decides by the heartbeat's age, as for a bisection of another host.
    One killed on this host within that age is running here and interrupted in the row;
    app/queries.py drops such rows from the page."""
    b = m.Bisection
    fresh = b.heartbeat_at >= now - timedelta(seconds=defaults.LEASE_STALE_S)
    if state == State.RUNNING.value:
        return and_(b.state == state, fresh)
    if state == State.INTERRUPTED.value:
        stale = or_(b.heartbeat_at.is_(None), b.heartbeat_at
                    < now - timedelta(seconds=defaults.LEASE_STALE_S))
        return or_(b.state == state, and_(b.state == State.RUNNING.value, stale))
    return b.state == state


def statement(f: Filters, conn: Connection) -> Select[m.Bisection]:
    """The one query: the matching bisections, newest first, one page. The failure text is
    asked of each bisection's document (store/bisection_text.py), which on SQLite drives the
    query in id order."""
    q: Select[Any] = select(m.Bisection).where(*conditions(f, conn))
    order: Any = m.Bisection.id
    narrowed = (bisection_text.statement_for(conn, q, m.Bisection.id, f.text) if f.text
                else None)
    if narrowed is not None:
        q, order = narrowed
    return q.order_by(order.desc()).limit(f.limit).offset(f.offset)


def bisections(store: Store, f: Filters) -> list[BisectionRecord]:
    with store.session() as s:
        return [_record(b) for b in s.scalars(statement(f, s.connection()))]


def oracle_names(store: Store) -> list[str]:
    """Every oracle name a bisection of the store used (the list page's choices), from the
    index on the names."""
    with store.session() as s:
        return list(s.scalars(select(m.Bisection.oracle_name).distinct()
                              .order_by(m.Bisection.oracle_name)))
