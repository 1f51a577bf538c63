"""Culprit confirmation on a real history: the revert is made with git plumbing (no branch
moves, the working tree untouched), built, and judged; a revert that conflicts is skipped."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import git
import pytest

from bisector.app.demo.torchlet import generate
from bisector.project.revert import revert_commit
from tests.support import run_cli


def test_a_bisection_confirms_its_culprit_and_probes_the_revert(home: Path,
                                                                tmp_path: Path) -> None:
    hist = generate(tmp_path / "torchlet", commits=24, culprit=15, broken=(), seed=3119,
                    release_at=None, side_branch_at=None)
    head = git.Repo(hist.path).head.commit.hexsha
    r = run_cli("start", "--repo", str(hist.path), "--good", hist.main[0], "--bad",
                hist.main[-1], "--oracle", "torchlet_norm", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    c = d["result"]["confirmation"]
    assert d["culprit"]["sha"] == hist.culprit and c["status"] == "confirmed"
    assert c["revert"]["applied"] and c["revert"]["verdict"] == "good"
    revert = git.Repo(hist.path).commit(c["revert"]["sha"])
    assert revert.parents[0].hexsha == hist.main[-1]
    assert revert.message.startswith('Revert "')
    assert git.Repo(hist.path).head.commit.hexsha == head  # nothing moved
    assert "Confirmation: confirmed" in run_cli("show", str(d["id"]), check=True).stdout
    # --no-confirm: no confirmation, and the reproduce line says so.
    r2 = run_cli("start", "--repo", str(hist.path), "--good", hist.main[0], "--bad",
                 hist.main[-1], "--oracle", "torchlet_norm", "--no-confirm", "--json")
    d2 = json.loads(r2.stdout)
    assert "confirmation" not in d2["result"] and "--no-confirm" in d2["reproduce"]


def test_a_revert_that_conflicts_is_none(tmp_path: Path) -> None:
    repo = git.Repo.init(tmp_path / "r")
    f = tmp_path / "r" / "a.txt"

    def commit(text: str) -> str:
        f.write_text(text)
        repo.index.add(["a.txt"])
        return repo.index.commit(text.strip()).hexsha

    commit("one\n")
    culprit = commit("two\n")
    later = commit("three\n")  # rewrites the very line the culprit changed
    assert revert_commit(repo, culprit, later) is None
    clean = revert_commit(repo, later, later)
    assert clean is not None and repo.commit(clean).tree["a.txt"].data_stream.read() == b"two\n"
    assert subprocess.run(["git", "-C", str(repo.working_dir), "status", "--porcelain"],
                          capture_output=True, text=True).stdout == ""


def test_an_old_git_reverts_by_reverse_patch_with_the_same_answers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A git older than 2.40 has no `merge-tree --write-tree`: the reverse patch in a
    # throwaway index gives the same trees, and the same refusal on a conflict.
    monkeypatch.setattr("bisector.project.revert.MERGE_TREE_GIT", (99, 0))
    repo = git.Repo.init(tmp_path / "r")
    root = Path(repo.working_dir)

    def commit(name: str, text: str) -> str:
        (root / name).write_text(text)
        repo.index.add([name])
        return repo.index.commit(f"{name}: {text.strip()}").hexsha

    commit("a.txt", "one\n")
    culprit = commit("b.txt", "bad\n")  # adds a file
    commit("a.txt", "two\n")
    later = commit("a.txt", "three\n")
    clean = revert_commit(repo, culprit, later)
    assert clean is not None
    tree = repo.commit(clean).tree
    assert "b.txt" not in tree and tree["a.txt"].data_stream.read() == b"three\n"
    assert repo.commit(clean).parents[0].hexsha == later
    rewrites = repo.commit(later).parents[0].hexsha  # "two": its line is rewritten by `later`
    assert revert_commit(repo, rewrites, later) is None
    assert subprocess.run(["git", "-C", str(root), "status", "--porcelain"],
                          capture_output=True, text=True).stdout == ""
