"""Real wheels of the synthetic project, published like PyTorch's nightlies and releases.

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
from pathlib import Path

import git
from packaging.version import Version

from bisector.app.demo.torchlet import SyntheticHistory
from bisector.artifacts.build import build_wheel
from bisector.project.profiles import TORCHLET


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
        assert m is not None, text
        base = Version(m.group(1)).base_version
        res = build_wheel(repo, nightly_sha, TORCHLET, python=sys.executable,
                          version=f"{base}.dev{stamp}+cpu")
        assert res.ok and res.wheel is not None, res.log_tail
        shutil.copy(res.wheel, files / res.wheel.name)
        out[res.wheel.name] = main_sha
    if releases:
        rel = root / "release" / "files"
        rel.mkdir(parents=True, exist_ok=True)
        for tag, sha in hist.tags.items():
            res = build_wheel(repo, sha, TORCHLET, python=sys.executable, version=tag[1:])
            assert res.ok and res.wheel is not None, res.log_tail
            shutil.copy(res.wheel, rel / res.wheel.name)
            out[res.wheel.name] = sha
    return out
