"""Which repository ``bisector.toml`` files the user trusts, by their exact content.

A cloned repository is untrusted input, yet its ``bisector.toml`` is convenient: the range's
usual flags live with the code. As direnv's ``allow`` and mise's ``trust`` do, a repository's
file may set only inert keys until the user trusts it; trusting records the file's sha256 (by
its real path), and any change of the content voids it, so a later ``git pull`` cannot slip a
new ``python`` or ``[notify] command`` in under an old yes. The user's own file is always
trusted and never recorded here.

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


def is_trusted(path: Path) -> bool:
    """The file's content is exactly what the user trusted."""
    want = _read().get(_key(path))
    if want is None:
        return False
    try:
        return digest(path) == want
    except OSError:
        return False


def trust(path: Path) -> Trusted:
    p = path.expanduser().resolve()
    if not p.is_file():
        raise UsageError(f"{path}: no such file; pass the path of a bisector.toml")
    data = _read()
    data[str(p)] = digest(p)
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
