"""Submodules are exported at the commit each superproject commit pins (PyTorch's third_party);
one the clone never initialised is exported empty, and named only when the build then fails."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import git

from bisector.artifacts.build import build_wheel
from bisector.artifacts.export import export_tree, gitlinks
from bisector.project.profiles import GENERIC, PYTORCH
from tests import minitorch, vcs_projects
from tests.support import run_cli


def test_export_syncs_submodules_per_commit(tmp_path: Path) -> None:
    mt = minitorch.make(tmp_path / "mt")
    repo = git.Repo(mt.path)
    seen = {}
    for sha in (mt.main[0], mt.culprit):
        dest = tmp_path / sha[:8]
        export_tree(repo, sha, dest)
        seen[sha] = (dest / "third_party/mini/include/mini.h").read_text().split()[-1]
    assert seen == {mt.main[0]: "1", mt.culprit: "2"}
    assert [p for p, _ in gitlinks(repo, mt.culprit)] == ["third_party/mini"]


def test_a_needed_submodule_missing_from_the_clone_is_named_with_its_fix(
        home: Path, tmp_path: Path) -> None:
    """PyTorch's path: third_party/mini not initialised, so exported empty; the build then
    fails and the skip names the submodule and the command, as the clone's state (retried),
    never as "this commit does not build". (Here setup.py stops early, as this Python has no
    ``wheel``; the generic test below fails on the missing file itself.)"""
    mt = minitorch.make(tmp_path / "mt")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(mt.path), str(clone)], check=True)
    res = build_wheel(git.Repo(clone), mt.culprit, PYTORCH, python=sys.executable)
    assert not res.ok
    assert res.infra is not None, "the clone's state, never 'this commit does not build'"
    # The log never names the submodule (setup.py stopped before it): its own error comes
    # first, the empty submodule after it, with the command that fetches it.
    assert res.infra.startswith("the build failed (") and "wheel" in res.infra
    assert res.infra.endswith(f"); also, submodule third_party/mini is not initialised in the "
                              f"clone: run `git -C {clone} submodule update --init "
                              f"third_party/mini`")
    said = res.infra.split("(", 1)[1].split("); also", 1)[0]
    assert said in res.log_tail  # the tail shows the line that says what broke
    assert res.log_path.read_text().startswith("bisector: note: left empty in the export")


def test_an_uninitialised_submodule_the_build_does_not_need_is_left_empty(
        home: Path, tmp_path: Path) -> None:
    """Before: every probe 'build could not run: submodule tests/data is not initialised',
    and the bisection stopped on its good endpoint (exit 7). Now the export leaves the folder
    empty, the build never looks at it, and the bisection (of a setuptools_scm project, which
    builds in a worktree: an empty gitlink folder does not make it "dirty") finds the culprit."""
    proj = vcs_projects.make(tmp_path, "scm", data_submodule=True)
    clone = vcs_projects.clone_without_submodules(proj, tmp_path / "clone")
    dest = tmp_path / "export"
    assert export_tree(git.Repo(clone), proj.main[0], dest) == [("tests/data", "tests/data")]
    assert (dest / "tests" / "data").is_dir() and not any((dest / "tests" / "data").iterdir())
    res = build_wheel(git.Repo(clone), proj.main[0], GENERIC, python=sys.executable)
    assert res.ok and res.wheel is not None and res.wheel.name.split("-")[1] == "0.1.0"
    assert "tests/data is not initialised" in res.log_path.read_text()  # said, not fatal
    r = run_cli("--db", str(home / "b.db"), "start", "--repo", str(clone), "--good", "v0.1.0",
                "--bad", "main", "--oracle", str(proj.oracle), "--no-confirm", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["culprit"]["sha"] == proj.culprit
    assert all(p["verdict"] in ("good", "bad") for p in d["probes"])


def test_an_uninitialised_submodule_the_build_needs_stops_with_the_fix(
        home: Path, tmp_path: Path) -> None:
    """The generic path: setup.py copies needed/value.txt. The probe's reason names the
    submodule and the command; running that command makes the same commit build (the skip was
    not remembered)."""
    proj = vcs_projects.make(tmp_path, "scm", needed_submodule=True)
    clone = vcs_projects.clone_without_submodules(proj, tmp_path / "clone")
    r = run_cli("--db", str(home / "b.db"), "start", "--repo", str(clone), "--good", "v0.1.0",
                "--bad", "main", "--oracle", str(proj.oracle), "--no-confirm")
    assert r.returncode == 7, r.stderr  # the good endpoint could not be tested
    fix = f"git -C {clone} submodule update --init needed"
    assert (f"build could not run: the build failed and submodule needed is not initialised "
            f"in the clone: run `{fix}`") in r.stderr
    # The command it names, as a user would paste it (a local-path remote needs file://).
    subprocess.run(["git", "-c", "protocol.file.allow=always", *shlex.split(fix)[1:]],
                   check=True, capture_output=True)
    res = build_wheel(git.Repo(clone), proj.main[0], GENERIC, python=sys.executable)
    assert res.ok, res.log_tail
