"""Wheels of the demo project, published like PyTorch's nightlies and releases (for
``bisect demo --nightlies`` and the tests of the nightly path).

Each nightly is built from its ``nightly``-branch commit (so ``git_version`` names that commit,
as in a real nightly), versioned ``<base>.devYYYYMMDD+cpu`` with ``<base>`` the commit's own
``__version__`` up to its pre-release part (PyTorch's ``version.txt`` up to its ``a``), so a
nightly's file name can be derived from the history alone; releases are built from their tag
as ``torchlet==0.1.0``. Building goes through bisector's own ``build_wheel``.
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import git
from packaging.version import Version

from bisector.app.demo.index import IndexServer
from bisector.app.demo.torchlet import SyntheticHistory
from bisector.artifacts.build import BuildResult, build_key, build_wheel, cached_build
from bisector.artifacts.cache import artifact_key
from bisector.base.errors import BuildError
from bisector.project.profiles import TORCHLET


def _built(res: BuildResult, what: str) -> Path:
    if not res.ok or res.wheel is None:
        raise BuildError(f"building the demo's {what} failed: {res.log_tail[-300:]}")
    return res.wheel


def _wheel(repo: git.Repo, sha: str, version: str, what: str) -> Path:
    """The wheel of ``sha`` versioned ``version``: from the content-addressed cache when built
    before (under build_wheel's own key for a version given), else built now. A second
    ``bisect demo --nightlies``, and the test modules that publish the same nightlies, build
    none of them again."""
    _, settings = build_key(TORCHLET, sha, sys.executable)
    cached = cached_build(artifact_key("source", sha, {**settings, "version": version}), sha,
                          settings)
    if cached is not None and cached.wheel is not None:
        return cached.wheel
    return _built(build_wheel(repo, sha, TORCHLET, python=sys.executable, version=version),
                  what)


def publish(hist: SyntheticHistory, root: Path, index: str = "nightly-cpu",
            releases: bool = False) -> dict[str, str]:
    """Build and copy the wheels into ``root/<index>/files``; returns filename -> main sha."""
    repo = git.Repo(hist.path)
    files = root / index / "files"
    files.mkdir(parents=True, exist_ok=True)
    out: dict[str, str] = {}
    for nightly_sha, main_sha, stamp in hist.nightlies:
        text = repo.git.show(f"{nightly_sha}:torchlet/version.py")
        m = re.search(r'__version__ = "([^"]+)"', text)
        if m is None:
            raise BuildError(f"the demo's nightly {nightly_sha[:12]} has no __version__")
        base = Version(m.group(1)).base_version
        wheel = _wheel(repo, nightly_sha, f"{base}.dev{stamp}+cpu", f"nightly {stamp}")
        shutil.copy(wheel, files / wheel.name)
        out[wheel.name] = main_sha
    if releases:
        rel = root / "release" / "files"
        rel.mkdir(parents=True, exist_ok=True)
        for tag, sha in hist.tags.items():
            wheel = _wheel(repo, sha, tag[1:], f"release {tag}")
            shutil.copy(wheel, rel / wheel.name)
            out[wheel.name] = sha
    return out


def day(stamp: str) -> str:
    """``20250110`` as the date a user types (``2025-01-10``)."""
    return f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:]}"


@contextmanager
def served(hist: SyntheticHistory, root: Path) -> Iterator[str]:
    """The history's nightlies built into ``root`` and served on 127.0.0.1 while the block
    runs; yields the nightly index's URL (as ``--nightly-index`` takes it)."""
    if root.exists():
        shutil.rmtree(root)
    publish(hist, root)
    with IndexServer(root) as server:
        yield server.index_url("nightly-cpu")
