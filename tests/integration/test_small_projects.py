"""Small pure-Python projects near ``git bisect run``: one real build, then overlays.

A history whose every commit bumps the version in ``pyproject.toml`` used to be a source build
per probe (the generic profile had no overlay rules, and pyproject.toml changed everywhere).
Now the first build's wheel says which files are installed where (artifacts/pure.py), and a
commit that differs from it in those files and the version field alone is laid over it, with
its own version in the installed metadata. A dependency change still forces a build.
"""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

import git
import pytest

from bisector.app.check import check
from bisector.app.demo.small_project import NAME, ORACLE, generate_small
from bisector.artifacts import overlay, pure
from bisector.artifacts.build import build_wheel
from bisector.base.events import QuietEvents
from bisector.core.search import Verdict
from bisector.project.profiles import GENERIC
from bisector.run.config import CheckRequest
from bisector.store.db import open_store
from tests.support import git as run_git
from tests.support import run_cli

pytestmark = pytest.mark.integration

# Fails unless the probe imports the *installed* package (never the tree's src/, which is not
# on the path) and its installed metadata carry the probed commit's own version.
TRUTHFUL = (f"import importlib.metadata as m, tomllib, {NAME}; "
            f"assert 'site-packages' in {NAME}.__file__, {NAME}.__file__; "
            f"want = tomllib.load(open('pyproject.toml', 'rb'))['project']['version']; "
            f"assert m.version('{NAME}') == want, (m.version('{NAME}'), want); "
            f"assert {NAME}.f() == 1")


def _start(path: Path, good: str, bad: str, command: str) -> dict[str, object]:
    r = run_cli("start", "--repo", str(path), "--good", good, "--bad", bad, "--no-confirm",
                "--json", "--", "python", "-c", command)
    assert r.returncode == 0, r.stderr
    out: dict[str, object] = json.loads(r.stdout)
    return out


def test_a_version_bump_only_history_bisects_with_one_build(home: Path,
                                                             tmp_path: Path) -> None:
    hist = generate_small(tmp_path / "proj", commits=24, culprit=15)
    d = _start(hist.path, hist.main[0], hist.main[-1], TRUTHFUL)
    assert d["culprit"]["sha"] == hist.culprit  # type: ignore[index]
    probes = d["probes"]
    assert isinstance(probes, list)
    kinds = [p["artifact"] for p in probes]
    print("probes:", kinds)
    assert kinds.count("source") <= 1 < len(kinds), kinds
    assert set(kinds) == {"source", "overlay"}, kinds
    # Each overlay says what it is and what it runs on, for the report and `bisect show`.
    for p in probes:
        if p["artifact"] == "overlay":
            assert p["facts"]["obtained"].startswith(f"overlay of {p['sha'][:12]} on source")
            assert p["facts"]["overlay"]["version_file"].endswith(
                f"carries {p['sha'][:12]}'s version")
    # Each probe's facts name the version its environment holds (read from its dist-info,
    # nothing imported), and the issue report says it, with no CUDA lines for this project.
    culprit = next(p for p in probes if p["sha"] == hist.culprit)
    want = run_git(hist.path, "show", f"{hist.culprit}:pyproject.toml").split('version = "')[1]
    assert culprit["facts"]["distribution_version"] == want.split('"')[0]
    # Named apart from "package" (what the oracle imports): a wheel that lost its module is
    # still bad, not a skip for "the environment cannot import" it.
    assert "package" not in culprit["facts"]
    issue = run_cli("show", str(d["id"]), "--format", "issue").stdout
    assert f"proj version: {culprit['facts']['distribution_version']}" in issue, issue
    assert "cuDNN" not in issue and "Is CUDA available" not in issue


def test_a_dependency_change_forces_a_build(home: Path, tmp_path: Path) -> None:
    hist = generate_small(tmp_path / "proj", commits=24, culprit=18, deps_at=9)
    assert hist.deps_changed is not None
    # The exact rule first: the version line alone passes, the dependency line does not.
    repo = git.Repo(hist.path)
    built = build_wheel(repo, hist.main[0], GENERIC, python=_python())
    assert built.ok and built.wheel is not None, built.log_tail
    layout = pure.layout_of(repo, hist.main[0], built.wheel)
    assert layout is not None
    assert (layout.prefix, layout.packages, layout.modules, layout.dist_info, layout.left_out) \
        == ("src/", (NAME,), (), f"{NAME}-0.1.0.dist-info", ())
    assert f"{NAME}/core.py" in layout.files
    prof = pure.derive(GENERIC, layout)
    assert overlay.check(repo, hist.main[0], hist.main[8], prof).ok
    refused = overlay.check(repo, hist.main[0], hist.main[9], prof)
    assert not refused.ok and "pyproject.toml changes beyond its version" in refused.reason
    # And a whole bisection: no overlay ever spans the dependency change.
    d = _start(hist.path, hist.main[0], hist.main[-1], ORACLE)
    assert d["culprit"]["sha"] == hist.culprit  # type: ignore[index]
    probes = d["probes"]
    assert isinstance(probes, list)
    kinds = [p["artifact"] for p in probes]
    assert kinds.count("source") == 2, kinds
    pos = {sha: i for i, sha in enumerate(hist.main)}
    for p in probes:
        if p["artifact"] == "overlay":
            base = pos[p["facts"]["overlay_base"]]
            assert (base < 9) == (pos[p["sha"]] < 9), (base, p["sha"])


def test_what_a_build_generates_or_compiles_is_never_laid_over(home: Path,
                                                              tmp_path: Path) -> None:
    """A wheel holding a file the tree lacks (written by the build), or one that is not pure,
    gives no layout: every commit is built, as before."""
    hist = generate_small(tmp_path / "proj", commits=2, culprit=1)
    repo = git.Repo(hist.path)
    built = build_wheel(repo, hist.main[0], GENERIC, python=_python())
    assert built.wheel is not None, built.log_tail
    generated = tmp_path / built.wheel.name
    with zipfile.ZipFile(built.wheel) as src, zipfile.ZipFile(generated, "w") as dst:
        for item in src.infolist():
            dst.writestr(item, src.read(item))
        dst.writestr(f"{NAME}/_version.py", "version = '0.1.0'\n")
    assert pure.layout_of(repo, hist.main[0], generated) is None
    platform = tmp_path / "platform" / built.wheel.name
    platform.parent.mkdir()
    with zipfile.ZipFile(built.wheel) as src, zipfile.ZipFile(platform, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename.endswith("/WHEEL"):
                data = data.replace(b"py3-none-any", b"cp311-cp311-linux_x86_64")
            dst.writestr(item, data)
    assert pure.layout_of(repo, hist.main[0], platform) is None
    assert pure.derive(GENERIC, None) is GENERIC


def _python() -> str:
    import sys

    return sys.executable


def test_files_the_build_leaves_out_stay_out(home: Path, tmp_path: Path) -> None:
    """A data file setuptools does not package (no MANIFEST.in): its change is not laid over,
    and a new module beside it is a build (the backend's excludes might take it or not)."""
    hist = generate_small(tmp_path / "proj", commits=2, culprit=1)
    repo = git.Repo(hist.path)
    notes = hist.path / "src" / NAME / "notes.txt"

    def commit(message: str) -> str:
        repo.git.add("-A")
        run_git(hist.path, "commit", "-q", "-m", message)  # its own identity: a new machine
        return repo.head.commit.hexsha

    notes.write_text("one\n")
    base = commit("notes")
    notes.write_text("two\n")
    edited = commit("edit the notes")
    (hist.path / "src" / NAME / "extra.py").write_text("X = 1\n")
    added = commit("a module beside the notes")
    built = build_wheel(repo, base, GENERIC, python=_python())
    assert built.wheel is not None, built.log_tail
    layout = pure.layout_of(repo, base, built.wheel)
    assert layout is not None and layout.left_out == (f"src/{NAME}/notes.txt",)
    prof = pure.derive(GENERIC, layout)
    ok = overlay.check(repo, base, edited, prof)
    assert ok.ok and ok.changed == (), ok
    refused = overlay.check(repo, base, added, prof)
    assert not refused.ok and "beside files the build leaves out" in refused.reason


class _Phases(QuietEvents):
    """Each step ``bisect check`` tells its display, in order."""

    def __init__(self) -> None:
        self.phases: list[str] = []
        self.lines: list[str] = []

    def phase(self, sha: str, text: str) -> None:
        self.phases.append(text)

    def build_line(self, sha: str, text: str) -> None:
        self.lines.append(text)


def test_check_tells_each_step_it_waits_on(home: Path, tmp_path: Path) -> None:
    """``bisect check --commit`` is never a silent wait: the build (and its newest log line),
    the environment, the oracle run, as a bisection's probe tells them (issue 21)."""
    hist = generate_small(tmp_path / "proj", commits=2, culprit=1)
    repo = git.Repo(hist.path)
    (hist.path / "MANIFEST.in").write_text("include CHANGES.md\n")  # no assembling: a build
    repo.git.add("-A")
    run_git(hist.path, "commit", "-q", "-m", "manifest")
    sha = repo.head.commit.hexsha
    heard = _Phases()
    store = open_store(str(tmp_path / "b.db"))
    res = check(CheckRequest(command=("python", "-c", ORACLE), repo=hist.path, commit=sha,
                             python=_python()), events=heard, store=lambda: store)
    assert res.verdict is Verdict.BAD  # the planted commit (1) is an ancestor
    assert heard.phases[0] == f"building {sha[:12]} from source", heard.phases
    assert heard.lines, "the build's log lines were never told"
    assert any(p.startswith("creating an environment for source build") for p in heard.phases)
    assert heard.phases[-1] == f"running {res.oracle.name} on {sha[:12]}", heard.phases


def test_a_pytest_command_with_its_dependency_finds_the_culprit(
        home: Path, tmp_path: Path, private_cache: Path) -> None:
    """``--dependency pytest -- pytest ...``: the oracle's dependency is installed once (into
    the skeleton new environments are copied from), and the ``pytest`` script of every probe's
    environment starts that environment's python (its ``#!`` line once named the scratch
    folder the environment was made in, and every probe was skipped)."""
    cache = private_cache  # counted below: no other test's environments
    hist = generate_small(tmp_path / "proj", commits=12, culprit=7)
    r = run_cli("start", "--repo", str(hist.path), "--good", hist.main[0], "--bad",
                hist.main[-1], "--no-confirm", "--json", "--dependency", "pytest",
                "--prefetch", "0", "--",  # one environment per probe: none made ahead
                "pytest", "-q", "-p", "no:cacheprovider", "tests/test_f.py")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["culprit"]["sha"] == hist.culprit
    assert all(p["verdict"] in ("good", "bad") for p in d["probes"]), d["probes"]
    envs = cache / "envs"
    made = [e for e in envs.iterdir() if e.is_dir() and not e.name.startswith("skeleton-")]
    assert len(made) == len(d["probes"])
    for env in made:  # a #! line, or uv's /bin/sh trampoline where the path is long
        head = "\n".join((env / "bin" / "pytest").read_text().splitlines()[:3])
        assert f"{env}/bin/python" in head, head
    assert subprocess.run([str(made[0] / "bin" / "pytest"), "--version"],
                          capture_output=True).returncode == 0
    skeletons = [e for e in envs.iterdir() if e.name.startswith("skeleton-")]
    assert len(skeletons) == 1  # one interpreter, one set of oracle dependencies
    # The packages are the skeleton's files, linked (as uv links them from its cache).
    skel_init = next(skeletons[0].glob("lib/python*/site-packages/pytest/__init__.py"))
    env_init = next(made[0].glob("lib/python*/site-packages/pytest/__init__.py"))
    assert env_init.stat().st_ino == skel_init.stat().st_ino
    # What the runs compiled of pytest is kept for the skeleton (compiled once, not per
    # environment), and each environment's copy of it is that same file.
    kept = list((cache / "pycache").glob(f"**/{skeletons[0].name}/lib/python*/site-packages/"
                                         "pytest/__init__.*.pyc"))
    assert len(kept) == 1, kept
    shared = 0
    for env in made:
        [mine] = (cache / "pycache").glob(f"**/{env.name}/lib/python*/site-packages/"
                                          "pytest/__init__.*.pyc")
        shared += mine.stat().st_ino == kept[0].stat().st_ino
    # Two probes at once (the endpoints, where they run together) may each compile it.
    assert shared >= len(made) - 1, (shared, len(made))


# Appends to its dependency's file in place: through a hard link, the skeleton's and every
# environment's copy of it would change, and the next oracle importing it would exit 0.
TAMPER = ("import packaging, pathlib; "
          "open(pathlib.Path(packaging.__file__), 'a').write('\\nraise SystemExit(0)\\n')")


def test_an_oracle_that_edits_its_dependency_poisons_no_later_verdict(
        home: Path, tmp_path: Path, private_cache: Path) -> None:
    hist = generate_small(tmp_path / "proj", commits=10, culprit=6)

    def start(command: str) -> subprocess.CompletedProcess[str]:
        return run_cli("start", "--repo", str(hist.path), "--good", hist.main[0], "--bad",
                       hist.main[-1], "--no-confirm", "--json", "--dependency", "packaging",
                       "--", "python", "-c", command)

    start(TAMPER)  # every commit "good": an endpoint stop, whatever it says
    r = start(f"import packaging; {ORACLE}")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["culprit"]["sha"] == hist.culprit
    for init in private_cache.glob("envs/*/lib/python*/site-packages/packaging/__init__.py"):
        assert "SystemExit" not in init.read_text(), init
