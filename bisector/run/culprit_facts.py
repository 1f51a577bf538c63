"""A culprit's git facts kept in the store the moment it is named (store/commits.py): its
author, pull request and the paths it changed. `bisect list --author/--touching/--culprit #PR`
then ask the store, which outlives the clone the bisection ran in.

A culprit is named once per bisection: one ``git log`` and one ``git diff-tree`` there. Never
the answer's loss: a clone that cannot say (gone, shallow) stores nothing, and the list says
how many culprits it cannot judge.
"""

from __future__ import annotations

from datetime import datetime

import git
from sqlalchemy.exc import SQLAlchemyError

from bisector.project import history
from bisector.store import commits
from bisector.store.db import Store

MAX_FILES = 5000  # a culprit that changed more (a vendored tree) keeps its first 5000
BACKFILL = 200  # culprits a list reads again at most (a git log and a diff-tree each)


def read(repo: git.Repo, sha: str) -> commits.CommitFacts:
    """The facts of ``sha`` in ``repo``; the paths against its first parent (a merge's: what
    it brought to the main line)."""
    info = history.commit_info(repo, sha)
    c = repo.commit(sha)
    against = [c.parents[0].hexsha] if c.parents else ["--root"]
    out = repo.git.diff_tree("--no-commit-id", "-r", "--name-only", "-z", *against, sha)
    files = tuple(p for p in out.split("\0") if p)[:MAX_FILES]
    return commits.CommitFacts(sha=c.hexsha, subject=info.subject, author=info.author,
                               author_email=info.author_email,
                               authored_at=datetime.fromisoformat(info.date),
                               pr=info.pr_number, files=files)


def backfill(store: Store, limit: int = BACKFILL) -> int:
    """Read again the facts of culprits named before the store kept them (an old store's),
    from their clones where these still are, so `bisect list --author/--touching/--culprit
    #PR` find them; the number of culprits filled. Lazy and bounded: called by the lists that
    need the facts, each clone opened once, at most ``limit`` culprits a call; a clone that is
    gone or cannot say is skipped (asked again next time, a failed open costs nothing), a
    store that may not be written here is left as it is."""
    by_clone: dict[str, list[str]] = {}
    for sha, path in commits.facts_missing(store, limit):
        by_clone.setdefault(path, []).append(sha)
    filled = 0
    for path, shas in by_clone.items():
        try:
            repo = history.open_repo(path)
        except Exception:  # gone, moved, not a clone any more: nothing to read
            continue
        for sha in shas:
            try:
                facts = read(repo, sha)
            except Exception:  # not in this clone (shallow, gc'd): it cannot say
                continue
            try:
                commits.remember(store, facts)
            except SQLAlchemyError:  # a store opened for reading only: the list still answers
                return filled
            filled += 1
    return filled


def keep(store: Store, repo_path: str, sha: str) -> bool:
    """Store ``sha``'s facts read from the clone at ``repo_path``; False when it cannot say."""
    try:
        repo = history.open_repo(repo_path)
        facts = read(repo, sha)
    except Exception:  # a clone that cannot say stores nothing, never the answer's loss
        return False
    commits.remember(store, facts)
    return True
