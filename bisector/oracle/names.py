"""Where oracles are found by name, and the names there, without reading any of them.

bisector/oracle/script.py resolves and loads an oracle (its metadata, its requirements); the
TAB completion of ``--oracle`` and ``bisect oracle new``'s default folder only need the
folders and the file names, so they are here, where importing costs nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

from bisector.base.paths import PACKAGE_DIR


def bundled_oracles_dir() -> Path:
    """The repository's ``oracles/`` in a checkout, or the copy packaged into the wheel."""
    here = PACKAGE_DIR
    for cand in (here.parent / "oracles", here / "_oracles"):
        if cand.is_dir():
            return cand
    return here.parent / "oracles"


def team_oracles_dir() -> Path | None:
    """``$BISECTOR_ORACLES_DIR``: a team's own oracles, found by name like the bundled ones
    (and before them), and where ``bisect oracle new`` writes; None when it is not set."""
    env = os.environ.get("BISECTOR_ORACLES_DIR")
    return Path(env).expanduser() if env else None


def oracle_dirs(oracles_dir: Path | None = None) -> list[Path]:
    """Where names are looked up, first match wins: ``oracles_dir`` alone when given (tests, a
    caller with its own set), else ``$BISECTOR_ORACLES_DIR`` and then the bundled oracles."""
    if oracles_dir is not None:
        return [oracles_dir]
    team = team_oracles_dir()
    return [team, bundled_oracles_dir()] if team else [bundled_oracles_dir()]


def oracle_names(oracles_dir: Path | None = None) -> list[str]:
    """The names ``--oracle NAME`` can reach (the files list_oracles would load), sorted; a
    folder that cannot be read gives none."""
    found: set[str] = set()
    for base in oracle_dirs(oracles_dir):
        try:
            found.update(p.stem for p in base.glob("*.py")
                         if not p.name.startswith("_") and p.is_file())
        except OSError:
            continue
    return sorted(found)
