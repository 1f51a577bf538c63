"""The pull request a commit came from, read from its message: PyTorch's ghstack trailer
(``Pull Request resolved: https://github.com/pytorch/pytorch/pull/143328``), else GitHub's
squash subject (``... (#143328)``), else its merge commit's (``Merge pull request #143328 from
owner/branch``: a merge named as the culprit had no pull request before).

Apart from project/history.py (GitPython) so that ``bisect list`` can name the culprits' pull
requests with one ``git log`` and no GitPython: a read command must start in a few times
``import click``'s time (make bench, section 16).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

PR_TRAILER = re.compile(r"^Pull Request resolved: (\S+/pull/(\d+))\s*$", re.MULTILINE)
PR_SUBJECT = re.compile(r"\(#(\d+)\)\s*$")
PR_MERGE = re.compile(r"^Merge pull request #(\d+) from \S")


def pr_of(message: str) -> tuple[int | None, str | None]:
    """(number, url) of the commit's pull request; (None, None) when its message names none."""
    m = PR_TRAILER.search(message)
    if m:
        return int(m.group(2)), m.group(1)
    subject = message.splitlines()[0] if message else ""
    s = PR_SUBJECT.search(subject) or PR_MERGE.match(subject)
    return (int(s.group(1)), None) if s else (None, None)


def prs(repo_path: str, shas: Sequence[str]) -> dict[str, int | None]:
    """The pull request number of each of ``shas`` in the clone at ``repo_path``, from one
    ``git log``; a clone that is gone, or a commit it lacks, gives none (the store outlives
    clones)."""
    if not shas:
        return {}
    try:
        r = subprocess.run(["git", "-C", repo_path, "log", "--no-walk=unsorted",
                            "--format=%H%x1f%B%x1e", "--end-of-options", *shas],
                           capture_output=True, text=True, errors="replace", check=False,
                           timeout=30)
    except (OSError, subprocess.SubprocessError):
        return {}
    if r.returncode != 0 and len(shas) > 1 and Path(repo_path).is_dir():
        # One commit the clone lacks (history rewritten since) fails the whole log: ask
        # each commit alone, so the others still name theirs.
        return {k: v for sha in shas for k, v in prs(repo_path, [sha]).items()}
    found: dict[str, int | None] = {}
    for record in r.stdout.split("\x1e"):
        sha, sep, message = record.strip("\n").partition("\x1f")
        if sep:
            found[sha] = pr_of(message)[0]
    return found
