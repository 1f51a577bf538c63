"""History walking against real repositories made here."""

from __future__ import annotations

import json
from pathlib import Path

import git
import pytest

from bisector.app.demo.torchlet import SyntheticHistory, generate
from bisector.base.errors import RepoError
from bisector.project import history
from tests.support import git as run_git
from tests.support import make_unrelated_repo, run_cli


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


def test_an_ancestry_path_culprit_merged_from_an_unwalked_side_says_so(
        home: Path, tmp_path: Path) -> None:
    """--good on a release branch, the change made on main before main merged that branch:
    the ancestry path holds only the merge and what follows, so the merge is its first bad
    commit. The answer says its other parent was never walked and how to look there (found
    bisecting click 8.1.8..8.2.0)."""
    repo = tmp_path / "p"
    repo.mkdir()
    (repo / "src" / "pkg").mkdir(parents=True)
    (repo / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"'
        '\n\n[project]\nname = "pkg"\nversion = "1.0"\n')

    def commit(value: str, message: str) -> str:
        (repo / "src" / "pkg" / "__init__.py").write_text(f"VALUE = {value!r}\n")
        (repo / f"{message.replace(' ', '-')}.txt").write_text(message)  # never empty
        run_git(repo, "add", "-A")
        run_git(repo, "commit", "-q", "-m", message)
        return run_git(repo, "rev-parse", "HEAD")

    run_git(repo, "init", "-q", "-b", "main")
    fork = commit("old", "fork point")
    run_git(repo, "checkout", "-q", "-b", "stable")
    good = commit("old", "stable fix")
    run_git(repo, "checkout", "-q", "main")
    commit("old", "main work")
    change = commit("new", "the change, on main")
    run_git(repo, "merge", "-q", "--no-ff", "-m", "merge stable into main", "stable")
    merge = run_git(repo, "rev-parse", "HEAD")
    bad = commit("new", "after the merge")
    r = run_cli("--db", str(home / "b.db"), "start", "--repo", str(repo), "--good", good,
                "--bad", bad, "--ancestry-path", "--no-confirm", "--json", "--", "python", "-c",
                "import pkg, sys; sys.exit(0 if pkg.VALUE == 'old' else 1)")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["culprit"]["sha"] == merge
    said = [n for n in d["notes"] if "is a merge whose parent" in n]
    assert said == [f"the culprit {merge[:12]} is a merge whose parent {change[:12]} is not in "
                    f"the walk (not a descendant of --good): the change may have been made on "
                    f"that side, which this bisection never tested (its confirmation ran the "
                    f"parent in the walk); to look there: bisect start --good {fork[:12]} "
                    f"--bad {change[:12]}"], d["notes"]
    # A clone made shallow since (the store outlives clones): no note, and no error.
    shallow = tmp_path / "shallow"
    run_git(tmp_path, "clone", "-q", "--depth", "2", f"file://{repo}", str(shallow))
    assert history.unwalked_side(git.Repo(shallow), merge, lambda: {good, merge, bad}) is None
    # Walked first-parent, the same range answers the merge as a landed change: no note.
    r = run_cli("--db", str(home / "b.db"), "start", "--repo", str(repo), "--good", good,
                "--bad", bad, "--no-confirm", "--json", "--", "python", "-c",
                "import pkg, sys; sys.exit(0 if pkg.VALUE == 'old' else 1)")
    assert r.returncode == 0, r.stderr
    assert not [n for n in json.loads(r.stdout)["notes"] if "is a merge whose parent" in n]
