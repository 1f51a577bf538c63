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

from bisector.project import history
from bisector.store import commits
from bisector.store.db import Store

MAX_FILES = 5000  # a culprit that changed more (a vendored tree) keeps its first 5000


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


def keep(store: Store, repo_path: str, sha: str) -> bool:
    """Store ``sha``'s facts read from the clone at ``repo_path``; False when it cannot say."""
    try:
        repo = history.open_repo(repo_path)
        facts = read(repo, sha)
    except Exception:  # a clone that cannot say stores nothing, never the answer's loss
        return False
    commits.remember(store, facts)
    return True
