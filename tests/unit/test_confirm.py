"""Culprit confirmation with the fake executor: fresh runs of the culprit and its parent, and
the revert when one applies; none of them becomes a probe or a reusable verdict."""

from __future__ import annotations

import pytest

from bisector.core.verdict import Outcome
from bisector.kinds import State
from bisector.run.runner import Runner
from bisector.store import verdicts
from bisector.store.db import Store
from tests.unit.fakes import FakeExecutor, make_runner, new_bisection, shas

REVERT = "e" * 40


def with_revert(runner: Runner, sha: str | None) -> Runner:
    runner.revert = lambda culprit, onto: sha  # type: ignore[method-assign]
    return runner


def test_a_deterministic_culprit_is_confirmed_and_changes_nothing_the_search_saw(
        store: Store) -> None:
    cands = shas(64)
    bid = new_bisection(store, cands)
    ex = FakeExecutor(cands, 40)
    r = make_runner(store, bid, cands, ex)
    r.confirm = True
    rec = with_revert(r, None).run().record
    c = rec.result["confirmation"]
    assert rec.state is State.DONE and rec.culprit_sha == cands[40]
    assert c["status"] == "confirmed"
    assert [x["verdict"] for x in c["culprit"]] == ["bad"]
    assert [x["verdict"] for x in c["parent"]] == ["good"]
    assert c["revert"]["applied"] is False
    # Two more runs than probes, and the probes are only the search's.
    probes = verdicts.probes(store, bid)
    assert len(ex.calls) == len(probes) + 2
    assert rec.message is None


def test_a_culprit_that_does_not_reproduce_is_said_so(store: Store) -> None:
    cands = shas(64)
    bid = new_bisection(store, cands)
    calls = {"n": 0}

    def once_bad_then_good(pos: int) -> Outcome:
        calls["n"] += 1
        if pos == 40 and calls["n"] > 8:  # the culprit's second run passes
            return Outcome.PASS
        return Outcome.FAIL if pos >= 40 else Outcome.PASS

    r = make_runner(store, bid, cands, FakeExecutor(cands, 40, outcome=once_bad_then_good))
    r.confirm = True
    rec = with_revert(r, None).run().record
    assert rec.result["confirmation"]["status"] == "not reproducible"
    assert "did not reproduce" in (rec.message or "")


@pytest.mark.parametrize(("revert_is", "status"), [(0, "confirmed"),
                                                    (63, "the revert did not fix it")])
def test_the_revert_is_probed_on_the_bad_endpoint(store: Store, revert_is: int,
                                                  status: str) -> None:
    cands = shas(64)
    bid = new_bisection(store, cands)
    ex = FakeExecutor(cands, 40)
    ex.position[REVERT] = revert_is  # judged as if it were that commit
    r = make_runner(store, bid, cands, ex)
    r.confirm = True
    rec = with_revert(r, REVERT).run().record
    c = rec.result["confirmation"]
    assert c["revert"]["applied"] is True and c["revert"]["sha"] == REVERT
    assert c["status"] == status
    assert any(call.commit == REVERT for call in ex.calls)


def test_a_fresh_run_that_cannot_decide_is_inconclusive_not_a_contradiction(
        store: Store) -> None:
    cands = shas(64)
    bid = new_bisection(store, cands)
    calls = {"n": 0}

    def parent_skips_later(pos: int) -> Outcome:
        calls["n"] += 1
        if pos == 39 and calls["n"] > 8:  # the parent's confirmation run cannot decide
            return Outcome.SKIP
        return Outcome.FAIL if pos >= 40 else Outcome.PASS

    r = make_runner(store, bid, cands, FakeExecutor(cands, 40, outcome=parent_skips_later))
    r.confirm = True
    rec = with_revert(r, None).run().record
    assert rec.culprit_sha == cands[40]
    assert rec.result["confirmation"]["status"] == "inconclusive"
    assert "could not be judged again" in (rec.message or "")
