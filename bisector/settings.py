"""Where bisector keeps things, and the frozen settings one bisection runs with.

Data (the database, logs) and caches (wheels, virtualenvs) follow the XDG layout through
platformdirs; ``BISECTOR_HOME`` puts everything under one folder, which is what the tests and the
demo do so that they never touch a user's real store.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def _home() -> Path | None:
    h = os.environ.get("BISECTOR_HOME")
    return Path(h).expanduser().resolve() if h else None


def data_dir() -> Path:
    h = _home()
    p = h / "data" if h else Path(platformdirs.user_data_dir("bisector"))
    p.mkdir(parents=True, exist_ok=True)
    return p


def cache_dir() -> Path:
    """Wheels, environments and uv's cache; ``BISECTOR_CACHE_DIR`` shares one across stores."""
    h = _home()
    explicit = os.environ.get("BISECTOR_CACHE_DIR")
    if explicit:
        p = Path(explicit).expanduser().resolve()
    else:
        p = h / "cache" if h else Path(platformdirs.user_cache_dir("bisector"))
    p.mkdir(parents=True, exist_ok=True)
    return p


def logs_dir() -> Path:
    p = data_dir() / "logs"
    p.mkdir(parents=True, exist_ok=True)
    return p
