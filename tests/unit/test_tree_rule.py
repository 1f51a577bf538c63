"""When a probe builds nothing and runs the oracle in the commit's tree (issue 50): the rule,
as data, before any repository is made."""

from __future__ import annotations

import pytest

from bisector.project.profiles import (
    GENERIC,
    PACKAGING,
    PYTORCH,
    TORCHLET,
    TREE,
    detect_profile,
    get_profile,
    in_tree_at,
)

pytestmark = pytest.mark.unit


def has(*names: str) -> set[str]:
    return set(names)


@pytest.mark.parametrize(("names", "profile"), [
    (has("Makefile", "src"), TREE),  # a C project: nothing uv could build
    (has("Cargo.toml", "src"), TREE),
    (has("check.sh"), TREE),
    (has("pyproject.toml"), GENERIC),
    (has("setup.py"), GENERIC),
    (has("setup.cfg"), GENERIC),
    (has("torchlet/__init__.py", "csrc/_C.c", "pyproject.toml"), TORCHLET),
    (has("torch/__init__.py", "aten/src/ATen", "c10", "setup.py"), PYTORCH),
])
def test_the_bad_commits_files_pick_the_profile(names: set[str], profile: object) -> None:
    assert detect_profile(names.__contains__) is profile


def test_each_profile_says_which_commits_run_in_their_tree() -> None:
    bare, packaged = has("main.c"), has("main.c", "pyproject.toml")
    for files in (bare, packaged):  # the tree profile builds nothing, anywhere
        assert in_tree_at(TREE, files.__contains__)
    # Generic: per commit, by its own packaging (a project that became a package midway).
    assert in_tree_at(GENERIC, bare.__contains__)
    assert not in_tree_at(GENERIC, packaged.__contains__)
    for prof in (PYTORCH, TORCHLET):  # a package is what they probe, always built
        assert not in_tree_at(prof, bare.__contains__)
    assert get_profile("tree") is TREE  # --profile tree, and a stored bisection's resume
    assert set(PACKAGING) == {"pyproject.toml", "setup.py", "setup.cfg"}
