"""Oracle runs (the ``run`` table), the reusable ones among them, and each bisection's probes.

A run is a fact about (commit, oracle sha256, environment fingerprint) shared by every
bisection: a partial unique index keeps one reusable row per key. A run that lands on a key
another process has just decided is still kept (as history, not reusable), so no GPU time is
ever thrown away, and the probe points at it.

A probe is one bisection's use of a run, in order, which is what ``bisect log`` replays. It is
written only while the bisection's lease is ours: a controller that lost its lease cannot
append to a bisection someone else now drives.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from bisector.core.verdict import Outcome
from bisector.store import models as m
from bisector.store.bisections import owned_by
from bisector.store.db import Store
from bisector.store.records import NewRun, ProbeRecord, RunRecord


@dataclass(frozen=True)
class Key:
    """What makes two runs comparable."""

    oracle_sha256: str
    env_fingerprint: str


def _run(v: m.RunRow) -> RunRecord:
    failure = (v.facts or {}).get("failure")
    return RunRecord(id=v.id, commit_sha=v.commit_sha, outcome=Outcome(v.outcome),
                     reason=v.reason, reusable=v.reusable, exit_code=v.exit_code,
                     duration_s=v.duration_s, output_tail=v.output_tail or "",
                     failure=failure if isinstance(failure, str) else None,
                     started_at=v.started_at)


run_record = _run  # for store/tasks.py, which reads the run a task points at


def reusable(store: Store, key: Key, shas: Iterable[str]) -> dict[str, RunRecord]:
    """Every reusable run stored for these commits under ``key`` (a pure read)."""
    wanted = set(shas)
    q = (select(m.RunRow)
         .where(m.RunRow.oracle_sha256 == key.oracle_sha256,
                m.RunRow.env_fingerprint == key.env_fingerprint,
                m.RunRow.reusable.is_(True))
         .order_by(m.RunRow.id))
    if len(wanted) <= 100:  # a probe's own check: by commit, in the database
        q = q.where(m.RunRow.commit_sha.in_(wanted))
    with store.session() as s:
        rows = s.scalars(q)
        return {v.commit_sha: _run(v) for v in rows if v.commit_sha in wanted}


@dataclass(frozen=True)
class Sample:
    """One stored run of a sampled oracle, with the facts it recorded (a performance oracle's
    samples are in ``facts["perf"]``)."""

    run: RunRecord
    facts: dict[str, Any]


def samples(store: Store, key: Key, shas: Iterable[str]) -> dict[str, list[Sample]]:
    """Every run stored under ``key`` for these commits, oldest first, reusable or not.

    A flaky oracle's runs are samples, not facts: each one is kept (never reusable, so the
    one-reusable-run-per-key index is untouched) and every later bisection reads them all back as
    evidence, which is how reuse and resume work for noisy searches."""
    wanted = set(shas)
    q = (select(m.RunRow)
         .where(m.RunRow.oracle_sha256 == key.oracle_sha256,
                m.RunRow.env_fingerprint == key.env_fingerprint)
         .order_by(m.RunRow.id))
    if len(wanted) <= 100:
        q = q.where(m.RunRow.commit_sha.in_(wanted))
    out: dict[str, list[Sample]] = {}
    with store.session() as s:
        for v in s.scalars(q):
            if v.commit_sha in wanted:
                out.setdefault(v.commit_sha, []).append(Sample(_run(v), dict(v.facts or {})))
    return out


@dataclass(frozen=True)
class Output:
    """Where a stored run's output is: its files (full, capped) and the tail kept in the row."""

    outcome: Outcome
    stdout_path: str | None
    stderr_path: str | None
    output_tail: str
    facts: dict[str, Any]


def outputs(store: Store, key: Key, sha: str) -> list[Output]:
    """Every run stored under ``key`` at one commit, newest first (the prior reads the bad
    endpoint's failure from them)."""
    q = (select(m.RunRow)
         .where(m.RunRow.oracle_sha256 == key.oracle_sha256,
                m.RunRow.env_fingerprint == key.env_fingerprint,
                m.RunRow.commit_sha == sha)
         .order_by(m.RunRow.id.desc()))
    with store.session() as s:
        return [Output(Outcome(v.outcome), v.stdout_path, v.stderr_path, v.output_tail or "",
                       dict(v.facts or {})) for v in s.scalars(q)]


def logged_runs(store: Store, bisection_id: int) -> set[int]:
    """Ids of the runs this bisection's probes point at (its own and adopted ones)."""
    with store.session() as s:
        return {int(r) for r in s.scalars(select(m.Probe.run_id)
                                          .where(m.Probe.bisection_id == bisection_id))}


def own_runs(store: Store, bisection_id: int) -> set[int]:
    """Ids of the runs this bisection made itself (its paid-for probes), adopted ones left
    out: a performance search's baseline must come from its own runs, made alongside the
    commits it is compared with, not from another bisection's day on the machine."""
    with store.session() as s:
        return {int(r) for r in s.scalars(select(m.Probe.run_id)
                                          .where(m.Probe.bisection_id == bisection_id,
                                                 m.Probe.reused.is_(False)))}


def paid_runs(store: Store, bisection_id: int, below: int | None = None) -> int:
    """How many oracle runs this bisection paid for (reused ones are free); with ``below``,
    only at positions before it (the walk's, not those of the search inside a merge)."""
    cond = [m.Probe.bisection_id == bisection_id, m.Probe.reused.is_(False)]
    if below is not None:
        cond.append(m.Probe.position < below)
    with store.session() as s:
        return int(s.scalar(select(func.count()).select_from(m.Probe).where(*cond)) or 0)


def probed_positions(store: Store, bisection_id: int) -> dict[int, tuple[str, str]]:
    """position -> (commit, verdict) of this bisection's own probes (paid for or adopted).
    The commit lets a search inside a merge leave out probes of an earlier one at the same
    positions (``--manual``'s ``back`` into the walk can change the merge)."""
    with store.session() as s:
        rows = s.execute(select(m.Probe.position, m.Probe.commit_sha, m.Probe.verdict)
                         .where(m.Probe.bisection_id == bisection_id)
                         .order_by(m.Probe.seq))
        return {int(pos): (str(sha), str(v)) for pos, sha, v in rows}


def next_seq(s: Session, bisection_id: int) -> int:
    n = s.scalar(select(func.max(m.Probe.seq)).where(m.Probe.bisection_id == bisection_id))
    return 1 if n is None else int(n) + 1


def last_seq(store: Store, bisection_id: int) -> int:
    """The number of the bisection's newest probe (0: none yet): a resumed run counts on
    from it, as the store and `bisect show` number them."""
    with store.session() as s:
        return next_seq(s, bisection_id) - 1


@dataclass(frozen=True)
class Adopted:
    position: int
    commit_sha: str
    run_id: int
    verdict: str


def adopt(store: Store, bisection_id: int, me: str, found: Sequence[Adopted],
          round_: int | None) -> bool:
    """Log runs made elsewhere as this bisection's reused probes (so the log shows them).

    False, and nothing written, when the lease is no longer ours.
    """
    if not found:
        return True
    with store.session() as s:
        if not owned_by(s, bisection_id, me):
            return False
        seq = next_seq(s, bisection_id)
        for i, a in enumerate(found):
            s.add(m.Probe(bisection_id=bisection_id, seq=seq + i, position=a.position,
                          commit_sha=a.commit_sha, run_id=a.run_id, verdict=a.verdict,
                          reused=True, round=round_))
    return True


def run_row(key: Key, run: NewRun, reusable: bool) -> m.RunRow:
    """The row of one run (also written by a worker's fenced write, ``store/tasks.py``)."""
    return m.RunRow(
        commit_sha=run.commit_sha, oracle_sha256=key.oracle_sha256,
        env_fingerprint=key.env_fingerprint, outcome=run.outcome.value,
        exit_code=run.exit_code, reason=run.reason, reusable=reusable,
        duration_s=run.duration_s, started_at=run.started_at, artifact_id=run.artifact_id,
        stdout_path=run.stdout_path, stderr_path=run.stderr_path,
        output_tail=run.output_tail, facts=run.facts)


def _insert_run(store: Store, key: Key, run: NewRun, reusable: bool) -> int:
    with store.session() as s:
        row = run_row(key, run, reusable)
        s.add(row)
        s.flush()
        return int(row.id)


def save_run(store: Store, key: Key, run: NewRun) -> int:
    """Store one run; if its key was decided meanwhile, keep it as non-reusable history."""
    try:
        return _insert_run(store, key, run, run.reusable)
    except IntegrityError:
        if not run.reusable:
            raise
        return _insert_run(store, key, run, False)


# Above ruff's limits on purpose: keywords only: the columns of one probe row.
def add_probe(store: Store, bisection_id: int, me: str, *, position: int, commit_sha: str,  # noqa: PLR0913
              run_id: int, verdict: str, round_: int | None, reused: bool = False) -> bool:
    """Append a paid-for probe; False (nothing written) when the lease is not ours."""
    with store.session() as s:
        if not owned_by(s, bisection_id, me):
            return False
        s.add(m.Probe(bisection_id=bisection_id, seq=next_seq(s, bisection_id),
                      position=position, commit_sha=commit_sha, run_id=run_id,
                      verdict=verdict, reused=reused, round=round_))
    return True


def probes(store: Store, bisection_id: int) -> list[ProbeRecord]:
    with store.session() as s:
        rows = s.execute(select(m.Probe, m.RunRow)
                         .join(m.RunRow, m.Probe.run_id == m.RunRow.id)
                         .where(m.Probe.bisection_id == bisection_id)
                         .order_by(m.Probe.seq)).all()
        return [ProbeRecord(p.seq, p.position, p.commit_sha, p.verdict, p.reused, p.round,
                            _run(v)) for p, v in rows]


def last_round(store: Store, bisection_id: int) -> int:
    """The highest round any probe of this bisection was recorded in (0: none yet)."""
    with store.session() as s:
        n = s.scalar(select(func.max(m.Probe.round))
                     .where(m.Probe.bisection_id == bisection_id, m.Probe.reused.is_(False)))
        return int(n or 0)
