"""``bisect log``: the probes in ``git bisect log`` form, replayable with ``git bisect replay``.

A replay must end where the search did: with git naming the same first bad commit, or, for a
culprit hidden among skipped commits, the same commits it could be. git reads a log as state,
not as a story: every good mark counts, but only the *last* bad mark is its bad commit (a later
one replaces an earlier). So the log is written as git would need it:

- the start line is git's own: the walk, the terms, the range's two endpoints (``BAD GOOD``,
  noted above it as git notes them) and ``-- PATHS`` for a ``--path`` bisection (without the
  paths git walks every commit of the range and stops short of the culprit);
- each side's marks narrow the range: the goods oldest first, the bads newest first, each in
  the places that side's marks had in the search (a sequential search is already in this
  order; verdicts reused from an earlier bisection came back goods first, then the bads oldest
  first, and git replayed to "4 revisions left" instead of the culprit);
- skips stay where they came (git keeps them all).

A deterministic oracle's runs are its marks. A flaky or performance oracle's runs disagree, and
git takes one word per commit, so each commit is marked once on its side of the answer and runs
that said otherwise stay as comments. Whatever the oracle, when the last bad mark is not the
culprit (a sampled search that never ran it), the culprit is marked last. An endpoint the
oracle judged otherwise than its side (a failed bisection) keeps the start line without refs:
the marks are then the oracle's alone, and ``--from-log`` reads them without a contradiction.
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


# An entry of the log: a comment line (str), or a mark: (side, sha, subject, position).
Mark = tuple[str, str, str, int]
Entry = str | Mark


def _entries(d: dict[str, Any], names: dict[str, str]) -> list[Entry]:
    """The probes in the search's order: a mark per commit judged, comments for the rest."""
    marks = _replayable_marks(d)
    marked: set[str] = set()
    out: list[Entry] = []
    for p in d["probes"]:
        subject = p.get("subject", "")
        if p.get("inside"):  # off the walk git replays: a note, never a mark
            out.append(f"# inside the merge, {names[p['verdict']]}: [{p['sha']}] {subject}")
            continue
        mark = marks.get(p["sha"], p["verdict"]) if marks else p["verdict"]
        if marks and p["verdict"] != mark:  # a sampled run that said otherwise: kept as a note
            out.append(f"# run said {names[p['verdict']]}: [{p['sha']}] {subject}")
            continue
        if marks and p["sha"] in marked:  # a sampled commit is marked once, on its side
            out.append(f"# ran again, {names[mark]}: [{p['sha']}] {subject}")
            continue
        marked.add(p["sha"])
        out.append((mark, p["sha"], subject, p.get("position") or 0))
    return out


def _narrowing(entries: list[Entry]) -> list[Entry]:
    """``entries`` with the goods in the goods' places oldest first and the bads in the bads'
    places newest first: the last of each is the nearest the culprit, as git needs."""
    goods = iter(sorted((e for e in entries if not isinstance(e, str) and e[0] == "good"),
                        key=lambda e: e[3]))
    bads = iter(sorted((e for e in entries if not isinstance(e, str) and e[0] == "bad"),
                       key=lambda e: -e[3]))
    return [next(goods) if not isinstance(e, str) and e[0] == "good"
            else next(bads) if not isinstance(e, str) and e[0] == "bad" else e
            for e in entries]


def _quoted(word: str) -> str:
    """A word as git's ``sq_quote`` writes it, which its replay reads back (always quoted)."""
    return "'" + word.replace("'", "'\\''") + "'"


def _start_line(d: dict[str, Any], refs: list[str]) -> str:
    """``git bisect start`` as git writes it (every word quoted)."""
    old, new = d["terms"]["old"], d["terms"]["new"]
    # The walk too: replayed without --first-parent, git would pick other commits to test
    # after these marks and stop short of the culprit. git has no --ancestry-path walk.
    words = ["--first-parent"] if d["walk"] == "first-parent" else []
    if (old, new) != ("good", "bad"):  # both, even when one is git's own (good/slow)
        words += [f"--term-old={old}", f"--term-new={new}"]
    words += refs
    if d.get("paths"):
        words += ["--", *d["paths"]]
    return " ".join(["git bisect start", *(_quoted(w) for w in words)])


def log_text(d: dict[str, Any]) -> str:
    """The ``git bisect log`` format, so it can be replayed with ``git bisect replay``."""
    new = d["terms"]["new"]
    names = {"good": d["terms"]["old"], "bad": new, "skip": "skip"}
    entries = _narrowing(_entries(d, names))
    good, bad = d["good"].get("searched") or d["good"]["sha"], d["bad"]["sha"]
    ends = {bad: "bad", good: "good"}
    # The endpoints on the start line, as git has them, unless the oracle judged one otherwise.
    agree = all(e[0] == ends[e[1]] for e in entries if not isinstance(e, str) and e[1] in ends)
    out = [] if d["walk"] == "first-parent" else [
        f"# walked by bisector with --{d['walk']}, which git bisect has no option for: a "
        f"replay may test other commits"]
    if good != d["good"]["sha"]:  # git would stop to have the merge-base tested
        out.append(f"# {d['good']['ref']} ({d['good']['sha']}) is no ancestor of the bad "
                   f"commit: the search started from their merge-base, as git bisect does")
    if agree:
        subjects = {e[1]: e[2] for e in entries if not isinstance(e, str)}
        out += [f"# {names[side]}: [{sha}] {subjects.get(sha, '')}" for sha, side in ends.items()]
        entries = [e for e in entries if isinstance(e, str) or e[1] not in ends]
    out.append(_start_line(d, [bad, good] if agree else []))
    last_bad = bad if agree else None
    for e in entries:
        if isinstance(e, str):
            out.append(e)
            continue
        side, sha, subject, _ = e
        out += [f"# {names[side]}: [{sha}] {subject}", f"git bisect {names[side]} {sha}"]
        last_bad = sha if side == "bad" else last_bad
    c = d["culprit"]
    if c and last_bad != c["sha"]:  # git keeps only the last bad mark: it must be the answer
        out.append(f"git bisect {new} {c['sha']}")
    if c:
        out.append(f"# first {new} commit: [{c['sha']}] {c.get('subject', '')}")
    elif d.get("suspects"):
        out.append(f"# the first {new} commit could be any of:")
        out += [f"# [{s['sha']}] {s.get('subject', '')}" for s in d["suspects"]]
    if d.get("inside"):
        i = d["inside"]
        out.append(f"# inside the merge: [{i['sha']}] {i.get('subject', '')}")
    return "\n".join(out)
