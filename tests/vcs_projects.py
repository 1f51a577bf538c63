"""Small Python projects that take their version from git, made with ``git init`` in a test.

Three ways a real project asks git for its version: setuptools_scm, hatch-vcs (setuptools_scm
under hatchling) and a ``setup.py`` that runs ``git describe`` itself (what versioneer does).
Each history: a tagged first commit ``v0.1.0``, then plain commits, one of which plants a
regression (``VALUE`` becomes 2). A ``data`` submodule that nothing builds from can be added,
and a ``needed`` one whose file the build copies into the package.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support import git

SCM_PYPROJECT = """\
[build-system]
requires = ["setuptools>=64", "setuptools-scm>=8"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
dynamic = ["version"]

[tool.setuptools]
packages = ["{name}"]

[tool.setuptools_scm]
"""

HATCH_PYPROJECT = """\
[build-system]
requires = ["hatchling", "hatch-vcs"]
build-backend = "hatchling.build"

[project]
name = "{name}"
dynamic = ["version"]

[tool.hatch.version]
source = "vcs"

[tool.hatch.build.targets.wheel]
packages = ["{name}"]
"""

STATIC_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "1.0"

[tool.setuptools]
packages = ["{name}"]
"""

DESCRIBE_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"
"""

# What versioneer does: ask `git describe` and turn v0.1.0-3-gabc1234 into 0.1.0.post3+gabc1234.
DESCRIBE_SETUP = """\
import subprocess
from setuptools import setup

tag, *rest = subprocess.check_output(
    ["git", "describe", "--tags", "--long"], text=True).strip().rsplit("-", 2)
n, g = rest
version = tag.lstrip("v") + (f".post{{n}}+{{g}}" if n != "0" else "")
setup(name="{name}", version=version, packages=["{name}"])
"""

# The build needs the submodule: setup.py copies its file into the package.
NEEDED_SETUP = """\
import shutil
from setuptools import setup

shutil.copy("needed/value.txt", "{name}/value.txt")
setup(package_data={{"{name}": ["value.txt"]}})
"""

ORACLE = """\
\"\"\"Good while {name}.VALUE is 1.\"\"\"
import sys
import {name}
sys.exit(0 if {name}.VALUE == 1 else 1)
"""

KINDS = {"scm": SCM_PYPROJECT, "hatch": HATCH_PYPROJECT, "describe": DESCRIBE_PYPROJECT,
         "static": STATIC_PYPROJECT}


@dataclass(frozen=True)
class VcsProject:
    path: Path
    name: str
    main: list[str]  # commits oldest first; main[0] is tagged v0.1.0
    culprit: str
    oracle: Path


def _data_repo(root: Path, name: str, filename: str, text: str) -> Path:
    lib = root / name
    lib.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main", str(lib))
    (lib / filename).write_text(text)
    git(lib, "add", "-A")
    git(lib, "commit", "-q", "-m", f"{name} data")
    return lib


def make(root: Path, kind: str, *, commits: int = 8, culprit: int = 5,
         data_submodule: bool = False, needed_submodule: bool = False) -> VcsProject:
    """A ``kind`` project (scm, hatch, describe; static: a fixed version), the regression at
    ``main[culprit]``.

    ``data_submodule`` adds ``tests/data`` (a submodule the build never reads);
    ``needed_submodule`` adds ``needed`` (setup.py copies ``needed/value.txt``: the build fails
    without it). Both are added in the first commit.
    """
    name = f"{kind}demo"
    repo = root / name
    (repo / name).mkdir(parents=True)
    git(root, "init", "-q", "-b", "main", str(repo))
    (repo / "pyproject.toml").write_text(KINDS[kind].format(name=name))
    if kind == "describe":
        (repo / "setup.py").write_text(DESCRIBE_SETUP.format(name=name))
    elif needed_submodule:
        (repo / "setup.py").write_text(NEEDED_SETUP.format(name=name))
    (repo / name / "__init__.py").write_text("VALUE = 1\n")
    (repo / ".gitignore").write_text("build/\n*.egg-info/\n")
    if data_submodule:
        lib = _data_repo(root, "testdata", "big.bin", "pretend this is 2 GB\n")
        git(repo, "submodule", "add", "-q", str(lib), "tests/data")
    if needed_submodule:
        lib = _data_repo(root, "neededlib", "value.txt", "1\n")
        git(repo, "submodule", "add", "-q", str(lib), "needed")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "Initial commit")
    git(repo, "tag", "v0.1.0")
    main = [git(repo, "rev-parse", "HEAD")]
    for i in range(1, commits):
        if i == culprit:
            (repo / name / "__init__.py").write_text("VALUE = 2\n")
            msg = "Change VALUE"
        else:
            (repo / name / f"mod{i}.py").write_text(f"X = {i}\n")
            msg = f"Add mod{i}"
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", msg)
        main.append(git(repo, "rev-parse", "HEAD"))
    oracle = root / f"{name}_oracle.py"
    oracle.write_text(ORACLE.format(name=name))
    return VcsProject(repo, name, main, main[culprit], oracle)


def clone_without_submodules(project: VcsProject, dest: Path) -> Path:
    """A plain ``git clone`` (no ``--recurse-submodules``): its submodules are not
    initialised, as in a clone made without thinking of them."""
    subprocess.run(["git", "clone", "-q", str(project.path), str(dest)], check=True)
    return dest
