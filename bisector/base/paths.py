"""Where bisector keeps things: its data and caches, and where its own package files lie.

Data (the database, logs) and caches (wheels, virtualenvs) follow the XDG layout through
platformdirs; ``BISECTOR_HOME`` puts everything under one folder, which is what the tests and the
demo do so that they never touch a user's real store.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bisector.base import defaults
from bisector.base.errors import UsageError

# The installed package's folder: the bundled oracles and migrations sit beside it in a
# checkout, and inside it (``_oracles``, ``_migrations``) in a wheel; the scripts run by path
# (``infra/scripts``) are here in both.
PACKAGE_DIR = Path(__file__).resolve().parent.parent
SCRIPTS_DIR = PACKAGE_DIR / "infra" / "scripts"
FACTS_SCRIPT = SCRIPTS_DIR / "facts_probe.py"
REAPER_SCRIPT = SCRIPTS_DIR / "reaper.py"


def _home() -> Path | None:
    h = os.environ.get("BISECTOR_HOME")
    return Path(h).expanduser().resolve() if h else None


def data_dir(create: bool = True) -> Path:
    """The database, logs, reports; ``create=False`` only names it (a query that finds no
    store leaves no folder behind)."""
    h = _home()
    if h:
        p = h / "data"
    else:
        # lazy: `bisect --help` and completion never need the user's folders
        import platformdirs

        p = Path(platformdirs.user_data_dir("bisector"))
    if create:
        p.mkdir(parents=True, exist_ok=True)
    return p


def cache_dir() -> Path:
    """Wheels, environments, uv's and ccache's caches; ``BISECTOR_CACHE_DIR`` shares one
    across stores."""
    h = _home()
    explicit = os.environ.get("BISECTOR_CACHE_DIR")
    if explicit:
        p = Path(explicit).expanduser().resolve()
    elif h:
        p = h / "cache"
    else:
        # lazy: `bisect --help` and completion never need the user's folders
        import platformdirs

        p = Path(platformdirs.user_cache_dir("bisector"))
    p.mkdir(parents=True, exist_ok=True)
    return p


def logs_dir() -> Path:
    p = data_dir() / "logs"
    p.mkdir(parents=True, exist_ok=True)
    return p


def uv_cache_dir() -> Path:
    """uv's cache, for environment installs and host builds alike: one filesystem with the
    environments (hardlinks), and inside the folder ``bisect du`` and ``bisect gc`` look at."""
    return cache_dir() / "uv"


def ccache_dir() -> Path:
    return cache_dir() / "ccache"


def host_build_env() -> dict[str, str]:
    """What a build on this host adds to its environment so that its caches land in ours:
    uv's always; ccache's unless the user named a ``CCACHE_DIR`` (then it is theirs, shared
    with their other builds, and capped by their own ccache settings)."""
    env = {"UV_CACHE_DIR": str(uv_cache_dir())}
    if not os.environ.get("CCACHE_DIR"):
        env["CCACHE_DIR"] = str(ccache_dir())
        env["CCACHE_MAXSIZE"] = os.environ.get("CCACHE_MAXSIZE") or defaults.CCACHE_MAXSIZE
    return env


def user_config_file() -> Path:
    """The user's ``bisector.toml``: ``$BISECTOR_CONFIG``, else in ``$BISECTOR_HOME/config``,
    else in the user config folder. Only this file may name where data goes (a repository's
    never does)."""
    explicit = os.environ.get("BISECTOR_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    home = os.environ.get("BISECTOR_HOME")
    if home:
        return Path(home).expanduser() / "config" / "bisector.toml"
    # lazy: with BISECTOR_HOME (tests, the demo, the bench) `bisect` never loads platformdirs
    import platformdirs

    return Path(platformdirs.user_config_dir("bisector")) / "bisector.toml"


def read_toml(path: Path, fix: str, content: bytes | None = None) -> dict[str, Any]:
    """A configuration file's tables (from ``content`` when the caller already read the
    file, as trust does: the bytes checked are the bytes parsed); a file that cannot be read
    or parsed is one line naming it and ``fix`` (what the user can do about it), as every bad
    input is."""
    # lazy: only a command that finds a configuration file parses TOML
    import tomllib

    try:
        raw = path.read_bytes() if content is None else content
        return tomllib.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise UsageError(f"{path}: not a readable TOML file ({e}); {fix}") from None
