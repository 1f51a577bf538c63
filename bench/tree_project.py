"""``make bench`` section 17: a repository with no Python packaging, bisector vs ``git bisect run``.

A 40-commit C project made here (:func:`generate_c`): one ``calc.c`` of BENCH_TREE_FUNCS
functions, a ``check.sh`` that compiles it with ``cc -O1`` and runs it, every commit changing
one function, one commit (23) breaking the function ``main`` checks. Nothing a Python build
could make: before issue 50 every probe was "build failed: ... does not appear to be a Python
project" and the bisection stopped at its good endpoint (exit 7).

The same oracle both ways, ``sh check.sh``: ``git bisect run`` in a clone (its checkout moves
from commit to commit), ``bisect start -- sh check.sh`` with nothing made before (a new
BISECTOR_HOME each run: its store, its one environment, its exported trees), where each probe
runs in a private copy of the commit's exported tree. Median of BENCH_TREE_RUNS runs each,
interleaved, in one run; the ratio is bisector's over git's.
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


def _bisector(home: Path, repo: Path, good: str, bad: str,
              oracle: tuple[str, ...] = ORACLE) -> tuple[float, str, int]:
    env = {**os.environ, "BISECTOR_HOME": str(home)}
    for k in ("BISECTOR_CACHE_DIR", "BISECTOR_DB"):
        env.pop(k, None)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "bisector", "start", "--repo", str(repo),
                        "--good", good, "--bad", bad, "--no-confirm", "--json", "--", *oracle],
                       env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip().splitlines()[-1:])
    d = json.loads(r.stdout)
    return took, d["culprit"]["sha"], sum(not p["reused"] for p in d["probes"])


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
    cold: list[float] = []
    warm: list[float] = []
    right, probes = True, 0
    for i in range(runs):  # interleaved: a busy machine weighs on both alike
        took, found = _git_bisect(clone, hist.main[0], hist.main[-1])
        theirs.append(took)
        right &= found == hist.culprit
        home = tmp / f"tree-home-{i}"
        try:
            took, found, probes = _bisector(home, hist.path, hist.main[0], hist.main[-1])
            cold.append(took)
            right &= found == hist.culprit
            # The same store and environment, another oracle (so no verdict is reused):
            # what a second bisection on this box pays.
            took, found, _ = _bisector(home, hist.path, hist.main[0], hist.main[-1],
                                       ("sh", "./check.sh"))
            warm.append(took)
            right &= found == hist.culprit
        except RuntimeError as e:
            show("bisect start -- sh check.sh", f"failed: {e}")
            return
        finally:
            shutil.rmtree(home, ignore_errors=True)
    base = statistics.median(theirs)
    show("baseline: git bisect run sh check.sh", f"{base:.2f}s")
    wrong = "" if right else " WRONG CULPRIT"
    for label, times in ((f"bisect start, nothing made before ({probes} probes)", cold),
                         ("bisect start, store and environment made before", warm)):
        mine = statistics.median(times)
        show(label, f"{mine:.2f}s -> ratio {mine / base:.1f}x{wrong}")
    oracle = statistics.median(_timed_oracle(clone, hist.main[-1]) for _ in range(runs))
    show("floor: the oracle alone at the bad commit, once", f"{oracle:.2f}s")


def _timed_oracle(clone: Path, sha: str) -> float:
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", sha], check=True)
    t0 = time.perf_counter()
    subprocess.run(list(ORACLE), cwd=clone, capture_output=True, check=False)
    return time.perf_counter() - t0
