"""A small pure-Python project's history, made with git in seconds: the ``git bisect run``
comparison of ``make bench`` (section 9) and the tests of pure-Python overlays.

Each commit bumps the static version in ``pyproject.toml`` (as release tooling does) and makes
one small change: a module of the package, the changelog, a test. One commit plants the
regression (``smallpkg.f()`` returns 2 from it on). Optionally one commit changes the
project's dependencies (a requirement whose marker never holds, so nothing is downloaded):
its metadata differ, so it must be built, never laid over.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

NAME = "smallpkg"

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "0.1.{n}"
requires-python = ">=3.9"
{deps}
[tool.setuptools.packages.find]
where = ["src"]
"""

# The oracle that tells good from bad, as ``git bisect run`` and ``bisect start -- CMD`` run it.
ORACLE = f"import {NAME}; assert {NAME}.f() == 1"


@dataclass(frozen=True)
class SmallHistory:
    path: Path
    main: list[str]  # oldest first
    culprit: str
    deps_changed: str | None  # the commit that changes the dependencies, if any


def git_in(path: Path) -> Callable[..., str]:
    """``git -C path ARGS`` as one made-up author commits (a history made for a demo, a test
    or a bench), its output stripped."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@example.com",
           "GIT_COMMITTER_NAME": "Dev", "GIT_COMMITTER_EMAIL": "dev@example.com"}

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(path), *args], check=True, env=env,
                              capture_output=True, text=True).stdout.strip()

    return git


def generate_small(path: Path, commits: int = 40, culprit: int = 27,
                   deps_at: int | None = None) -> SmallHistory:
    """``commits`` commits in a new repository at ``path``; commit ``culprit`` breaks
    ``f()``; commit ``deps_at`` (if given) adds a dependency."""
    pkg = path / "src" / NAME
    pkg.mkdir(parents=True)
    (path / "tests").mkdir()
    git = git_in(path)
    git("init", "-q", "-b", "main")
    shas: list[str] = []
    for i in range(commits):
        deps = 'dependencies = ["smallpkg-extra; python_version < \'3\'"]\n' \
            if deps_at is not None and i >= deps_at else ""
        (path / "pyproject.toml").write_text(PYPROJECT.format(name=NAME, n=i, deps=deps))
        (pkg / "__init__.py").write_text(f"from {NAME}.core import f\n\n__all__ = ['f']\n")
        (pkg / "core.py").write_text(f"def f():\n    return {2 if i >= culprit else 1}\n")
        (pkg / f"mod{i % 5}.py").write_text(f"STEP = {i}\n")
        (path / "CHANGES.md").write_text("".join(f"- change {j}\n" for j in range(i + 1)))
        (path / "tests" / "test_f.py").write_text(
            f"import {NAME}\n\n\ndef test_f():\n    assert {NAME}.f() == 1  # {i}\n")
        git("add", "-A")
        git("commit", "-q", "-m", f"change {i}")
        shas.append(git("rev-parse", "HEAD"))
    return SmallHistory(path, shas, shas[culprit],
                        shas[deps_at] if deps_at is not None else None)
