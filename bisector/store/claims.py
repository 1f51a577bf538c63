"""Claims: "this process is running the oracle on commit C under (oracle, environment) now".

Two bisections over the same range would otherwise run every commit both have in flight twice.
Before a probe runs its oracle it claims the run's key; a second process that finds the
claim held by a live owner waits for that run instead of running it again, and takes the claim
over only when its owner is gone. The primary key makes claiming a single insert, so two
claimers can never both win.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError

from bisector.store import models as m
from bisector.store.db import Store


@dataclass(frozen=True)
class Holder:
    owner: str
    at: datetime


def claim(store: Store, oracle_sha256: str, env_fingerprint: str, sha: str,
          me: str) -> Holder | None:
    """Claim the key; None when it is ours now, else who holds it."""
    try:
        with store.session() as s:
            s.add(m.Claim(commit_sha=sha, oracle_sha256=oracle_sha256,
                          env_fingerprint=env_fingerprint, owner=me, at=datetime.now(UTC)))
        return None
    except IntegrityError:
        pass
    with store.session() as s:
        row = s.get(m.Claim, (sha, oracle_sha256, env_fingerprint))
        if row is None:
            return Holder("", datetime.now(UTC))  # released meanwhile: the caller tries again
        at = row.at if row.at.tzinfo else row.at.replace(tzinfo=UTC)
        return None if row.owner == me else Holder(row.owner, at)


def take_over(store: Store, oracle_sha256: str, env_fingerprint: str, sha: str, me: str,
              seen: str) -> bool:
    """Take a claim whose owner is gone (compare-and-set on the owner seen)."""
    with store.session() as s:
        res = s.execute(update(m.Claim).where(
            m.Claim.commit_sha == sha, m.Claim.oracle_sha256 == oracle_sha256,
            m.Claim.env_fingerprint == env_fingerprint, m.Claim.owner == seen)
            .values(owner=me, at=datetime.now(UTC)))
        return bool(res.rowcount == 1)  # type: ignore[attr-defined]


def release(store: Store, oracle_sha256: str, env_fingerprint: str, sha: str, me: str) -> None:
    with store.session() as s:
        s.execute(delete(m.Claim).where(
            m.Claim.commit_sha == sha, m.Claim.oracle_sha256 == oracle_sha256,
            m.Claim.env_fingerprint == env_fingerprint, m.Claim.owner == me))


def beat(store: Store, me: str) -> None:
    """Keep this process's claims fresh (the lease heartbeat calls it)."""
    with store.session() as s:
        s.execute(update(m.Claim).where(m.Claim.owner == me).values(at=datetime.now(UTC)))


def held_by(store: Store, me: str) -> list[str]:
    with store.session() as s:
        return list(s.scalars(select(m.Claim.commit_sha).where(m.Claim.owner == me)))


# A build is claimed in the same table: its artifact key where a run's oracle hash goes, and
# this marker for the environment (no run's fingerprint is this word). Two boxes that miss the
# same wheel at once then build it once; the other waits and fetches it.
BUILD = "build"


def claim_build(store: Store, key: str, sha: str, me: str) -> Holder | None:
    return claim(store, key, BUILD, sha, me)


def take_over_build(store: Store, key: str, sha: str, me: str, seen: str) -> bool:
    return take_over(store, key, BUILD, sha, me, seen)


def release_build(store: Store, key: str, sha: str, me: str) -> None:
    release(store, key, BUILD, sha, me)
