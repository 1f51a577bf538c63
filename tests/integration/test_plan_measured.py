"""``bisect plan`` after a real bisection of the same range: it counts the stored verdicts, projects
(almost) nothing left to run, and prices steps with what they took on this repository."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from bisector.app.demo.small_project import generate_small
from bisector.app.demo.torchlet import generate
from bisector.app.plan import DEFAULT_COSTS
from tests.support import ROOT, git, run_cli


def plan(db: Path, repo: Path, good: str, bad: str, oracle: str, *extra: str) -> dict[str, Any]:
    r = run_cli("--db", str(db), "plan", "--repo", str(repo), "--good", good, "--bad", bad,
                "--oracle", oracle, "--json", *extra)
    assert r.returncode == 0, r.stderr
    data: dict[str, Any] = json.loads(r.stdout)
    return data


def test_plan_after_a_bisection_reuses_its_verdicts_and_measured_costs(home: Path,
                                                                        tmp_path: Path) -> None:
    h = generate(tmp_path / "t", commits=24, culprit=15, broken=(), release_at=None, seed=2417,
                 side_branch_at=None)
    db = home / "b.db"
    good, bad = h.main[0], h.main[23]
    cold = plan(db, h.path, good, bad, "torchlet_norm")
    assert cold["stored_verdicts"] == 0 and cold["probes_max"] > 0
    assert {s["from"] for s in cold["cost_sources"].values()} == {"default"}

    # --no-prebuilt: every probe a build (no overlays on a neighbour's build), so builds of
    # this repository get measured however warm the session's wheel cache is.
    r = run_cli("--db", str(db), "start", "--repo", str(h.path), "--good", good, "--bad", bad,
                "--oracle", "torchlet_norm", "--no-prebuilt", "--json")
    assert r.returncode == 0, r.stderr
    done = json.loads(r.stdout)
    assert done["culprit"]["sha"] == h.culprit
    # Once a probe was measured, the probe lines estimate the time left.
    assert re.search(r"probe \d+ \(about \d+ left, about \d+ (s|min) left\)", r.stderr)

    warm = plan(db, h.path, good, bad, "torchlet_norm")
    assert warm["stored_verdicts"] == len(done["probes"])
    assert warm["probes_max"] == 0 and warm["seconds_max"] == 0
    sources, costs = warm["cost_sources"], warm["costs"]
    # Every probe built its commit, except a wheel another test of this session already
    # built (the root commit is the same in every generated history): that one is no
    # measurement of a build here.
    assert sources["build"]["from"] == "measured"
    assert sources["build"]["over"] == "torchlet source builds of this repository"
    assert 1 <= sources["build"]["count"] <= len(done["probes"])
    assert sources["oracle"]["from"] == "measured"
    assert sources["oracle"]["over"] == "runs of this oracle"
    assert 0 < costs["build"] < DEFAULT_COSTS["build"] / 10  # seconds, not the hour default
    assert sources["overlay"] == {"from": "default", "for": "torchlet projects"}

    # --cost still wins over a measurement.
    forced = plan(db, h.path, good, bad, "torchlet_norm", "--cost", "build=600")
    assert forced["costs"]["build"] == 600
    assert forced["cost_sources"]["build"] == {"from": "--cost"}

    # Another oracle (other bytes) reuses no verdict, but its builds are cached now; its
    # oracle runs are priced by its kind, never by another oracle's runs here.
    other = tmp_path / "norm_copy.py"
    shutil.copy(ROOT / "oracles" / "torchlet_norm.py", other)
    other.write_text(other.read_text() + "\n# the same check, other bytes\n")
    fresh = plan(db, h.path, good, bad, str(other))
    assert fresh["stored_verdicts"] == 0 and fresh["probes_max"] > 0
    assert fresh["cost_sources"]["oracle"] == {"from": "default", "for": "torchlet projects"}

    text = run_cli("--db", str(db), "plan", "--repo", str(h.path), "--good", good, "--bad",
                   bad, "--oracle", "torchlet_norm").stdout
    assert f"stored verdicts in the range: {len(done['probes'])}" in text
    assert "the stored verdicts already answer this range" in text
    assert "measured over" in text and "default for torchlet projects" in text


def _python_project(path: Path, compiled: bool) -> list[str]:
    """A small pure-Python package (or, ``compiled``, one with a C source) of 20 commits."""
    path.mkdir()
    (path / "pyproject.toml").write_text('[project]\nname = "tiny"\nversion = "0.1"\n')
    (path / "tiny").mkdir()
    if compiled:
        (path / "tiny" / "speedups.c").write_text("int tiny_add(int a, int b) { return a + b; }\n")
    git(path, "init", "-q", "-b", "main")
    commits = []
    for i in range(20):
        (path / "tiny" / "__init__.py").write_text(f"VALUE = {i}\n")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", f"value {i}")
        commits.append(git(path, "rev-parse", "HEAD"))
    return commits


def test_a_cold_plan_of_a_small_python_project_is_priced_in_minutes(home: Path,
                                                                     tmp_path: Path) -> None:
    """Nothing measured yet: the defaults of this kind of project, never PyTorch's hour-long
    build (a cold plan of a 12 s job once projected 8.4 h)."""
    oracle = tmp_path / "check.py"
    oracle.write_text("import tiny\nraise SystemExit(tiny.VALUE >= 13)\n")
    db = home / "b.db"
    shas = _python_project(tmp_path / "tiny", compiled=False)
    cold = plan(db, tmp_path / "tiny", shas[0], shas[-1], str(oracle))
    assert cold["cost_sources"]["build"] == {"from": "default", "for": "a pure-Python project"}
    assert cold["costs"]["build"] < 60
    assert 0 < cold["seconds_max"] < 3600, cold["seconds_max"]  # minutes, not hours
    text = run_cli("--db", str(db), "plan", "--repo", str(tmp_path / "tiny"), "--good", shas[0],
                   "--bad", shas[-1], "--oracle", str(oracle)).stdout
    assert re.search(r"projected wall time: \d+ (s|min) on average, at most \d+ (s|min), ",
                     text), text
    assert "default for a pure-Python project" in text

    # The same project with a C source is priced as a compiled one: longer, still not PyTorch.
    shas = _python_project(tmp_path / "tinyc", compiled=True)
    compiled = plan(db, tmp_path / "tinyc", shas[0], shas[-1], str(oracle))
    assert compiled["cost_sources"]["build"] == {"from": "default",
                                                 "for": "a project with compiled sources"}
    assert cold["costs"]["build"] < compiled["costs"]["build"] < DEFAULT_COSTS["build"]


def test_a_cold_plan_prices_assembled_wheels_when_the_trees_assemble(home: Path,
                                                                     tmp_path: Path) -> None:
    """The first wheel of a project whose trees assemble costs no build (a cold plan of a
    5.6 s click bisection projected ten 30 s builds); one that would really build is priced
    as one."""
    oracle = tmp_path / "check.py"
    oracle.write_text("import smallpkg\nraise SystemExit(smallpkg.f() != 1)\n")
    hist = generate_small(tmp_path / "small")
    cold = plan(home / "b.db", hist.path, hist.main[0], hist.main[-1], str(oracle))
    assert cold["cost_sources"]["build"] == {
        "from": "default",
        "for": "a pure-Python project whose wheels assemble from the tree (both ends')"}
    assert cold["costs"]["build"] < 1
    # The same history with a setup.py at the bad end: built for real, priced as such.
    (hist.path / "setup.py").write_text("from setuptools import setup\nsetup()\n")
    git(hist.path, "add", "setup.py")
    git(hist.path, "commit", "-q", "-m", "a setup.py")
    bad = git(hist.path, "rev-parse", "HEAD")
    built = plan(home / "b.db", hist.path, hist.main[0], bad, str(oracle))
    assert built["cost_sources"]["build"] == {"from": "default", "for": "a pure-Python project"}
    assert built["costs"]["build"] > 1
