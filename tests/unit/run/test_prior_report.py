"""Which prior a bisection used and what it saved, as plan, show and the reports say it."""

from __future__ import annotations

import pytest

from bisector.run.prior import note, plain_bound, projection, saved, view

pytestmark = pytest.mark.unit

USED = {"mode": "auto", "used": True, "why": "3 of 40 candidates changed what the failure names",
        "expected_probes": {"plain": 7.1, "prior": 5.2}}


def test_saved_counts_against_plain_bisection_for_the_same_culprit() -> None:
    assert saved({**USED, "probes": 5, "plain_probes": 8}) == 3
    assert saved({**USED, "probes": 9, "plain_probes": 8}) == -1
    assert saved(USED) is None
    assert "saved 3 runs" in note({**USED, "probes": 5, "plain_probes": 8})
    assert "1 more" in note({**USED, "probes": 9, "plain_probes": 8})
    plain = {"mode": "none", "used": False, "why": "--prior none", "probes": 8,
             "plain_probes": 8}
    assert note(plain).startswith("Prior: none, plain bisection (--prior none)")
    assert "saved none" in note(plain)


def test_view_adds_saved_and_the_plain_bound() -> None:
    v = view({**USED, "probes": 5, "plain_probes": 8}, 101)
    assert v["saved"] == 3 and v["plain_bound"] == 9 == plain_bound(101)


def test_plan_uses_the_prior_when_the_evidence_is_stored() -> None:
    p = projection(USED, 41, 8.0)
    assert p == {"plain": 8.0, "prior": 6.1}  # the plan's figure less the expected saving
    assert "8.0 plain, 6.1 with the prior" in note({**USED, "projection": p})


def test_plan_before_the_bad_endpoint_gives_both_figures() -> None:
    unknown = {"mode": "auto", "used": None, "why": "built from the bad endpoint's failure"}
    p = projection(unknown, 5001, 14.4)
    prior = p["prior"]
    assert isinstance(prior, dict) and prior["at_most"] == 15 and prior["best"] < 10
    text = note({**unknown, "projection": p})
    assert "14.4 plain" in text and "unknown until the bad endpoint has run" in text
    assert "prior" not in projection({"mode": "none", "used": False}, 5001, 14.4)


def test_saved_counts_plain_bisection_from_the_verdicts_the_run_began_with() -> None:
    """A run that reused every verdict made no run: plain bisection from the same verdicts
    would have made none either, so nothing was saved (it said "saved 6 probes")."""
    from bisector.base.kinds import PriorMode, Verdict
    from bisector.core.prior import Evidence
    from bisector.run.prior import PriorInfo

    plain = PriorInfo(PriorMode.AUTO, None, Evidence(), "the bad endpoint's output names no file")
    began = {0: Verdict.GOOD, 5: Verdict.GOOD, 10: Verdict.GOOD, 14: Verdict.GOOD,
             15: Verdict.BAD, 29: Verdict.BAD}
    s = plain.summary(30, 1, probes=0, culprit=15, start=began)
    assert s["plain_probes"] == 0 and s["reused"] == 6
    said = note(s)
    assert "0 oracle runs, plain bisection 0 for this culprit from the 6 verdicts it began " \
           "with, saved none" in said, said
    # Without the verdicts it began with, plain bisection is priced from nothing.
    fresh = plain.summary(30, 1, probes=0, culprit=15)["plain_probes"]
    assert isinstance(fresh, int) and fresh > 0
