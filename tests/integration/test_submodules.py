"""Submodules are exported at the commit each superproject commit pins (PyTorch's third_party)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import git

from bisector.artifacts.build import build_wheel
from bisector.artifacts.export import export_tree, gitlinks
from bisector.profiles import PYTORCH
from tests import minitorch


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


def test_uninitialised_submodule_is_a_clear_infrastructure_error(home: Path,
                                                                tmp_path: Path) -> None:
    mt = minitorch.make(tmp_path / "mt")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(mt.path), str(clone)], check=True)
    res = build_wheel(git.Repo(clone), mt.culprit, PYTORCH, python=sys.executable)
    assert not res.ok
    assert res.infra is not None, "the clone's state, never 'this commit does not build'"
    assert "submodule third_party/mini is not initialised" in res.infra
    assert "submodule update --init --recursive" in res.infra
