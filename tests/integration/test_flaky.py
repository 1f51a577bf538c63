"""A flaky oracle end to end through the real CLI: a generated history, real builds, and an
oracle that lies at a set rate (seeded per commit and per run), bisected to the planted
regression with the posterior's probability in the report."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bisector.app.demo.torchlet import SyntheticHistory, generate
from tests.issue_rules import check
from tests.support import run_cli

LIAR = '''# /// script
# dependencies = []
# [tool.bisector]
# description = "torchlet.norm([3, 4]) must be 5, answered wrongly {rate} of the time"
# flaky = true
# timeout = 60
# ///
"""Lies on purpose: the truth flipped with a seeded chance per commit and per run."""
import pathlib
import random
import sys

import torchlet

state = pathlib.Path({state!r}) / torchlet.git_version
runs = int(state.read_text()) if state.exists() else 0
state.parent.mkdir(parents=True, exist_ok=True)
state.write_text(str(runs + 1))
bad = abs(torchlet.norm([3.0, 4.0]) - 5.0) > 1e-9
if random.Random(f"{seed}-{{torchlet.git_version}}-{{runs}}").random() < {rate}:
    bad = not bad
print("regressed" if bad else "fine")
sys.exit(1 if bad else 0)
'''


@pytest.fixture(scope="module")
def hist(tmp_path_factory: pytest.TempPathFactory) -> SyntheticHistory:
    return generate(tmp_path_factory.mktemp("flaky") / "torchlet", commits=48, culprit=29,
                    broken=(), release_at=None, side_branch_at=None)


def test_an_oracle_wrong_one_time_in_five_finds_the_planted_commit(
        home: Path, hist: SyntheticHistory, tmp_path: Path) -> None:
    oracle = tmp_path / "liar.py"
    oracle.write_text(LIAR.format(rate=0.2, seed=3, state=str(tmp_path / "state")))
    r = run_cli("start", "--repo", str(hist.path), "--good", hist.main[0], "--bad",
                hist.main[-1], "--oracle", str(oracle), "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["culprit"]["sha"] == hist.culprit
    noise = d["result"]["noisy"]
    assert noise["probability"] >= 0.99
    assert noise["runs"] == len(d["probes"]) == d["oracle_runs"]
    # Some commits were run more than once: the evidence is a sample, not a verdict.
    shas = [p["sha"] for p in d["probes"]]
    assert len(set(shas)) < len(shas)
    text = run_cli("show", str(d["id"]), check=True).stdout
    assert "Flaky oracle: probability" in text
    issue = run_cli("show", str(d["id"]), "--format", "issue", check=True).stdout
    assert "Flaky oracle: probability" in issue
    check(issue, [hist.path])  # a flaky bisection's issue (its oracle names tmp_path)
    # Issue 31, item 6: the report draws the posterior over commits, the culprit's the tallest.
    page = run_cli("show", str(d["id"]), "--format", "html", check=True).stdout
    assert 'data-kind="posterior"' in page and 'class="posterior"' in page
    # `bisect log` replays in git although the runs disagree: one mark per commit.
    log = tmp_path / "bisect.log"
    log.write_text(run_cli("log", str(d["id"]), check=True).stdout + "\n")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(hist.path), str(clone)], check=True)
    replay = subprocess.run(["git", "-C", str(clone), "bisect", "replay", str(log)],
                            capture_output=True, text=True)
    assert replay.returncode == 0, replay.stderr
    assert f"{hist.culprit} is the first bad commit" in replay.stdout
    # A second bisection of the same range starts from the stored samples and runs nothing.
    again = run_cli("start", "--repo", str(hist.path), "--good", hist.main[0], "--bad",
                    hist.main[-1], "--oracle", str(oracle), "--json")
    assert again.returncode == 0, again.stderr
    d2 = json.loads(again.stdout)
    assert d2["culprit"]["sha"] == hist.culprit and d2["oracle_runs"] == 0
