"""``bisect log``: the probes in ``git bisect log`` form, replayable with ``git bisect replay``.

A deterministic oracle's runs are its marks. A flaky or performance oracle's runs disagree, and
git takes one word per commit and keeps only the newest "bad" mark, so each commit is marked
once on its side of the answer, runs that said otherwise stay as comments, and the answer is
marked last.
"""

from __future__ import annotations

from typing import Any


def _replayable_marks(d: dict[str, Any]) -> dict[str, str]:
    """sha -> the mark ``git bisect replay`` accepts, for a flaky or performance answer: each
    commit on its side of the culprit (their runs disagree, and git takes one word per
    commit). Empty for a deterministic oracle, whose runs are the marks."""
    result = d["result"] or {}
    pos = result.get("position")
    if not (result.get("noisy") or result.get("perf")) or result.get("kind") != "culprit" \
            or pos is None:
        return {}
    return {p["sha"]: ("bad" if p["position"] >= pos else "good") for p in d["probes"]
            if p.get("position") is not None and p["verdict"] != "skip"}


def log_data(d: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"seq": p["seq"], "sha": p["sha"], "verdict": p["verdict"], "reused": p["reused"],
             "subject": p.get("subject", ""), "inside": p.get("inside", False)}
            for p in d["probes"]]


def log_text(d: dict[str, Any]) -> str:
    """The ``git bisect log`` format, so it can be replayed with ``git bisect replay``."""
    old, new = d["terms"]["old"], d["terms"]["new"]
    # The walk too: replayed without --first-parent, git would pick other commits to test
    # after these marks and stop short of the culprit. git has no --ancestry-path walk.
    start = "git bisect start" + (" '--first-parent'" if d["walk"] == "first-parent" else "")
    out = [f"{start} '--term-old={old}' '--term-new={new}'" if old != "good" else start]
    if d["walk"] != "first-parent":
        out.insert(0, f"# walked by bisector with --{d['walk']}, which git bisect has no "
                      f"option for: a replay may test other commits")
    names = {"good": old, "bad": new, "skip": "skip"}
    marks = _replayable_marks(d)
    marked: set[str] = set()
    for p in d["probes"]:
        if p.get("inside"):  # off the walk git replays: a note, never a mark
            out.append(f"# inside the merge, {names[p['verdict']]}: [{p['sha']}] "
                       f"{p.get('subject', '')}")
            continue
        mark = marks.get(p["sha"], p["verdict"]) if marks else p["verdict"]
        if marks and p["verdict"] != mark:  # a sampled run that said otherwise: kept as a note
            out.append(f"# run said {names[p['verdict']]}: [{p['sha']}] {p.get('subject', '')}")
            continue
        if marks and p["sha"] in marked:  # a sampled commit is marked once, on its side
            out.append(f"# ran again, {names[mark]}: [{p['sha']}] {p.get('subject', '')}")
            continue
        marked.add(p["sha"])
        out.append(f"# {names[mark]}: [{p['sha']}] {p.get('subject', '')}")
        out.append(f"git bisect {names[mark]} {p['sha']}")
    if marks and d["culprit"]:
        # git keeps only the newest "bad" mark: a flaky or performance search comes back to
        # its endpoints all along, so the answer is marked last, where a replay ends on it.
        out.append(f"git bisect {new} {d['culprit']['sha']}")
    if d["culprit"]:
        c = d["culprit"]
        out.append(f"# first {new} commit: [{c['sha']}] {c.get('subject', '')}")
    if d.get("inside"):
        c = d["inside"]
        out.append(f"# inside the merge: [{c['sha']}] {c.get('subject', '')}")
    return "\n".join(out)
