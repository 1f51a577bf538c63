"""Read-side views of stored bisections: list, show (paste-ready Markdown), log (git-style).

Each view is built as plain data first (what ``--json`` prints) and rendered second, so the
Markdown and the JSON can never disagree.
"""

from __future__ import annotations

from typing import Any

import git

from bisector.app.list_rows import commit_facts, effective_state, open_clone
from bisector.app.report import compile_debug, compiler_pass, hunted, merge_text
from bisector.app.report.phases import phase_markdown
from bisector.app.report.result_text import (
    commit_lines,
    confirmation_summary,
    inherited_line,
    noisy_summary,
    perf_table,
    probe_counts,
    range_commits,
    skipped_up_front,
    suspect_probabilities,
    suspects_heading,
)
from bisector.base import defaults, oracle_env
from bisector.base.escape import code, fence, md
from bisector.base.kinds import ArtifactKind, ArtifactStatus, Way
from bisector.core.verdict import Polarity
from bisector.project import history
from bisector.project.profiles import report_names as project_words
from bisector.run.config import RunConfig, reproduce_command
from bisector.run.prior import note as prior_note
from bisector.run.prior import view as prior_view
from bisector.store import bisections, views
from bisector.store.db import Store
from bisector.store.records import ArtifactRecord


def _portable_ref(repo: git.Repo | None, ref: str, sha: str) -> str:
    """What another clone resolves to the same commit: a tag that points at it, else the sha
    (a branch such as ``main`` moves, and a local branch does not exist elsewhere)."""
    if repo is not None:
        try:
            if repo.tags[ref].commit.hexsha == sha:
                return ref
        except (IndexError, ValueError, git.BadName, git.GitCommandError):
            pass
    return sha


def show_data(store: Store, bisection_id: int, cfg: RunConfig) -> dict[str, Any]:
    b = bisections.get(store, bisection_id)
    repo = open_clone(b.repo_path)
    slug = history.github_slug(repo) if repo else None
    old, new = cfg.rules.terms
    oracle = bisections.get_oracle(store, b.oracle_sha256)
    data: dict[str, Any] = {
        "id": b.id,
        "state": effective_state(b),
        "repo": b.repo_path,
        "good": {"ref": b.good_ref, "sha": b.good_sha,
                 "portable": _portable_ref(repo, b.good_ref, b.good_sha),
                 # What the search started from: the merge-base when the good ref is not an
                 # ancestor of the bad one (as git bisect tests it); the log's start line.
                 "searched": views.candidate_at(store, bisection_id, 0) or b.good_sha},
        "bad": {"ref": b.bad_ref, "sha": b.bad_sha,
                "portable": _portable_ref(repo, b.bad_ref, b.bad_sha)},
        "terms": {"old": old, "new": new},
        "walk": "first-parent" if cfg.first_parent else "ancestry-path",
        "paths": list(cfg.request.path),  # --path: the log's start line ends "-- PATHS"
        "oracle": {"name": b.oracle_name, "sha256": b.oracle_sha256,
                   "source": oracle.content},
        "github": slug,
        "compare_url": (f"https://github.com/{slug}/compare/{b.good_sha}...{b.bad_sha}"
                        if slug else None),
        # Wheels of an index placed on the range: the timeline marks them, and the issue
        # report names the two nightlies the regression falls between.
        "prebuilts": [{"position": pb.position, "sha": pb.wheel.commit, "kind": pb.wheel.kind,
                       "version": pb.wheel.version} for pb in cfg.prebuilts],
        "project": project_words(cfg.profile, slug or b.repo_path),
        "polarity": cfg.rules.polarity.value,
        "find_fix": cfg.rules.find_fix,
        "on_timeout": cfg.rules.on_timeout.value,
        "jobs": cfg.width,
        "gpus": list(cfg.gpus),
        "candidates": b.n_candidates,
        # The range's commits as `git rev-list --count [--first-parent] good..bad` counts
        # them: the candidates less the good endpoint, which is no commit of the range.
        "range_commits": max(0, b.n_candidates - 1),
        "environment": b.environment,
        "env_fingerprint": b.env_fingerprint,
        "notes": [*b.notes, *merge_text.notes(store, b, repo, cfg)],
        "message": b.message,
        "result": b.result,
        "culprit": commit_facts(repo, b.culprit_sha, slug) if b.culprit_sha else None,
        "inside": merge_text.inside(b.result, lambda sha: commit_facts(repo, sha, slug)),
        "merge_at": merge_text.merge_at(store, b),  # the walk's position of that merge
        "suspects": [commit_facts(repo, x, slug) for x in b.result.get("suspects", [])],
        # As the issue's line: the variables the user chose (--env), not those the run
        # inherited (an image's TORCH_SYMM_MEM_DISABLE_MULTICAST=1, CUDA_VERSION): those are
        # the environment the runs had, said beside the line.
        "reproduce": reproduce_command(cfg.request),
        "inherited_env": oracle_env.shown({k: v for k, v in cfg.oracle_env.items()
                                           if k in cfg.request.inherited}),
        # Which prior the search used (--prior), its evidence, and the probes it saved.
        "prior": prior_view((b.result or {}).get("prior") or {
            "mode": cfg.request.prior.value, "used": None,
            "why": "built once the bad endpoint has failed in this bisection"},
            b.n_candidates),
        "probes": [],
        "oracle_runs": 0,
        "rounds": 0,
    }
    for p in views.probe_views(store, bisection_id):
        a = p.artifact
        entry: dict[str, Any] = {
            "seq": p.seq,
            "round": p.round,
            "position": p.position,
            "inside": p.position >= b.n_candidates,  # of the search inside a merge
            "sha": p.commit_sha,
            "verdict": p.verdict,
            "reused": p.reused,
            "outcome": p.outcome,
            "exit_code": p.exit_code,
            "reason": p.reason,
            "duration_s": round(p.duration_s, 3),
            "output_tail": p.output_tail,
            "stdout": p.stdout_path,
            "stderr": p.stderr_path,
            "facts": p.facts,
            "gpu": p.facts.get("gpu_index"),
            "phases": p.facts.get("phases"),
            "started_at": p.started_at.isoformat() if p.started_at is not None else None,
            "artifact": a.kind.value if a is not None else None,
            # cached, bucket (another box made it), build, prebuilt, overlay, broken
            "obtained": p.facts.get("obtained_as"),
        }
        if a is not None and a.status in (ArtifactStatus.FAILED, ArtifactStatus.ERROR):
            entry["build_log"] = a.log_path
            entry["build_log_tail"] = a.log_tail
        # Built by this probe (an older store did not record it: then assume it was).
        if a is not None and a.kind is ArtifactKind.SOURCE and p.facts.get("artifact_fresh",
                                                                          True):
            entry["build"] = _build_entry(a)
        if repo is not None:
            entry["subject"] = commit_facts(repo, p.commit_sha, None).get("subject", "")
        data["probes"].append(entry)
        data["oracle_runs"] += 0 if p.reused or p.exit_code is None else 1
    data["confirm_builds"] = confirmation_builds(store, b.result or {})
    decided = _perf_verdicts(b.result)
    for entry in data["probes"]:
        # A performance oracle's runs exit 0; what a commit is comes from its samples.
        if entry["position"] in decided:
            entry["raw_verdict"], entry["verdict"] = entry["verdict"], decided[entry["position"]]
    hunted.annotate(data, hunted.rule_of(cfg, oracle))  # the failure hunted (run/hunt.py)
    data["rounds"] = len({p["round"] for p in data["probes"]
                          if p["round"] is not None and not p["reused"]})
    # A compile failure: the commands that show what dynamo/inductor did at the culprit.
    data["compile_debug"] = compile_debug.hints(data, cfg.request)
    return data


def _build_entry(a: ArtifactRecord) -> dict[str, Any]:
    return {
        "seconds": round(a.duration_s, 1), "status": a.status.value,
        "where": "assembled from the tree" if (a.stats or {}).get("assembled")
        else (a.settings.get("builder") or {}).get("where", "host"),
        **({"ccache": a.stats["ccache"]} if a.stats and "ccache" in a.stats else {}),
    }


def confirmation_builds(store: Store, result: dict[str, Any]) -> list[dict[str, Any]]:
    """The source builds confirmation paid for (the revert's, mostly: the culprit and its
    parent were built for the search), each artifact once among them, with what it was built
    for; none when the confirmation was another bisection's, reused. A report counting only
    the probes' builds said "Source builds: 6" for 7."""
    c = result.get("confirmation") or {}
    if c.get("reused_from"):  # another bisection's runs: it paid for their builds
        return []
    role = {int(x["run"]): side for side in ("culprit", "parent")
            for x in c.get(side) or [] if x.get("run") is not None}
    role.update({int(x["run"]): "revert" for x in (c.get("revert") or {}).get("runs") or []
                 if x.get("run") is not None})
    out: dict[int, dict[str, Any]] = {}
    for run_id, facts, a in views.run_artifacts(store, sorted(role)):
        if a.kind is ArtifactKind.SOURCE and facts.get("artifact_fresh") and a.id not in out:
            out[a.id] = {**_build_entry(a), "for": role[run_id]}
    return list(out.values())


def builds_line(d: dict[str, Any]) -> str | None:
    """"- Source builds: N, …" for the builds that ran for this bisection (a wheel found in the
    cache is not one), those confirmation paid for (its revert) included; None without any."""
    builds = [p["build"] for p in d["probes"] if p.get("build") and not p["reused"]]
    extra = d.get("confirm_builds") or []
    builds += extra
    if not builds:
        return None
    hits = sum(b.get("ccache", {}).get("hits", 0) for b in builds)
    calls = hits + sum(b.get("ccache", {}).get("misses", 0) for b in builds)
    cache = f", ccache {hits}/{calls} hits" if calls else ""
    why = ", ".join(sorted({b.get("for") or "confirmation" for b in extra}))
    return (f"- Source builds: {len(builds)}"
            + (f" ({len(extra)} for confirmation: {why})" if extra else "")
            + f", {sum(b['seconds'] for b in builds):.0f}s in all{cache}")


def _perf_verdicts(result: dict[str, Any]) -> dict[int, str]:
    """position -> the verdict a performance search decided from the samples (good endpoint
    included); empty for other oracles."""
    pf = result.get("perf")
    if not pf:
        return {}
    out = {row["position"]: row["verdict"] for row in pf["commits"]
           if row["verdict"] in ("good", "bad", "skip")}
    out[0] = "good"
    return out


def _bug_words(d: dict[str, Any]) -> str:
    """What the oracle says when the bug is there: a failure, a pass, or for a performance
    oracle a measurement worse (or better) by more than its threshold."""
    pf = (d.get("result") or {}).get("perf")
    if pf:
        return f"{pf.get('sought', 'worse')} by more than {100 * pf['threshold']:.3g} %"
    return f"oracle {'fails' if d['polarity'] == Polarity.FAILURE.value else 'passes'}"


# Above ruff's limits on purpose: the record's sections in the order `show` prints them.
def show_markdown(d: dict[str, Any]) -> str:  # noqa: C901, PLR0912
    """``bisect show``: Markdown for a terminal and for pasting. Every string from a repository
    or an oracle is escaped (:mod:`bisector.base.escape`), code blocks are fenced longer than
    any backtick run they hold."""
    old, new = d["terms"]["old"], d["terms"]["new"]
    lines = [f"## bisector #{d['id']}: {d['state']}", ""]
    c = d["culprit"]
    if c:
        title = (f"Suspected first {new} commit, {d['state']}: `{c['sha']}`"
                 if d["state"] in ("not reproducible", "inconclusive")
                 else f"First {new} commit: `{c['sha']}`")
        lines += [title, "", *commit_lines(c), "", *merge_text.markdown(d)]
    elif d["suspects"]:
        lines += [suspects_heading(d), ""]
        for x, q in zip(d["suspects"], suspect_probabilities(d), strict=False):
            lines.append(f"- `{x['sha'][:12]}` {md(x.get('subject', ''))}{q}")
        lines.append("")
    if d["message"]:
        lines += [*(f"> {md(m)}" for m in d["message"].splitlines()), ""]
    lines += [
        f"- Range: {code(d['good']['ref'])} (`{d['good']['sha'][:12]}`) .. "
        f"{code(d['bad']['ref'])} (`{d['bad']['sha'][:12]}`), {range_commits(d)} commits "
        f"({d['walk']})",
        f"- Oracle: {code(d['oracle']['name'])} (sha256 {d['oracle']['sha256'][:12]}), "
        f"the bug = {_bug_words(d)}"
        f"{'; looking for the commit that fixed it' if d['find_fix'] else ''}",
        f"- Probes: {len(d['probes'])} ({probe_counts(d)})"
        + (f" in {d['rounds']} rounds of up to {d['jobs']} at once" if d["jobs"] > 1 else ""),
    ]
    if d.get("prior"):
        lines.append(f"- {md(prior_note(d['prior']))}")
    lines += [f"- {x}" for x in (hunted.rule_line(d),) if x]
    if (d["result"] or {}).get("noisy"):
        lines.append(f"- {noisy_summary(d['result']['noisy'])}")
    if (d["result"] or {}).get("confirmation"):
        lines.append(f"- {confirmation_summary(d['result']['confirmation'], old, new)}")
    if (d["result"] or {}).get("perf"):
        lines += ["", *perf_table(d["result"]["perf"], old, new)]
    if (built := builds_line(d)) is not None:
        lines.append(built)
    paid = [p for p in d["probes"] if not p["reused"] and p.get("obtained")]
    if fetched := sum(1 for p in paid if p["obtained"] == Way.BUCKET):
        lines.append(f"- From the team's object store: {fetched} of {len(paid)} probes' "
                     f"packages (built or downloaded by another box)")
    for note in d["notes"]:
        lines.append(f"- Note: {md(note)}")
    package = (d.get("project") or {}).get("package", "torch")
    lines += ["", f"| # | commit | verdict | time | {md(package)} from | reason | subject |",
              "|---|---|---|---|---|---|---|"]
    for p in d["probes"]:
        verdict = {"good": old, "bad": new}.get(p["verdict"], p["verdict"])
        t = "--skip" if skipped_up_front(p) else "reused" if p["reused"] else \
            f"{p['duration_s']:.2f}s"
        subject = md((p.get("subject") or "")[:60])
        reason = md(p["reason"][:80])
        how = p.get("artifact") or ""
        if p.get("obtained") == Way.BUCKET:
            how += " (team bucket)"
        if p.get("gpu") is not None:
            how += f" (GPU {p['gpu']})"
        if p.get("build") and not p["reused"]:
            how += f" ({_build_summary(p['build'])})"
        lines.append(f"| {p['seq']} | `{p['sha'][:12]}` | {verdict} | {t} | {how} | {reason} "
                     f"| {subject} |")
    lines += hunted.section(d) + phase_markdown(d)
    failed = [p for p in d["probes"] if p.get("build_log")]
    for p in failed:
        lines += ["", f"Build log of `{p['sha'][:12]}` ({md(p['build_log'])}), last lines:",
                  *fence(p.get("build_log_tail") or "")]
    # The oracle's own words where it failed or could not decide: the first thing anyone asks.
    for p in d["probes"]:
        if p["outcome"] != "pass" and not p.get("build_log") and p.get("output_tail"):
            verdict = {"bad": new}.get(p["verdict"], p["verdict"])
            lines += ["", f"Output of probe {p['seq']} (`{p['sha'][:12]}`, {verdict}, "
                      f"{md(p['reason'])}), last lines:", *fence(tail(p["output_tail"]))]
    lines += compiler_pass.markdown(d)
    lines += compile_debug.markdown(d.get("compile_debug"))
    if d["reproduce"]:
        lines += ["", "Reproduce with:", *fence(d["reproduce"])]
        lines += [y for x in (inherited_line(d),) if x for y in ("", x)]
    return "\n".join(lines)


def culprit_facts(d: dict[str, Any]) -> dict[str, Any]:
    """What the environment was at the culprit (its own probe's facts: the version, git
    version and libraries of the commit the report names), else of any run that recorded
    some. Every report (issue, HTML, web page) shows these."""
    culprit = (d["culprit"] or {}).get("sha")
    runs = [p for p in d["probes"] if p["facts"].get("python")]
    at = [p for p in runs if p["sha"] == culprit]
    facts: dict[str, Any] = (at or runs or [{"facts": {}}])[0]["facts"]
    return facts


TRACEBACK = "Traceback (most recent call last):"
CHAINED = ("During handling of the above exception, another exception occurred:",
           "The above exception was the direct cause of the following exception:")
TRACEBACK_LINES = 200  # a traceback is shown whole up to this many lines


def tail(text: str, lines: int = 15) -> str:
    """The last ``lines`` lines of an output, reaching back to the start of its last Python
    traceback (and the tracebacks chained to it) so that one is shown whole, up to
    :data:`TRACEBACK_LINES`: a traceback cut at its top loses the line saying what it is.
    From the output's last :data:`~bisector.base.defaults.REPORT_TEXT_CHARS` at most (an
    output of one endless line stays bounded for every scrubber after this)."""
    rows = text[-defaults.REPORT_TEXT_CHARS:].rstrip().splitlines()
    start = len(rows) - lines
    heads = [i for i, row in enumerate(rows) if row.strip() == TRACEBACK]
    if heads:
        first = heads[-1]
        while True:  # back over chained exceptions to the traceback they follow
            before = [i for i in heads if i < first]
            between = {row.strip() for row in rows[before[-1]:first]} if before else set()
            if not before or not between & set(CHAINED):
                break
            first = before[-1]
        start = min(start, max(first, len(rows) - TRACEBACK_LINES))
    return "\n".join(rows[max(0, start):])


def _build_summary(b: dict[str, Any]) -> str:
    parts = [b["where"], f"{b['seconds']:.0f}s"]
    cc = b.get("ccache")
    if cc and cc["hits"] + cc["misses"]:
        parts.append(f"ccache {cc['hits']}/{cc['hits'] + cc['misses']}")
    return ", ".join(parts)
