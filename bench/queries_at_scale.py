"""`bisect list`'s filters and `bisect commit` on a big SQLite store (issue 49): N bisections
with R runs each (default 100,000 and 20: two million runs and probes), written straight into
a store made by this bisector's schema, then each question timed as the CLI asks it.

    .venv/bin/python bench/queries_at_scale.py [BISECTIONS] [RUNS_EACH] [--keep PATH]

Rows are synthetic (random shas, a few oracles, repos and failure texts); what is timed is the
real query of store/queries.py and store/commits.py through the real store, median of 5.
"""

from __future__ import annotations

import hashlib
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bisector.app import commit_view
from bisector.app.list_rows import list_data
from bisector.store import queries
from bisector.store.db import open_store

TEXTS = ("RuntimeError: CUDA error: an illegal memory access was encountered",
         "AssertionError: Tensor-likes are not close! Mismatched elements: 3 / 64",
         "torch._dynamo.exc.Unsupported: call_function BuiltinVariable(setattr)",
         "Segmentation fault (core dumped)", "exit 1")


def sha(i: int, salt: str) -> str:
    return hashlib.sha1(f"{salt}{i}".encode()).hexdigest()


def fill(path: Path, n: int, runs_each: int) -> None:
    open_store(str(path)).engine.dispose()  # the schema, by migration
    rng = random.Random(49)
    con = sqlite3.connect(path)
    con.execute("PRAGMA synchronous=OFF")
    oracles = [(sha(i, "oracle") + sha(i, "o2")[:24], f"oracle_{i}") for i in range(40)]
    con.executemany("INSERT INTO oracle VALUES (?, ?, '', '{}', '2026-01-01 00:00:00')",
                    oracles)
    start = datetime(2025, 1, 1, tzinfo=UTC)
    run_id = 0
    for b in range(1, n + 1):
        o_sha, o_name = oracles[b % len(oracles)]
        culprit = sha(b, "culprit") if b % 3 else None
        created = (start + timedelta(minutes=5 * b)).strftime("%Y-%m-%d %H:%M:%S.000000")
        con.execute(
            "INSERT INTO bisection (id, created_at, updated_at, state, repo_path, good_ref, "
            "bad_ref, good_sha, bad_sha, oracle_name, oracle_sha256, polarity, "
            "env_fingerprint, environment, settings, notes, n_candidates, result, culprit_sha) "
            "VALUES (?, ?, ?, ?, ?, 'v1', 'v2', ?, ?, ?, ?, 'regression', ?, '{}', '{}', '[]', "
            "?, '{}', ?)",
            (b, created, created, "done" if culprit else "failed", f"/home/u{b % 50}/pytorch",
             sha(b, "g"), sha(b, "b"), o_name, o_sha, "e" * 64, runs_each, culprit))
        runs, probes = [], []
        for k in range(runs_each):
            run_id += 1
            bad = rng.random() < 0.5
            text = rng.choice(TEXTS) if bad else "ok"
            half = n * runs_each // 2  # each commit runs twice, in two environments
            runs.append((run_id, sha(run_id % half, "c"), o_sha, f"{run_id // half:064d}",
                         "fail" if bad else "pass", 1 if bad else 0, text, 1,
                         created, created, text + "\n" + "x" * 80, "{}"))
            probes.append((b, k, k, runs[-1][1], run_id, "bad" if bad else "good", created))
        con.executemany(
            "INSERT INTO run (id, commit_sha, oracle_sha256, env_fingerprint, outcome, "
            "exit_code, reason, reusable, duration_s, started_at, finished_at, output_tail, "
            "facts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1.0, ?, ?, ?, ?)", runs)
        con.executemany(
            "INSERT INTO probe (bisection_id, seq, position, commit_sha, run_id, verdict, "
            "reused, at) VALUES (?, ?, ?, ?, ?, ?, 0, ?)", probes)
        if culprit:
            con.execute("INSERT INTO git_commit VALUES (?, 'subject', ?, ?, NULL, ?, "
                        "'2026-01-01 00:00:00')",
                        (culprit, f"author{b % 300}", f"a{b % 300}@example.com", 140000 + b))
            con.executemany("INSERT INTO commit_path VALUES (?, ?, ?)",
                            [(culprit, "torch", 1), (culprit, f"torch/m{b % 40}", 1),
                             (culprit, f"torch/m{b % 40}/f{b % 7}.py", 0)])
        if b % 10000 == 0:
            con.commit()
            print(f"  {b} bisections, {run_id} runs", flush=True)
    con.commit()
    con.execute("ANALYZE")
    con.close()


def timed(what: str, fn: object) -> None:
    assert callable(fn)
    times = []
    for _ in range(5):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    print(f"{what:58} {statistics.median(times) * 1000:8.1f} ms  ({len(out)} rows)")


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[0]) if args else 100_000
    each = int(args[1]) if len(args) > 1 else 20
    keep = sys.argv[sys.argv.index("--keep") + 1] if "--keep" in sys.argv else None
    path = Path(keep) if keep else Path(tempfile.mkdtemp()) / "big.db"
    if not path.exists():
        t = time.perf_counter()
        fill(path, n, each)
        print(f"filled {path} in {time.perf_counter() - t:.0f} s "
              f"({path.stat().st_size / 2**20:.0f} MiB)")
    store = open_store(str(path), create=False, reads_only=True)
    culprit = sha(3 * (n // 6) + 1, "culprit")
    some_oracle = sha(7, "oracle")[:10]
    F = queries.Filters
    cases = [
        ("no filter (a page of 50)", F()),
        ("--state failed", F(state="failed")),
        ("--oracle oracle_7", F(oracle="oracle_7")),
        (f"--oracle {some_oracle} (sha prefix)", F(oracle=some_oracle)),
        ("--culprit (8 hex digits)", F(culprit=culprit[:8])),
        ("--culprit #PR", F(pr=140000 + 3 * (n // 6) + 1)),
        ("--touching torch/m7", F(touching="torch/m7")),
        ("--touching torch/m7/f3.py", F(touching="torch/m7/f3.py")),
        ("--author author17", F(author="author17")),
        ("--since/--until (one day)", F(since=datetime(2025, 3, 1, tzinfo=UTC),
                                        until=datetime(2025, 3, 2, tzinfo=UTC))),
        ("--text 'illegal memory access'", F(text="illegal memory access")),
        ("--text 'illegal memory' --oracle oracle_7", F(text="illegal memory",
                                                        oracle="oracle_7")),
        ("--text 'no such failure anywhere'", F(text="no such failure anywhere")),
        ("--repo u7/ (a scan)", F(repo="u7/")),
        ("--state done --offset 50000", F(state="done", offset=50_000)),
    ]
    for what, f in cases:
        timed(f"list {what}", lambda f=f: queries.bisections(store, f))
    timed("list --touching torch/m7 (rows as the CLI makes them)",
          lambda: list_data(store, F(touching="torch/m7")))
    commit = sha(12345, "c")
    timed("commit (one sha: every run, culprit, builds)",
          lambda: commit_view.commit_data(store, commit)["verdicts"])
    timed("commit (an 8-digit prefix)",
          lambda: commit_view.commit_data(store, commit[:8])["verdicts"])
    store.engine.dispose()


if __name__ == "__main__":
    main()
