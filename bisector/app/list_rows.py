"""The rows of ``bisect list`` and ``bisect serve``'s list: one store query (store/queries.py:
the filters are SQL) and, for a culprit, its pull request (its stored facts, else its clone).
Apart from the reports (app/report/show.py) so that ``bisect list`` imports the store and
git, not the code that renders a whole bisection (it took 0.84 s to start on a store, 14 times
``import click``, most of it importing what it never ran)."""

from __future__ import annotations

from typing import Any

import git

from bisector.base.kinds import State
from bisector.infra.owner import owner_alive
from bisector.project import history
from bisector.store import commits, queries
from bisector.store.db import Store
from bisector.store.queries import Filters
from bisector.store.records import BisectionRecord


def list_data(store: Store, where: Filters | None = None) -> list[dict[str, Any]]:
    """One page of the bisections ``where`` matches, newest first (store/queries.py asks the
    store), as rows; a culprit's pull request from its stored facts, else read from its
    clone."""
    where = where or Filters()
    if where.author or where.touching or where.pr is not None:
        from bisector.run import culprit_facts  # lazy: only these filters read the facts

        culprit_facts.backfill(store)  # an old store's culprits, read again from their clones
    rows = []
    repos: dict[str, git.Repo | None] = {}
    found = queries.bisections(store, where)
    # A culprit's pull request as git said it when it was named (one query for the page); the
    # clone is asked only for a culprit without stored facts (a git call a row: seconds for a
    # page of 200).
    prs = commits.prs_of(store, (b.culprit_sha for b in found if b.culprit_sha))
    for b in found:
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
        if where.state and row["state"] != where.state:
            continue  # killed on this host within the heartbeat's age (store/queries._state)
        if b.culprit_sha in prs:
            row["culprit_pr"] = prs[b.culprit_sha]
        elif b.culprit_sha:
            if b.repo_path not in repos:
                repos[b.repo_path] = open_clone(b.repo_path)
            row["culprit_pr"] = commit_facts(repos[b.repo_path], b.culprit_sha, None).get("pr")
        rows.append(row)
    return rows


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
