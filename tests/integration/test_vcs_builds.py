"""Projects that take their version from git build in a throwaway worktree of the clone.

Before: the generic profile built from a bare export, setuptools_scm raised ``LookupError``
and every probe was recorded as a broken build (bisect exit 7). Real projects made with
``git init`` here; real ``uv build`` with build isolation (setuptools-scm and hatch-vcs come
from the package index, as for a user). The last tests build in the builder container (the
Docker engine and the image made from docker/make-base.sh, as in test_docker.py).
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import git
import pytest

from bisector.artifacts.build import BuildResult, build_wheel
from bisector.artifacts.docker_build import DockerBuilder, repository_id
from bisector.infra import cancel
from bisector.infra.containers import client
from bisector.project.profiles import GENERIC
from tests import vcs_projects
from tests.support import ROOT, run_cli


def _state(repo: Path) -> tuple[str, str, str, str]:
    """What a build must never change in the user's clone: HEAD, status, worktrees, branches."""
    def g(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                              check=True).stdout

    return (g("rev-parse", "HEAD"), g("status", "--porcelain"), g("worktree", "list"),
            g("branch", "-a"))


def _version(wheel: Path) -> str:
    return wheel.name.split("-")[1]


def _assert_later(kind: str, wheel: Path, n: int, sha: str) -> None:
    """``n`` commits after the tag: setuptools_scm's guess-next-dev (hatch-vcs included), or
    the describe project's ``.postN``; the hash is the commit's."""
    pattern = rf"0\.1\.0\.post{n}" if kind == "describe" else rf"0\.1\.1\.dev{n}"
    m = re.fullmatch(pattern + r"\+g([0-9a-f]+)", _version(wheel))
    assert m is not None and sha.startswith(m.group(1)), wheel.name


@pytest.mark.parametrize("kind", ["scm", "hatch", "describe"])
def test_wheel_version_comes_from_git(home: Path, tmp_path: Path, kind: str) -> None:
    """setuptools_scm, hatch-vcs and a setup.py running ``git describe`` (versioneer's way)
    each see the commit and its tags: the tag's version at the tag, a dev/post version with the
    commit's hash after it, never "-dirty" (the worktree's index matches the export, the
    initialised data submodule included)."""
    proj = vcs_projects.make(tmp_path, kind, data_submodule=True)
    repo = git.Repo(proj.path)
    before = _state(proj.path)
    tagged = build_wheel(repo, proj.main[0], GENERIC, python=sys.executable)
    assert tagged.ok and tagged.wheel is not None, tagged.log_tail
    assert _version(tagged.wheel) == "0.1.0"
    res = build_wheel(repo, proj.main[3], GENERIC, python=sys.executable)
    assert res.ok and res.wheel is not None, res.log_tail
    _assert_later(kind, res.wheel, 3, proj.main[3])
    assert _state(proj.path) == before, "the clone's HEAD, status, worktrees and branches"


def test_a_setuptools_scm_project_bisects(home: Path, tmp_path: Path) -> None:
    """Before: both endpoints 'build failed: raise LookupError(error_msg)', exit 7."""
    proj = vcs_projects.make(tmp_path, "scm")
    db = home / "b.db"
    r = run_cli("--db", str(db), "start", "--repo", str(proj.path), "--good", "v0.1.0",
                "--bad", "main", "--oracle", str(proj.oracle), "--no-confirm", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["culprit"]["sha"] == proj.culprit
    assert all(p["verdict"] in ("good", "bad") for p in d["probes"]), d["probes"]
    assert subprocess.run(["git", "-C", str(proj.path), "worktree", "list", "--porcelain"],
                          capture_output=True, text=True, check=True
                          ).stdout.count("worktree ") == 1


FAILING_SETUP = 'import sys\nsys.exit("this commit does not build")\n'
# Says it started (a file the test waits for), then hangs until it is killed.
HANGING_SETUP = 'import pathlib, time\npathlib.Path({marker!r}).touch()\ntime.sleep(120)\n'


def _worktrees_left(repo: git.Repo) -> list[str]:
    admin = Path(repo.git_dir) / "worktrees"
    return sorted(p.name for p in admin.iterdir()) if admin.exists() else []


@pytest.mark.parametrize("how", ["fails", "times out", "is stopped"])
def test_the_worktree_is_removed_whatever_the_build_did(home: Path, tmp_path: Path,
                                                        how: str) -> None:
    """A failed build, a build timeout and Ctrl-C (``cancel.stop_all`` from the main thread
    while a worker builds) all leave the clone with no worktree registered."""
    proj = vcs_projects.make(tmp_path, "describe", commits=2, culprit=1)
    marker = tmp_path / "started"
    setup = FAILING_SETUP if how == "fails" else HANGING_SETUP.format(marker=str(marker))
    (proj.path / "setup.py").write_text(setup)
    vcs_projects.git(proj.path, "commit", "-q", "-am", "break the build")
    repo = git.Repo(proj.path)
    sha = repo.head.commit.hexsha
    before = _state(proj.path)
    got: list[object] = []

    def build() -> None:
        try:
            got.append(build_wheel(repo, sha, GENERIC, python=sys.executable,
                                   timeout_s=20 if how == "times out" else 600))
        except cancel.Stopped as e:
            got.append(e)

    worker = threading.Thread(target=build)
    worker.start()
    try:
        if how == "is stopped":
            deadline = time.monotonic() + 120
            while not marker.exists() and time.monotonic() < deadline:
                time.sleep(0.2)
            assert marker.exists(), "the build never started"
            assert _worktrees_left(repo), "the build runs in a registered worktree"
            cancel.stop_all()
        worker.join(180)
    finally:
        cancel.reset()
    assert not worker.is_alive()
    res = got[0]
    if how == "is stopped":
        assert isinstance(res, cancel.Stopped)
    else:
        assert isinstance(res, BuildResult) and not res.ok
        if how == "times out":
            assert res.infra is not None and "timed out" in res.infra
        else:
            assert res.infra is None and "this commit does not build" in res.log_tail
    assert _worktrees_left(repo) == []
    assert _state(proj.path) == before


@pytest.fixture(scope="module")
def builder_image() -> None:
    """The builder image on the local Debian base, as tests/integration/test_docker.py makes it
    (the Docker engine is needed; no registry)."""
    subprocess.run([str(ROOT / "docker" / "make-base.sh"), DOCKER_BASE], check=True)
    from bisector.app import images as img

    assert img.build("builder", DOCKER_BASE).id


DOCKER_BASE = "bisector/base:bookworm"


@pytest.mark.parametrize("kind", ["scm", "hatch", "describe"])
def test_the_same_versions_in_the_builder_container(home: Path, tmp_path: Path, kind: str,
                                                    builder_image: None) -> None:
    """The worktree's .git file names the clone's .git/worktrees/<name> by its host path: the
    builder mounts the clone's git directory there read-only, and git runs as the build user
    (not the owner of that directory here, where bisector runs as root) on it. The build is
    isolated, so setuptools-scm and hatch-vcs come from the project's own build requirements
    (without them setuptools made a setuptools_scm project 0.0.0)."""
    proj = vcs_projects.make(tmp_path, kind)
    repo = git.Repo(proj.path)
    before = _state(proj.path)
    b = DockerBuilder(repository_id(repo), requires=GENERIC.build_requires)
    try:
        tagged = build_wheel(repo, proj.main[0], GENERIC, python=sys.executable, builder=b)
        later = build_wheel(repo, proj.main[4], GENERIC, python=sys.executable, builder=b)
    finally:
        with contextlib.suppress(Exception):
            client().volumes.get(b.volume).remove(force=True)
    assert tagged.ok and tagged.wheel is not None, tagged.log_path.read_text()
    assert later.ok and later.wheel is not None, later.log_path.read_text()
    assert tagged.settings["builder"]["where"] == "docker"
    assert _version(tagged.wheel) == "0.1.0"
    _assert_later(kind, later.wheel, 4, proj.main[4])
    assert _state(proj.path) == before


READS_CONFIG = """
import os
common = subprocess.check_output(["git", "rev-parse", "--git-common-dir"], text=True).strip()
print("CONFIG:", open(os.path.join(common, "config")).read().replace(chr(10), " "))
"""


def test_the_builder_container_never_sees_the_clones_config(home: Path, tmp_path: Path,
                                                            builder_image: None) -> None:
    """A remote URL with a token in the clone's .git/config stays on the host: the container
    gets the objects, refs and a config with the repository format only. (A clone made with
    ``--shared`` also builds: its alternate object directory is mounted too.)"""
    proj = vcs_projects.make(tmp_path, "describe", commits=2, culprit=1)
    with (proj.path / "setup.py").open("a") as f:
        f.write(READS_CONFIG)
    vcs_projects.git(proj.path, "commit", "-q", "-am", "print the repository's config")
    clone = tmp_path / "shared"
    subprocess.run(["git", "clone", "-q", "--shared", str(proj.path), str(clone)], check=True)
    vcs_projects.git(clone, "config", "remote.origin.url", "https://me:SECRET@example.com/p")
    repo = git.Repo(clone)
    b = DockerBuilder(repository_id(repo), requires=GENERIC.build_requires)
    try:
        res = build_wheel(repo, repo.head.commit.hexsha, GENERIC, python=sys.executable,
                          builder=b)
    finally:
        with contextlib.suppress(Exception):
            client().volumes.get(b.volume).remove(force=True)
    log = res.log_path.read_text()
    assert res.ok and res.wheel is not None, log
    assert _version(res.wheel).startswith("0.1.0.post2+g")
    assert "CONFIG: [core] \trepositoryformatversion = 0" in log
    assert "SECRET" not in log and "remote" not in log.split("CONFIG:")[1].splitlines()[0]
