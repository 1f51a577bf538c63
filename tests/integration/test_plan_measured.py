"""``bisect plan`` after a real bisection of the same range: it counts the stored verdicts, projects
(almost) nothing left to run, and prices steps with what they took on this repository."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from bisector.app.demo.torchlet import generate
from bisector.app.plan import DEFAULT_COSTS
from tests.support import ROOT, run_cli


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
    assert sources["overlay"] == {"from": "default"}

    # --cost still wins over a measurement.
    forced = plan(db, h.path, good, bad, "torchlet_norm", "--cost", "build=600")
    assert forced["costs"]["build"] == 600
    assert forced["cost_sources"]["build"] == {"from": "--cost"}

    # Another oracle (other bytes) reuses no verdict, but its builds are cached now, and its
    # oracle runs are priced with what oracles took on this repository.
    other = tmp_path / "norm_copy.py"
    shutil.copy(ROOT / "oracles" / "torchlet_norm.py", other)
    other.write_text(other.read_text() + "\n# the same check, other bytes\n")
    fresh = plan(db, h.path, good, bad, str(other))
    assert fresh["stored_verdicts"] == 0 and fresh["probes_max"] > 0
    assert fresh["cost_sources"]["oracle"]["over"] == "oracle runs on this repository"

    text = run_cli("--db", str(db), "plan", "--repo", str(h.path), "--good", good, "--bad",
                   bad, "--oracle", "torchlet_norm").stdout
    assert f"stored verdicts in the range: {len(done['probes'])}" in text
    assert "the stored verdicts already answer this range" in text
    assert "measured over" in text and "default" in text
