"""Culprit confirmation with the fake executor: fresh runs of the culprit and its parent, and
the revert when one applies; none of them becomes a probe, a reusable verdict or evidence for
a search. A flaky oracle's runs are weighed by the search's model, not voted on, and the
search's own runs of the culprit and its parent stand in for a first fresh group."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from bisector.app.report.result_text import confirmation_summary
from bisector.base.events import QuietEvents
from bisector.base.kinds import State
from bisector.core import confirmation
from bisector.core.confirmation import Confirmation
from bisector.core.joint import Joint
from bisector.core.noisy import Posterior
from bisector.core.verdict import Outcome
from bisector.run import confirm
from bisector.run.runner import Runner
from bisector.run.strategies import noisy as noisy_run
from bisector.run.strategies import perf as perf_search
from bisector.store import runs as run_store
from bisector.store.db import Store
from bisector.store.records import NewRun
from tests.unit.fakes import (
    ORACLE,
    FakeClone,
    FakeExecutor,
    FakeSource,
    make_runner,
    new_bisection,
    shas,
)

REVERT = "e" * 40


def with_revert(runner: Runner, sha: str | None) -> Runner:
    runner.clone = FakeClone(sha)
    return runner


def test_a_deterministic_culprit_is_confirmed_and_changes_nothing_the_search_saw(
        store: Store) -> None:
    cands = shas(64)
    bid = new_bisection(store, cands)
    ex = FakeExecutor(cands, 40)
    r = make_runner(store, bid, cands, ex, confirm=True)
    rec = with_revert(r, None).run().record
    c = rec.result["confirmation"]
    assert rec.state is State.DONE and rec.culprit_sha == cands[40]
    assert c["status"] == "confirmed"
    assert [x["verdict"] for x in c["culprit"]] == ["bad"]
    assert [x["verdict"] for x in c["parent"]] == ["good"]
    assert c["revert"]["applied"] is False
    # Two more runs than probes, and the probes are only the search's.
    probes = run_store.probes(store, bid)
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

    r = make_runner(store, bid, cands, FakeExecutor(cands, 40, outcome=once_bad_then_good),
                    confirm=True)
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
    r = make_runner(store, bid, cands, ex, confirm=True)
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

    r = make_runner(store, bid, cands, FakeExecutor(cands, 40, outcome=parent_skips_later),
                    confirm=True)
    rec = with_revert(r, None).run().record
    assert rec.culprit_sha == cands[40]
    assert rec.result["confirmation"]["status"] == "inconclusive"
    assert "could not be judged again" in (rec.message or "")


# -- a flaky oracle: fresh runs are weighed by the posterior, not put to a vote ---------------

FLAKY = replace(ORACLE, content=b"# flaky, confirmed\nraise SystemExit(0)\n",
                meta=replace(ORACLE.meta, flaky=True))


def _seen(*said: str) -> list[tuple[int, str, str]]:
    return [(i, v, "") for i, v in enumerate(said)]


def _sure_of_10(fp: float = 0.2, runs: int = 12) -> Posterior:
    """20 commits, ``runs`` runs saying 9 is good and as many saying 10 is bad (weighed with
    the rates integrated out, 12 runs each make 10 the culprit at 0.99999)."""
    return Posterior.from_observations(20, fp, fp, [(9, False)] * runs + [(10, True)] * runs)


def test_one_wrong_fresh_run_in_three_still_confirms_a_flaky_culprit() -> None:
    post = _sure_of_10()
    assert post.prob(10) >= 0.99
    status, before, after = confirmation.weigh(post, 10, _seen("bad", "good", "good"),
                                          _seen("good", "good", "bad"), 0.99)
    # A 3-run vote would call this culprit "not reproducible"; the evidence still holds it.
    assert status is Confirmation.CONFIRMED and after >= 0.99
    assert before == Joint(20, post.history).prob(10)  # as the search's answer was


def test_fresh_runs_that_agree_raise_the_probability() -> None:
    post = _sure_of_10()
    status, before, after = confirmation.weigh(post, 10, _seen("bad", "bad", "bad"),
                                          _seen("good", "good", "good"), 0.99)
    assert status is Confirmation.CONFIRMED and after > before


def test_fresh_runs_that_contradict_weak_evidence_make_it_not_reproducible() -> None:
    post = _sure_of_10(runs=3)  # 0.78: weak evidence, outweighed by six contradicting runs
    status, _, after = confirmation.weigh(post, 10, _seen("good", "good", "good"),
                                     _seen("bad", "bad", "bad"), 0.99)
    assert status is Confirmation.NOT_REPRODUCIBLE and after < 0.5
    assert post.prob(10) > 0.5


def test_contradicting_runs_against_strong_evidence_are_inconclusive() -> None:
    # Six fresh lies in six runs are likelier than the nine the other culprits need.
    status, _, after = confirmation.weigh(_sure_of_10(), 10, _seen("good", "good", "good"),
                                     _seen("bad", "bad", "bad"), 0.99)
    assert status is Confirmation.INCONCLUSIVE and 0.5 <= after < 0.99


def test_a_parent_with_no_answer_is_inconclusive_however_sure_the_rest_is() -> None:
    # The culprit's git parent (8, under --ancestry-path) is not the commit the search ran
    # beside it (9): its fresh runs all skipped, so nothing says it passes.
    status, _, after = confirmation.weigh(_sure_of_10(), 10, _seen("bad", "bad", "bad"),
                                          _seen("skip"), 0.99, parent_position=8)
    assert status is Confirmation.INCONCLUSIVE and after >= 0.99
    # The search's own runs answer for a commit no fresh run was asked of...
    status, _, _ = confirmation.weigh(_sure_of_10(), 10, _seen("bad"), [], 0.99)
    assert status is Confirmation.CONFIRMED
    # ...but not for one whose fresh runs were asked for and all skipped (it stopped building).
    for culprit, parent in ((_seen("skip"), _seen("skip")), (_seen("bad"), _seen("skip")),
                            ([], _seen("skip", "skip"))):
        status, _, _ = confirmation.weigh(_sure_of_10(), 10, culprit, parent, 0.99)
        assert status is Confirmation.INCONCLUSIVE


def test_the_first_group_owes_only_what_the_search_did_not_run() -> None:
    history = [(9, False), (10, True), (10, True), (3, False)]
    assert confirmation.owed(history, 10, 9, 1) == (0, 0)
    assert confirmation.owed(history, 10, 9, 3) == (1, 2)
    assert confirmation.owed(history, 10, 8, 3) == (1, 3)  # a parent the search never ran
    assert confirmation.searched(history, 10) == (2, 2)


class _Phases(QuietEvents):
    """Says when confirmation starts (its first note)."""

    def __init__(self) -> None:
        self.confirming = False

    def note(self, text: str) -> None:
        if text.startswith("confirming"):
            self.confirming = True


def test_a_flaky_culprit_is_confirmed_by_its_posterior_and_shown_with_it(store: Store) -> None:
    cands = shas(64)
    bid = new_bisection(store, cands, oracle=FLAKY)
    ex = FakeExecutor(cands, 40)  # marked flaky, never wrong
    r = with_revert(make_runner(store, bid, cands, ex, oracle=FLAKY, confirm=True), None)
    rec = r.run().record
    c = rec.result["confirmation"]
    assert rec.culprit_sha == cands[40] and c["status"] == "confirmed"
    # The search ran the culprit and its parent (it cannot name one before): those runs are
    # the first group, and a sure culprit needs no fresh one.
    assert c["judged_by"] == "posterior" and c["culprit"] == c["parent"] == []
    failed, runs = c["from_search"]["culprit"]
    assert runs >= 1 and failed == runs and c["from_search"]["parent"][0] == 0
    assert c["probability_after"] == c["probability_before"] >= 0.99
    assert rec.message is None
    assert len(ex.calls) == rec.result["noisy"]["runs"]  # no run beyond the search's
    text = confirmation_summary(c, "good", "bad")
    assert f"culprit: failed {failed} of {runs} in the search, fresh: none" in text


def test_a_flaky_culprit_that_the_fresh_runs_contradict_is_not_advised_to_be_flaky(
        store: Store) -> None:
    cands = shas(64)
    sixes = replace(FLAKY, meta=replace(FLAKY.meta, repeats=6))  # groups of 6: fresh runs
    bid = new_bisection(store, cands, oracle=sixes)
    events = _Phases()

    def turns_after_the_search(pos: int) -> Outcome:
        bad = pos >= 40
        if events.confirming and pos in (39, 40):  # both sides of the culprit change
            bad = not bad
        return Outcome.FAIL if bad else Outcome.PASS

    r = make_runner(store, bid, cands, FakeExecutor(cands, 40, outcome=turns_after_the_search),
                    oracle=sixes, confirm=True)
    r.events = events
    rec = with_revert(r, None).run().record
    c = rec.result["confirmation"]
    # The search's runs of both stand for part of the first group; the fresh rest contradict
    # them and lower the probability (below one half: the search's runs made the oracle look
    # reliable, so each contradiction weighs much): never "done".
    owed = sum(max(0, 6 - runs) for _, runs in c["from_search"].values())
    assert 0 < len(c["culprit"]) + len(c["parent"]) == owed
    assert c["status"] == "not reproducible"
    assert c["probability_after"] < 0.5 < c["probability_before"]
    assert rec.state is State.NOT_REPRODUCIBLE
    assert rec.message and "probability" in rec.message
    assert "flaky = true" not in rec.message and "confidence" in rec.message


def test_advice_fits_the_kind_of_oracle() -> None:
    plain = confirm.warning({"status": "not reproducible", "judged_by": "verdicts"})
    perf = confirm.warning({"status": "not reproducible", "judged_by": "samples"})
    flaky = confirm.warning({"status": "not reproducible", "judged_by": "posterior",
                             "probability_before": 0.995, "probability_after": 0.31,
                             "confidence": 0.99})
    assert plain and "flaky = true" in plain
    assert perf and "flaky = true" not in perf and "threshold" in perf
    assert flaky and "flaky = true" not in flaky and "0.995 to 0.310" in flaky
    assert "confidence" in flaky and "false-positive" in flaky


# -- confirmation runs are never search evidence ---------------------------------------------

def _save(store: Store, key: run_store.Key, sha: str, outcome: Outcome,
          facts: dict[str, Any]) -> int:
    return run_store.save_run(store, key, NewRun(commit_sha=sha, outcome=outcome,
                                                reason="stored", reusable=False,
                                                started_at=datetime.now(UTC), facts=facts))


def test_the_searches_leave_stored_confirmation_runs_out(store: Store) -> None:
    cands = shas(20)
    bid = new_bisection(store, cands, oracle=FLAKY)
    r = make_runner(store, bid, cands, FakeExecutor(cands, 10), oracle=FLAKY)
    searched = _save(store, r.key, cands[5], Outcome.PASS, {})
    for sha, role in ((cands[10], "culprit"), (cands[9], "parent"), (REVERT, "revert")):
        _save(store, r.key, sha, Outcome.FAIL, {"confirmation": {"bisection": bid,
                                                                "role": role}})
    ev, adopted = noisy_run.gather(r.view)
    assert ev.reports == ((5, False),) and not ev.skips
    assert [a.run_id for a, _ in adopted] == [searched]
    by_pos, *_, perf_adopted = perf_search.gather(r.view)
    assert set(by_pos) == {5} and [a.run_id for a, _ in perf_adopted] == [searched]


def test_a_flaky_bisection_stopped_while_confirming_resumes_without_those_runs(
        store: Store) -> None:
    cands = shas(64)
    sixes = replace(FLAKY, meta=replace(FLAKY.meta, repeats=6))  # fresh runs owed
    bid = new_bisection(store, cands, oracle=sixes)
    events = _Phases()
    confirming: list[str] = []

    def stop_on_the_second_confirmation_run(index: int, commit: str) -> None:
        if events.confirming:
            confirming.append(commit)
            if len(confirming) == 2:
                raise KeyboardInterrupt

    ex = FakeExecutor(cands, 40, hook=stop_on_the_second_confirmation_run)
    r = make_runner(store, bid, cands, ex, oracle=sixes, confirm=True)
    r.events = events
    with pytest.raises(KeyboardInterrupt):
        with_revert(r, None).run()
    tagged = [x for xs in run_store.samples(store, r.key, cands).values() for x in xs
              if x.facts.get("confirmation")]
    assert [x.facts["confirmation"] for x in tagged] == [{"bisection": bid, "role": "culprit"}]
    before = len(run_store.probes(store, bid))
    again = make_runner(store, bid, cands, FakeExecutor(cands, 40), oracle=sixes, confirm=True)
    rec = with_revert(again, None).run().record
    probes = run_store.probes(store, bid)
    assert len(probes) == before  # the same evidence: nothing adopted, nothing new to probe
    assert tagged[0].run.id not in {p.run.id for p in probes}
    assert rec.result["noisy"]["runs"] == before
    assert rec.result["confirmation"]["status"] == "confirmed"


# -- each group is obtained once -------------------------------------------------------------

def test_a_group_obtains_its_commit_once_and_a_revert_that_does_not_build_runs_once(
        store: Store) -> None:
    cands = shas(20)
    thrice = replace(FLAKY, meta=replace(FLAKY.meta, repeats=3))  # groups of 3 runs
    bid = new_bisection(store, cands, oracle=thrice)
    src = FakeSource(broken_commits={REVERT})
    ex = FakeExecutor(cands, 10)
    r = with_revert(make_runner(store, bid, cands, ex, oracle=thrice, source=src), REVERT)
    # Sure of a regression between 8 and 11, never having run 9 or 10: a fresh group each.
    around = Posterior.from_observations(20, 0.2, 0.2, [(8, False)] * 12 + [(11, True)] * 12)
    c = confirm.confirm(r.answering().check(r.walk_view), 10, posterior=around)
    assert src.obtained == [10, 9, REVERT]  # once per group, not once per run
    assert len(ex.calls) == 6 and all(call.commit != REVERT for call in ex.calls)
    assert [x["verdict"] for x in c["revert"]["runs"]] == ["skip"]
    assert c["revert"]["verdict"] == "skip" and c["status"] == "confirmed"


def test_the_parent_confirmed_is_the_culprits_git_parent(store: Store) -> None:
    """Under --ancestry-path the walk's previous commit may be another branch's: the parent
    run again is the culprit's own (its first parent on the path), as git says."""
    cands = shas(64)
    bid = new_bisection(store, cands)
    ex = FakeExecutor(cands, 40)
    r = make_runner(store, bid, cands, ex, confirm=True,
                    clone=FakeClone(None, {cands[40]: ["f" * 40, cands[37]]}))
    rec = r.run().record
    c = rec.result["confirmation"]
    assert c["status"] == "confirmed" and c["parent_sha"] == cands[37]
    assert ex.calls[-1].commit == cands[37]  # the confirmation's last run: that parent
    # Where git cannot say (a clone gone), the walk's previous commit, as before.
    bid2 = new_bisection(store, cands, env="env-no-clone")
    r2 = with_revert(make_runner(store, bid2, cands, FakeExecutor(cands, 40), confirm=True),
                     None)
    assert r2.run().record.result["confirmation"]["parent_sha"] == cands[39]


def test_a_flaky_confirmation_runs_groups_of_one_up_to_the_same_cap() -> None:
    assert confirmation.confirm_rounds(1) == 18 and confirmation.confirm_rounds(3) == 6
    assert confirmation.confirm_rounds(4) == 5  # a last partial group still runs whole
