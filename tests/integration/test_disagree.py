"""`bisect list --disagree` on real stores, SQLite and PostgreSQL: bisections of one oracle whose
answers cannot both hold are listed (both sides), the ones that agree or never overlap are not.

The store is written through its own functions, as the runner writes bisections: one main line
of commits c0..c19 and bisections over windows of it, each with the oracle, range and answer
named in :data:`PLANTED`."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bisector.base.kinds import State
from bisector.store import bisections, queries
from bisector.store.db import open_store
from tests.support import invoke

LINE = [f"{i:02d}" * 20 for i in range(20)]  # the main line's shas
# name: (oracle, first candidate, last candidate, state, culprit position or None, polarity)
PLANTED = {
    "x": ("a", 0, 10, State.DONE, 6, "regression"),  # named c6
    "none": ("a", 4, 8, State.NO_REGRESSION, None, "regression"),  # holds c6: disagrees
    "other": ("a", 5, 12, State.DONE, 11, "regression"),  # holds c6, named c11: disagrees
    "edge": ("a", 6, 9, State.NO_REGRESSION, None, "regression"),  # c6 is its good endpoint
    "agree1": ("a", 14, 19, State.DONE, 17, "regression"),  # the same c17: they agree
    "agree2": ("a", 15, 19, State.DONE, 17, "regression"),
    "b_only": ("b", 0, 19, State.NO_REGRESSION, None, "regression"),  # another oracle
    "fixed": ("a", 0, 10, State.NO_REGRESSION, None, "fix"),  # another question
    "failed": ("a", 0, 10, State.FAILED, None, "regression"),  # no answer to disagree with
}
DISAGREE = {"x", "none", "other"}


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "d.db")
    return str(request.getfixturevalue("pg_url"))


def _plant(db: str) -> dict[str, int]:
    store = open_store(db)
    ids = {}
    try:
        for o in ("a", "b"):
            bisections.save_oracle(store, o * 64, f"oracle_{o}", "", {})
        for name, (o, first, last, state, culprit, polarity) in PLANTED.items():
            me = f"test@host:1:{name}"
            i = bisections.create(
                store, candidates=LINE[first:last + 1], owner=me,
                created_at=datetime(2026, 1, 1, tzinfo=UTC), repo_path="/r", good_ref="g",
                bad_ref="b", good_sha=LINE[first], bad_sha=LINE[last],
                oracle_name=f"oracle_{o}", oracle_sha256=o * 64, polarity=polarity,
                env_fingerprint="0" * 64, environment={}, settings={}, notes=[])
            bisections.finish(store, i, me=me, state=state, result={},
                              culprit_sha=None if culprit is None else LINE[culprit],
                              message=None)
            ids[name] = i
    finally:
        store.engine.dispose()
    return ids


def test_disagreeing_bisections_of_one_oracle_are_listed(db: str) -> None:
    ids = _plant(db)
    store = open_store(db, create=False, reads_only=True)
    try:
        def found(**f: object) -> set[int]:
            return {b.id for b in queries.bisections(store, queries.Filters(**f))}  # type: ignore[arg-type]

        assert found(disagree=True) == {ids[n] for n in DISAGREE}
        assert found(disagree=True, state="no regression") == {ids["none"]}
        assert found(disagree=True, oracle="oracle_b") == set()
        assert found(disagree=True, limit=1) == {max(ids[n] for n in DISAGREE)}
    finally:
        store.engine.dispose()


def test_pairs_are_kept_as_bisections_finish_run_again_and_migrate(db: str) -> None:
    """The pairs are kept when a bisection finishes (store/disagree.refresh), dropped when it
    runs again, found again when it finishes again; migration 0015 finds those of a store
    made before it with the same query."""
    from alembic import command

    from bisector.store.db import alembic_config

    ids = _plant(db)
    store = open_store(db, create=False)
    try:
        def found() -> set[int]:
            return {b.id for b in queries.bisections(store, queries.Filters(disagree=True))}

        me = "again@host:1:1"
        assert bisections.take(store, ids["none"], me=me, seen=None)
        assert found() == {ids["x"], ids["other"]}
        bisections.finish(store, ids["none"], me=me, state=State.NO_REGRESSION, result={},
                          culprit_sha=None, message=None)
        assert found() == {ids[n] for n in DISAGREE}
        cfg = alembic_config()
        with store.engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0014")
            command.upgrade(cfg, "head")
        assert found() == {ids[n] for n in DISAGREE}
    finally:
        store.engine.dispose()
    r = invoke("--db", db, "list", "--disagree", "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert {row["id"] for row in json.loads(r.stdout)} == {ids[n] for n in DISAGREE}


def test_the_web_list_and_api_take_disagree(db: str) -> None:
    from starlette.testclient import TestClient

    from bisector.web.server import create_app

    ids = _plant(db)
    store = open_store(db, create=False, reads_only=True)
    try:
        client = TestClient(create_app(store))
        api = client.get("/api/bisections", params={"disagree": "1"})
        assert api.status_code == 200, api.text
        assert {row["id"] for row in api.json()} == {ids[n] for n in DISAGREE}
        page = client.get("/", params={"disagree": "1"}).text
        assert 'name="disagree" value="1" checked' in page
        assert page.count('<td><a href="/bisections/') == len(DISAGREE)
        assert client.get("/", params={"disagree": "maybe"}).status_code == 400
    finally:
        store.engine.dispose()
