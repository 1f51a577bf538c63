"""The sentences both Markdown reports (``bisect show`` and the GitHub issue) say about a
result that is more than one commit: the suspects of a window, a flaky oracle's answer, the
confirmation of a culprit and a performance bisection's table. One wording for both."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bisector.base.escape import code, md


def suspects_heading(d: dict[str, Any]) -> str:
    new = d["terms"]["new"]
    if (d["result"] or {}).get("noisy"):
        return (f"No commit reached the confidence asked for; the most likely first {new} "
                f"commits:")
    return f"The first {new} commit is one of these (skipped commits hide which):"


def suspect_probabilities(d: dict[str, Any]) -> list[str]:
    """", probability 0.41" per suspect of a flaky oracle's answer; blanks otherwise."""
    qs = (d["result"] or {}).get("probabilities") or []
    return [f", probability {q:.3f}" for q in qs] + [""] * (len(d["suspects"]) - len(qs))


def noisy_summary(noise: dict[str, Any]) -> str:
    """One sentence on a flaky oracle's answer: how sure, from how many runs, at what rates
    (for "no regression" and "inconclusive", how often each endpoint failed)."""
    if "probability" not in noise:
        p = noise.get("regression_probability")
        return (f"Flaky oracle: the bad endpoint failed {noise['bad_fails']:.0%} of "
                f"{noise['bad_runs']} runs, the good one {noise['good_fails']:.0%} of "
                f"{noise['good_runs']}; a regression is a rise of "
                f"{noise['min_contrast']:.0%} or more"
                + (f" (its probability {p:.3f})" if p is not None else ""))
    reg = noise.get("regression_probability")
    return (f"Flaky oracle: probability {noise['probability']:.4f} for the most likely culprit "
            f"(asked for {noise['confidence']}), from {noise['runs']} runs; false positives "
            f"{noise['false_positive']:.3f}, false negatives {noise['false_negative']:.3f} "
            f"({noise['rates']})"
            + (f"; probability of a regression in the range {reg:.4f}" if reg is not None
               else ""))


def confirmation_summary(c: dict[str, Any], old: str, new: str) -> str:
    """One sentence: did the culprit hold up on fresh runs, and did its revert fix it."""
    names = {"good": old, "bad": new, "skip": "skip"}
    by_samples = c.get("judged_by") == "samples"  # each run exits 0: the samples decide

    def said(runs: list[dict[str, Any]], group: str | None) -> str:
        if by_samples and group is not None:
            return f"{names.get(group, group)} from the samples of {len(runs)} runs"
        return ", ".join(names.get(r["verdict"], r["verdict"]) for r in runs)

    if c.get("judged_by") == "paired":
        change = "" if c.get("change") is None else f", {100 * c['change']:+.1f} %"
        p = "" if c.get("p_value") is None else f", p {c['p_value']:.2g}"
        rv = c.get("revert") or {}
        got = str(rv.get("verdict"))
        revert = (f"its revert beside the parent: {names.get(got, got)}"
                  if rv.get("applied") else "no clean revert onto the bad endpoint")
        return (f"Confirmation: {c['status']} (the culprit beside its parent, "
                f"{c.get('pairs', 0)} pairs{change}{p}; {revert})")
    parent = f"parent `{c['parent_sha'][:12]}`" if c.get("parent_sha") else "parent"
    searched = c.get("from_search") or {}

    def again(role: str, name: str) -> str:
        fresh = said(c[role], c.get(f"{role}_verdict")) if c[role] else "none"
        if role not in searched:
            return f"{name} again: {fresh}"
        failed, runs = searched[role]
        return f"{name}: failed {failed} of {runs} in the search, fresh: {fresh}"

    text = (f"Confirmation: {c['status']} ({again('culprit', 'culprit')}; "
            f"{again('parent', parent)}; ")
    if "probability_after" in c and not (c["culprit"] or c["parent"]):  # none owed
        text += (f"the culprit's probability {c['probability_after']:.4f} (confirmed at "
                 f"{c['confidence']} or more); ")
    elif "probability_after" in c:  # a flaky oracle: the runs weighed, not voted on
        text += (f"the culprit's probability {c['probability_before']:.4f} after the search, "
                 f"{c['probability_after']:.4f} with the fresh runs (confirmed at "
                 f"{c['confidence']} or more); ")
    rv = c.get("revert") or {}
    if rv.get("applied"):
        return text + f"its revert on the {new} endpoint: {said(rv['runs'], rv.get('verdict'))})"
    return text + "no clean revert onto the bad endpoint)"


def perf_table(pf: dict[str, Any], old: str, new: str) -> list[str]:
    """Medians and the relative change of every judged commit against the good endpoint."""
    unit = pf.get("unit") or ""
    paired = pf.get("compared") == "paired"
    scale = pf.get("scale") or {}
    if paired and scale:  # decided after every pair, by the bisection's own scale
        how = (f"each run paired with the good endpoint's runs beside it, one-sided t-test by "
               f"the bisection's scale: a pair moves {100 * float(scale['sd']):.2g} % between "
               f"runs, {float(scale['dof']):g} degrees of freedom")
    else:  # a record of an older bisector
        how = ("each run paired with the good endpoint's runs beside it, Wilcoxon signed-rank, "
               "one-sided" if paired else "Mann-Whitney U, one-sided")
    out = [f"Performance: {old} endpoint median {pf['baseline_median']:.4g} {unit} "
           f"({pf['baseline_runs']} runs, {pf['direction']}); {new} = "
           f"{pf.get('sought', 'worse')} by more than "
           f"{100 * pf['threshold']:.3g} % ({how})", ""]
    ref = pf.get("reference")
    if ref:
        out += [f"The {old} endpoint itself measured {ref['first']:.4g} {unit} at the start and "
                f"{ref['last']:.4g} {unit} at the end ({100 * ref['change']:+.1f} %; its runs "
                f"spread over {100 * ref['spread']:.1f} %): the machine's drift, which pairing "
                f"takes out.", ""]
    out += ["| commit | runs | pairs | median | change | verdict | p |",
            "|---|---|---|---|---|---|---|"]
    for row in sorted(pf["commits"], key=lambda r: r["position"]):
        change = "" if row["change"] is None else f"{100 * row['change']:+.1f} %"
        med = "" if row["median"] is None else f"{row['median']:.4g} {unit}"
        p = "" if row["p_value"] is None else f"{row['p_value']:.2g}"
        verdict = {"good": old, "bad": new}.get(row["verdict"], row["verdict"])
        out.append(f"| `{row['sha'][:12]}` | {row['runs']} | {row.get('pairs', '')} | {med} "
                   f"| {change} | {verdict} | {p} |")
    return out


def commit_lines(c: dict[str, Any]) -> list[str]:
    """A named commit's subject, author and pull request as Markdown list items (the culprit,
    or the commit inside a merge): the same words wherever a commit is named."""
    out = []
    if c.get("subject"):
        out.append(f"- **{md(c['subject'])}**")
        out.append(f"- Author: {md(c.get('author') or '')} "
                   f"({md(c.get('author_email') or '')}), {c.get('date')}")
    if c.get("pr"):
        link = f" ({c['pr_url']})" if c.get("pr_url") else ""
        out.append(f"- Pull request: #{c['pr']}{link}")
    return out


def range_commits(d: dict[str, Any]) -> int:
    """The range's commits as ``git rev-list --count`` counts them: the candidates less the
    good endpoint (a view recorded before the field existed has only ``candidates``)."""
    return int(d.get("range_commits", max(0, int(d["candidates"]) - 1)))


def skipped_up_front(p: dict[str, Any]) -> bool:
    """A ``--skip`` mark: stored as a probe with a person's skip (``run/from_log.skipping``),
    yet no verdict of any run, so never counted as a reused one."""
    return bool(p["reused"]) and "skip" in (p.get("facts") or {})


def probe_counts(d: dict[str, Any]) -> str:
    """"3 oracle runs, 4 reused verdicts, 4 skipped up front (--skip)": how the probes of
    ``show``, the issue and the HTML report divide, in one wording. A ``--skip`` mark was
    counted as a reused verdict, so "4 reused" read 8 with nothing reused but the endpoints."""
    skipped = sum(1 for p in d["probes"] if skipped_up_front(p))
    reused = sum(1 for p in d["probes"] if p["reused"]) - skipped
    return (f"{d['oracle_runs']} oracle runs, {reused} reused verdicts"
            + (f", {skipped} skipped up front (--skip)" if skipped else ""))


def inherited_line(d: dict[str, Any], scrub: Callable[[str], str] = str) -> str | None:
    """The variables the runs inherited from the machine that ran them (not given with
    ``--env``; ``show``'s ``inherited_env``), said beside the commands to type, which carry
    ``--env`` alone: the environment the runs had, not flags for the reader. None without."""
    env = d.get("inherited_env") or {}
    if not env:
        return None
    pairs = ", ".join(code(scrub(f"{k}={v}")) for k, v in sorted(env.items()))
    return (f"The runs also had {pairs}: set where they ran, not with --env, so no command "
            f"here carries it.")
