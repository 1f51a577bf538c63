"""``bisect log`` replays in git, every kind of bisection (issue 50, item 2): its output, fed
to a real ``git bisect replay`` in a clone, ends with git naming what bisector named: the same
first bad commit (``refs/bisect/<new term>`` and git's "is the first ... commit" line), or,
for a culprit hidden among skipped commits, the same commits it could be.

A reviewer found two kinds that did not: verdicts reused from an earlier bisection came out as
the goods, then the bads oldest first, and git keeps only the last bad mark (it said "4
revisions left"); a ``--path`` bisection's start line had no ``-- PATHS`` (git walked every
commit). One small history (its commit 15 breaks ``f()``; commit i touches ``mod{i % 5}``)
and a command oracle keep each bisection to seconds."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bisector.app.demo.small_project import NAME, SmallHistory, generate_small
from tests.support import invoke, run_cli

pytestmark = pytest.mark.integration

CULPRIT = 15
BREAKS = f"import {NAME}, sys; sys.exit(0 if {NAME}.f() == 1 else 1)"
FIXES = f"import {NAME}, sys; sys.exit(1 if {NAME}.f() == 1 else 0)"  # --find-fix's oracle
MOD0 = f"src/{NAME}/mod0.py"  # touched by commits 0, 5, 10, 15 (the culprit), 20


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> SmallHistory:
    return generate_small(tmp_path_factory.mktemp("replay") / "proj", commits=24,
                          culprit=CULPRIT)


def _bisect(hist: SmallHistory, *args: str, oracle: str = BREAKS) -> dict[str, Any]:
    r = run_cli("start", "--repo", str(hist.path), "--good", hist.main[0], "--bad",
                hist.main[-1], "--no-confirm", "--json", *args, "--", "python", "-c", oracle)
    assert r.returncode in (0, 11), r.stderr  # 11: a window, not one commit
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def _replay(hist: SmallHistory, log: str, where: Path, new: str) -> tuple[str | None, set[str]]:
    """git's answer to ``log`` replayed in a fresh clone: the first ``new`` commit it names
    (checked against ``refs/bisect/<new>``), or the commits it says it could be."""
    clone = where / "clone"
    subprocess.run(["git", "clone", "-q", str(hist.path), str(clone)], check=True)
    (where / "bisect.log").write_text(log)
    r = subprocess.run(["git", "-C", str(clone), "bisect", "replay", str(where / "bisect.log")],
                       capture_output=True, text=True)
    found = re.search(rf"^([0-9a-f]{{40}}) is the first {new} commit$", r.stdout, re.M)
    if found is not None:
        assert r.returncode == 0, r.stderr
        ref = subprocess.run(["git", "-C", str(clone), "rev-parse", f"refs/bisect/{new}"],
                             check=True, capture_output=True, text=True).stdout.strip()
        assert ref == found.group(1), (ref, r.stdout)
        return ref, set()
    window = re.search(r"could be any of:\n((?:[0-9a-f]{40}\n)+)", r.stdout)
    assert window is not None, f"git's replay named no answer:\n{r.stdout}\n{r.stderr}\n{log}"
    return None, set(window.group(1).split())


def _check(hist: SmallHistory, d: dict[str, Any], where: Path) -> str:
    """``bisect log`` of ``d`` replays in git to bisector's answer; the log."""
    log = invoke("log", str(d["id"])).stdout
    culprit, suspects = _replay(hist, log, where, d["terms"]["new"])
    if d["culprit"] is not None:
        assert culprit == d["culprit"]["sha"], log
    else:
        assert culprit is None and suspects == set(d["result"]["suspects"]), log
    return log


def test_a_fresh_bisection_replays_to_its_culprit(home: Path, small: SmallHistory,
                                                  tmp_path: Path) -> None:
    d = _bisect(small)
    assert d["culprit"]["sha"] == small.culprit
    _check(small, d, tmp_path)


def test_reused_verdicts_replay_to_the_culprit(home: Path, small: SmallHistory,
                                               tmp_path: Path) -> None:
    _bisect(small)
    d = _bisect(small)  # every verdict the first one's: they come back goods first
    assert d["oracle_runs"] == 0 and all(p["reused"] for p in d["probes"])
    assert d["culprit"]["sha"] == small.culprit
    _check(small, d, tmp_path)


def test_a_path_bisection_replays_with_its_paths_and_seeds_one(home: Path, small: SmallHistory,
                                                               tmp_path: Path) -> None:
    d = _bisect(small, "--path", MOD0)
    assert d["culprit"]["sha"] == small.culprit
    log = _check(small, d, tmp_path)
    start = next(ln for ln in log.splitlines() if ln.startswith("git bisect start"))
    assert start.endswith(f"'--' '{MOD0}'"), start
    # --from-log reads it back: the same paths, the same culprit, nothing run again.
    (tmp_path / "path.log").write_text(log)
    r = run_cli("start", "--repo", str(small.path), "--from-log", str(tmp_path / "path.log"),
                "--no-confirm", "--json", "--", "python", "-c", BREAKS)
    assert r.returncode == 0, r.stderr
    again = json.loads(r.stdout)
    assert again["culprit"]["sha"] == small.culprit and again["oracle_runs"] == 0
    assert f"--path {MOD0}" in again["reproduce"]
    assert {p["sha"] for p in again["probes"]} == {p["sha"] for p in d["probes"]}


def test_skips_replay_as_git_bisect_skip(home: Path, small: SmallHistory,
                                         tmp_path: Path) -> None:
    m = small.main
    d = _bisect(small, "--skip", m[5], "--skip", f"{m[16]}..{m[18]}")  # not hiding the culprit
    assert d["culprit"]["sha"] == small.culprit
    log = _check(small, d, tmp_path)
    assert all(f"git bisect skip {m[i]}" in log for i in (5, 17, 18)), log


def test_custom_terms_replay_in_their_words(home: Path, small: SmallHistory,
                                            tmp_path: Path) -> None:
    d = _bisect(small, "--term-old", "fast", "--term-new", "slow")
    assert d["culprit"]["sha"] == small.culprit
    log = _check(small, d, tmp_path)
    assert "'--term-old=fast' '--term-new=slow'" in log


def test_find_fix_replays_to_the_fix(home: Path, small: SmallHistory, tmp_path: Path) -> None:
    # The "fix" is the commit where f() stops returning 1: the oracle passes from there on.
    d = _bisect(small, "--find-fix", oracle=FIXES)
    assert d["culprit"]["sha"] == small.culprit and d["terms"]["new"] == "fixed"
    _check(small, d, tmp_path)


def test_a_window_of_skipped_commits_replays_to_the_same_suspects(
        home: Path, small: SmallHistory, tmp_path: Path) -> None:
    m = small.main
    d = _bisect(small, "--skip", f"{m[12]}..{m[16]}")  # 13..16: the culprit among them
    assert d["state"] == "ambiguous" and small.culprit in d["result"]["suspects"]
    _check(small, d, tmp_path)
