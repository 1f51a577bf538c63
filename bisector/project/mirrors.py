"""A worker's own copy of a bisection's repository, by URL: no clone at the coordinator's path.

A bisection records its repository's URL (``--repo-url``, else the clone's ``origin``). A
worker keeps one bare, partial mirror per URL in its cache (``git clone --bare
--filter=blob:none``: commits and trees now, file contents when a build or an overlay reads
them) and fetches again when a commit it is asked for is missing. Only plain transports are
allowed (``GIT_ALLOW_PROTOCOL``): a URL can never make git run a program (``ext::``).

A mirror fetches branches and tags, then any commit still missing by its sha, and nothing else:
never ``+refs/*:refs/*``, which brings the server's ``refs/replace/*`` (another commit's object
served under a sha) and whatever else it keeps. Replace refs a mirror holds from before are
deleted, and every git of bisector runs with replacements off (``bisector/__init__``).
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


# What a mirror takes from the server: its branches and tags. A commit reachable from
# neither (a pull request's head) is fetched by its sha afterwards.
REFSPECS = ("+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*")


def _env() -> dict[str, str]:
    return {**os.environ, "GIT_ALLOW_PROTOCOL": PROTOCOLS, "GIT_TERMINAL_PROMPT": "0",
            "GIT_NO_REPLACE_OBJECTS": "1"}


def _git(*args: str, cwd: Path | None = None, check: bool = True) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=3600)
    if done.returncode != 0 and check:
        raise RepoError(f"git {args[0]} failed: {done.stderr.strip()[-300:]}")
    return done.stdout if done.returncode == 0 else ""


def _drop_replacements(path: Path) -> None:
    """Delete ``refs/replace/*`` a mirror holds (fetched by an older bisector with every ref)."""
    refs = _git("for-each-ref", "--format=%(refname)", "refs/replace/", cwd=path).split()
    for ref in refs:
        _git("update-ref", "-d", ref, cwd=path)


def _has(path: Path, sha: str) -> bool:
    """Whether the mirror holds ``sha`` now. Not a lazy fetch of it (a partial clone's
    promisor would fetch each missing commit alone, one round trip per commit): the missing
    ones are fetched together, from branches and tags, by :func:`mirror`."""
    return subprocess.run(["git", "cat-file", "-e", f"{sha}^{{commit}}"], cwd=path,
                          env={**_env(), "GIT_NO_LAZY_FETCH": "1"},
                          capture_output=True).returncode == 0


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
        _drop_replacements(path)
        missing = [c for c in commits if not _has(path, c)]
        if missing:
            _git("fetch", "--quiet", "--no-tags", "--filter=blob:none", "origin", *REFSPECS,
                 cwd=path)
        missing = [c for c in missing if not _has(path, c)]
        if missing:  # not on a branch or tag: by sha, where the server allows it (v2 does)
            _git("fetch", "--quiet", "--no-tags", "--filter=blob:none", "origin", *missing,
                 cwd=path, check=False)
            missing = [c for c in missing if not _has(path, c)]
        if missing:
            raise RepoError(f"{url} has no commit {missing[0][:12]} (of {len(missing)} "
                            f"missing): push it, or run workers where the clone is")
    return path
