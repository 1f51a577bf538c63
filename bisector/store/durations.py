"""What steps took on a repository, as measured: the figures ``bisect plan`` prices a range with,
and the running estimate of how long a bisection has left.

Measured rather than configured because the same step differs by orders of magnitude between
repositories (a torchlet build takes 2 s, a PyTorch build an hour): any one default is badly
wrong somewhere, while the store already holds what every earlier probe and build cost here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import Select, select

from bisector.base.kinds import ArtifactKind, ArtifactStatus, Way
from bisector.store import models as m
from bisector.store.db import Store


@dataclass(frozen=True)
class Measured:
    """A mean over ``count`` measurements: the count says how far to trust it."""

    mean_s: float
    count: int


def _mean(values: Iterable[float]) -> Measured | None:
    seen = list(values)
    return Measured(sum(seen) / len(seen), len(seen)) if seen else None


def _repo_commits(repo_path: str) -> Select[str]:
    """Every commit any bisection of this repository searched (a subquery)."""
    return (select(m.Candidate.sha)
            .join(m.Bisection, m.Bisection.id == m.Candidate.bisection_id)
            .where(m.Bisection.repo_path == repo_path))


def build_seconds(store: Store, repo_path: str, profile: str) -> Measured | None:
    """Mean source build of this repository's commits with this profile.

    Builds that ran count, failed ones included (a failure costs time too); builds that could
    not run (``error``) and wheels found already built (duration 0) say nothing about what a
    build costs here, so they do not.
    """
    with store.session() as s:
        rows = s.execute(
            select(m.Artifact.duration_s, m.Artifact.settings)
            .where(m.Artifact.kind == ArtifactKind.SOURCE.value,
                   m.Artifact.status.in_([ArtifactStatus.OK.value, ArtifactStatus.FAILED.value]),
                   m.Artifact.duration_s > 0,
                   m.Artifact.commit_sha.in_(_repo_commits(repo_path))))
        return _mean(float(d) for d, settings in rows
                     if (settings or {}).get("profile") == profile)


def _oracle_runs() -> Select[float]:
    """Runs where the oracle really ran: on an installable artifact. A skip because the
    commit does not build carries the build's time, not the oracle's."""
    return (select(m.RunRow.duration_s)
            .join(m.Artifact, m.Artifact.id == m.RunRow.artifact_id)
            .where(m.Artifact.status == ArtifactStatus.OK.value))


def oracle_seconds(store: Store, oracle_sha256: str) -> Measured | None:
    """Mean run of this exact oracle (its bytes), in any repository and environment."""
    q = _oracle_runs().where(m.RunRow.oracle_sha256 == oracle_sha256)
    with store.session() as s:
        return _mean(float(d) for d in s.scalars(q))


def probe_seconds(store: Store, repo_path: str, oracle_sha256: str | None = None
                  ) -> Measured | None:
    """Mean paid-for probe of this repository: its wall time as the probe measured it, or, for
    a probe stored by an older bisector, the oracle run plus the build it made, if any.
    ``oracle_sha256``: probes of that oracle only (the running estimate's: another oracle's
    runs of the same repository say nothing about this one's; a 2 s check beside a 30 s
    training step made "8 s left" take 35 s).

    A reused run cost nothing, so it does not count. Every probe counts from the moment it
    is stored, so a running bisection's own probes are in the figure too: on a repository never
    measured before, the estimate is what this run has measured so far.
    """
    q = (select(m.RunRow.duration_s, m.RunRow.facts, m.Artifact.duration_s,
                m.Artifact.status)
         .select_from(m.Probe)
         .join(m.RunRow, m.RunRow.id == m.Probe.run_id)
         .join(m.Bisection, m.Bisection.id == m.Probe.bisection_id)
         .outerjoin(m.Artifact, m.Artifact.id == m.RunRow.artifact_id)
         .where(m.Bisection.repo_path == repo_path, m.Probe.reused.is_(False)))
    if oracle_sha256 is not None:
        q = q.where(m.RunRow.oracle_sha256 == oracle_sha256)
    with store.session() as s:
        rows = s.execute(q).all()
    seconds = []
    for run_s, facts, built_s, status in rows:
        wall = (facts or {}).get("probe_s")
        if isinstance(wall, int | float):
            seconds.append(float(wall))
            continue
        fresh = bool((facts or {}).get("artifact_fresh"))
        ran = status is None or status == ArtifactStatus.OK.value
        # A skip for a broken build stores the build's time as the run's: count it once.
        seconds.append((float(run_s) if ran else 0.0) + (float(built_s or 0) if fresh else 0.0))
    return _mean(seconds)


# How a probe got its commit's package (its ``obtained_as`` fact, a Way), for the steps
# ``bisect plan`` prices besides builds (measured from artifacts) and oracle runs.
OBTAINING = (Way.CACHED, Way.PREBUILT, Way.OVERLAY)


def obtaining_seconds(store: Store, repo_path: str) -> dict[str, Measured]:
    """Per way of obtaining a commit (:data:`OBTAINING`), the mean of what this repository's
    paid-for probes spent besides the oracle run itself: downloading or overlaying the
    package, making and installing the environment, collecting its facts."""
    q = (select(m.RunRow.duration_s, m.RunRow.facts)
         .select_from(m.Probe)
         .join(m.RunRow, m.RunRow.id == m.Probe.run_id)
         .join(m.Bisection, m.Bisection.id == m.Probe.bisection_id)
         .where(m.Bisection.repo_path == repo_path, m.Probe.reused.is_(False)))
    with store.session() as s:
        rows = s.execute(q).all()
    seen: dict[str, list[float]] = {k: [] for k in OBTAINING}
    for run_s, facts in rows:
        how, wall = (facts or {}).get("obtained_as"), (facts or {}).get("probe_s")
        if how in seen and isinstance(wall, int | float):
            seen[how].append(max(0.0, float(wall) - float(run_s or 0)))
    return {k: got for k, values in seen.items() if (got := _mean(values)) is not None}
