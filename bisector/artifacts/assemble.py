"""A pure-Python project's wheel assembled from its commit's tree, with no build backend run.

The first probe of a small project used to pay a real build (an isolated environment, the
backend installed into it, the backend run: a second or three) where ``git bisect run`` pays
nothing. For the most common shape of project the wheel every backend would make is known
exactly: the package's Python files under their installed path, plus metadata written from
the static ``[project]`` table. This module writes that wheel, and only where the answer
cannot depend on which backend, which backend version or which plugin builds it; anywhere
else it declines (None, with the reason) and the real build runs, as before.

What it takes (all must hold, else it declines):

- ``pyproject.toml`` whose ``[build-system]`` names one of setuptools, hatchling, flit-core
  or pdm-backend and requires only that backend (``wheel`` too, for setuptools): a plugin
  (setuptools_scm, hatch-vcs, a metadata hook) may change files or metadata;
- a static ``[project]`` table: name and version given, nothing ``dynamic``;
- no ``setup.py``, no ``MANIFEST.in``, no ``setup.cfg`` section setuptools reads
  (``metadata``, ``options*``), no backend build settings (``[tool.hatch.build]``,
  ``[tool.pdm.build]``, ``[tool.flit.external-data]``, any ``[tool.setuptools]`` but
  ``packages.find.where = ["src"]``);
- exactly one import package, named as the project (``-`` and ``.`` read as ``_``): in a
  src layout, ``src/`` holds that package and nothing else (every backend then installs
  just it); a flat layout (``<package>/`` at the top) only for hatchling and flit, which
  choose the package by the project's name (setuptools and pdm-backend discover every
  top-level package, and setuptools refuses several);
- inside it only regular files (their executable bit kept as the backend keeps it: all but
  setuptools, whose ``build_py`` copies modules without their mode), no ``__pycache__``,
  ``.tox`` and the like or ``.pyc`` (flit and hatchling leave them out), none that hatchling
  would leave out for the root ``.gitignore`` (asked of git's own matcher); for setuptools and
  pdm-backend only ``.py`` files and an ``__init__.py`` in every folder (whether they ship
  ``py.typed`` or a ``.json``, or a folder without ``__init__.py``, depends on their version and
  settings), where flit and hatchling ship the whole folder;
- metadata every backend writes alike: a version, extra names and ``requires-python``
  already in their normalized spelling (hatchling writes the version as given, flit the
  ``requires-python``, the others normalize them), no extra that names the project itself
  (hatchling expands it), and the backend not pinned to one release (``flit_core==3.2.0``
  cannot even read most of today's ``pyproject.toml`` files).

The metadata (``METADATA``, ``entry_points.txt``) carry what an installer and an oracle use:
name, version, summary, ``Requires-Python``, ``Requires-Dist`` and extras, entry points.
Fields only a package index shows (classifiers, URLs, the long description) are left out.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import io
import os
import re
import subprocess
import tempfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import git

from bisector.artifacts.assemble_meta import (
    NAME,
    entry_points_text,
    metadata_text,
    project_table,
    table_problem,
)

FLAT_OK = ("hatchling", "flit-core")  # backends that pick a flat-layout package by name
DATA_OK = ("hatchling", "flit-core")  # backends that ship every file of the package folder
# setup.cfg sections of other tools (linters, test runners), which no backend reads.
OTHER_TOOLS = ("tool:", "flake8", "pycodestyle", "pep8", "pydocstyle", "mypy", "isort",
               "coverage:", "pylint", "bumpversion", "codespell", "doc8")
GENERATOR = "bisector (assembled from the tree)"
# Folders hatchling never ships (and flit never ships __pycache__): a tree holding one is built.
LEFT_OUT = {"__pycache__", "__pypackages__", ".git", ".hg", ".hatch", ".tox", ".nox",
            ".venv", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".pixi", ".DS_Store"}


@dataclass(frozen=True)
class Assembled:
    """The wheel's name and bytes, or why the tree needs a real build."""

    filename: str | None = None
    data: bytes = b""
    declined: str = ""


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _blob(tree: git.Tree, path: str) -> git.Blob | None:
    try:
        obj = tree / path
    except KeyError:
        return None
    return obj if isinstance(obj, git.Blob) else None


REGULAR = (0o100644, 0o100755)  # git's modes of a regular file (not a link, not a submodule)
# Files a backend reads besides pyproject.toml whose presence alone is declined: setuptools'
# setup.py and MANIFEST.in, hatchling's hatch.toml (its [build] table, hooks) and
# hatch_build.py, pdm-backend's pdm_build.py (loaded whenever it exists; its hooks may add or
# edit files).
DECLINED_FILES = ("setup.py", "MANIFEST.in", "hatch.toml", "hatch_build.py", "pdm_build.py")
# The files read here: one that is a symlink is read by the backend where it points, and here
# it would be the link's own text (a symlinked setup.cfg's tag_build went unseen).
READ_FILES = ("pyproject.toml", "setup.cfg", ".gitignore", ".hgignore")


def _is_file(tree: git.Tree, path: str) -> bool:
    return (b := _blob(tree, path)) is not None and b.mode in REGULAR


def _symlinked(tree: git.Tree) -> str:
    return next((f"{path} is a symlink" for path in READ_FILES
                 if _blob(tree, path) is not None and not _is_file(tree, path)), "")


def _text(tree: git.Tree, path: str) -> str | None:
    b = _blob(tree, path)
    return b.data_stream.read().decode(errors="replace") if b is not None else None


def _declines_config(tree: git.Tree, backend: str, tool: dict[str, Any]) -> str:
    """Why the build settings may change the wheel, or ``""``."""
    for path in DECLINED_FILES:
        if _blob(tree, path) is not None:
            return f"the project has {path}"
    # hatchling leaves out what the root .gitignore matches, tracked or not (a subpackage
    # called lib/ under GitHub's Python template): checked by git's own matcher once the
    # package's files are known (:func:`_hatch_ignored`); an .hgignore is not read here.
    if backend == "hatchling" and _has(tree, ".hgignore"):
        return "hatchling applies the project's .hgignore"
    cfg = _text(tree, "setup.cfg") or ""
    # Only other tools' sections: setuptools reads [metadata], [options*], [egg_info]
    # (tag_build changes the version), [bdist_wheel], [build] and more.
    for section in re.findall(r"^\[([^\]]+)\]", cfg, re.M):
        if not section.startswith(OTHER_TOOLS):
            return f"setup.cfg section [{section}] (setuptools may read it)"
    st = tool.get("setuptools")
    if st is not None and st != {"packages": {"find": {"where": ["src"]}}}:
        return "[tool.setuptools] settings"
    if "build" in (tool.get("hatch") or {}) or "build" in (tool.get("pdm") or {}):
        return "backend build settings"
    flit = tool.get("flit") or {}
    if set(flit) - {"module", "sdist"}:
        return "[tool.flit] settings"
    if "poetry" in tool:
        return "[tool.poetry] settings"
    if st is not None and backend != "setuptools":
        return "[tool.setuptools] settings for another backend"
    return ""


def _package_root(tree: git.Tree, backend: str, package: str) -> tuple[str, str]:
    """The folder prefix the package lies in (``src/`` or ``""``), or ``("", reason)``."""
    src = _obj(tree, "src")
    if isinstance(src, git.Tree):
        entries = [e.name for e in src]
        if entries != [package] or not isinstance(src / package, git.Tree):
            return "", "src/ holds more than the package"
        if _has(tree, package) or _has(tree, f"{package}.py"):
            return "", f"both src/{package} and a top-level {package}"
        return "src/", ""
    if backend not in FLAT_OK:
        return "", "a flat layout (its backend discovers every top-level package)"
    if not isinstance(_obj(tree, package), git.Tree) or _has(tree, f"{package}.py"):
        return "", f"no single package folder {package}/"
    return "", ""


def _has(tree: git.Tree, path: str) -> bool:
    return _obj(tree, path) is not None


def _obj(tree: git.Tree, path: str) -> Any:
    try:
        return tree / path
    except KeyError:
        return None


# Above ruff's limits on purpose: one branch per build backend's package layout.
def _package_files(pkg: git.Tree, backend: str) -> tuple[list[tuple[str, bytes, int]], str]:  # noqa: C901
    """(path within the package, bytes, git mode) of every file, or a reason to decline."""
    files: list[tuple[str, bytes, int]] = []
    folders = {""}
    for item in pkg.traverse():
        if not isinstance(item, git.Tree | git.Blob):
            return [], f"{pkg.path} holds a submodule"
        rel = str(item.path)[len(str(pkg.path)) + 1:]
        if isinstance(item, git.Tree):
            folders.add(rel)
            continue
        if item.mode not in REGULAR:
            return [], f"{item.path} is not a regular file"
        if any(c in rel for c in ',"\n\r') or not rel.isprintable():
            return [], f"{item.path!r}: a name RECORD cannot hold as it is"
        if set(rel.split("/")) & LEFT_OUT or rel.endswith((".pyc", ".pyo", ".pyd")):
            return [], f"{item.path}: a file backends leave out"
        if not rel.endswith(".py") and backend not in DATA_OK:
            return [], f"data file {item.path} (whether {backend} ships it depends on its " \
                "version and settings)"
        files.append((rel, item.data_stream.read(), item.mode))
    have = {rel: data for rel, data, _ in files}
    if "__init__.py" not in have:  # no backend builds a package without one
        return [], f"{pkg.path} has no __init__.py"
    if backend == "flit-core":  # flit reads these with ast (a docstring, __version__)
        for name in ("__init__.py", "version.py", "_version.py", "__version__.py"):
            try:
                if name in have:
                    ast.parse(have[name])
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                return [], f"{pkg.path}/{name} does not parse (flit's build would fail)"
    if backend in DATA_OK:  # they ship the whole folder, namespace folders included
        return files, ""
    for folder in folders:
        if (f"{folder}/__init__.py" if folder else "__init__.py") not in have:
            return [], f"{pkg.path}/{folder} has no __init__.py".replace("//", "/").rstrip("/")
    return files, ""


def _unlike_git(gitignore: bytes) -> str:
    """Where git's reading of a ``.gitignore`` and hatchling's (pathspec) may part, or ``""``:
    a negation (git keeps a file under an excluded folder excluded, pathspec lets the last
    pattern win), a tab or a backslash (git keeps a trailing tab and reads escapes, pathspec
    strips and may refuse them), a pattern ending ``**/``, text that is not UTF-8 (hatchling
    cannot read it and the build fails)."""
    try:
        text = gitignore.decode()
    except UnicodeDecodeError:
        return "that is not UTF-8"
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line.lstrip().startswith("!"):
            return "with negations"
        # git keeps leading blanks and a trailing tab, older pathspec strips them
        if line != line.lstrip() or "\t" in line or "\\" in line or \
                line.rstrip().endswith("**/"):
            return f"pattern {line!r} git and hatchling may read apart"
    return ""


def _hatch_ignored(gitignore: bytes, paths: list[str]) -> list[str]:
    """Which of ``paths`` (from the project's root) the root ``.gitignore`` matches, by git's
    own matcher in an empty repository (nothing of the user's or the clone's ignore files
    counts): hatchling leaves those out of its wheel, tracked or not. A matcher that fails
    counts as a match: the tree is built."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    failed = paths[:1] or ["the package"]
    with tempfile.TemporaryDirectory(prefix="bisector-ignore-") as d:
        try:
            subprocess.run(["git", "init", "-q", d], check=True, capture_output=True, env=env)
            Path(d, ".gitignore").write_bytes(gitignore)
            r = subprocess.run(["git", "-C", d, "-c", "core.excludesFile=/dev/null",
                                "check-ignore", "--no-index", "--stdin", "-z"],
                               input=b"".join(p.encode() + b"\0" for p in paths),
                               capture_output=True, env=env, check=False)
        except (OSError, subprocess.CalledProcessError):
            return failed
    if r.returncode not in (0, 1):  # 1: nothing matched
        return failed
    return [p for p in r.stdout.decode(errors="replace").split("\0") if p]


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def assemble(repo: git.Repo, sha: str) -> Assembled:
    """The wheel of ``sha`` when its tree is one whose wheel is known without building; never
    an error: a tree this cannot read (an ``__init__.py`` too deep for ``ast``, a version
    ``packaging`` refuses) is declined, and the real build says what it makes of it."""
    tree = repo.commit(sha).tree
    try:
        return _assemble(tree)
    except (git.GitCommandError, ValueError, RecursionError, MemoryError, TypeError,
            AttributeError, KeyError) as e:  # packaging's Invalid*: ValueErrors
        return Assembled(declined=f"the tree could not be read ({type(e).__name__})")


# Above ruff's limits on purpose: each refusal to assemble is its own branch, each with its reason.
def _assemble(tree: git.Tree) -> Assembled:  # noqa: C901, PLR0912
    text = _text(tree, "pyproject.toml")
    if text is None:
        return Assembled(declined="no pyproject.toml")
    try:
        pyproject = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return Assembled(declined="unreadable pyproject.toml")
    project, why = project_table(pyproject)
    tool = pyproject.get("tool")
    tool = tool if isinstance(tool, dict) else {}
    if project is None:
        return Assembled(declined=why)
    backend = project["_backend"]
    why = table_problem(project, lambda path: _is_file(tree, path))
    if why:
        return Assembled(declined=why)
    from packaging.version import InvalidVersion, Version  # lazy

    try:
        version = str(Version(project["version"]))
    except InvalidVersion:
        return Assembled(declined="an invalid version")
    if version != project["version"] and backend == "hatchling":
        return Assembled(declined=f"version {project['version']!r}, which hatchling writes as "
                         f"given and the others as {version!r}")
    if not NAME.match(project["name"]):
        return Assembled(declined=f"metadata a backend may write otherwise (project name "
                         f"{project['name']!r})")
    package = _norm(project["name"])
    if backend == "flit-core":  # flit takes the name as it is, ``-`` read as ``_``
        module = (tool.get("flit") or {}).get("module") or {}
        named = module.get("name") if isinstance(module, dict) else None
        if (named or project["name"].replace("-", "_")) != package:
            return Assembled(declined="flit looks for a module named otherwise")
    why = _symlinked(tree) or _declines_config(tree, backend, tool)
    prefix, why = _package_root(tree, backend, package) if not why else ("", why)
    if why:
        return Assembled(declined=why)
    files, why = _package_files(tree / f"{prefix}{package}", backend)
    gitignore = _blob(tree, ".gitignore") if backend == "hatchling" else None
    if not why and gitignore is not None:
        text = gitignore.data_stream.read()
        if odd := _unlike_git(text):
            return Assembled(declined=f"a .gitignore {odd} (hatchling applies it)")
        left_out = _hatch_ignored(text, [f"{prefix}{package}/{rel}" for rel, _, _ in files])
        why = f"hatchling leaves out {left_out[0]} (the .gitignore matches it)" \
            if left_out else ""
    if why:
        return Assembled(declined=why)
    try:
        metadata, eps = metadata_text(project, version), entry_points_text(project)
    except (ValueError, TypeError, AttributeError) as e:  # packaging's Invalid*: ValueErrors
        return Assembled(declined=f"metadata a backend may write otherwise ({e})")
    info = f"{package}-{version}.dist-info"
    executable = {f"{package}/{rel}" for rel, _, mode in files
                  if mode == 0o100755 and backend != "setuptools"}
    entries = [(f"{package}/{rel}", data) for rel, data, _ in sorted(files)]
    entries.append((f"{info}/METADATA", metadata.encode()))
    if eps:
        entries.append((f"{info}/entry_points.txt", eps.encode()))
    entries.append((f"{info}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: {GENERATOR}\n"
                                      "Root-Is-Purelib: true\nTag: py3-none-any\n").encode()))
    record = "\n".join([*(_record_line(p, d) for p, d in entries), f"{info}/RECORD,,"]) + "\n"
    entries.append((f"{info}/RECORD", record.encode()))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in entries:
            # A fixed time: the same tree gives the same bytes, so the same sha256.
            info_ = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
            # The file's mode as the backends write it: an installer keeps the executable bit.
            info_.external_attr = (0o100755 if path in executable else 0o100644) << 16
            z.writestr(info_, data, zipfile.ZIP_DEFLATED)
    return Assembled(f"{package}-{version}-py3-none-any.whl", buf.getvalue())


def write(assembled: Assembled, out: Path) -> Path:
    assert assembled.filename is not None
    path = out / assembled.filename
    path.write_bytes(assembled.data)
    return path
