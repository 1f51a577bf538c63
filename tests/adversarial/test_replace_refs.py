"""M1 of hardening round 5: ``refs/replace/*`` never swaps a probed commit's tree.

git honours a replace ref on every read: a mirror that fetched one (it used to fetch
``+refs/*:refs/*``) handed another commit's tree back under the culprit's sha, which was then
built, judged and cached under that sha. Served by a real ``git daemon``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import git
import pytest

from bisector.artifacts.export import ExportError, tree_entries, verified_tree
from bisector.project import history, mirrors
from tests import fleet_world
from tests.fleet_world import grow, plant_replacement

pytestmark = pytest.mark.integration


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def _history(path: Path, n: int) -> list[str]:
    """n commits on main, commit i writing ``x.txt`` = i."""
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    shas = []
    for i in range(n):
        (path / "x.txt").write_text(f"{i}\n")
        _git(path, "add", "x.txt")
        _git(path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", f"c{i}")
        shas.append(_git(path, "rev-parse", "HEAD"))
    return shas


def _x(repo: git.Repo, sha: str) -> str:
    blob = next(o for _m, o, p in tree_entries(repo, sha) if p == "x.txt")
    return str(repo.git.cat_file("blob", blob))


def test_a_mirror_fetching_again_never_takes_the_servers_replace_refs(tmp_path: Path,
                                                                     home: Path) -> None:
    shas = _history(tmp_path / "src", 4)
    with fleet_world.git_server(tmp_path / "src", tmp_path / "served") as url:
        served = tmp_path / "served" / "t.git"
        first = mirrors.mirror(url, [shas[1]])
        # Between two bisections the server grows a replace ref for commit 2 (commit 1's
        # tree under its sha) and a new commit, which makes the mirror fetch again.
        plant_replacement(served, shas[2], shas[1])
        new = grow(served, "c4")
        again = mirrors.mirror(url, [new])
        assert again == first
        repo = git.Repo(again)
        assert _git(again, "for-each-ref", "refs/replace/") == ""
        assert _x(repo, shas[2]) == "2"  # its own tree, not commit 1's
        assert verified_tree(repo, shas[2]) == _git(tmp_path / "src", "rev-parse",
                                                    f"{shas[2]}^{{tree}}")


def test_replace_refs_a_mirror_already_holds_are_dropped(tmp_path: Path, home: Path) -> None:
    shas = _history(tmp_path / "src", 3)
    with fleet_world.git_server(tmp_path / "src", tmp_path / "served") as url:
        plant_replacement(tmp_path / "served" / "t.git", shas[2], shas[1])
        path = mirrors.mirror(url, [shas[2]])
        # As an older bisector left it: every ref fetched, the replace ref among them.
        _git(path, "fetch", "-q", "origin", "+refs/replace/*:refs/replace/*")
        assert _git(path, "for-each-ref", "refs/replace/") != ""
        mirrors.mirror(url, [shas[2]])
        assert _git(path, "for-each-ref", "refs/replace/") == ""


def test_a_replaced_commit_is_refused_even_where_git_honours_the_replacement(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shas = _history(tmp_path / "src", 3)
    plant_replacement(tmp_path / "src", shas[2], shas[1])
    repo = git.Repo(tmp_path / "src")
    assert _x(repo, shas[2]) == "2"  # bisector's own environment: replacements off
    monkeypatch.delenv("GIT_NO_REPLACE_OBJECTS")  # as a git run without it would read it
    assert _git(tmp_path / "src", "show", f"{shas[2]}:x.txt") == "1"
    with pytest.raises(ExportError, match="replace ref"):
        verified_tree(repo, shas[2])


def test_the_users_clone_with_replace_refs_is_told_and_not_honoured(tmp_path: Path) -> None:
    shas = _history(tmp_path / "src", 5)
    plant_replacement(tmp_path / "src", shas[3], shas[2])
    repo = history.open_repo(tmp_path / "src")
    span = history.resolve_range(repo, shas[0], shas[4])
    assert span.candidates == tuple(shas)
    note = " ".join(span.notes)
    assert "replace refs" in note and shas[3][:12] in note and "ignored" in note
    assert _x(repo, shas[3]) == "3"
    _git(tmp_path / "src", "replace", "-d", shas[3])
    clean = history.resolve_range(history.open_repo(tmp_path / "src"), shas[0], shas[4])
    assert not any("replace" in n for n in clean.notes)


def test_a_commit_on_no_branch_or_tag_is_fetched_by_its_sha(tmp_path: Path, home: Path) -> None:
    """A pull request's head (``refs/pull/N/head`` on a forge) is no branch: the mirror asks
    for it by sha instead of taking every ref the server has."""
    shas = _history(tmp_path / "src", 2)
    with fleet_world.git_server(tmp_path / "src", tmp_path / "served") as url:
        served = tmp_path / "served" / "t.git"
        mirrors.mirror(url, [shas[1]])
        pr = _git(served, "-c", "user.name=t", "-c", "user.email=t@t", "commit-tree",
                  "main^{tree}", "-p", "main", "-m", "a pull request")
        _git(served, "update-ref", "refs/pull/1/head", pr)
        path = mirrors.mirror(url, [pr])
        assert _git(path, "cat-file", "-t", pr) == "commit"
        assert "refs/pull" not in _git(path, "for-each-ref")
