"""The content-addressed wheel cache.

A key is the sha256 of what determines the build (profile, commit, build command, Python), so
two bisections that need the same commit built the same way share one wheel, and a change of
build settings can never serve a stale one. Wheels land by atomic rename, so a crash mid-build
leaves no half-written artifact behind.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
from pathlib import Path
from typing import Any

from bisector.base.paths import cache_dir


def artifact_key(kind: str, commit: str, settings: dict[str, Any]) -> str:
    blob = json.dumps({"kind": kind, "commit": commit, "settings": settings}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def wheel_file_key(path: Path) -> tuple[str, str]:
    """(artifact key, sha256) of a wheel file given by the user (``check --wheel``, a watch
    suite's ``wheel``): its bytes alone name it, so both key one file one way and share its
    environment."""
    digest = file_sha256(path)
    return artifact_key("wheel", "", {"sha256": digest}), digest


def wheel_dir(key: str) -> Path:
    return cache_dir() / "wheels" / key[:2] / key


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


_KNOWN: dict[tuple[str, int, int, int], str] = {}
_KNOWN_LOCK = threading.Lock()


def known_sha256(path: Path) -> str:
    """:func:`file_sha256`, remembered for this process while the file is unchanged (same
    inode, size and mtime): a multi-GB wheel checked on every probe that finds it is hashed
    once."""
    st = path.stat()
    ident = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
    with _KNOWN_LOCK:
        if ident in _KNOWN:
            return _KNOWN[ident]
    digest = file_sha256(path)
    with _KNOWN_LOCK:
        _KNOWN[ident] = digest
    return digest


def publish(tmp_dir: Path, key: str) -> Path:
    """Move a finished build directory into place; the first writer wins a race."""
    final = wheel_dir(key)
    final.parent.mkdir(parents=True, exist_ok=True)
    # mkdtemp made it private (0700); a published artifact is read by other users too: the
    # containers of --executor docker mount it and run as their own user.
    tmp_dir.chmod(0o755)
    try:
        tmp_dir.rename(final)
    except OSError:
        if not final.exists():
            raise
        shutil.rmtree(tmp_dir, ignore_errors=True)
    return final


def scratch_dir(prefix: str) -> Path:
    """A private folder under the cache, named with this process's pid so that a sweep can
    tell one left by a killed process (``sweep_scratch``)."""
    import os
    import tempfile

    root = cache_dir() / "tmp"
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=root))


def sweep_scratch() -> list[str]:
    """Remove scratch folders whose process is gone (builds and installs cut by kill -9)."""
    import os
    import re

    root = cache_dir() / "tmp"
    removed: list[str] = []
    if root.is_symlink():
        return removed  # a link out of the cache: never followed (``bisect gc`` says so)
    for d in root.glob("*") if root.is_dir() else []:
        m = re.search(r"-(\d+)-[^-]*$", d.name)
        if not m:
            continue
        try:
            os.kill(int(m.group(1)), 0)
            continue  # alive (or another user's): leave it
        except ProcessLookupError:
            pass
        except (PermissionError, OverflowError):
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d.name)
    return removed
