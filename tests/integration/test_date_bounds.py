"""Bounds by date: ``--good 2025-01-10`` and ``--good nightly:2.9.0.dev20250110`` are the
main-line commits that day's nightly was cut from, read from the clone's ``nightly`` branch."""

from __future__ import annotations

import json
from pathlib import Path

import git
import pytest

from bisector.app.demo.torchlet import generate
from bisector.base.errors import RepoError
from bisector.project import history
from tests.support import run_cli


def dated(path: Path) -> list[tuple[str, str]]:
    """(date, main sha) of each nightly, oldest first."""
    repo = git.Repo(path)
    return sorted(history.nightlies(repo).items())


def test_a_date_and_a_nightly_version_name_that_days_main_commit(tmp_path: Path) -> None:
    hist = generate(tmp_path / "t", commits=30, culprit=17, broken=(), seed=5113,
                    release_at=None, side_branch_at=None, nightly_every=5)
    days = dated(hist.path)
    assert len(days) == 6 and [sha for _, sha in days] == hist.main[::5]
    repo = git.Repo(hist.path)
    day, sha = days[2]
    compact = day.replace("-", "")
    for ref in (day, f"nightly:{day}", f"nightly:0.3.0.dev{compact}",
                f"nightly:2.9.0.dev{compact}+cu128"):
        assert history.resolve(repo, ref, "good") == sha, ref
    plan = history.resolve_range(repo, days[1][0], days[4][0])
    assert plan.candidates[0] == days[1][1] and plan.candidates[-1] == days[4][1]
    assert any(f"is the nightly of {days[1][0]}" in n for n in plan.notes)
    with pytest.raises(RepoError, match=rf"no nightly of 1999-01-01.*nearest: {days[0][0]}"):
        history.resolve(repo, "1999-01-01", "good")


def test_without_a_nightly_branch_a_date_is_the_main_line_that_day(tmp_path: Path) -> None:
    """A nightly version needs the nightly branch (the error says to fetch it); a plain date
    is the newest first-parent commit of HEAD by the end of that day, as for any project."""
    hist = generate(tmp_path / "t", commits=8, culprit=5, broken=(), seed=5114,
                    release_at=None, side_branch_at=None)
    repo = git.Repo(hist.path)
    with pytest.raises(RepoError, match=r"no nightly branch.*git fetch origin nightly"):
        history.resolve(repo, "nightly:2025-01-10", "bad")
    assert history.resolve(repo, "2999-01-10", "bad") == repo.head.commit.hexsha
    with pytest.raises(RepoError, match=r"HEAD has no commit on or before 1971-01-01"):
        history.resolve(repo, "1971-01-01", "good")


def test_a_bisection_between_two_dates_names_the_culprit(home: Path, tmp_path: Path) -> None:
    hist = generate(tmp_path / "t", commits=30, culprit=17, broken=(), seed=5115,
                    release_at=None, side_branch_at=None, nightly_every=5)
    days = dated(hist.path)
    r = run_cli("start", "--repo", str(hist.path), "--good", days[1][0], "--bad",
                f"nightly:0.1.0.dev{days[5][0].replace('-', '')}", "--oracle", "torchlet_norm",
                "--no-confirm", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["culprit"]["sha"] == hist.culprit
    assert d["good"]["ref"] == days[1][0] and d["good"]["sha"] == days[1][1]
    assert any(f"is the nightly of {days[5][0]}" in note for note in d["notes"])
