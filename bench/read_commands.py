"""``make bench`` section 16: read commands on a store of 1,000 bisections (issue 36).

``bisect list``, ``bisect show ID`` and ``bisect log ID``, each a fresh process as a shell
starts it, against ``python -c "import click"`` in the same run (goal: at most 3x), idle and
with two busy cores. The store: one real bisection (``bisect demo``: 240 commits, its probes,
runs, artifacts) copied in SQL until the store holds BENCH_READ_BISECTIONS (default 1000), the
copies sharing its runs as reused verdicts do. Each also the full way
(``BISECTOR_QUICK_READS=0``: the ORM, git and the renderers, as every read went before), in
the same run. ``show`` and ``log`` of a finished bisection read
the snapshot its end (or its first ``show``) kept (app/report/snapshots.py): that first show is
timed once on its own. Then a probe's own overhead: everything a probe
of the demo paid besides obtaining its torch, making its environment and running its oracle,
read from the probes' recorded phases (goal: at most 0.2 s).

Runnable alone: ``python -m bench.run reads``.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from bench.cli_start import BEFORE, GOAL, _bisect, idle_and_loaded

COUNT = int(os.environ.get("BENCH_READ_BISECTIONS", "1000"))
OVERHEAD_GOAL_S = 0.2


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in con.execute(f"PRAGMA table_info({table})")]


def _copies(db: Path, count: int) -> int:
    """Copy bisection 1 (and its candidates and probes) until the store holds ``count``;
    the id shown and logged: the one in the middle."""
    con = sqlite3.connect(db)
    cols = [c for c in _columns(con, "bisection") if c != "id"]
    probe_cols = [c for c in _columns(con, "probe") if c not in ("id", "bisection_id")]
    cand_cols = [c for c in _columns(con, "candidate") if c != "bisection_id"]
    for _ in range(count - 1):
        cur = con.execute(f"INSERT INTO bisection ({', '.join(cols)}) SELECT "
                          f"{', '.join(cols)} FROM bisection WHERE id = 1")
        new = cur.lastrowid
        con.execute(f"INSERT INTO candidate (bisection_id, {', '.join(cand_cols)}) SELECT ?, "
                    f"{', '.join(cand_cols)} FROM candidate WHERE bisection_id = 1", (new,))
        con.execute(f"INSERT INTO probe (bisection_id, {', '.join(probe_cols)}) SELECT ?, "
                    f"{', '.join(probe_cols)} FROM probe WHERE bisection_id = 1", (new,))
    con.commit()
    (n,) = con.execute("SELECT count(*) FROM bisection").fetchone()
    con.close()
    return max(1, int(n) // 2)


def _overhead(db: Path, line: Callable[[str, str], None]) -> None:
    """Per probe that ran: its wall time minus obtain, environment and oracle (the phases
    the pipeline records), median over the demo's probes."""
    import json

    con = sqlite3.connect(db)
    rows = con.execute("SELECT r.facts, r.duration_s FROM probe p JOIN run r ON r.id = "
                       "p.run_id WHERE p.bisection_id = 1 AND p.reused = 0").fetchall()
    con.close()
    own = []
    for facts, _duration in rows:
        phases = (json.loads(facts or "{}").get("phases") or {})
        if "overhead" in phases:  # the facts read and bisector's own bookkeeping
            own.append(sum(float(v) for k, v in phases.items()
                           if k not in ("obtain", "environment", "oracle")))
    if not own:
        line("a probe's own overhead", "no probe recorded its phases")
        return
    med = statistics.median(own)
    line(f"a probe's own overhead (median of {len(own)} demo probes)",
         f"{med:.3f} s (goal <= {OVERHEAD_GOAL_S} s: "
         f"{'met' if med <= OVERHEAD_GOAL_S else 'NOT met'}); max {max(own):.3f} s")


def _first_show(bisect: list[str], db: Path, bisection_id: int, env: dict[str, str], home: str,
                line: Callable[[str, str], None]) -> None:
    """The first ``show`` of a bisection that has no snapshot (one finished before this
    bisector, or copied in SQL as here): the full path, which keeps one for the next time."""
    import time

    t0 = time.perf_counter()
    r = subprocess.run([*bisect, "--db", str(db), "show", str(bisection_id)], env=env, cwd=home,
                       capture_output=True, text=True, check=False)
    took = time.perf_counter() - t0
    line(f"bisect show {bisection_id}, its first time (no snapshot: rendered, then kept)",
         f"{took * 1000:.0f} ms" if r.returncode == 0 else f"failed: {r.stderr[-120:]}")


def bench_reads(line: Callable[[str, str], None]) -> None:
    runs = int(os.environ.get("BENCH_CLI_RUNS", "15"))
    print(f"16. read commands on a store of {COUNT} bisections: median of {runs} fresh "
          f"processes vs python -c 'import click' (goal <= {GOAL:.0f}x), idle, then with two "
          f"busy cores")
    with tempfile.TemporaryDirectory(prefix="bisector-bench-reads-") as home:
        env = {k: v for k, v in os.environ.items()
               if k not in ("BISECTOR_DB", "BISECTOR_CONFIG", "BISECTOR_CACHE_DIR")}
        env["BISECTOR_HOME"] = home
        bisect, needs = _bisect()
        env.update(needs)
        db = Path(home) / "reads.db"
        made = subprocess.run([*bisect, "--db", str(db), "demo", "--dir",
                               str(Path(home) / "demo"), "--json"], env=env,
                              capture_output=True, text=True, check=False)
        if made.returncode != 0:
            line("bisect demo (the store's first bisection)", f"failed: {made.stderr[-200:]}")
            return
        _overhead(db, line)
        middle = _copies(db, COUNT)
        _first_show(bisect, db, middle - 1, env, home, line)
        cases = {
            "python -c 'import click' (baseline)": ([sys.executable, "-c", "import click"], {}),
            "bisect list": ([*bisect, "--db", str(db), "list"], {}),
            f"bisect show {middle}": ([*bisect, "--db", str(db), "show", str(middle)], {}),
            f"bisect log {middle}": ([*bisect, "--db", str(db), "log", str(middle)], {}),
        }
        full = {"BISECTOR_QUICK_READS": "0"}  # the way every read went before (issue 36)
        cases.update({f"{name}, the full way {BEFORE}": (cmd, full)
                      for name, (cmd, _) in list(cases.items())[1:]})
        idle_and_loaded(cases, env, home, runs, line)
