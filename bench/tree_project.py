"""``make bench`` section 17: a repository with no Python packaging, bisector vs ``git bisect run``.

A 40-commit C project made here (:func:`generate_c`): one ``calc.c`` of BENCH_TREE_FUNCS
functions, a ``check.sh`` that compiles it with ``cc -O1`` and runs it, every commit changing
one function, one commit (23) breaking the function ``main`` checks. Nothing a Python build
could make: before issue 50 every probe was "build failed: ... does not appear to be a Python
project" and the bisection stopped at its good endpoint (exit 7).

The same oracle both ways, ``sh check.sh``: ``git bisect run`` in a clone (its checkout moves
from commit to commit), ``bisect start -- sh check.sh`` with nothing made before (a new
BISECTOR_HOME each run: its store, its one environment, its exported trees), where each probe
runs in a private copy of the commit's exported tree. The headline is that command as typed,
its confirmation included (the culprit and its parent run again: runs git never makes); the
same with ``--no-confirm`` (the search alone: the two endpoints git trusts, then the search's
probes) and a second bisection on the same store follow. Each bisector line also gives its own
time: the wall time less its oracle runs' (imports, store, environment, exports, reports).
Median of BENCH_TREE_RUNS runs each, interleaved, in one run; the ratio is bisector's over
git's.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bisector.app.demo.small_project import git_in

CHECK = """\
#!/bin/sh
# Good: calc builds and f_checked(3) is 12. Exit 125 (skip) when it does not compile.
cc -O1 -o calc calc.c || exit 125
./calc
"""

ORACLE = ("sh", "check.sh")


@dataclass(frozen=True)
class CHistory:
    path: Path
    main: list[str]  # oldest first
    culprit: str


def _calc(funcs: int, changed: int, broken: bool) -> str:
    """calc.c: ``funcs`` functions (the ``changed``-th one's constant bumped by the commit),
    the checked one returning 12 for 3, or 13 once ``broken``."""
    lines = ["#include <stdio.h>", ""]
    for k in range(funcs):
        bump = 1 if k == changed else 0
        lines += [f"int f_{k}(int x) {{", f"    int y = x * {k + 1} + {bump};",
                  "    for (int i = 0; i < 3; i++) y = (y * 31 + i) % 1000003;",
                  "    return y;", "}", ""]
    lines += ["int f_checked(int x) {", f"    return 4 * x{' + 1' if broken else ''};", "}", "",
              "int main(void) {", "    long sum = 0;",
              *(f"    sum += f_{k}({k});" for k in range(0, funcs, max(1, funcs // 16))),
              '    printf("%ld\\n", sum);', "    return f_checked(3) == 12 ? 0 : 1;", "}", ""]
    return "\n".join(lines)


def generate_c(path: Path, commits: int = 40, culprit: int = 23,
               funcs: int = 400) -> CHistory:
    """``commits`` commits of a C project at ``path``; commit ``culprit`` breaks it."""
    path.mkdir(parents=True)
    git = git_in(path)
    git("init", "-q", "-b", "main")
    (path / "check.sh").write_text(CHECK)
    (path / ".gitignore").write_text("calc\n")
    shas = []
    for i in range(commits):
        (path / "calc.c").write_text(_calc(funcs, i % funcs, broken=i >= culprit))
        (path / "README").write_text(f"calc, release {i}\n")
        git("add", "-A")
        git("commit", "-q", "-m", f"calc: change {i}" + (" (the regression)" if i == culprit
                                                           else ""))
        shas.append(git("rev-parse", "HEAD"))
    return CHistory(path, shas, shas[culprit])


def _git_bisect(clone: Path, good: str, bad: str) -> tuple[float, str]:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(clone), *args], check=True, text=True,
                              capture_output=True).stdout

    t0 = time.perf_counter()
    git("bisect", "start", bad, good)
    git("bisect", "run", *ORACLE)
    took = time.perf_counter() - t0
    found = git("rev-parse", "refs/bisect/bad").strip()
    git("bisect", "reset")
    return took, found


@dataclass(frozen=True)
class Ran:
    took: float  # wall seconds of the whole command
    culprit: str
    runs: int  # oracle runs: the probes' and the confirmation's
    own: float  # the wall time less the oracle runs': bisector's own


def _bisector(home: Path, repo: Path, good: str, bad: str,
              oracle: tuple[str, ...] = ORACLE, confirm: bool = True) -> Ran:
    env = {**os.environ, "BISECTOR_HOME": str(home)}
    for k in ("BISECTOR_CACHE_DIR", "BISECTOR_DB"):
        env.pop(k, None)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "bisector", "start", "--repo", str(repo),
                        "--good", good, "--bad", bad, *([] if confirm else ["--no-confirm"]),
                        "--json", "--", *oracle],
                       env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip().splitlines()[-1:])
    d = json.loads(r.stdout)
    probes = [p for p in d["probes"] if not p["reused"]]
    checked = (d["result"] or {}).get("confirmation") or {}
    again = [*checked.get("culprit", []), *checked.get("parent", []),
             *(checked.get("revert") or {}).get("runs", [])]
    oracle_s = sum(p["duration_s"] for p in probes) + sum(_run_s(home, a["run"]) for a in again)
    return Ran(took, d["culprit"]["sha"], len(probes) + len(again), took - oracle_s)


def _run_s(home: Path, run_id: int) -> float:
    """A confirmation run's oracle seconds, from the store the bisection wrote."""
    import sqlite3

    with sqlite3.connect(home / "data" / "bisector.db") as db:
        row = db.execute("SELECT duration_s FROM run WHERE id = ?", (run_id,)).fetchone()
    return float(row[0]) if row and row[0] is not None else 0.0


def bench_tree_project(tmp: Path, show: Callable[[str, str], None]) -> None:
    runs = int(os.environ.get("BENCH_TREE_RUNS", "3"))
    funcs = int(os.environ.get("BENCH_TREE_FUNCS", "400"))
    print(f"17. a 40-commit C project, no Python packaging, command oracle `sh check.sh` "
          f"(cc -O1 of {funcs} functions, then run): bisect start vs git bisect run "
          f"(median of {runs})")
    hist = generate_c(tmp / "tree-c", funcs=funcs)
    clone = tmp / "tree-c-git"
    subprocess.run(["git", "clone", "-q", str(hist.path), str(clone)], check=True)
    theirs: list[float] = []
    rows: dict[str, list[Ran]] = {"default": [], "search": [], "warm": []}
    right = True
    for i in range(runs):  # interleaved: a busy machine weighs on both alike
        took, found = _git_bisect(clone, hist.main[0], hist.main[-1])
        theirs.append(took)
        right &= found == hist.culprit
        homes = (tmp / f"tree-home-{i}", tmp / f"tree-home-{i}-search")
        try:
            # As typed: `bisect start -- sh check.sh`, its confirmation included.
            rows["default"].append(_bisector(homes[0], hist.path, hist.main[0], hist.main[-1]))
            # The search alone, also with nothing made before.
            rows["search"].append(_bisector(homes[1], hist.path, hist.main[0], hist.main[-1],
                                            confirm=False))
            # The same store and environment, another oracle (so no verdict is reused):
            # what a second bisection on this box pays.
            rows["warm"].append(_bisector(homes[1], hist.path, hist.main[0], hist.main[-1],
                                          ("sh", "./check.sh"), confirm=False))
        except RuntimeError as e:
            show("bisect start -- sh check.sh", f"failed: {e}")
            return
        finally:
            for home in homes:
                shutil.rmtree(home, ignore_errors=True)
    right &= all(r.culprit == hist.culprit for done in rows.values() for r in done)
    base = statistics.median(theirs)
    show("baseline: git bisect run sh check.sh", f"{base:.2f}s")
    wrong = "" if right else " WRONG CULPRIT"
    labels = {"default": "bisect start, nothing made before, as typed (confirmation on)",
              "search": "the same with --no-confirm (the search alone)",
              "warm": "--no-confirm, store and environment made before"}
    for key, label in labels.items():
        done = rows[key]
        mine = statistics.median(r.took for r in done)
        own = statistics.median(r.own for r in done)
        show(f"{label}, {done[-1].runs} oracle runs",
             f"{mine:.2f}s -> ratio {mine / base:.1f}x{wrong} (own time {own:.2f}s)")
    oracle = statistics.median(_timed_oracle(clone, hist.main[-1]) for _ in range(runs))
    show("floor: the oracle alone at the bad commit, once", f"{oracle:.2f}s")


def _timed_oracle(clone: Path, sha: str) -> float:
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", sha], check=True)
    t0 = time.perf_counter()
    subprocess.run(list(ORACLE), cwd=clone, capture_output=True, check=False)
    return time.perf_counter() - t0
