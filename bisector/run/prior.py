"""Which prior a bisection's search uses, built once the bad endpoint has run.

``--prior auto`` (the default): when the bad endpoint has a stored run under the bisection's
key, its output (the files, else the tail kept in the row; a failing run first) and a command
oracle's words are read for evidence (:func:`bisector.core.prior.read_evidence`), the files
are named as the repository names them at the bad endpoint, and each candidate's changes are
read from git (:mod:`bisector.project.evidence`); :func:`bisector.core.prior.build` weighs
them. No evidence, or none that a candidate matches: no prior, the search is plain. ``none``:
never a prior. The same stored runs and history give the same prior, so resume needs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import git

from bisector.base import defaults
from bisector.base.kinds import PriorMode, Verdict
from bisector.core.prior import Evidence, Prior, build, expected_probes, probes_to, read_evidence
from bisector.core.verdict import Rules
from bisector.project import evidence as repo_evidence
from bisector.store import runs as run_store
from bisector.store.db import Store

# Bytes read from the end of each output file: a traceback is at the end, and an oracle may
# print megabytes before it.
TAIL_BYTES = 256 * 1024


@dataclass(frozen=True)
class PriorInfo:
    """The prior a search uses (None: plain), what it came from, and why."""

    mode: PriorMode
    prior: Prior | None
    evidence: Evidence
    why: str

    def summary(self, n: int, width: int = 1, probes: int | None = None,
                culprit: int | None = None,
                start: Mapping[int, Verdict] | None = None) -> dict[str, object]:
        """For ``show``, ``plan`` and the reports: which prior, the evidence, and the probes
        a deterministic search is expected to make with it and without it (if it is right),
        and, once the culprit is known, how many runs plain bisection would have paid for it
        from the same ``start`` (the stored verdicts and ``--skip`` marks the run began
        with): against plain bisection from nothing, a run that reused every verdict "saved
        6 probes" with no run made, and the prior had saved none of them."""
        out: dict[str, object] = {"mode": self.mode.value, "used": self.prior is not None,
                                  "why": self.why, "evidence": self.evidence.summary()}
        if self.prior is not None:
            plain, weighted = expected_probes(n, self.prior, width)
            out.update(matched=self.prior.matched, candidates=n - 1,
                       weight=self.prior.weight,
                       expected_probes={"plain": round(plain, 2), "prior": round(weighted, 2)})
        if probes is not None:
            out["probes"] = probes
        if culprit is not None:
            out["plain_probes"] = probes_to(n, culprit, None, width, start)
            if start:
                out["reused"] = len(start)
        return out


def _text(out: run_store.Output) -> str:
    parts = []
    for name in (out.stderr_path, out.stdout_path):
        if not name:
            continue
        try:
            with Path(name).open("rb") as f:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - TAIL_BYTES))
                parts.append(f.read().decode(errors="replace"))
        except OSError:
            continue
    return "\n".join(parts) or out.output_tail


class FailurePrior:
    """Builds the prior on the first ask after the bad endpoint has a run, then keeps it."""

    def __init__(self, mode: PriorMode, repo: Callable[[], git.Repo],
                 command: Sequence[str] = ()) -> None:
        self.mode, self.repo, self.command = mode, repo, tuple(command)
        self.info: PriorInfo | None = None

    def get(self, store: Store, key: run_store.Key, candidates: Sequence[str],
            rules: Rules) -> PriorInfo | None:
        """The prior, or None while the bad endpoint has no stored run yet."""
        if self.info is not None:
            return self.info
        if self.mode is PriorMode.NONE:
            self.info = PriorInfo(self.mode, None, Evidence(), "--prior none")
            return self.info
        bad = candidates[-1]
        outs = [o for o in run_store.outputs(store, key, bad) if not o.facts.get("confirmation")]
        if not outs:
            return None
        failing = [o for o in outs if rules.judge(o.outcome) is Verdict.BAD]
        text = _text((failing or outs)[0])
        found = read_evidence(text, self.command)
        self.info = self.make(found, candidates)
        return self.info

    def make(self, found: Evidence, candidates: Sequence[str]) -> PriorInfo:
        if not found:
            return PriorInfo(self.mode, None, found, "the bad endpoint's output names no file")
        repo = self.repo()
        named = repo_evidence.resolve(repo, candidates[-1], found)
        if not named:
            return PriorInfo(self.mode, None, found,
                             "no file the failure names is in the repository")
        prior = build(named, repo_evidence.changes(repo, candidates, named))
        if prior is None:
            return PriorInfo(self.mode, None, named,
                             "no candidate changed what the failure names")
        return PriorInfo(self.mode, prior, named,
                         f"{prior.matched} of {len(candidates) - 1} candidates changed what "
                         f"the failure names ({len(named.files)} file(s))")


def planned(source: FailurePrior, store: Store, key: run_store.Key, candidates: Sequence[str],
            rules: Rules, width: int = 1) -> dict[str, object]:
    """What ``bisect plan`` says about the prior: the one a run would use now when the bad
    endpoint already has a stored run, else that it is built once the bad endpoint has run."""
    info = source.get(store, key, candidates, rules)
    if info is None:
        return {"mode": source.mode.value, "used": None,
                "why": "built from the bad endpoint's failure once it has run"}
    return info.summary(len(candidates), width)


def plain_bound(n: int) -> int:
    """The probes plain bisection makes at most over ``n`` candidates, endpoints included
    (ceil(log2 (n - 1)) between them): what a prior's saving is counted against."""
    return math.ceil(math.log2(max(n - 1, 1))) + 2


def saved(summary: dict[str, object]) -> int | None:
    """Probes the search saved against plain bisection for the same culprit (negative: it
    spent more), once a bisection has an answer; None before."""
    plain, probes = summary.get("plain_probes"), summary.get("probes")
    if isinstance(plain, int) and isinstance(probes, int):
        return plain - probes
    return None


def view(summary: dict[str, object], n: int) -> dict[str, object]:
    """A stored prior summary as ``show`` and the reports give it: with what it saved against
    plain bisection for this culprit (``saved``, once there is an answer) and plain
    bisection's bound over the ``n`` candidates (``plain_bound``)."""
    return {**summary, "saved": saved(summary), "plain_bound": plain_bound(n)}


def projection(summary: dict[str, object], n: int, plain: float) -> dict[str, object]:
    """``plan``'s two figures: the projection of plain bisection (``plain``, the plan's own
    simulation) and with the prior. With evidence already stored the prior's figure is the
    plan's less what the prior is expected to save if it is right; before the bad endpoint has
    run its evidence cannot be known, so the prior's figure is a range: as few as when the
    failure points at the culprit alone, never more than the bound."""
    expected = summary.get("expected_probes")
    out: dict[str, object] = {"plain": round(plain, 2)}
    if summary.get("used") and isinstance(expected, dict):
        gain = float(expected["plain"]) - float(expected["prior"])
        out["prior"] = round(max(plain - gain, 1.0), 2)
    elif summary.get("used") is None and summary.get("mode") != "none" and n > 2:
        culprit, lam = n // 2, defaults.PRIOR_WEIGHT
        best = Prior.from_weights([(1 - lam) / (n - 1) + (lam if c == culprit else 0.0)
                                   for c in range(1, n)], matched=1)
        out["prior"] = {"best": probes_to(n, culprit, best),
                        "at_most": math.ceil(math.log2(n)) + 2,
                        "why": "the prior is read from the bad endpoint's failure: unknown "
                               "until it has run"}
    return out


def note(summary: dict[str, object]) -> str:
    """One line for ``plan`` and ``show``: which prior, and what it saved or may save."""
    mode, why = summary.get("mode"), summary.get("why")
    expected = summary.get("expected_probes")
    got = saved(summary)
    reused = summary.get("reused")
    done = (f"; this bisection: {summary['probes']} oracle runs, plain bisection "
            f"{summary['plain_probes']} for this culprit"
            f"{f' from the {reused} verdicts it began with' if reused else ''}, "
            f"{_saved_words(got)}" if got is not None else "")
    if not summary.get("used") or not isinstance(expected, dict):
        head = (f"Prior: {mode}, plain bisection ({why})" if summary.get("used") is False
                else f"Prior: {mode} ({why})")
        return head + done + _projected(summary.get("projection"))
    return (f"Prior: {mode}, from the failure: {why}; expected probes if it is right "
            f"{expected['prior']} (plain bisection {expected['plain']})" + done
            + _projected(summary.get("projection")))


def _saved_words(n: int) -> str:
    return (f"saved {n} run{'s' if n != 1 else ''}" if n > 0 else
            "saved none" if n == 0 else f"{-n} more")


def _projected(p: object) -> str:
    if not isinstance(p, dict) or "prior" not in p:
        return ""
    prior = p["prior"]
    if isinstance(prior, dict):
        return (f"; projected probes: {p['plain']} plain; with a prior from the failure "
                f"(unknown until the bad endpoint has run) {prior['best']} if it points at "
                f"the culprit alone, at most {prior['at_most']}")
    return f"; projected probes: {p['plain']} plain, {prior} with the prior if it is right"
