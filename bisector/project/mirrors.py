"""A worker's own copy of a bisection's repository, by URL: no clone at the coordinator's path.

A bisection records its repository's URL (``--repo-url``, else the clone's ``origin``). A
worker keeps one bare, partial mirror per URL in its cache (``git clone --bare
--filter=blob:none``: commits and trees now, file contents when a build or an overlay reads
them) and fetches again when a commit it is asked for is missing. Only plain transports are
allowed (``GIT_ALLOW_PROTOCOL``): a URL can never make git run a program (``ext::``).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import git

from bisector.base.errors import RepoError, UsageError
from bisector.base.paths import cache_dir
from bisector.infra import flock

PROTOCOLS = "http:https:git:ssh:file"
_SCP = re.compile(r"^[\w.-]+@[\w.-]+:[\w./~-]+$")  # git@host:org/repo.git


def checked_url(url: str) -> str:
    """``url`` when git may fetch it with a plain transport, else a one-line error."""
    u = url.strip()
    scheme = u.split("://", 1)[0] if "://" in u else ("ssh" if _SCP.match(u) else "")
    if scheme not in PROTOCOLS.split(":") or any(c in u for c in "\n\r\0 "):
        raise UsageError(f"--repo-url {url!r} is not a repository URL git may fetch plainly: "
                         f"give https://, ssh://, git://, file:// or user@host:path")
    return u


def origin(repo: git.Repo) -> str:
    """The clone's ``origin`` URL when it has a plain one, else "" (workers then need the
    clone at the coordinator's path, as before)."""
    try:
        url = repo.remotes.origin.url
    except (AttributeError, ValueError, git.GitCommandError):
        return ""
    try:
        return checked_url(url)
    except UsageError:
        return ""


def _env() -> dict[str, str]:
    return {**os.environ, "GIT_ALLOW_PROTOCOL": PROTOCOLS, "GIT_TERMINAL_PROMPT": "0"}


def _git(*args: str, cwd: Path | None = None) -> None:
    done = subprocess.run(["git", *args], cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=3600)
    if done.returncode != 0:
        raise RepoError(f"git {args[0]} failed: {done.stderr.strip()[-300:]}")


def _has(path: Path, sha: str) -> bool:
    return subprocess.run(["git", "cat-file", "-e", f"{sha}^{{commit}}"], cwd=path,
                          env=_env(), capture_output=True).returncode == 0


def mirror(url: str, commits: list[str]) -> Path:
    """This box's mirror of ``url``, holding ``commits`` (fetched when missing); one process
    at a time per URL."""
    url = checked_url(url)
    path = cache_dir() / "mirrors" / hashlib.sha256(url.encode()).hexdigest()[:16]
    path.parent.mkdir(parents=True, exist_ok=True)
    with flock.held(path.with_name(path.name + ".lock")):
        if not (path / "HEAD").exists():
            tmp = path.with_name(path.name + f".{os.getpid()}.part")
            shutil.rmtree(tmp, ignore_errors=True)
            _git("clone", "--quiet", "--bare", "--filter=blob:none", url, str(tmp))
            tmp.rename(path)
        missing = [c for c in commits if not _has(path, c)]
        if missing:
            _git("fetch", "--quiet", "--filter=blob:none", "origin", "+refs/*:refs/*",
                 cwd=path)
        missing = [c for c in missing if not _has(path, c)]
        if missing:
            raise RepoError(f"{url} has no commit {missing[0][:12]} (of {len(missing)} "
                            f"missing): push it, or run workers where the clone is")
    return path
