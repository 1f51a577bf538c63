"""What every report says about a culprit that is a merge: the commit inside it that the
search found (run/into_merge.py), named beside the merge, or why none is, or, when nobody
looked inside, how to. One wording for ``bisect show``, the issue, the HTML and the list."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import git

from bisector.app.report.result_text import commit_lines
from bisector.base.escape import md
from bisector.project import merges
from bisector.project.history import merge_parents, unwalked_side
from bisector.run.config import RunConfig
from bisector.store import bisections
from bisector.store.db import Store
from bisector.store.records import BisectionRecord

# commit sha -> the report's dict of it (sha, subject, author, PR...)
Describe = Callable[[str], dict[str, Any]]


def inside(result: dict[str, Any], describe: Describe) -> dict[str, Any] | None:
    """The commit inside the merge the search named (with its subject, author and PR), or
    None: no merge, no search inside, or one that named no commit (its ``said`` tells)."""
    found = (result or {}).get("into_merge") or {}
    if found.get("kind") != "culprit" or not found.get("sha"):
        return None
    # What the answer kept (subject, author, PR), then the clone's view of it where it is.
    kept = {k: found[k] for k in ("subject", "author", "author_email", "date", "pr")
            if found.get(k) is not None}
    return {**kept, **describe(str(found["sha"])),
            "same_tree": found["sha"] in found.get("same_tree", [])}


def notes(store: Store, b: BisectionRecord, repo: git.Repo | None,
          cfg: RunConfig) -> list[str]:
    """The report's notes on a merge culprit: an --ancestry-path one merged from a side the
    walk never held (:func:`history.unwalked_side`), or a first-parent one nobody searched
    inside (:func:`not_searched`)."""
    if not cfg.first_parent:
        if repo is None or not b.culprit_sha:
            return []
        note = unwalked_side(repo, b.culprit_sha,
                             lambda: set(bisections.candidates(store, b.id)))
        return [note] if note else []
    return not_searched(repo, b.culprit_sha, b.result,
                        why_not(cfg.first_parent, cfg.request.into_merge, b.result))


def merge_at(store: Store, b: BisectionRecord) -> int | None:
    """The walk's position of the merge searched inside (its candidates are stored past the
    walk, the merge last), also while that search runs: where the timeline draws its probes.
    None when no search inside a merge was started."""
    cands = bisections.candidates(store, b.id)
    return cands.index(cands[-1]) if len(cands) > b.n_candidates else None


def why_not(first_parent: bool, asked: bool, result: dict[str, Any]) -> str | None:
    """Why a first-parent merge culprit was not searched inside (None: it was, or it could
    not be: the ancestry path already holds what a merge brings)."""
    if not first_parent:
        return None
    if not asked:
        return "--no-into-merge; without it the search goes on among them"
    return "a flaky or performance oracle's search stops at the merge" if (
        (result or {}).get("noisy") or (result or {}).get("perf")) else None


def not_searched(repo: git.Repo | None, culprit: str | None, result: dict[str, Any],
                 why: str | None) -> list[str]:
    """A note when a first-parent culprit is a merge nobody searched inside (``why``: the
    reason, e.g. ``--no-into-merge``; None when it was searched or could not be), with the
    bisection that would look there."""
    if repo is None or not culprit or why is None or "into_merge" in (result or {}):
        return []
    try:
        if not merge_parents(repo, culprit):
            return []
        brings = len(merges.merge_brings(repo, culprit)) - 2
        look = merges.side_look(repo, culprit)
    except (ValueError, git.BadName, git.GitCommandError):  # a clone made shallow since
        return []
    return [f"the culprit {culprit[:12]} is a merge that brings {brings} commit(s), not "
            f"searched inside ({why})" + (f"; to look there: {look}" if look else "")]


def said(d: dict[str, Any]) -> str | None:
    """The one line on what the search inside the merge found, when it named no commit."""
    found = (d.get("result") or {}).get("into_merge") or {}
    return None if not found or found.get("kind") == "culprit" else str(found.get("said", ""))


def markdown(d: dict[str, Any]) -> list[str]:
    """``bisect show``'s lines under the culprit: the commit inside the merge, or why none."""
    c = d.get("inside")
    if c:
        out = [f"Inside the merge: `{c['sha']}`"
               + (" (the merge's own tree)" if c.get("same_tree") else ""), ""]
        return [*out, *commit_lines(c), ""]
    line = said(d)
    return [f"Inside the merge: {md(line)}", ""] if line else []


def issue(d: dict[str, Any]) -> list[str]:
    """The issue's sentence: the commit inside the merge that did it, or why none is named."""
    c = d.get("inside")
    if c:
        pr = (f" in [#{c['pr']}]({c['pr_url']})" if c.get("pr_url")
              else f" in #{c['pr']}" if c.get("pr") else "")
        who = f" by {md(c['author'])}" if c.get("author") else ""
        subject = f" ({md(c['subject'])})" if c.get("subject") else ""
        return [f"It is a merge; the commit inside it that did it is `{c['sha']}`{subject}"
                f"{pr}{who}.", ""]
    line = said(d)
    return [f"It is a merge; {md(line)}.", ""] if line else []

