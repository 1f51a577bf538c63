"""The rows of ``bisect list`` and ``bisect serve``'s list: one store read and, for a culprit, its
pull request from the clone. Apart from the reports (app/reports.py) so that ``bisect list``
imports the store and git, not the code that renders a whole bisection (it took 0.84 s to start
on a store, 14 times ``import click``, most of it importing what it never ran)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import git

from bisector.base.kinds import State
from bisector.infra.owner import owner_alive
from bisector.project import history
from bisector.store import bisections
from bisector.store.db import Store
from bisector.store.records import BisectionRecord


@dataclass(frozen=True)
class ListFilter:
    """What ``bisect serve``'s list (and its JSON) narrows to; empty fields match everything.

    ``culprit`` is a sha prefix or a pull request number (``143328`` or ``#143328``)."""

    oracle: str = ""
    state: str = ""
    repo: str = ""
    culprit: str = ""

    def keep(self, row: dict[str, Any]) -> bool:
        want = self.culprit.strip().lstrip("#").lower()
        return ((not self.oracle or row["oracle"] == self.oracle)
                and (not self.state or row["state"] == self.state)
                and (not self.repo or self.repo in row["repo"])
                and (not want or (bool(row["culprit"]) and (
                    row["culprit"].startswith(want) or str(row.get("culprit_pr")) == want
                    or (row.get("inside") or "-").startswith(want)))))


def list_data(store: Store, limit: int = 50,
              where: ListFilter | None = None) -> list[dict[str, Any]]:
    rows = []
    repos: dict[str, git.Repo | None] = {}
    for b in bisections.listing(store, limit if where is None else max(limit, 1000)):
        row = {
            "id": b.id,
            "repo": b.repo_path,
            "range": f"{b.good_ref}..{b.bad_ref}",
            "oracle": b.oracle_name,
            # A run whose controller is gone (kill -9, a crash) is not running any more.
            "state": effective_state(b),
            "culprit": b.culprit_sha,
            "culprit_pr": None,
            # The commit inside a merge culprit that the search named (run/into_merge.py).
            "inside": ((b.result or {}).get("into_merge") or {}).get("sha"),
            "created": b.created_at.isoformat(timespec="seconds"),
        }
        if b.culprit_sha:
            if b.repo_path not in repos:
                repos[b.repo_path] = open_clone(b.repo_path)
            row["culprit_pr"] = commit_facts(repos[b.repo_path], b.culprit_sha, None).get("pr")
        if where is None or where.keep(row):
            rows.append(row)
    return rows[:limit]


def effective_state(b: BisectionRecord) -> str:
    """A run whose controller is gone (kill -9, a crash) is not running any more."""
    if b.state is State.RUNNING and not owner_alive(b.owner, b.heartbeat_at):
        return State.INTERRUPTED.value
    return b.state.value


def open_clone(path: str) -> git.Repo | None:
    """The clone a bisection ran in, or None when it is gone (the store outlives clones)."""
    try:
        return history.open_repo(path)
    except Exception:
        return None


def commit_facts(repo: git.Repo | None, sha: str, slug: str | None) -> dict[str, Any]:
    info: dict[str, Any] = {"sha": sha}
    if repo is None:
        return info
    try:
        c = history.commit_info(repo, sha)
    except (ValueError, git.BadName, git.GitCommandError):
        return info
    info.update(subject=c.subject, author=c.author, author_email=c.author_email, date=c.date,
                pr=c.pr_number, pr_url=history.pr_link(slug, c.pr_number, c.pr_url))
    return info
