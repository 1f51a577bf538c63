"""``make bench`` section 18 (issue 49): every question of past bisections on a team's store,
SQLite and PostgreSQL, each against ``SELECT count(*)`` of the table it asks, in the same run.

The store (bench/queries_fill.py): BENCH_QUERY_BISECTIONS bisections (default 100,000) with
BENCH_QUERY_RUNS runs and probes each (default 20: two million runs), written in bulk into a
store this bisector's migrations made. Each question is asked as the commands ask it (the real
query of store/queries.py and store/commits.py through the real store: `bisect list`'s rows,
`bisect commit`'s data, the web list page through the ASGI app), median of 5 after one warm
call; the baseline is ``SELECT count(*)`` of ``bisection`` (of ``run`` for `bisect commit`),
timed the same way. The goal: every question within 300 ms.

PostgreSQL: a throwaway cluster under the bench's temporary folder (initdb and pg_ctl of the
installed server, as tests/conftest.py's pg_server starts one); skipped when none is installed.
BENCH_QUERY_PG_URL names a database to use instead (filled when it holds no bisection, else
reused as it is: quick iteration on the queries).

Runnable alone: ``python -m bench.run queries``, or ``python -m bench.queries_at_scale
[sqlite|postgresql] [--keep PATH]`` (a SQLite store kept at PATH and reused when there).
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import queries_fill as fill
from bisector.store.db import Store

GOAL_MS = 300.0
Line = Callable[[str, str], None]


def _scale() -> tuple[int, int]:
    return (int(os.environ.get("BENCH_QUERY_BISECTIONS", "100000")),
            int(os.environ.get("BENCH_QUERY_RUNS", "20")))


def _median_ms(fn: Callable[[], Any]) -> tuple[float, Any]:
    out = fn()  # warm: the first call pays for the connection and the pages' first read
    times = []
    for _ in range(5):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000, out


def _count(store: Store, table: str) -> Callable[[], int]:
    from sqlalchemy import text

    def count() -> int:
        with store.engine.connect() as conn:
            return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar() or 0)
    return count


def questions(store: Store, n: int) -> list[tuple[str, dict[str, str]]]:
    """Each question as `bisect list` takes it (option -> value), on a store of ``n``: the
    culprit asked for is one named two thirds of the way."""
    from sqlalchemy import text

    with store.engine.connect() as conn:
        culprit, pr = conn.execute(text(
            "SELECT g.sha, g.pr FROM bisection b JOIN git_commit g ON g.sha = b.culprit_sha "
            "WHERE b.id >= :i ORDER BY b.id LIMIT 1"), {"i": 2 * n // 3}).one()
    return [
        ("list (no filter: the newest 50)", {}),
        ("list --state 'no regression'", {"state": "no regression"}),
        ("list --oracle oracle_7", {"oracle": "oracle_7"}),
        ("list --oracle SHA (10 hex digits)", {"oracle": fill.oracle_sha(7)[:10]}),
        ("list --culprit SHA (8 hex digits)", {"culprit": culprit[:8]}),
        ("list --culprit #PR", {"culprit": f"#{pr}"}),
        ("list --touching torch/m7 (a folder)", {"touching": "torch/m7"}),
        ("list --touching torch/m7/f3.py (a file)", {"touching": "torch/m7/f3.py"}),
        ("list --author author17", {"author": "author17"}),
        ("list --author a17@example.com", {"author": "a17@example.com"}),
        ("list --since/--until (one day)", {"since": "2025-03-01", "until": "2025-03-01"}),
        ("list --text 'illegal memory access' (a tenth of runs)",
         {"text": "illegal memory access"}),
        ("list --text 'illegal memory' --oracle oracle_7",
         {"text": "illegal memory", "oracle": "oracle_7"}),
        ("list --text 'no such failure anywhere'", {"text": "no such failure anywhere"}),
        ("list --repo u7/ (a scan)", {"repo": "u7/"}),
        ("list --disagree", {"disagree": "1"}),
        ("list --disagree --oracle oracle_7", {"disagree": "1", "oracle": "oracle_7"}),
    ]


def _asks(store: Store, n: int) -> Iterator[tuple[str, str, Callable[[], Any]]]:
    """(what, baseline table, the call) for every question."""
    from starlette.testclient import TestClient

    from bisector.app import commit_view, list_rows, queries
    from bisector.web.server import create_app

    for what, words in questions(store, n):
        where = queries.parse(words, 50, 0)
        yield what, "bisection", lambda where=where: list_rows.list_data(store, where)
    yield ("list --state done --offset 50000", "bisection",
           lambda: list_rows.list_data(store, queries.parse({"state": "done"}, 50, 50_000)))
    client = TestClient(create_app(store))
    for what, query in (("web list page (no filter)", ""),
                        ("web list page ?author=author17&text=illegal+memory",
                         "?author=author17&text=illegal+memory")):
        def page(query: str = query) -> str:
            r = client.get("/" + query)
            assert r.status_code == 200, r.text[:300]
            return r.text
        yield what, "bisection", page
    sha = fill.commit(n // 2)
    yield ("commit SHA (every run at it, culprit, builds)", "run",
           lambda: commit_view.commit_data(store, sha)["verdicts"])
    yield ("commit PREFIX (8 hex digits)", "run",
           lambda: commit_view.commit_data(store, sha[:8])["verdicts"])


def measure(store: Store, n: int, line: Line) -> list[float]:
    """Print each question's median against its count(*) baseline; the questions' ms."""
    base = {t: _median_ms(_count(store, t))[0] for t in ("bisection", "run")}
    line("baseline: SELECT count(*) FROM bisection", f"{base['bisection']:7.1f} ms")
    line("baseline: SELECT count(*) FROM run", f"{base['run']:7.1f} ms")
    figures = []
    for what, table, fn in _asks(store, n):
        ms, out = _median_ms(fn)
        rows = f"{len(out)} rows" if isinstance(out, list) else "a page"
        figures.append(ms)
        line(what, f"{ms:7.1f} ms  {ms / base[table]:6.2f}x count(*)  ({rows})"
                   + ("  OVER GOAL" if ms > GOAL_MS else ""))
    return figures


def _on(engine: str, url: str, n: int, each: int, line: Line, kept: bool = False) -> None:
    from bisector.store.db import open_store

    if not kept:
        open_store(url).engine.dispose()  # the schema, by this bisector's migrations
        t = time.perf_counter()
        if engine == "sqlite":
            fill.fill_sqlite(url.removeprefix("sqlite:///"), n, each)
        else:
            fill.fill_postgres(url, n, each)
        line(f"{engine}: made the store", f"{time.perf_counter() - t:.0f} s")
    store = open_store(url, create=False, reads_only=True)
    try:
        figures = measure(store, n, line)
    finally:
        store.engine.dispose()
    worst = max(figures)
    line(f"{engine}: goal every question <= {GOAL_MS:.0f} ms",
         f"{'met' if worst <= GOAL_MS else 'NOT met'} (slowest {worst:.1f} ms)")


def _filled(url: str) -> bool:
    """Whether the database at ``url`` holds a store with bisections (a previous run's)."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return bool(conn.execute(sa.text("SELECT count(*) FROM bisection")).scalar())
    except sa.exc.DBAPIError:
        return False
    finally:
        engine.dispose()


@contextmanager
def postgres() -> Iterator[str | None]:
    """A throwaway PostgreSQL cluster on 127.0.0.1 (its base URL), or None without a server."""
    bins = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), reverse=True)
    initdb = bins[0] if bins else (Path(p) if (p := shutil.which("initdb")) else None)
    if initdb is None:
        yield None
        return
    user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    # Its own folder outside ``tmp`` (0700, root's when root runs the bench): initdb runs as
    # postgres, which must reach it.
    data = Path(tempfile.mkdtemp(prefix="bench-pg-"))
    if user:
        shutil.chown(data, "postgres")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pg_ctl = [*user, str(initdb.parent / "pg_ctl"), "-D", str(data / "db")]
    subprocess.run([*user, str(initdb), "-D", str(data / "db"), "-U", "postgres",
                    "--auth=trust", "-E", "UTF8"], check=True, capture_output=True)
    subprocess.run([*pg_ctl, "-l", str(data / "log"), "-w", "-o",
                    f"-p {port} -k {data} -c listen_addresses=127.0.0.1 "
                    "-c shared_buffers=2GB -c fsync=off", "start"],
                   check=True, capture_output=True)
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*pg_ctl, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(data, ignore_errors=True)


def bench_queries(tmp: Path, line: Line, engines: tuple[str, ...] = ("sqlite", "postgresql"),
                  keep: Path | None = None) -> None:
    n, each = _scale()
    print(f"18. questions of past bisections on {n:,} bisections / {n * each:,} runs vs "
          f"SELECT count(*) (goal: each <= {GOAL_MS:.0f} ms; "
          f"{datetime.now(UTC):%Y-%m-%d})")
    if "sqlite" in engines:
        path = keep or tmp / "queries.db"
        _on("sqlite", f"sqlite:///{path}", n, each, line, kept=path.exists())
    if "postgresql" in engines and (given := os.environ.get("BENCH_QUERY_PG_URL")):
        _on("postgresql", given, n, each, line, kept=_filled(given))
    elif "postgresql" in engines:
        with postgres() as url:
            if url is None:
                line("postgresql", "skipped: no PostgreSQL server installed (initdb)")
            else:
                _on("postgresql", url, n, each, line)


def main() -> None:
    from bench.run import line

    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    keep = Path(sys.argv[sys.argv.index("--keep") + 1]) if "--keep" in sys.argv else None
    engines = tuple(a for a in args if a in ("sqlite", "postgresql")) or ("sqlite",
                                                                          "postgresql")
    tmp = Path(tempfile.mkdtemp(prefix="bisector-bench-"))
    try:
        bench_queries(tmp, line, engines, keep)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
