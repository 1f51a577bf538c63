"""History walking against real repositories made here."""

from __future__ import annotations

from pathlib import Path

import git
import pytest

from bisector.app.demo.torchlet import SyntheticHistory, generate
from bisector.base.errors import RepoError
from bisector.project import history
from tests.support import make_unrelated_repo


@pytest.fixture(scope="module")
def hist(tmp_path_factory: pytest.TempPathFactory) -> SyntheticHistory:
    return generate(tmp_path_factory.mktemp("h") / "repo", commits=60, culprit=40,
                    broken=(10,), release_at=(5, 50), side_branch_at=30)


def test_first_parent_range_skips_side_branch(hist: SyntheticHistory) -> None:
    repo = git.Repo(hist.path)
    plan = history.resolve_range(repo, hist.main[3], hist.main[45])
    assert plan.candidates == tuple(hist.main[3:46])
    assert not set(hist.side) & set(plan.candidates)
    assert not plan.merge_base_used


def test_ancestry_path_includes_side_branch(hist: SyntheticHistory) -> None:
    repo = git.Repo(hist.path)
    plan = history.resolve_range(repo, hist.main[3], hist.main[45], first_parent=False)
    assert set(hist.side) <= set(plan.candidates)
    assert plan.candidates[-1] == hist.main[45]


def test_release_tags_use_the_merge_base(hist: SyntheticHistory) -> None:
    repo = git.Repo(hist.path)
    plan = history.resolve_range(repo, "v0.1.0", "v0.2.0")
    assert plan.merge_base_used
    assert plan.effective_good == hist.main[5]
    assert plan.candidates[1:-1] == tuple(hist.main[6:51])
    assert plan.bad_sha == hist.tags["v0.2.0"]
    assert "merge-base" in plan.notes[0]
    assert "1 of them cherry-picked" in plan.notes[1]


def test_tags_branches_and_short_shas_resolve(hist: SyntheticHistory) -> None:
    repo = git.Repo(hist.path)
    assert history.resolve(repo, "v0.1.0", "good") == hist.tags["v0.1.0"]
    assert history.resolve(repo, "main", "bad") == hist.main[-1]
    assert history.resolve(repo, hist.main[7][:9], "good") == hist.main[7]


@pytest.mark.parametrize(
    ("good", "bad", "needle"),
    [
        ("nope", "main", "unknown good ref 'nope'"),
        ("main", "main", "same commit"),
        ("main", "main~20", "is an ancestor of good"),
    ],
)
def test_bad_ranges_are_refused(hist: SyntheticHistory, good: str, bad: str, needle: str) -> None:
    with pytest.raises(RepoError, match=needle):
        history.resolve_range(git.Repo(hist.path), good, bad)


def test_unrelated_histories_are_refused(tmp_path: Path) -> None:
    r = make_unrelated_repo(tmp_path / "r")
    with pytest.raises(RepoError, match="unrelated"):
        history.resolve_range(git.Repo(r), "main", "other")


def test_not_a_repository(tmp_path: Path) -> None:
    with pytest.raises(RepoError, match="not a git repository"):
        history.open_repo(tmp_path)
    with pytest.raises(RepoError, match="does not exist"):
        history.open_repo(tmp_path / "missing")


def test_commit_info_reads_pull_request_trailer(hist: SyntheticHistory) -> None:
    info = history.commit_info(git.Repo(hist.path), hist.culprit)
    assert info.pr_number is not None and info.pr_url is not None
    assert info.pr_url.endswith(f"/pull/{info.pr_number}")
    assert "Simplify the norm" in info.subject


def test_generator_is_deterministic(tmp_path: Path) -> None:
    a = generate(tmp_path / "a", commits=30, culprit=20, broken=(), release_at=None,
                 side_branch_at=None)
    b = generate(tmp_path / "b", commits=30, culprit=20, broken=(), release_at=None,
                 side_branch_at=None)
    assert a.main == b.main and a.culprit == a.main[20]
