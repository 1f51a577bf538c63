"""Wheels assembled from the tree (artifacts/assemble.py) against the wheels the real backends
build from the same commit: what an installer and an oracle see must be the same. And every
shape whose wheel could depend on the backend is declined, so it is built as before."""

from __future__ import annotations

import configparser
import email.parser
import io
import sys
import zipfile
from pathlib import Path

import git
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from bisector.artifacts.assemble import assemble
from bisector.artifacts.build import build_wheel, obtain_wheel
from bisector.project.profiles import GENERIC
from tests.support import git as run_git

pytestmark = pytest.mark.integration

BACKEND = {
    "setuptools": ('["setuptools>=61"]', "setuptools.build_meta"),
    "hatchling": ('["hatchling"]', "hatchling.build"),
    "flit": ('["flit_core>=3.4,<4"]', "flit_core.buildapi"),
    "pdm": ('["pdm-backend"]', "pdm.backend"),
}

PROJECT = """\
[build-system]
requires = {requires}
build-backend = "{backend}"

[project]
name = "Neat-Pkg"
version = "1.2.0rc1"
description = "A small project"
requires-python = ">=3.9"
dependencies = ["packaging>=20; python_version >= '3'", "attrs"]

[project.optional-dependencies]
test = ["pytest>=7; sys_platform != 'win32'"]

[project.scripts]
neat-cli = "neat_pkg.core:main"
{extra}"""

PACKAGE = {
    "__init__.py": "from neat_pkg.core import f\n",
    "core.py": "def f():\n    return 1\n\n\ndef main():\n    print(f())\n",
    "sub/__init__.py": "",
    "sub/deep.py": "X = 1\n",
    "tool.py": "#!/usr/bin/env python3\nprint(1)\n",  # executable: see _repo
}


# As GitHub's Python template has it, in part (hatchling applies it; lib/ matches nothing here).
GITIGNORE = "__pycache__/\n*.py[cod]\nbuild/\ndist/\nlib/\n*.egg-info/\n.venv\n"


def _repo(path: Path, files: dict[str, str]) -> tuple[git.Repo, str]:
    path.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
        if text.startswith("#!"):
            (path / name).chmod(0o755)
    run_git(path, "init", "-q", "-b", "main")
    run_git(path, "add", "-A", "-f")  # every file written is tracked, ignored or not
    run_git(path, "-c", "user.name=Dev", "-c", "user.email=dev@example.com",
            "commit", "-q", "-m", "one")
    repo = git.Repo(path)
    return repo, repo.head.commit.hexsha


def _project(backend: str, layout: str, extra: str = "", data: bool = False) -> dict[str, str]:
    requires, module = BACKEND[backend]
    text = PROJECT.format(requires=requires, backend=module, extra=extra)
    if backend == "flit":  # flit looks for the module by the name as written
        text = text.replace("Neat-Pkg", "neat-pkg")
    files = {"pyproject.toml": text, ".gitignore": GITIGNORE,
             "README.md": "# neat\n", "tests/test_f.py": "def test():\n    pass\n"}
    root = "src/neat_pkg/" if layout == "src" else "neat_pkg/"
    files.update({root + k: v for k, v in PACKAGE.items()})
    if data:  # and a folder without __init__.py: flit and hatchling ship the whole package
        files[root + "table.json"] = "{}\n"
        files[root + "assets/page.html"] = "<p>x</p>\n"
    return files


def _wheel(data: bytes) -> tuple[dict[str, tuple[bytes, bool]], dict[str, str]]:
    """(installed files but the dist-info's, with their executable bit, which an installer
    keeps; dist-info files by base name)."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        files = {i.filename: (z.read(i), bool(i.external_attr >> 16 & 0o100))
                 for i in z.infolist() if not i.filename.endswith("/")}
    info = {n.rsplit("/", 1)[1]: v.decode() for n, (v, _) in files.items()
            if n.split("/")[0].endswith(".dist-info")}
    return {n: v for n, v in files.items() if not n.split("/")[0].endswith(".dist-info")}, info


def _deps(meta: email.message.Message) -> set[tuple[str, str, tuple[bool, ...]]]:
    """Each requirement as its name, versions and its marker's answer in a few places."""
    places = [{"extra": e, "sys_platform": p, "python_version": "3.11"}
              for e in ("", "test") for p in ("linux", "win32")]
    out = set()
    for line in meta.get_all("Requires-Dist") or []:
        r = Requirement(line)
        out.add((canonicalize_name(r.name), str(r.specifier),
                 tuple(r.marker.evaluate(p) if r.marker else True for p in places)))
    return out


def _entry_points(text: str | None) -> dict[str, dict[str, str]]:
    cfg = configparser.ConfigParser(delimiters=("=",))
    cfg.optionxform = str  # type: ignore[assignment,method-assign]
    cfg.read_string(text or "")
    # An empty group (pdm-backend writes ``[gui_scripts]`` with nothing in it) is no group.
    return {s: {k: v.strip() for k, v in cfg.items(s)} for s in cfg.sections() if cfg.items(s)}


@pytest.mark.parametrize(("backend", "layout", "extra", "data"), [
    ("setuptools", "src", '\n[tool.setuptools.packages.find]\nwhere = ["src"]\n', False),
    ("setuptools", "src", "", False),
    ("hatchling", "src", "", True),
    ("hatchling", "flat", "", True),
    ("flit", "flat", "", True),
    ("flit", "src", "", False),
    ("pdm", "src", "", False),
])
def test_an_assembled_wheel_is_what_the_backend_builds(
        home: Path, tmp_path: Path, backend: str, layout: str, extra: str, data: bool) -> None:
    repo, sha = _repo(tmp_path / "p", _project(backend, layout, extra, data))
    made = assemble(repo, sha)
    assert made.filename is not None, made.declined
    built = build_wheel(repo, sha, GENERIC, python=sys.executable)
    assert built.ok and built.wheel is not None, built.log_tail
    ours, our_info = _wheel(made.data)
    theirs, their_info = _wheel(built.wheel.read_bytes())
    assert ours == theirs  # the same files, byte for byte, executable where theirs are
    mine = email.parser.Parser().parsestr(our_info["METADATA"])
    real = email.parser.Parser().parsestr(their_info["METADATA"])
    for field in ("Version", "Requires-Python", "Summary"):
        assert mine[field] == real[field], field
    assert canonicalize_name(mine["Name"]) == canonicalize_name(real["Name"])
    assert set(mine.get_all("Provides-Extra") or []) == set(real.get_all("Provides-Extra") or [])
    assert _deps(mine) == _deps(real)
    assert _entry_points(our_info.get("entry_points.txt")) == \
        _entry_points(their_info.get("entry_points.txt"))
    assert made.filename.split("-")[:2] == built.wheel.name.split("-")[:2]
    assert assemble(repo, sha).data == made.data  # the same tree, the same bytes


NOT_SRC = "[tool.setuptools.packages.find]\nwhere = ['lib']\n"


@pytest.mark.parametrize(("change", "why"), [
    (lambda f: f.update({"setup.py": "from setuptools import setup\nsetup()\n"}),
     "setup.py"),
    (lambda f: f.update({"MANIFEST.in": "include *.txt\n"}), "MANIFEST.in"),
    (lambda f: f.update({"setup.cfg": "[options]\nzip_safe = False\n"}), "setup.cfg"),
    (lambda f: f.update({"pyproject.toml": f["pyproject.toml"].replace(
        'version = "1.2.0rc1"', 'dynamic = ["version"]')}),
     "dynamic [project] fields (version): the backend computes them"),
    (lambda f: f.update({"pyproject.toml": f["pyproject.toml"].replace(
        '["setuptools>=61"]', '["setuptools>=61", "setuptools-scm"]')}), "build plugins"),
    (lambda f: f.update({"pyproject.toml": f["pyproject.toml"] + NOT_SRC}), "[tool.setuptools]"),
    (lambda f: f.update({"src/neat_pkg/py.typed": ""}), "data file"),
    (lambda f: f.update({"src/other/__init__.py": ""}), "src/ holds more"),
    (lambda f: f.update({"src/neat_pkg/ns/mod.py": "Y = 2\n"}), "no __init__.py"),
    (lambda f: f.update({"neat_pkg/__init__.py": ""}), "both src/neat_pkg"),
    (lambda f: f.update({"pyproject.toml": f["pyproject.toml"].replace(
        "setuptools.build_meta", "poetry.core.masonry.api")}), "not a backend"),
    (lambda f: f.update({"pyproject.toml": f["pyproject.toml"].replace(
        '["setuptools>=61"]', '["flit_core"]').replace(
        "setuptools.build_meta", "flit_core.buildapi")}), "flit looks for a module"),
    # Values that would add lines of their own to the metadata are never written.
    (lambda f: f.update({"pyproject.toml": f["pyproject.toml"].replace(
        '"A small project"', '"one\\nRequires-Dist: evil"')}), "more than one line"),
    (lambda f: f.update({"pyproject.toml": f["pyproject.toml"].replace(
        'neat-cli = "neat_pkg.core:main"', '"x\\n[evil]" = "neat_pkg.core:main"')}),
     "entry point"),
    (lambda f: f.update({"pyproject.toml": f["pyproject.toml"].replace(
        '">=3.9"', '">=3.9\\nEvil: 1"')}), "metadata a backend may write otherwise"),
    (lambda f: f.update({"pyproject.toml": f["pyproject.toml"].replace(
        '"Neat-Pkg"', '"Neat-Pkg\\n"')}), "metadata a backend may write otherwise"),
    (lambda f: f.update({"pyproject.toml": f["pyproject.toml"].replace(
        '"attrs"', '"attrs @ https://example.com/attrs.whl"')}), "direct reference"),
    (lambda f: f.update({"pyproject.toml": f["pyproject.toml"].replace(
        '["setuptools>=61"]', '["setuptools<61"]')}), "pinned or capped"),
    (lambda f: f.update({"setup.cfg": "[egg_info]\ntag_build = .dev\n"}), "[egg_info]"),
    (lambda f: f.update({"pdm_build.py": "def pdm_build_initialize(c):\n    pass\n"}),
     "pdm_build.py"),
    (lambda f: f.update({"hatch.toml": "[build]\npackages = ['src/other']\n"}), "hatch.toml"),
    (lambda f: f.update({"src/neat_pkg/a,b.py": ""}), "RECORD cannot hold"),
    (lambda f: f.update({"src/neat_pkg/__pycache__/core.cpython-311.pyc": "x"}),
     "a file backends leave out"),
    # Found on public projects (flit_core==3.2.0 cannot read most of today's pyproject.toml
    # files; the spellings below are written as given by one backend, normalized by others).
    (lambda f: f.update({"pyproject.toml": f["pyproject.toml"].replace(
        '["setuptools>=61"]', '["setuptools==69.0.0"]')}), "pinned to one release"),
    (lambda f: f.update({"pyproject.toml": f["pyproject.toml"].replace(
        '">=3.9"', '">= 3.9"')}), "requires-python '>= 3.9', not spelled as normalized"),
    (lambda f: f.update({"pyproject.toml": f["pyproject.toml"].replace(
        "test = [", "Test_Extra = [")}), "extra 'Test_Extra', not spelled as normalized"),
    # Found with trees derived from public projects: shapes a backend leaves out, writes
    # otherwise or refuses to build (a build that fails is a fact a wheel would hide).
    (lambda f: f.update({"src/neat_pkg/.DS_Store": "x"}), "a file backends leave out"),
    (lambda f: f.pop("src/neat_pkg/__init__.py"), "src/neat_pkg has no __init__.py"),
    (lambda f: f.update({"pyproject.toml": f["pyproject.toml"].replace(
        '"A small project"', '""')}), "an empty description"),
    (lambda f: f.update({"pyproject.toml": f["pyproject.toml"].replace(
        'requires-python', 'colour = "blue"\nrequires-python')}),
     "unknown [project] key 'colour'"),
    (lambda f: f.update({"pyproject.toml": f["pyproject.toml"].replace(
        'requires-python', 'readme = "README.rst"\nrequires-python')}),
     "readme 'README.rst' is not a file of the commit"),
    (lambda f: f.update({"pyproject.toml": f["pyproject.toml"].replace(
        'requires-python', 'authors = "Dev"\nrequires-python')}),
     "[project] authors of a type the backends refuse"),
    (lambda f: f.update({"pyproject.toml": f["pyproject.toml"].replace(
        '"attrs"]', '"attrs"]\nkeywords = "x"')}), "[project] keywords of a type"),
    (lambda f: f.update({"pyproject.toml": f["pyproject.toml"].replace(
        'requires-python', 'license = "MIT"\nclassifiers = ["License :: OSI Approved"]\n'
        'requires-python')}), "an SPDX license with License :: classifiers"),
    (lambda f: f.update({"pyproject.toml": f["pyproject.toml"].replace(
        '["setuptools>=61"]', '["setuptools===61.0x"]')}),
     "the tree could not be read (InvalidVersion)"),
    (lambda f: f.update({"pyproject.toml": f["pyproject.toml"].replace(
        'requires-python', 'license = "Not-A-Licence"\nrequires-python')}),
     "not an SPDX expression"),
])
def test_a_tree_whose_wheel_may_depend_on_the_backend_is_built(
        tmp_path: Path, change: object, why: str) -> None:
    files = _project("setuptools", "src")
    change(files)  # type: ignore[operator]
    repo, sha = _repo(tmp_path / "p", files)
    made = assemble(repo, sha)
    assert made.filename is None and why in made.declined, made.declined


def test_other_tools_setup_cfg_sections_do_not_count_and_gitignore_does_for_hatchling(
        home: Path, tmp_path: Path) -> None:
    files = _project("setuptools", "src")
    files["setup.cfg"] = "[flake8]\nmax-line-length = 100\n\n[tool:pytest]\naddopts = -q\n"
    files["src/neat_pkg/lib/__init__.py"] = ""  # tracked, though the .gitignore matches it
    repo, sha = _repo(tmp_path / "st", files)
    assert assemble(repo, sha).filename is not None  # setuptools reads neither
    # hatchling leaves out what the root .gitignore matches, as its real build does
    # (setuptools, flit and pdm-backend ship lib/).
    hatch = _project("hatchling", "src")
    hatch["src/neat_pkg/lib/__init__.py"] = ""
    repo, sha = _repo(tmp_path / "hatch", hatch)
    assert assemble(repo, sha).declined == \
        "hatchling leaves out src/neat_pkg/lib/__init__.py (the .gitignore matches it)"
    built = build_wheel(repo, sha, GENERIC, python=sys.executable)
    assert built.ok and built.wheel is not None, built.log_tail
    assert "neat_pkg/lib/__init__.py" not in zipfile.ZipFile(built.wheel).namelist()
    hatch.pop("src/neat_pkg/lib/__init__.py")
    hatch[".gitignore"] += "!build/keep.txt\n"
    repo, sha = _repo(tmp_path / "negated", hatch)
    assert "a .gitignore with negations" in assemble(repo, sha).declined
    hatch[".hgignore"] = "syntax: glob\n*.log\n"
    repo, sha = _repo(tmp_path / "hg", hatch)
    assert "hatchling applies the project's .hgignore" in assemble(repo, sha).declined


def test_what_hatchling_alone_writes_otherwise_is_built(tmp_path: Path) -> None:
    """hatchling writes the version as given and expands an extra naming the project itself
    (seen on wntrblm/nox and hynek/structlog trees); flit normalizes the one and keeps the
    other, as the assembler writes them."""
    def made(backend: str, old: str, new: str) -> str:
        files = _project(backend, "src")
        files["pyproject.toml"] = files["pyproject.toml"].replace(old, new)
        repo, sha = _repo(tmp_path / f"{backend}-{len(list(tmp_path.iterdir()))}", files)
        return assemble(repo, sha).declined
    padded = ('version = "1.2.0rc1"', 'version = "2024.08.07"')
    assert "hatchling writes as given" in made("hatchling", *padded)
    assert made("flit", *padded) == ""
    self_extra = ('test = [', 'dev = ["neat-pkg[test]"]\ntest = [')
    assert "naming the project itself" in made("hatchling", *self_extra)
    assert made("flit", *self_extra) == ""


def test_what_a_backend_reads_elsewhere_or_otherwise_is_built(tmp_path: Path) -> None:
    """A symlinked setup.cfg or .gitignore (the backend reads where it points), a .gitignore
    git and hatchling's matcher may read apart, and an __init__.py flit cannot parse."""
    for n, (backend, extra, why) in enumerate((
            ("setuptools", {"cfg/real.cfg": "[egg_info]\ntag_build = .post7\n"},
             "setup.cfg is a symlink"),
            ("hatchling", {".gitignore": "core.py\ttab\n"}, "a .gitignore pattern"),
            ("hatchling", {".gitignore": "src/**/\n"}, "a .gitignore pattern"),
            ("flit", {"src/neat_pkg/__init__.py": "def broken(:\n"},
             "src/neat_pkg/__init__.py does not parse"),
            ("flit", {"src/neat_pkg/__init__.py": "x = " + "-" * 200_000 + "1\n"},
             "src/neat_pkg/__init__.py does not parse"),
            ("hatchling", {".gitignore": "  build/\n"}, "a .gitignore pattern"))):
        files = {**_project(backend, "src"), **extra}
        path = tmp_path / str(n)
        if backend == "setuptools":
            path.mkdir()
            (path / "setup.cfg").symlink_to("cfg/real.cfg")
        repo, sha = _repo(path, files)
        made = assemble(repo, sha)
        assert why in made.declined, (backend, made.declined)


def test_flat_layouts_only_where_the_backend_picks_the_package_by_name(tmp_path: Path) -> None:
    for backend, ok in (("setuptools", False), ("pdm", False), ("hatchling", True)):
        repo, sha = _repo(tmp_path / backend, _project(backend, "flat"))
        made = assemble(repo, sha)
        assert (made.filename is not None) is ok, (backend, made.declined)


def test_a_declined_tree_is_built_and_its_log_says_why(home: Path, tmp_path: Path) -> None:
    files = _project("setuptools", "src")
    files["src/neat_pkg/py.typed"] = ""
    repo, sha = _repo(tmp_path / "p", files)
    res = obtain_wheel(repo, sha, GENERIC, python=sys.executable)
    assert res.ok and not res.stats.get("assembled"), res.log_tail
    assert "built, not assembled: data file src/neat_pkg/py.typed" in res.log_path.read_text()
    files.pop("src/neat_pkg/py.typed")
    repo, sha = _repo(tmp_path / "q", files)
    res = obtain_wheel(repo, sha, GENERIC, python=sys.executable)
    assert res.ok and res.stats.get("assembled") and res.wheel is not None
    assert "assembled from the tree" in res.log_path.read_text()
