"""What every report says of the failure hunted (``run/hunt.py``): the rule that judged failing
runs, the failure the bad endpoint showed, and the commits that failed differently.

Those commits are skips, stepped around by the search, and each is listed with its own failure
line: a window of them next to the answer is what a person checks first (a failure reworded
inside the range would hide the culprit among them; ``--match`` or ``--any-failure`` then say
what the bug is). A probe failed differently exactly when its verdict is a skip and its stored
run a failure: no other rule turns a failing run into a skip (``--match`` stores the skip as
the run's own outcome, a build failure or an oracle's exit 125 are skips already).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bisector.base.escape import code, md
from bisector.core.signature import FAILURE_FACT, LONGEST, failure_of, last_line
from bisector.core.verdict import Polarity
from bisector.oracle.script import parse_metadata
from bisector.run.config import RunConfig
from bisector.run.hunt import DIFFERENTLY
from bisector.store.records import OracleRecord

SAME = "same-failure"  # the default: a failure unlike the bad endpoint's is a skip
ANY = "any-failure"  # git's rule, asked for
MATCH = "match"  # an explicit signature (--match or the oracle's)
EXIT = "exit-code"  # a rule where failures are not compared (flaky, performance, manual...)


def rule_of(cfg: RunConfig, oracle: OracleRecord) -> str:
    """Which rule judged this bisection's failing runs (as ``run/hunt.hunt_for`` chose)."""
    judging = dict(tuple(x) for x in oracle.meta.get("judging") or ())
    if cfg.request.match is not None or judging.get("match") is not None:
        return MATCH
    if cfg.request.any_failure:
        return ANY
    try:
        meta = parse_metadata(oracle.content, oracle.name)
    except Exception:  # stored by an older bisector under other metadata rules: not compared
        return EXIT
    if (cfg.request.manual or meta.sampled or meta.match is not None
            or cfg.rules.polarity is not Polarity.FAILURE):
        return EXIT
    return SAME


def annotate(d: dict[str, Any], rule: str) -> None:
    """Add ``hunted`` (the rule and the failure hunted) and ``failed_differently`` (the
    probes skipped for it, oldest probe first) to ``show`` data, and give those probes their
    reason (``fails differently: <line>``; the stored run says ``exit 1``)."""
    anchor = 0 if d["find_fix"] else d["candidates"] - 1
    hunted = None
    differently: list[dict[str, Any]] = []
    for p in d["probes"]:
        line = failure_of(p["facts"].get(FAILURE_FACT), p["output_tail"] or "")
        if p["position"] == anchor and p["outcome"] == "fail" and hunted is None:
            hunted = line
        if rule == SAME and p["verdict"] == "skip" and p["outcome"] == "fail":
            said = (line or last_line(p["output_tail"] or ""))[:LONGEST]
            p["reason"] = DIFFERENTLY + said
            p["failed_differently"] = True
            differently.append({"seq": p["seq"], "sha": p["sha"], "position": p["position"],
                                "subject": p.get("subject", ""), "failure": said,
                                "reused": p["reused"]})
    d["hunted"] = {"rule": rule, "failure": hunted if rule == SAME else None}
    d["failed_differently"] = differently


def rule_line(d: dict[str, Any]) -> str:
    """One line for ``show``: which failure was hunted; "" where failures are not compared."""
    h = d.get("hunted") or {}
    if h.get("rule") == ANY:
        return "Failures: every failure counts as the bug (--any-failure, git's rule)"
    if h.get("rule") == MATCH:
        return "Failures: the bug is the failure the signature (--match) names"
    if h.get("rule") != SAME:
        return ""
    if not h.get("failure"):
        return ("Failures: every failure counts as the bug (the bad endpoint printed no "
                "failure line to compare with)")
    n = len(d.get("failed_differently") or ())
    return (f"Failure hunted: {code(h['failure'])}; a probe that fails otherwise is skipped "
            f"({n} failed differently; --any-failure counts every failure)")


def section(d: dict[str, Any], scrub: Callable[[str], str] = lambda s: s) -> list[str]:
    """The Markdown list of commits that failed differently (``show`` and the issue)."""
    rows = d.get("failed_differently") or []
    if not rows:
        return []
    bug = (d.get("hunted") or {}).get("failure") or ""
    out = ["", f"Failed differently ({len(rows)} skipped, not evidence of this regression; "
           f"the failure hunted is {code(scrub(bug))}):", ""]
    for r in rows:
        subject = f" {md(r['subject'][:60])}" if r.get("subject") else ""
        out.append(f"- `{r['sha'][:12]}`{subject}: {code(scrub(r['failure']))}")
    return out
