"""What the store knows about one commit (`bisect commit`), and the git facts of culprits it
keeps for the queries (store/queries.py).

Every verdict at a commit is a run row keyed by the commit, so "what did anyone learn here"
is one query on the run table's key index, joined to the oracles and to the probes and
bisections that used each run; whether a wheel is cached or the build failed is the artifact
rows of the commit; whether it was named a culprit, the bisections' culprit index. A commit
is asked for by a prefix of its sha, which one query over those three indexes resolves.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, exists, func, literal, select
from sqlalchemy.exc import IntegrityError

from bisector.store import models as m
from bisector.store.bisections import _aware
from bisector.store.db import Store
from bisector.store.queries import upper_bound


@dataclass(frozen=True)
class CommitFacts:
    """What git said of a commit when it was named a culprit."""

    sha: str
    subject: str
    author: str
    author_email: str
    authored_at: datetime | None
    pr: int | None
    files: tuple[str, ...]  # the paths it changed (against its first parent)


@dataclass(frozen=True)
class RunAt:
    """One oracle run at the commit, and the bisection probe that used it (if any)."""

    run_id: int
    oracle: str
    oracle_sha256: str
    env_fingerprint: str
    environment: dict[str, Any]  # the using bisection's executor facts ({} when none)
    outcome: str
    exit_code: int | None
    reason: str
    reusable: bool
    finished_at: datetime
    duration_s: float
    bisection_id: int | None
    verdict: str | None  # what the run meant for that bisection (good, bad, skip)


@dataclass(frozen=True)
class NamedIn:
    """A bisection that named the commit its culprit."""

    bisection_id: int
    state: str
    oracle: str
    created_at: datetime


@dataclass(frozen=True)
class BuildAt:
    """An artifact row of the commit: a wheel or overlay made (``ok``), a build that failed
    (``failed``) or could not run (``error``); ``buckets``: object stores holding its wheel."""

    key: str
    kind: str
    status: str
    path: str | None
    size: int | None
    created_at: datetime
    log_tail: str | None
    buckets: tuple[str, ...]


def paths_of(files: tuple[str, ...]) -> list[tuple[str, bool]]:
    """Each file and every folder above it, once: (path, is a folder)."""
    rows: dict[str, bool] = {}
    for f in files:
        parts = f.strip("/").split("/")
        for i in range(1, len(parts)):
            rows.setdefault("/".join(parts[:i]), True)
        rows["/".join(parts)] = False
    return sorted(rows.items())


def remember(store: Store, facts: CommitFacts) -> None:
    """Keep a culprit's facts once; a concurrent insert of the same commit is fine."""
    with store.session() as s:
        if s.get(m.GitCommit, facts.sha) is not None:
            return
    try:
        with store.session() as s:
            s.add(m.GitCommit(sha=facts.sha, subject=facts.subject, author=facts.author,
                              author_email=facts.author_email, authored_at=facts.authored_at,
                              pr=facts.pr))
            s.flush()
            s.add_all(m.CommitPath(sha=facts.sha, path=p, folder=folder)
                      for p, folder in paths_of(facts.files))
    except IntegrityError:
        pass  # another process kept the same commit first


def prs_of(store: Store, shas: Iterable[str]) -> dict[str, int | None]:
    """The pull request of each of ``shas`` whose facts are stored (one query: a list page's
    culprits), None where git named none; a sha without facts is left out."""
    wanted = sorted(set(shas))
    if not wanted:
        return {}
    g = m.GitCommit
    with store.session() as s:
        return {str(sha): pr for sha, pr in s.execute(select(g.sha, g.pr)
                                                      .where(g.sha.in_(wanted)))}


def facts_of(store: Store, sha: str) -> CommitFacts | None:
    with store.session() as s:
        g = s.get(m.GitCommit, sha)
        if g is None:
            return None
        files = s.scalars(select(m.CommitPath.path).where(
            m.CommitPath.sha == sha, m.CommitPath.folder.is_(False)).order_by(m.CommitPath.path))
        return CommitFacts(g.sha, g.subject, g.author, g.author_email, _aware(g.authored_at),
                           g.pr, tuple(files))


def resolve(store: Store, prefix: str, limit: int = 10) -> list[str]:
    """The full shas the store knows (runs, artifacts, culprits) that start with ``prefix``
    (lowercase hex), at most ``limit``."""
    high = upper_bound(prefix)
    q = (select(m.RunRow.commit_sha.label("sha"))
         .where(m.RunRow.commit_sha >= prefix, m.RunRow.commit_sha < high)
         .union(select(m.Artifact.commit_sha)
                .where(m.Artifact.commit_sha >= prefix, m.Artifact.commit_sha < high),
                select(m.Bisection.culprit_sha)
                .where(m.Bisection.culprit_sha >= prefix, m.Bisection.culprit_sha < high))
         .order_by("sha").limit(limit))
    with store.session() as s:
        return [str(r[0]) for r in s.execute(q)]


def runs_at(store: Store, sha: str) -> list[RunAt]:
    """Every run at ``sha``, oldest first, once per probe that used it (a run no probe used,
    a confirmation's, once with no bisection)."""
    r, p, b = m.RunRow, m.Probe, m.Bisection
    q = (select(r, m.OracleRow.name, p.bisection_id, p.verdict, b.environment)
         .join(m.OracleRow, m.OracleRow.sha256 == r.oracle_sha256)
         .outerjoin(p, p.run_id == r.id).outerjoin(b, b.id == p.bisection_id)
         .where(r.commit_sha == sha).order_by(r.finished_at, r.id, p.bisection_id))
    with store.session() as s:
        return [RunAt(v.id, name, v.oracle_sha256, v.env_fingerprint,
                      dict((env or {}).get("executor") or {}), v.outcome, v.exit_code,
                      v.reason or "", bool(v.reusable),
                      _aware(v.finished_at) or datetime.now(UTC), v.duration_s or 0.0, bid,
                      verdict)
                for v, name, bid, verdict, env in s.execute(q)]


def named_in(store: Store, sha: str) -> list[NamedIn]:
    """The bisections that named ``sha`` their culprit, newest first."""
    b = m.Bisection
    q = (select(b.id, b.state, b.oracle_name, b.created_at).where(b.culprit_sha == sha)
         .order_by(b.id.desc()))
    with store.session() as s:
        return [NamedIn(i, st, o, _aware(t) or datetime.now(UTC)) for i, st, o, t in s.execute(q)]


def builds_at(store: Store, sha: str) -> list[BuildAt]:
    """The artifact rows of ``sha``, oldest first, each with the buckets holding its wheel."""
    a, o = m.Artifact, m.RemoteObject
    buckets = func.group_concat if store.url.startswith("sqlite") else func.string_agg
    joined = (buckets(o.bucket) if store.url.startswith("sqlite")
              else buckets(o.bucket, literal(",")))
    q = (select(a, joined).outerjoin(o, o.artifact_key == a.key).where(a.commit_sha == sha)
         .group_by(a.id).order_by(a.created_at, a.id))
    with store.session() as s:
        return [BuildAt(x.key, x.kind, x.status, x.path, x.size,
                        _aware(x.created_at) or datetime.now(UTC), x.log_tail,
                        tuple(sorted(set(str(names).split(",")))) if names else ())
                for x, names in s.execute(q)]


def _has_facts(sha: Any) -> ColumnElement[bool]:
    """EXISTS, not NOT IN: an anti-join on git_commit's key (PostgreSQL hashes a NOT IN's whole
    subquery first: 250 ms on 100,000 bisections)."""
    g = m.GitCommit
    return exists().where(g.sha == sha)


def _named(sha: Any) -> ColumnElement[bool]:
    """A culprit was named, written so that no index serves it: SQLite read every culprit
    from ``ix_bisection_culprit_sha`` (170 ms) instead of the few old bisections from
    ``ix_bisection_created_at``."""
    cond: ColumnElement[bool] = func.coalesce(sha, "") != ""
    return cond


def _before_facts(store: Store) -> list[ColumnElement[bool]]:
    """Only bisections created before the first culprit's facts were kept can lack them (the
    runner keeps them when it names one since migration 0013): a range of
    ``ix_bisection_created_at``, nothing on a store made since (a scan of every culprit took
    140 ms on PostgreSQL at 100,000 bisections, on every --author)."""
    with store.session() as s:
        first = s.scalar(select(func.min(m.GitCommit.created_at)))
    return [] if first is None else [m.Bisection.created_at < first]


def facts_missing(store: Store, limit: int) -> list[tuple[str, str]]:
    """(culprit sha, clone) of bisections whose culprit's git facts are not stored (named
    before migration 0013 kept them), at most ``limit``, newest first: what
    run/culprit_facts.backfill reads again from the clones."""
    b = m.Bisection
    q = (select(b.culprit_sha, b.repo_path)
         .where(_named(b.culprit_sha), ~_has_facts(b.culprit_sha), *_before_facts(store))
         .order_by(b.created_at.desc()).limit(limit))  # the range's own index, in order
    with store.session() as s:
        return list(dict.fromkeys((str(sha), str(path)) for sha, path in s.execute(q)))


def culprits_without_facts(store: Store) -> int:
    """Bisections whose culprit's git facts are not stored (named before this version):
    --author, --touching and --culprit #PR cannot find them."""
    b = m.Bisection
    q = (select(func.count()).select_from(b)
         .where(_named(b.culprit_sha), ~_has_facts(b.culprit_sha), *_before_facts(store)))
    with store.session() as s:
        return int(s.scalar(q) or 0)
