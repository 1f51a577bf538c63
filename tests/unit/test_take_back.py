"""``back`` at a ``--manual`` prompt, in the runner and the store: the previous answer leaves
the bisection, its commit is asked next, a run taken back is never reused, probes nobody
answered stay, and a lease that is not ours changes nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bisector.artifacts.installable import Installable
from bisector.core.verdict import Outcome, Rules
from bisector.executors.base import RunResult
from bisector.oracle.manual import TakeBack
from bisector.oracle.script import Oracle
from bisector.store import answers, bisections
from bisector.store import models as m
from bisector.store import runs as run_store
from bisector.store.db import Store
from bisector.store.records import NewRun
from tests.unit.fakes import make_runner, new_bisection, shas

pytestmark = pytest.mark.unit


class Person:
    """Answers truthfully (bad from ``culprit`` on) except at the calls in ``lies``, and types
    ``back`` at the calls in ``backs``; ``asked`` is every commit put to it, in order."""

    name = "manual"

    def __init__(self, candidates: list[str], culprit: int, *, lies: set[int] = frozenset(),
                 backs: set[int] = frozenset()) -> None:  # type: ignore[assignment]
        self.position = {sha: i for i, sha in enumerate(candidates)}
        self.culprit, self.lies, self.backs = culprit, lies, backs
        self.asked: list[int] = []

    def fingerprint_facts(self) -> dict[str, Any]:
        return {"executor": "manual"}

    def run(self, *, inst: Installable, oracle: Oracle, commit: str, run_dir: Path,
            gpu: str | None = None) -> RunResult:
        pos = self.position[commit]
        self.asked.append(pos)
        if len(self.asked) in self.backs:
            raise TakeBack(commit)
        bug = (pos >= self.culprit) != (len(self.asked) in self.lies)
        out = Outcome.FAIL if bug else Outcome.PASS
        return RunResult(out, "judged by hand", int(bug), 0.0, True,
                         facts={"manual": "shows the bug" if bug else "does not"})


def test_back_twice_returns_to_each_commit_and_the_culprit_is_right(store: Store) -> None:
    cands = shas(32)
    bid = new_bisection(store, cands)
    # Question 3 is answered wrongly; at 4 and 5 the person types back (undoing 3, then 2).
    person = Person(cands, 20, lies={3}, backs={4, 5})
    done = make_runner(store, bid, cands, person).run()  # type: ignore[arg-type]
    assert done.record.culprit_sha == cands[20]
    first, second, third, _fourth = person.asked[:4]
    assert (first, second) == (0, 31)
    assert person.asked[4] == third  # back at 4: the third commit is asked again ...
    assert person.asked[5] == second  # ... back again: the second, and then on
    assert person.asked[6] == third
    probes = run_store.probes(store, bid)
    assert [p.position for p in probes][:3] == [0, 31, third]
    assert len({p.position for p in probes}) == len(probes)  # no commit twice
    with store.session() as s:
        taken = list(s.scalars(select(m.RunRow).where(m.RunRow.reusable.is_(False))
                               .order_by(m.RunRow.id)))
    assert [r.commit_sha for r in taken] == [cands[31], cands[third]]
    assert all(r.facts["taken_back"]["bisection"] == bid for r in taken)


def test_back_passes_over_probes_nobody_answered(store: Store) -> None:
    cands = shas(16)
    bid = new_bisection(store, cands)
    me = "owner@x:1:1"
    with store.session() as s:
        s.get(m.Bisection, bid).owner = me  # type: ignore[union-attr]
    key = run_store.Key(bisections.get(store, bid).oracle_sha256, "env0")
    now = datetime.now(UTC)
    # Round 1: both endpoints answered; round 2: position 7 does not build (nobody asked).
    for pos, outcome, round_, facts in ((0, Outcome.PASS, 1, {"manual": "does not"}),
                                        (15, Outcome.FAIL, 1, {"manual": "shows the bug"}),
                                        (7, Outcome.SKIP, 2, {})):
        run_id = run_store.save_run(store, key, NewRun(cands[pos], outcome, "r", True, now,
                                                       facts=facts))
        assert run_store.add_probe(store, bid, me, position=pos, commit_sha=cands[pos],
                                   run_id=run_id, verdict=Rules().judge(outcome).value,
                                   round_=round_)
    assert bisections.set_in_flight(store, bid, me=me, round_=3, positions=[11])
    assert answers.take_back(store, bid, "someone@else:1:1") == (False, None)  # not ours
    assert answers.last(store, bid) == f"bad for {cands[15][:12]}"
    owned, taken = answers.take_back(store, bid, me)
    assert owned and taken == answers.Taken(15, cands[15], "bad", 1)
    assert [p.position for p in run_store.probes(store, bid)] == [0, 7]  # the skip stays
    assert bisections.get(store, bid).in_flight == {"round": 1, "positions": [15]}
    assert cands[15] not in run_store.reusable(store, key, cands)  # never counted again
    assert answers.last(store, bid) == f"good for {cands[0][:12]}"


def test_nothing_to_take_back_at_the_first_question(store: Store) -> None:
    cands = shas(8)
    bid = new_bisection(store, cands)
    me = "owner@x:1:1"
    with store.session() as s:
        s.get(m.Bisection, bid).owner = me  # type: ignore[union-attr]
    assert answers.last(store, bid) is None
    assert answers.take_back(store, bid, me) == (True, None)
