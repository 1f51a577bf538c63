"""A person's verdicts (``--manual``) that are not a probe appended as it ran: an answer taken
back with ``back``, and marks read from a ``git bisect log`` (``start --from-log``).

An answer taken back leaves the bisection's probes (the search, ``show`` and ``bisect log``
no longer see it) and stops being reusable: its run stays as history, marked
``facts["taken_back"]``, so neither this bisection's ``resume`` nor anything reading the key
ever counts it again. The marks of a log are stored as runs of a manual oracle with this
bisection's probes pointing at them, in the transaction that creates the bisection.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from bisector.store import models as m
from bisector.store.bisections import owned_by
from bisector.store.db import Store
from bisector.store.records import NewRun
from bisector.store.runs import Key, run_row


@dataclass(frozen=True)
class Taken:
    """The answer taken back: the probe it was, and the round now in flight again."""

    position: int
    commit_sha: str
    verdict: str
    round: int


@dataclass(frozen=True)
class Seed:
    """One mark of a log, placed on the candidates: the run to store and its verdict."""

    position: int
    run: NewRun
    verdict: str


def _newest_answer(s: Session, bisection_id: int) -> tuple[m.Probe, m.RunRow] | None:
    """The bisection's newest probe that is a person's answer (its run says so). Probes
    nobody answered (a commit that does not build is a skip before anyone is asked) are facts
    about the commit, not answers: ``back`` passes over them and they stay."""
    rows = s.execute(select(m.Probe, m.RunRow)
                     .join(m.RunRow, m.Probe.run_id == m.RunRow.id)
                     .where(m.Probe.bisection_id == bisection_id)
                     .order_by(m.Probe.seq.desc()))
    for probe, run in rows:
        if "manual" in (run.facts or {}):
            return probe, run
    return None


def last(store: Store, bisection_id: int) -> str | None:
    """What ``back`` would take back, in words ("good for abc123456789"); None: nothing."""
    with store.session() as s:
        found = _newest_answer(s, bisection_id)
        return None if found is None else f"{found[0].verdict} for {found[0].commit_sha[:12]}"


def take_back(store: Store, bisection_id: int, me: str) -> tuple[bool, Taken | None]:
    """Remove the newest answer from the bisection (the probe row goes, its run is kept as
    non-reusable history) and note its round as in flight again with that commit in it, so
    this process and a later ``resume`` ask about it next. One transaction; ``(False, None)``
    and nothing changed when the lease is not ours, ``(True, None)`` when there is no answer
    to take back."""
    with store.session() as s:
        if not owned_by(s, bisection_id, me):
            return False, None
        found = _newest_answer(s, bisection_id)
        if found is None:
            return True, None
        probe, run = found
        b = s.get(m.Bisection, bisection_id)
        assert b is not None
        flight: dict[str, Any] = dict(b.in_flight or {})
        positions = {probe.position}
        if probe.round is not None:
            round_ = probe.round
            if flight.get("round") == round_:  # taken back inside the round being asked
                positions |= {int(p) for p in flight.get("positions", ())}
        else:  # a mark of a log (no round): asked again in a round of its own
            top = s.scalar(select(func.max(m.Probe.round))
                           .where(m.Probe.bisection_id == bisection_id))
            round_ = max(int(top or 0), int(flight.get("round", 0))) + 1
        b.in_flight = {"round": round_, "positions": sorted(positions)}
        run.reusable = False
        run.facts = {**(run.facts or {}), "taken_back": {
            "bisection": bisection_id, "at": datetime.now(UTC).isoformat()}}
        taken = Taken(probe.position, probe.commit_sha, probe.verdict, round_)
        s.delete(probe)
    return True, taken


def seed(s: Session, bisection_id: int, key: Key, seeds: Sequence[Seed]) -> None:
    """Inside the transaction creating the bisection: each mark as a run under ``key`` (a
    manual oracle's) and a probe of the bisection pointing at it, in the log's order. Logged
    as reused (nobody ran anything now) and in no round."""
    for seq, one in enumerate(seeds, start=1):
        row = run_row(key, one.run, one.run.reusable)
        s.add(row)
        s.flush()
        s.add(m.Probe(bisection_id=bisection_id, seq=seq, position=one.position,
                      commit_sha=one.run.commit_sha, run_id=row.id, verdict=one.verdict,
                      reused=True, round=None))
