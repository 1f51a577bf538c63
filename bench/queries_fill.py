"""A team's store made up for `make bench`'s query section (bench/queries_at_scale.py): N
bisections of 21 candidates each over one main line of 2N commits, R runs and probes each
(default 100,000 and 20: two million runs), on SQLite or PostgreSQL, in a minute or two.

The schema is this bisector's own (``open_store`` migrates an empty store); the rows are then
written in bulk with the store's secondary indexes and SQLite's text-index triggers dropped
(one ``executemany`` per table and batch on SQLite, ``COPY`` on PostgreSQL) and the indexes made
again at the end, as a restore would: building an index once is many times cheaper than keeping
it in step row by row. The rows are what the queries meet in a real store:

- 40 oracles; each has its regressions (a commit in every 80 of the main line), and a
  bisection whose window holds one names it (state done), else says ``no regression``; one in
  a hundred is flaky and names another commit of its window (the disagreements to find);
- every probe is a run at a candidate of the window, in the bisection's own environment; a bad
  one holds one of five failure texts (the common phrase of ``--text``: a tenth of all runs);
- every culprit has its git facts (author, pull request, paths), 300 authors, 40 folders.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

TEXTS = ("RuntimeError: CUDA error: an illegal memory access was encountered",
         "AssertionError: Tensor-likes are not close! Mismatched elements: 3 / 64",
         "torch._dynamo.exc.Unsupported: call_function BuiltinVariable(setattr)",
         "Segmentation fault (core dumped)", "exit 1")
ORACLES = 40
WINDOW = 20  # a bisection's range: 21 candidates, its good endpoint at position 0
REGRESSION_EVERY = 80
START = datetime(2025, 1, 1, tzinfo=UTC)
BATCH = 5000  # bisections a batch

BISECTION = ("id", "created_at", "updated_at", "state", "repo_path", "good_ref", "bad_ref",
             "good_sha", "bad_sha", "oracle_name", "oracle_sha256", "polarity",
             "env_fingerprint", "environment", "settings", "notes", "n_candidates", "result",
             "culprit_sha")
RUN = ("id", "commit_sha", "oracle_sha256", "env_fingerprint", "outcome", "exit_code", "reason",
       "reusable", "duration_s", "started_at", "finished_at", "output_tail", "facts")
PROBE = ("bisection_id", "seq", "position", "commit_sha", "run_id", "verdict", "reused", "at")
CANDIDATE = ("bisection_id", "position", "sha")
GIT_COMMIT = ("sha", "subject", "author", "author_email", "authored_at", "pr", "created_at")
COMMIT_PATH = ("sha", "path", "folder")
ORACLE = ("sha256", "name", "content", "meta", "created_at")


def sha(i: int, salt: str) -> str:
    return hashlib.sha1(f"{salt}{i}".encode()).hexdigest()


def commit(i: int) -> str:
    """The main line's i-th commit."""
    return sha(i, "c")


def oracle_sha(o: int) -> str:
    return sha(o, "oracle") + sha(o, "o2")[:24]


def pr_of(position: int) -> int:
    return 100_000 + position


@dataclass
class Batch:
    """The rows of BATCH bisections, table by table (columns as the tuples above)."""

    bisection: list[tuple[Any, ...]] = field(default_factory=list)
    run: list[tuple[Any, ...]] = field(default_factory=list)
    probe: list[tuple[Any, ...]] = field(default_factory=list)
    candidate: list[tuple[Any, ...]] = field(default_factory=list)
    git_commit: list[tuple[Any, ...]] = field(default_factory=list)
    commit_path: list[tuple[Any, ...]] = field(default_factory=list)


def oracles() -> list[tuple[Any, ...]]:
    return [(oracle_sha(o), f"oracle_{o}", "", "{}", START) for o in range(ORACLES)]


def batches(n: int, runs_each: int) -> Iterator[Batch]:
    """The rows of ``n`` bisections, BATCH at a time (deterministic: seeded)."""
    rng = random.Random(49)
    line = 2 * n
    run_id = 0
    facts: set[int] = set()  # main-line positions whose git facts are written
    batch = Batch()
    for b in range(1, n + 1):
        o = b % ORACLES
        start = rng.randrange(line - WINDOW)
        window = range(start, start + WINDOW + 1)
        found = next((p for p in window[1:] if (p + o) % REGRESSION_EVERY == 0), None)
        if rng.random() < 0.01:  # a flaky oracle's answer: another commit of the window
            found = rng.choice([p for p in window[1:] if p != found])
        created = START + timedelta(minutes=5 * b)
        state = "done" if found is not None else "no regression"
        batch.bisection.append((
            b, created, created, state, f"/home/u{b % 50}/pytorch", "v1", "v2",
            commit(start), commit(window[-1]), f"oracle_{o}", oracle_sha(o), "regression",
            "e" * 64, "{}", "{}", "[]", len(window), "{}",
            None if found is None else commit(found)))
        batch.candidate.extend((b, k, commit(p)) for k, p in enumerate(window))
        env = f"{b:064x}"
        for k in range(runs_each):
            run_id += 1
            p = window[1 + k % WINDOW]
            bad = found is not None and p >= found
            text = rng.choice(TEXTS) if bad else "ok"
            batch.run.append((run_id, commit(p), oracle_sha(o), env, "fail" if bad else "pass",
                              1 if bad else 0, text, True, 1.0, created, created,
                              text + "\n" + "x" * 80, "{}"))
            batch.probe.append((b, k, p - start, commit(p), run_id, "bad" if bad else "good",
                                False, created))
        if found is not None and found not in facts:
            facts.add(found)
            batch.git_commit.append((commit(found), "subject", f"author{found % 300}",
                                     f"a{found % 300}@example.com", created, pr_of(found),
                                     created))
            batch.commit_path.extend([(commit(found), "torch", True),
                                      (commit(found), f"torch/m{found % 40}", True),
                                      (commit(found), f"torch/m{found % 40}/f{found % 7}.py",
                                       False)])
        if b % BATCH == 0 or b == n:
            yield batch
            batch = Batch()


TABLES = ("bisection", "candidate", "run", "probe", "git_commit", "commit_path")


def columns(table: str) -> tuple[str, ...]:
    return {"bisection": BISECTION, "run": RUN, "probe": PROBE, "candidate": CANDIDATE,
            "git_commit": GIT_COMMIT, "commit_path": COMMIT_PATH, "oracle": ORACLE}[table]


def fill_sqlite(path: str, n: int, runs_each: int) -> None:
    """Bulk rows into the migrated SQLite store at ``path``: indexes and the text index's
    triggers off while writing, made again (and the text index rebuilt) at the end."""
    import sqlite3

    from bisector.store import bisection_text, fulltext

    con = sqlite3.connect(path)
    con.execute("PRAGMA synchronous=OFF")
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA cache_size=-500000")
    tables = ", ".join(f"'{t}'" for t in (*TABLES, "oracle"))
    indexes = con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql "
                          f"IS NOT NULL AND tbl_name IN ({tables})").fetchall()
    triggers = con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND "
                           "(name LIKE 'run_text%' OR name LIKE 'bisection_text%')").fetchall()
    for name, _ in indexes:
        con.execute(f"DROP INDEX {name}")
    for name, _ in triggers:
        con.execute(f"DROP TRIGGER {name}")

    def put(table: str, rows: list[tuple[Any, ...]]) -> None:
        cols = columns(table)
        con.executemany(f"INSERT INTO {table} ({', '.join(cols)}) VALUES "
                        f"({', '.join('?' * len(cols))})",
                        [tuple(_sqlite(v) for v in r) for r in rows])

    put("oracle", oracles())
    for batch in batches(n, runs_each):
        for t in TABLES:
            put(t, getattr(batch, t))
        con.commit()
    for _, sql in [*indexes, *triggers]:
        con.execute(sql)
    if triggers:
        con.execute(f"INSERT INTO {fulltext.PREFIX}({fulltext.PREFIX}) VALUES ('rebuild')")
        con.execute(bisection_text.SQLITE_FILL)
    con.execute(_pairs("sqlite"))
    con.commit()
    con.execute("ANALYZE")
    con.close()


def _sqlite(v: Any) -> Any:
    """As SQLAlchemy writes a value to SQLite (a datetime as text, a bool as 0/1)."""
    if isinstance(v, datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S.%f")
    return v


def _pairs(dialect: str) -> str:
    """The disagreeing pairs (store/disagree.py), as SQL to fill ``disagreement`` at once."""
    from sqlalchemy import insert
    from sqlalchemy.dialects import postgresql, sqlite

    from bisector.store import disagree
    from bisector.store import models as m

    q = insert(m.Disagreement).from_select(["named", "other"], disagree.pairs())
    d = sqlite.dialect() if dialect == "sqlite" else postgresql.dialect()  # type: ignore[no-untyped-call]
    return str(q.compile(dialect=d, compile_kwargs={"literal_binds": True}))


def fill_postgres(url: str, n: int, runs_each: int) -> None:
    """Bulk rows into the migrated PostgreSQL store at ``url`` by COPY: secondary indexes
    dropped while writing and made again, foreign keys unchecked (a replica's session)."""
    import psycopg

    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True) as con:
        con.execute("SET session_replication_role = replica")
        con.execute("SET maintenance_work_mem = '1GB'")
        tables = list((*TABLES, "oracle"))
        indexes = con.execute(
            "SELECT i.indexname, i.indexdef FROM pg_indexes i WHERE i.tablename = ANY(%s) AND "
            "NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)",
            (tables,)).fetchall()
        for name, _ in indexes:
            con.execute(f'DROP INDEX "{name}"')

        def put(table: str, rows: list[tuple[Any, ...]]) -> None:
            cols = columns(table)
            with con.cursor() as cur, cur.copy(
                    f"COPY {table} ({', '.join(cols)}) FROM STDIN") as copy:
                for r in rows:
                    copy.write_row(r)

        put("oracle", oracles())
        for batch in batches(n, runs_each):
            for t in TABLES:
                put(t, getattr(batch, t))
        for _, sql in indexes:
            con.execute(sql)
        # What finishing bisections would have written (store/disagree.refresh).
        con.execute(_pairs("postgresql"))
        con.execute("VACUUM ANALYZE")
