"""The revert of a culprit on top of the bad endpoint, made for confirmation: a commit object
nobody references, built with plumbing only, so no branch moves and no working tree is touched.
A revert that stays bad says the culprit is not the whole story (run/confirm.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import git

from bisector.project import history
from bisector.project.history import printable

# ``merge-tree --write-tree --merge-base=`` (a real three-way merge without a working tree).
MERGE_TREE_GIT = (2, 40)


def _revert_tree_by_patch(repo: git.Repo, culprit: str, parent: str, onto: str) -> str:
    """The revert's tree for a git older than :data:`MERGE_TREE_GIT`: the culprit's diff
    applied in reverse to ``onto`` in a throwaway index file (the repository's own index and
    working tree are never touched). Stricter than a merge: a reverse patch whose context
    moved does not apply, and the revert is then reported as not applying."""
    import os
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bisector-revert-") as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        with repo.git.custom_environment(**env):
            repo.git.read_tree(onto)
            patch = os.path.join(tmp, "culprit.patch")
            with open(patch, "wb") as f:
                f.write(repo.git.diff(parent, culprit, "--binary", "--full-index",
                                      stdout_as_string=False, strip_newline_in_stdout=False))
            repo.git.apply("--cached", "-R", patch)
            return str(repo.git.write_tree()).strip()


def revert_commit(repo: git.Repo, culprit: str, onto: str) -> str | None:
    """A commit that reverts ``culprit`` on top of ``onto``, or None when it does not apply
    cleanly. Made with plumbing only (``merge-tree --write-tree`` and ``commit-tree``): no
    branch moves and the working tree is never touched; the new commit object is unreferenced,
    so ``git gc`` drops it in time. A merge culprit is reverted against its first parent, as
    ``git revert -m 1`` does."""
    try:
        parent = repo.git.rev_parse(f"{culprit}^1")
        if repo.git.version_info >= MERGE_TREE_GIT:
            out = repo.git.merge_tree("--write-tree", f"--merge-base={culprit}", onto, parent)
            tree = out.splitlines()[0].strip()
        else:
            tree = _revert_tree_by_patch(repo, culprit, parent, onto)
    except git.GitCommandError:
        return None  # conflicts (exit 1 from merge-tree, or a patch that does not apply)
    subject = printable(str(repo.commit(culprit).message).splitlines()[0] if
                        repo.commit(culprit).message else "")
    ident = {"GIT_AUTHOR_NAME": "bisector", "GIT_AUTHOR_EMAIL": "bisector@localhost",
             "GIT_COMMITTER_NAME": "bisector", "GIT_COMMITTER_EMAIL": "bisector@localhost"}
    with repo.git.custom_environment(**ident):
        sha: str = repo.git.commit_tree(tree, "-p", onto, "-m", f'Revert "{subject}"', "-m",
                                        f"This reverts commit {culprit}.")
    return sha.strip()


def make_revert(repo_path: str, culprit: str, onto: str) -> str | None:
    """The revert commit in the bisection's clone, or None (conflicts, clone gone)."""
    try:
        repo = history.open_repo(repo_path)
    except Exception:
        return None
    return revert_commit(repo, culprit, onto)


def git_parents(repo_path: str, sha: str) -> list[str]:
    """The commit's parents in the clone, first parent first ([] when git cannot say):
    confirmation runs the culprit's own parent, not the walk's previous commit."""
    try:
        return [p.hexsha for p in history.open_repo(repo_path).commit(sha).parents]
    except Exception:
        return []


class Clone(Protocol):
    """What confirming a culprit asks of git: handed to the runner (``Runner(clone=...)``),
    so a test without a clone passes a fake instead of replacing the runner's methods."""

    def revert(self, culprit: str, onto: str) -> str | None:
        """The culprit's revert on ``onto`` (the bad endpoint), or None (not clean)."""
        ...

    def parents(self, sha: str) -> Sequence[str]:
        """A commit's git parents, first parent first: confirmation runs the culprit's own."""
        ...


@dataclass(frozen=True)
class GitClone:
    """The bisection's clone on this box, as confirmation asks it (:class:`Clone`)."""

    path: str

    def revert(self, culprit: str, onto: str) -> str | None:
        return make_revert(self.path, culprit, onto)

    def parents(self, sha: str) -> list[str]:
        return git_parents(self.path, sha)
