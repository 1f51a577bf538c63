"""``make bench`` section 9: a small pure-Python project, bisector vs ``git bisect run``.

40 commits of a setuptools project, the version in ``pyproject.toml`` bumped by every commit,
one commit breaking ``smallpkg.f()`` (bisector/app/demo/small_project.py). The same command
oracle both ways: ``git bisect run`` in a clone with ``PYTHONPATH=src`` (the tree itself, no
install), ``bisect start -- CMD`` with nothing cached (a new BISECTOR_HOME each run: its
build, its uv cache, its store), where every probe runs against an installed copy of the
probed commit. Median of BENCH_SMALL_RUNS runs each, interleaved, in one run.

Two ways of naming the interpreter, both printed:
- the bench's own interpreter by its path, both ways (``--python`` for bisector): the strict
  comparison, each oracle run a bare interpreter start;
- ``python3`` as PATH has it, both ways, no ``--python``: how a person types it, and how issue
  21 measured its baseline (0.6-0.8 s). Where that ``python3`` is a pyenv shim, every run of
  ``git bisect run`` pays the shim (a bash script and ``pyenv exec``, ~80 ms) and bisector
  pays it once, to find the interpreter behind it.
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
from pathlib import Path

from bisector.app.demo.small_project import ORACLE, generate_small

# The same test as a pytest command: ``git bisect run python -m pytest`` against bisector's
# ``--dependency pytest -- pytest`` (the bench's pytest, from uv's cache in bisector's case).
PYTEST = ("-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_f.py")


def _git_bisect(clone: Path, good: str, bad: str, oracle: tuple[str, ...] = ("-c", ORACLE),
                python: str = sys.executable) -> tuple[float, str]:
    def git(*args: str, env: dict[str, str] | None = None) -> str:
        return subprocess.run(["git", "-C", str(clone), *args], check=True, text=True,
                              capture_output=True, env=env).stdout

    # Installed packages' bytecode read, the project's never written: written, a .pyc of a
    # same-size edit made within the same second is taken for the next commit's source, and
    # git bisect run named the wrong commit on this history.
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    t0 = time.perf_counter()
    git("bisect", "start", bad, good)
    git("bisect", "run", python, *oracle, env={**env, "PYTHONPATH": "src"})
    took = time.perf_counter() - t0
    found = git("rev-parse", "refs/bisect/bad").strip()
    git("bisect", "reset")
    return took, found


def _bisector(tmp: Path, repo: Path, good: str, bad: str, i: int,
             oracle: tuple[str, ...] = ("--", "python", "-c", ORACLE),
             python: str | None = sys.executable) -> tuple[float, str, str]:
    home = tmp / f"small-home-{i}"
    env = {**os.environ, "BISECTOR_HOME": str(home)}
    for k in ("BISECTOR_CACHE_DIR", "BISECTOR_DB"):
        env.pop(k, None)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "bisector", "start", "--repo", str(repo),
                        "--good", good, "--bad", bad,
                        *(["--python", python] if python else []),
                        "--no-confirm", "--json", *oracle], env=env, capture_output=True,
                       text=True, check=False)
    took = time.perf_counter() - t0
    shutil.rmtree(home, ignore_errors=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip().splitlines()[-1:])
    d = json.loads(r.stdout)
    kinds = [p["artifact"] for p in d["probes"]]
    how = ", ".join(f"{kinds.count(k)} {k}" for k in sorted(set(kinds)))
    return took, d["culprit"]["sha"], how


GPU_BOX = (Path(__file__).resolve().parent.parent / "oracles" / "proof"
           / "2026-11-27-small-project-gpu-box" / "box4_head.txt")

# The store's, the history's and the CLI's libraries: what any bisector command imports.
LIBRARIES = "import sqlalchemy.orm, git, click"


def _timed(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> float:
    """Wall time of one run of ``cmd``, whatever its exit status (a bad commit's oracle fails)."""
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, check=False)
    return time.perf_counter() - t0


def _floors(clone: Path, probes: int, runs: int, base: float,
            show: Callable[[str, str], None]) -> None:
    """The two floors of the module docstring, as ratios against ``base``."""
    env = {**os.environ, "PYTHONPATH": "src", "PYTHONDONTWRITEBYTECODE": "1"}
    libs = [_timed([sys.executable, "-c", LIBRARIES]) for _ in range(runs)]
    bare = [sum(_timed([sys.executable, "-c", ORACLE], clone, env) for _ in range(probes))
            for _ in range(runs)]
    lib, ora = statistics.median(libs), statistics.median(bare)
    show("floor: SQLAlchemy's ORM, GitPython, click imported, nothing done",
         f"{lib:.2f}s = {lib / base:.1f}x the baseline")
    show(f"floor: that + the oracle run bare at each of bisector's {probes} probes",
         f"{lib + ora:.2f}s = {(lib + ora) / base:.1f}x the baseline "
         f"(5x leaves {max(0.0, 5 * base - lib - ora):.2f}s for everything else)")


def _recorded_on_gpu_box(show: Callable[[str, str], None]) -> None:
    """The ratio lines of this section as a lent H100 box printed them."""
    if not GPU_BOX.is_file():
        show("recorded on a lent GPU box", f"{GPU_BOX.name} missing")
        return
    print(f"  recorded on a lent H100 box ({GPU_BOX.parent.name}/{GPU_BOX.name}):")
    for raw in GPU_BOX.read_text().splitlines():
        text = raw.strip()
        if text.startswith(("baseline", "floor", "bisect start")) and "failed" not in text:
            print(f"    {text}")


def bench_small_project(tmp: Path, show: Callable[[str, str], None]) -> None:
    runs = int(os.environ.get("BENCH_SMALL_RUNS", "3"))
    print(f"9. a 40-commit pure-Python project (version bumped by every commit), command "
          f"oracle, first run: bisect start vs git bisect run (median of {runs})")
    hist = generate_small(tmp / "small")
    clone = tmp / "small-git"
    subprocess.run(["git", "clone", "-q", str(hist.path), str(clone)], check=True)
    runs_so_far = 0
    floored = False

    def compare(git_oracle: tuple[str, ...], ours_oracle: tuple[str, ...], git_label: str,
                ours_label: str, python: str | None = sys.executable) -> None:
        nonlocal runs_so_far, floored
        ours: list[float] = []
        theirs: list[float] = []
        how, right = "", True
        for _ in range(runs):  # interleaved: a busy machine weighs on both alike
            took, found = _git_bisect(clone, hist.main[0], hist.main[-1], git_oracle,
                                      python or "python3")
            theirs.append(took)
            right &= found == hist.culprit
            try:
                took, found, how = _bisector(tmp, hist.path, hist.main[0], hist.main[-1],
                                             runs_so_far, ours_oracle, python)
            except RuntimeError as e:
                show(ours_label, f"failed: {e}")
                return
            runs_so_far += 1
            ours.append(took)
            right &= found == hist.culprit
        base, mine = statistics.median(theirs), statistics.median(ours)
        show(git_label, f"{base:.2f}s")
        show(f"{ours_label} ({how})",
             f"{mine:.2f}s -> ratio {mine / base:.1f}x{'' if right else ' WRONG CULPRIT'}")
        if not floored:  # the first comparison: its baseline is the floors' too
            floored = True
            probes = sum(int(part.split()[0]) for part in how.split(", ") if part)
            if probes:
                _floors(clone, probes, runs, base, show)

    compare(("-c", ORACLE), ("--", "python", "-c", ORACLE),
            "baseline: git bisect run, PYTHONPATH=src", "bisect start, nothing cached")
    # The same test through pytest, as a project's own test suite.
    compare(PYTEST, ("--dependency", "pytest", "--", "pytest", *PYTEST[2:]),
            "baseline: git bisect run python -m pytest",
            "bisect start --dependency pytest -- pytest")
    _recorded_on_gpu_box(show)
    # As a person types it, and as issue 21 measured its baseline: python3 as PATH has it.
    found = shutil.which("python3")
    if found is None:
        show("python3 as PATH has it", "no python3 on PATH: skipped")
        return
    shim = "a pyenv shim" if "/shims/" in found else "an interpreter"
    compare(("-c", ORACLE), ("--", "python3", "-c", ORACLE),
            f"baseline: git bisect run python3 ({shim}: {found})",
            "bisect start -- python3, no --python", python=None)
