"""A commit's pull request from its message (project/pr.py), and many at once from one
``git log`` (what ``bisect list`` names without GitPython)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bisector.project.pr import pr_of, prs

TRAILER = ("[inductor] fix argmin lowering\n\nSummary...\n\nPull Request resolved: "
           "https://github.com/pytorch/pytorch/pull/143328\nApproved by: https://github.com/x\n")


@pytest.mark.parametrize(("message", "want"), [
    (TRAILER, (143328, "https://github.com/pytorch/pytorch/pull/143328")),
    ("Fix the thing (#4521)\n\nbody (#1)\n", (4521, None)),
    ("Merge pull request #77 from someone/feature-branch\n\nAdd a feature\n", (77, None)),
    ("Fix the thing (#4521) and more\n", (None, None)),  # not at the subject's end
    ("Merge branch 'main' into feature\n", (None, None)),
    ("Revert \"Merge pull request #77 from a/b\"\n", (None, None)),
    ("", (None, None)),
], ids=["ghstack trailer", "squash subject", "merge commit", "mid-subject", "plain merge",
        "a revert naming one", "empty"])
def test_a_commit_message_names_its_pull_request(message: str,
                                                 want: tuple[int | None, str | None]) -> None:
    assert pr_of(message) == want


def test_many_commits_from_one_git_log(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t",
                               "-c", "user.email=t@e", *args], check=True,
                              capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    shas = []
    for message in ("first (#1)", "Merge pull request #2 from a/b", "no pull request"):
        git("commit", "-q", "--allow-empty", "-m", message)
        shas.append(git("rev-parse", "HEAD"))
    assert prs(str(tmp_path), shas) == {shas[0]: 1, shas[1]: 2, shas[2]: None}
    assert prs(str(tmp_path / "gone"), shas) == {}  # a clone that is gone names none
    lost = "f" * 40  # a commit the clone no longer has: the others still name theirs
    assert prs(str(tmp_path), [lost, *shas]) == {shas[0]: 1, shas[1]: 2, shas[2]: None}
    assert prs(str(tmp_path), []) == {}
