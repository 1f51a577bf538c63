"""Which optional part of bisector a missing module belongs to, for a one-line error.

The core install (``pip install bisector``) bisects with deterministic, command and manual
oracles, locally or in Docker, on SQLite. Each heavier dependency serves one feature and is an
extra: ``[perf]`` (numpy, scipy, ruptures: flaky and performance oracles, the watch's change
points), ``[web]`` (starlette, uvicorn: ``bisect serve``), ``[postgres]`` (psycopg,
procrastinate: a shared store and workers), ``[s3]`` (boto3: a team's object store of
wheels), ``[all]`` all of them. A command that reaches a
missing one says which extra to install instead of printing a traceback.
"""

from __future__ import annotations

import importlib.util

from bisector.base.errors import UsageError

EXTRA_OF = {
    "numpy": ("perf", "flaky and performance oracles and the watch's change points"),
    "scipy": ("perf", "flaky and performance oracles and the watch's change points"),
    "ruptures": ("perf", "the watch's change points"),
    "starlette": ("web", "bisect serve"),
    "uvicorn": ("web", "bisect serve"),
    "psycopg": ("postgres", "a PostgreSQL store and workers"),
    "procrastinate": ("postgres", "a PostgreSQL store and workers"),
    "boto3": ("s3", "a team's object store of wheels (--artifacts)"),
    "botocore": ("s3", "a team's object store of wheels (--artifacts)"),
}


def missing_extra(e: ModuleNotFoundError) -> str | None:
    """The one-line message for a module of an extra that is not installed, else None (a
    missing module of anything else is a bug and keeps its traceback)."""
    top = (e.name or "").split(".")[0]
    if top not in EXTRA_OF:
        return None
    extra, serves = EXTRA_OF[top]
    return (f"this needs bisector's [{extra}] extra, for {serves} ({top} is not installed "
            f"here): pip install 'bisector[{extra}]' (or uv tool install 'bisector[{extra}]')")


def require(extra: str) -> None:
    """Refuse now, before anything is stored, when ``extra``'s modules are not installed (a
    flaky or performance bisection would otherwise stop at its first decision)."""
    for module, (name, _) in EXTRA_OF.items():
        if name == extra and importlib.util.find_spec(module) is None:
            needed = missing_extra(ModuleNotFoundError(name=module))
            assert needed is not None
            raise UsageError(needed)
