"""A list's culprit column on real stores, SQLite and PostgreSQL: a culprit's pull request is
read from the facts the store kept when it was named (one query for the page), so a clone that
is gone since (or a page of 200 culprits, a git call each) still shows it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bisector.app import list_rows
from bisector.base.kinds import State
from bisector.store import bisections, commits
from bisector.store.db import open_store
from bisector.store.queries import Filters
from tests.support import invoke, one_line_error

CULPRIT = "ab" * 20


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "f.db")
    return str(request.getfixturevalue("pg_url"))


def test_the_pull_request_comes_from_the_stored_facts(db: str) -> None:
    store = open_store(db)
    try:
        bisections.save_oracle(store, "a" * 64, "oracle_a", "", {})
        me = "test@host:1:1"
        ids = []
        for culprit in (CULPRIT, "cd" * 20):
            i = bisections.create(
                store, candidates=["00" * 20, culprit], owner=me,
                created_at=datetime(2026, 1, 1, tzinfo=UTC), repo_path="/gone/clone",
                good_ref="g", bad_ref="b", good_sha="00" * 20, bad_sha=culprit,
                oracle_name="oracle_a", oracle_sha256="a" * 64, polarity="regression",
                env_fingerprint="0" * 64, environment={}, settings={}, notes=[])
            bisections.finish(store, i, me=me, state=State.DONE, result={}, culprit_sha=culprit,
                              message=None)
            ids.append(i)
        commits.remember(store, commits.CommitFacts(CULPRIT, "s", "Ann", "ann@x", None, 4242,
                                                    ("a/b.py",)))
        rows = {r["id"]: r for r in list_rows.list_data(store, Filters())}
        assert rows[ids[0]]["culprit_pr"] == 4242  # the clone is gone: the store said it
        assert rows[ids[1]]["culprit_pr"] is None  # no facts, no clone: nothing to say
    finally:
        store.engine.dispose()
    # --pr N: the culprit's pull request, as --culprit '#N'.
    for args in (("--pr", "4242"), ("--culprit", "#4242")):
        r = invoke("--db", db, "list", "--format", "json", *args)
        assert r.exit_code == 0, r.stderr
        assert [row["id"] for row in json.loads(r.stdout)] == [ids[0]]
    assert json.loads(invoke("--db", db, "list", "--pr", "4243", "--json").stdout) == []
    one_line_error(invoke("--db", db, "list", "--pr", "abc"), "--pr 'abc': give a pull request")
