"""Where a project's torch comes from, decided once for ``bisect start`` and the nightly watch:
the profile (given, or detected from the commit's files), the interpreter, the wheel variant
and the nightly or release index. Both ask this module, so a watch's suite and the bisection
it starts can never resolve the same settings two ways.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

import git

from bisector.project.interpreter import Interpreter, choose_python
from bisector.project.profiles import Profile, detect_profile, get_profile, nightly_url


@dataclass(frozen=True)
class Resolved:
    """The profile, interpreter and variant of one repository at one commit."""

    profile: Profile
    interpreter: Interpreter
    variant: str | None

    @property
    def python(self) -> str:
        return self.interpreter.path

    def index(self, kind: str, given: str | None = None) -> str | None:
        """The ``nightly`` or ``release`` index: ``given``, else the profile's default (the
        nightly one for this variant; PyTorch's release wheels from the index pip and uv are
        configured with); None when there is none."""
        if given is not None:
            return given
        if kind == "nightly":
            return nightly_url(self.profile, self.variant)
        if kind == "release" and self.profile.name == "pytorch":
            return configured_index()
        return None


def resolve(repo: git.Repo, sha: str, *, profile: str | None = None,
            python: str | None = None, variant: str | None = None) -> Resolved:
    """``profile``, ``python`` and ``variant`` as given, else their defaults at ``sha``."""
    prof = pick_profile(repo, sha, profile)
    return Resolved(prof, choose_python(python, prof.import_name),
                    variant or prof.default_variant)


def pick_profile(repo: git.Repo, sha: str, name: str | None) -> Profile:
    """The named profile, else the one whose marker files the commit has (read in-process
    from the commit's tree: a ``git cat-file`` each was 15-40 ms a path, eight paths)."""
    if name:
        return get_profile(name)
    tree = repo.commit(sha).tree

    def exists(path: str) -> bool:
        try:
            tree.join(path)
            return True
        except KeyError:
            return False

    return detect_profile(exists)


def configured_index() -> str | None:
    """The release index pip/uv are configured with (never a host written in this code)."""
    for var in ("UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"):
        if os.environ.get(var):
            return os.environ[var]
    r = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.index-url"],
                       capture_output=True, text=True, check=False)
    if r.returncode == 0 and r.stdout.strip():
        return r.stdout.strip()
    try:
        from pip._internal.models.index import PyPI  # pip's own default

        return str(PyPI.simple_url)
    except ImportError:
        return None
