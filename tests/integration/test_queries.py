"""Querying past bisections (`bisect list`'s filters, `bisect commit`) on real stores, SQLite
and PostgreSQL: three real bisections of the shared world made by the CLI (two oracles, one
done by each, one stopped at its endpoints) and one older bisection written through the store's
own functions (a culprit from before culprits' git facts were kept). Every filter is checked to
keep what it names and drop the rest, so a filter that were ignored would fail."""

from __future__ import annotations

import csv
import io
import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from bisector.app.demo.torchlet import SyntheticHistory
from bisector.base.kinds import ArtifactKind, ArtifactStatus, State
from bisector.core.verdict import Outcome
from bisector.store import bisections, queries, runs
from bisector.store.artifacts import ArtifactStore
from bisector.store.db import open_store
from bisector.store.records import NewArtifact, NewRun
from tests.support import copy_world, git, invoke, one_line_error, run_cli, serving

MARK = "NORM CHECK FAILED"
CHECK = ("import sys, torchlet; v = torchlet.norm([3.0, 4.0]); ok = abs(v - 5.0) < 1e-9; "
         f"print('norm is fine' if ok else '{MARK}: %r' % v); sys.exit(0 if ok else 1)")
OLD = datetime(2025, 1, 15, 12, 0, tzinfo=UTC)


class Made:
    """The store, the world it bisected, and its four bisections by role."""

    def __init__(self, db: str, hist: SyntheticHistory, env: dict[str, str],
                 ids: dict[str, int], old_culprit: str) -> None:
        self.db, self.hist, self.env, self.ids, self.old_culprit = db, hist, env, ids, old_culprit

    def run(self, *args: str) -> Any:
        return invoke("--db", self.db, *args, env={
            "BISECTOR_HOME": self.env["BISECTOR_HOME"],
            "BISECTOR_CACHE_DIR": self.env["BISECTOR_CACHE_DIR"], "BISECTOR_DB": None})

    def ids_of(self, *args: str) -> set[int]:
        r = self.run("list", "--format", "json", *args)
        assert r.exit_code == 0, r.stderr
        return {row["id"] for row in json.loads(r.stdout)}

    def named(self, *roles: str) -> set[int]:
        return {self.ids[r] for r in roles}


def _database(backend: str, request: pytest.FixtureRequest, root: Path) -> str:
    if backend == "sqlite":
        return str(root / "queries.db")
    import psycopg

    server = request.getfixturevalue("pg_server")
    name = f"q{int(time.time() * 1000) % 10**9}_{os.getpid()}"
    dsn = server.replace("postgresql+psycopg://", "postgresql://") + "/postgres"
    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute(f"CREATE DATABASE {name}")
    return f"{server}/{name}"


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def made(request: pytest.FixtureRequest, world: SyntheticHistory, shared_cache: Path,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Made]:
    root = tmp_path_factory.mktemp(f"queries-{request.param}")
    hist = copy_world(world, root / "torchlet")
    db = _database(request.param, request, root)
    env = {"BISECTOR_HOME": str(root / "home"), "BISECTOR_CACHE_DIR": str(shared_cache)}
    main = hist.main

    def start(good: str, *oracle: str) -> dict[str, Any]:
        r = run_cli("--db", db, "start", "--repo", str(hist.path), "--good", good, "--bad",
                    main[-1], "--no-confirm", "--json", *oracle, env=env)
        data: dict[str, Any] = json.loads(r.stdout)
        return data

    ids = {"norm": int(start(main[0], "--oracle", "torchlet_norm")["id"]),
           "command": int(start(main[0], "--", "python", "-P", "-c", CHECK)["id"])}
    # Its good endpoint is already bad: it stops there (an error, and a failed bisection).
    assert start(main[main.index(hist.culprit) + 1], "--oracle", "torchlet_norm")["error"]
    mp = pytest.MonkeyPatch()
    for k, v in env.items():
        mp.setenv(k, v)
    store = open_store(db, create=False)
    try:
        ids["failed"] = bisections.listing(store, 1)[0].id
        # A bisection of early 2025 in another clone, written as the runner writes one, whose
        # culprit was named before its git facts were kept.
        oracle = next(iter(bisections.listing(store, 1))).oracle_sha256
        old = bisections.create(
            store, candidates=main[:5], owner="old@host:1:1", created_at=OLD,
            repo_path="/elsewhere/other-clone", good_ref="v0", bad_ref="v1", good_sha=main[0],
            bad_sha=main[4], oracle_name="torchlet_norm", oracle_sha256=oracle,
            polarity="regression", env_fingerprint="0" * 64, environment={}, settings={},
            notes=[])
        bisections.finish(store, old, me="old@host:1:1", state=State.DONE, result={},
                          culprit_sha=main[3], message=None)
        ids["old"] = old
        # The norm oracle passed at the culprit on another machine (an environment where the
        # regression does not show): the store's runs there disagree.
        norm = bisections.get(store, ids["norm"]).oracle_sha256
        runs.save_run(store, runs.Key(norm, "1" * 64), NewRun(
            commit_sha=hist.culprit, outcome=Outcome.PASS, reason="exit 0", reusable=True,
            started_at=datetime.now(UTC), exit_code=0, output_tail="norm is fine elsewhere"))
        # The commit before the culprit once failed to build (a fact the store keeps).
        ArtifactStore(store).save(NewArtifact(
            key="f" * 64, commit_sha=main[2], kind=ArtifactKind.SOURCE,
            status=ArtifactStatus.FAILED, settings={}, log_tail="error: the build broke"))
        yield Made(db, hist, env, ids, main[3])
    finally:
        store.engine.dispose()
        mp.undo()


def test_the_world_was_bisected_as_planted(made: Made) -> None:
    rows = {r["id"]: r for r in json.loads(made.run("list", "--json").stdout)}
    assert rows[made.ids["norm"]]["culprit"] == made.hist.culprit
    assert rows[made.ids["command"]]["culprit"] == made.hist.culprit
    assert rows[made.ids["failed"]]["state"] == "failed"
    assert set(rows) == set(made.ids.values())


def test_state_oracle_and_repo_filter(made: Made) -> None:
    assert made.ids_of("--state", "done") == made.named("norm", "command", "old")
    assert made.ids_of("--state", "failed") == made.named("failed")
    assert made.ids_of("--state", "running") == set()
    assert made.ids_of("--oracle", "torchlet_norm") == made.named("norm", "failed", "old")
    command = json.loads(made.run("show", str(made.ids["command"]), "--json").stdout)
    sha = command["oracle"]["sha256"]
    assert made.ids_of("--oracle", sha[:10]) == made.named("command")
    assert made.ids_of("--oracle", sha[:10].upper()) == made.named("command")
    assert made.ids_of("--oracle", "no-such-oracle") == set()
    assert made.ids_of("--repo", "elsewhere") == made.named("old")
    assert made.ids_of("--repo", made.hist.path.parent.name.upper()) == made.named(
        "norm", "command", "failed")


def test_culprit_touching_and_author_filter(made: Made) -> None:
    culprit = made.hist.culprit
    assert made.ids_of("--culprit", culprit[:7]) == made.named("norm", "command")
    assert made.ids_of("--culprit", made.old_culprit[:8]) == made.named("old")
    pr = json.loads(made.run("commit", culprit, "--json").stdout)["pr"]
    assert pr and made.ids_of("--culprit", f"#{pr}") == made.named("norm", "command")
    changed = git(made.hist.path, "diff-tree", "--no-commit-id", "-r", "--name-only",
                  culprit).splitlines()
    assert changed, "the culprit changed no file"
    folder = changed[0].split("/")[0]
    assert made.ids_of("--touching", changed[0]) == made.named("norm", "command")
    assert made.ids_of("--touching", f"./{folder}/") == made.named("norm", "command")
    assert made.ids_of("--touching", changed[0][:-1]) == set()  # a path, not a prefix
    assert made.ids_of("--touching", "no/such/file.py") == set()
    author = git(made.hist.path, "log", "-1", "--format=%an", culprit)
    email = git(made.hist.path, "log", "-1", "--format=%ae", culprit)
    assert made.ids_of("--author", author.upper()) == made.named("norm", "command")
    assert made.ids_of("--author", email.split("@")[0]) == made.named("norm", "command")
    assert made.ids_of("--author", "nobody-at-all") == set()
    r = made.run("list", "--author", author)
    assert "1 culprit(s) were named before bisector kept" in r.stderr


def test_dates_text_and_pages(made: Made) -> None:
    everyone = set(made.ids.values())
    assert made.ids_of("--since", "2025-06-01") == everyone - made.named("old")
    assert made.ids_of("--until", "2025-06-01") == made.named("old")
    assert made.ids_of("--until", "2025-01-15") == made.named("old")  # the whole day
    assert made.ids_of("--until", "2025-01-14") == set()
    assert made.ids_of("--since", "2025-01-15T13:00Z", "--until", "2025-02-01") == set()
    assert made.ids_of("--since", "1d") == everyone - made.named("old")
    # The failure text of bad probes: the command oracle's line, in any case; the text its
    # good probes printed is no failure.
    assert made.ids_of("--text", MARK.lower()) == made.named("command")
    assert made.ids_of("--text", "norm is fine") == set()
    assert made.ids_of("--text", MARK, "--oracle", "torchlet_norm") == set()
    newest = sorted(everyone, reverse=True)
    assert made.ids_of("--limit", "2") == set(newest[:2])
    assert made.ids_of("--limit", "2", "--offset", "2") == set(newest[2:4])
    assert made.ids_of("--state", "done", "--limit", "1", "--offset", "1") == {
        sorted(made.named("norm", "command", "old"), reverse=True)[1]}


def test_formats(made: Made) -> None:
    rows = json.loads(made.run("list", "--json").stdout)
    lines = made.run("list", "--format", "jsonl").stdout.splitlines()
    assert [json.loads(line) for line in lines] == rows
    table = list(csv.DictReader(io.StringIO(made.run("list", "--format", "csv").stdout)))
    assert [int(r["id"]) for r in table] == [r["id"] for r in rows]
    assert {r["culprit"] for r in table} >= {made.hist.culprit, ""}


@pytest.mark.parametrize(("args", "needle"), [
    (("--since", "yesterdayish"), "--since 'yesterdayish': not a date"),
    (("--until", "2025-13-01"), "--until '2025-13-01': not a date"),
    (("--state", "donee"), "--state 'donee': not a state"),
    (("--culprit", "xyz!"), "--culprit 'xyz!': give a sha prefix"),
    (("--touching", "/etc/passwd"), "--touching '/etc/passwd': give a path inside"),
    (("--since", "2025-02-01", "--until", "2025-01-01"), "is not before --until"),
    (("--limit", "0"), "--limit"),
])
def test_a_bad_filter_is_one_line(made: Made, args: tuple[str, ...], needle: str) -> None:
    one_line_error(made.run("list", *args), needle)


def test_commit_says_everything_the_store_knows(made: Made) -> None:
    culprit = made.hist.culprit
    d = json.loads(made.run("commit", culprit[:10], "--json").stdout)
    assert d["sha"] == culprit and d["files"] and d["author"]
    assert {n["bisection"] for n in d["culprit_of"]} == made.named("norm", "command")
    by_oracle = {(v["oracle"], v["bisection"], v["verdict"], v["outcome"])
                 for v in d["verdicts"]}
    assert ("torchlet_norm", made.ids["norm"], "bad", "fail") in by_oracle
    assert any(o != "torchlet_norm" and b == made.ids["command"] and v == "bad"
               for o, b, v, _ in by_oracle)
    assert d["wheel_cached"] and not d["build_failed"]
    # The norm oracle failed here in the bisections' environment and passed in another one.
    [split] = d["disagreements"]
    assert split["oracle"] == "torchlet_norm" and set(split["outcomes"]) == {"fail", "pass"}
    assert split["outcomes"]["pass"]["environments"] == ["1" * 64]
    assert ("torchlet_norm", None, None, "pass") in by_oracle  # no bisection used that run
    text = made.run("commit", culprit[:10]).stdout
    assert f"commit {culprit}" in text and f"#{made.ids['norm']}" in text
    assert "verdicts (" in text and "torchlet_norm" in text
    assert "disagreement: torchlet_norm ended fail in" in text and "pass in 11111111" in text
    broke = json.loads(made.run("commit", made.hist.main[2], "--json").stdout)
    assert broke["build_failed"] and broke["culprit_of"] == []
    old = json.loads(made.run("commit", made.old_culprit[:9], "--json").stdout)
    assert [n["bisection"] for n in old["culprit_of"]] == [made.ids["old"]]
    assert old["files"] is None  # named before culprits' facts were kept


def test_commit_resolves_refs_and_refuses_unknown_ones(made: Made) -> None:
    head = made.run("commit", "main", "--repo", str(made.hist.path), "--json")
    assert json.loads(head.stdout)["sha"] == made.hist.main[-1]
    one_line_error(made.run("commit", "deadbeef"), "deadbeef: no commit the store knows", 6)
    one_line_error(made.run("commit", "no-such-ref", "--repo", str(made.hist.path)),
                   "no-such-ref: no commit the store knows")


def test_the_store_answers_from_its_indexes(made: Made) -> None:
    """Each filter is served by an index (SQLite's plan names it); the failure text by the
    trigram index of either database."""
    store = open_store(made.db, create=False, reads_only=True)
    try:
        with store.engine.connect() as conn:
            if conn.dialect.name == "postgresql":
                names = {r[0] for r in conn.execute(sa.text(
                    "SELECT indexname FROM pg_indexes WHERE tablename = 'run'"))}
                assert {"run_text_reason_trgm", "run_text_output_tail_trgm"} <= names
                return

            def plan(**filters: Any) -> str:
                q = queries.statement(queries.Filters(**filters), conn).compile(conn)
                values = tuple(str(q.params[k]) for k in q.positiontup or ())
                rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + str(q), values)
                return " | ".join(str(r[-1]) for r in rows)

            # Each bisection's document, read in id order: no sort, a page stops early.
            assert "SCAN bisection_text VIRTUAL TABLE INDEX" in plan(text=MARK)
            assert "TEMP B-TREE" not in plan(text=MARK)
            assert "ix_bisection_culprit_sha" in plan(culprit="abcd12")
            # (A time range may be read in id order instead: newest first, a page, stops early.)
            assert "ix_commit_path_path" in plan(touching="torchlet")
            assert "ix_bisection_state" in plan(state="done")
    finally:
        store.engine.dispose()


def test_already_bisected_is_one_store_query(made: Made) -> None:
    """``--from-report``'s "this range was bisected" asks the store once (short shas as a
    report gives them), no scan of every bisection in Python; a LIKE wildcard in a sha is
    never a pattern."""
    store = open_store(made.db, create=False, reads_only=True)
    statements: list[str] = []

    def seen(_c: Any, _cur: Any, statement: str, *_rest: Any) -> None:
        statements.append(statement)

    try:
        norm = bisections.get(store, made.ids["norm"])
        sa.event.listen(store.engine, "before_cursor_execute", seen)
        found = bisections.same_range(store, norm.oracle_sha256, norm.good_sha[:10].upper(),
                                      norm.bad_sha[:12])
        assert found == made.ids["norm"]
        assert len(statements) == 1 and "bisection" in statements[0].lower()
        assert bisections.same_range(store, norm.oracle_sha256, "%", "%") is None
        assert bisections.same_range(store, "0" * 64, norm.good_sha, norm.bad_sha) is None
        # The other oracle's bisection of the same range is not this one.
        command = bisections.get(store, made.ids["command"])
        assert bisections.same_range(store, command.oracle_sha256, norm.good_sha,
                                     norm.bad_sha) == made.ids["command"]
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", seen)
        store.engine.dispose()


def test_the_web_view_takes_the_same_filters_and_pages(made: Made) -> None:
    """`bisect serve` over real HTTP: /api/bisections takes the list's filters as query
    parameters and links its next page; the list page keeps them in its URL; a commit has its
    page and endpoint, the same data as `bisect commit --json`."""
    env = {**os.environ, **made.env}
    env.pop("BISECTOR_DB", None)
    with serving("--db", made.db, env=env) as base:
        def ids(**params: str) -> set[int]:
            r = httpx.get(f"{base}/api/bisections", params=params)
            assert r.status_code == 200, r.text
            return {row["id"] for row in r.json()}

        assert ids(state="done") == made.named("norm", "command", "old")
        assert ids(text=MARK.lower()) == made.named("command")
        assert ids(until="2025-06-01") == made.named("old")
        assert ids(touching="torchlet", author="") == made.named("norm", "command")
        bad = httpx.get(f"{base}/api/bisections", params={"since": "soon"})
        assert bad.status_code == 400 and bad.text.startswith("since 'soon': not a date")
        assert "\n" not in bad.text.strip()
        first = httpx.get(f"{base}/api/bisections", params={"state": "done", "limit": "1"})
        following = first.headers["link"].split(">")[0].lstrip("<")
        assert "state=done" in following and "offset=1" in following
        second = httpx.get(following).json()
        assert len(first.json()) == len(second) == 1 and first.json()[0] != second[0]
        page = httpx.get(f"{base}/", params={"state": "done", "author": "nobody-at-all"}).text
        assert 'value="nobody-at-all"' in page and "No bisection matches." in page
        done = httpx.get(f"{base}/", params={"state": "done"}).text
        assert done.count('<td><a href="/bisections/') == 3
        assert f'href="/commits/{made.hist.culprit}"' in done
        culprit = made.hist.culprit
        html = httpx.get(f"{base}/commits/{culprit[:10]}")
        assert html.status_code == 200 and culprit in html.text
        assert f'href="/bisections/{made.ids["norm"]}"' in html.text
        api = httpx.get(f"{base}/api/commits/{culprit[:10]}").json()
        cli = json.loads(made.run("commit", culprit[:10], "--json").stdout)
        assert api == cli
        assert httpx.get(f"{base}/api/commits/deadbeef").status_code == 404
