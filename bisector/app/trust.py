"""Which repository ``bisector.toml`` files the user trusts, by their exact content.

A cloned repository is untrusted input, yet its ``bisector.toml`` is convenient: the range's
usual flags live with the code. As direnv's ``allow`` and mise's ``trust`` do, a repository's
file may set only inert keys until the user trusts it; trusting records the file's sha256 (by
its real path), and any change of the content voids it, so a later ``git pull`` cannot slip a
new ``python`` or ``[notify] command`` in under an old yes. The user's own file is always
trusted and never recorded here.

Trust holds for that content *at that place*: a repository's file that is a symbolic link is
never trusted (a hostile clone's ``bisector.toml -> ../mine/bisector.toml`` would borrow the
trust of the file it points to, and its relative values would then resolve in the hostile
clone), and the bytes that are hashed are the bytes that are parsed (:func:`read`), so the file
cannot be swapped between the check and the use.

The record is a JSON file in the data folder, written atomically; a damaged record trusts
nothing (and says so), it never stops a command.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bisector.base.errors import UsageError
from bisector.base.paths import data_dir

RECORD = "trusted-configs.json"


@dataclass(frozen=True)
class Trusted:
    path: Path
    sha256: str
    state: str  # "trusted", "changed" (void until trusted again) or "missing"


def _record() -> Path:
    return data_dir() / RECORD


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class LinkError(OSError):
    """A repository's file that is a symbolic link: read it, never trust it."""


def read(path: Path) -> bytes:
    """The file's bytes, read once and never through a link in its last part (``O_NOFOLLOW``):
    what is hashed for trust is what is parsed. :class:`LinkError` when it is a link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        if path.is_symlink():
            raise LinkError(f"{path} is a symbolic link") from None
        raise e
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _read() -> dict[str, str]:
    try:
        data = json.loads(_record().read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return {}  # a damaged record trusts nothing
    if not isinstance(data, dict):
        return {}
    return {str(k): str(v) for k, v in data.items() if isinstance(v, str)}


def _write(data: dict[str, str]) -> None:
    rec = _record()
    fd, tmp = tempfile.mkstemp(dir=rec.parent, prefix=".trust-")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2, sort_keys=True)
    os.replace(tmp, rec)


def _key(path: Path) -> str:
    return str(path.expanduser().resolve())


def is_trusted(path: Path, content: bytes) -> bool:
    """``content``, read from ``path`` (by :func:`read`, never through a link), is exactly
    what the user trusted at that place."""
    want = _read().get(_key(path))
    return want is not None and hashlib.sha256(content).hexdigest() == want


def trust(path: Path) -> Trusted:
    if path.is_symlink():
        raise UsageError(f"{path} is a symbolic link, and trust holds for a file at its own "
                         f"place: trust the file it points to ({path.resolve()}) there, or "
                         f"replace the link with a copy")
    p = path.expanduser().resolve()
    if not p.is_file():
        raise UsageError(f"{path}: no such file; pass the path of a bisector.toml")
    data = _read()
    data[str(p)] = hashlib.sha256(read(p)).hexdigest()
    _write(data)
    return Trusted(p, data[str(p)], "trusted")


def revoke(path: Path) -> bool:
    """Forget the file; False when it was not trusted."""
    data = _read()
    if data.pop(_key(path), None) is None:
        return False
    _write(data)
    return True


def listing() -> list[Trusted]:
    out = []
    for p, sha in sorted(_read().items()):
        path = Path(p)
        try:
            state = "trusted" if digest(path) == sha else "changed"
        except OSError:
            state = "missing"
        out.append(Trusted(path, sha, state))
    return out
