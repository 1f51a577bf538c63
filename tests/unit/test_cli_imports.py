"""The CLI's import graph: `bisect --help`, `bisect list` on an empty store and a TAB
completion load none of the heavy libraries (their cost is measured in `make bench`, section
12; this guards the cause, not the time). Each case runs in a fresh interpreter, which then
lists what it imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("sqlalchemy", "alembic", "rich", "git", "cattrs", "httpx", "docker", "packaging",
         "platformdirs", "jinja2", "starlette", "scipy")

PRELUDE = """
import json, os, sys
def done():
    print("MODULES " + json.dumps(sorted(sys.modules)))
"""


def loaded(body: str, home: Path, **env: str) -> set[str]:
    """The top-level packages imported by ``body`` in a fresh interpreter with an empty
    BISECTOR_HOME (no store, no bisector.toml)."""
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("BISECTOR_", "_BISECT_", "COMP_"))}
    r = subprocess.run([sys.executable, "-c", PRELUDE + body], capture_output=True, text=True,
                       env={**clean, "BISECTOR_HOME": str(home), "PYTHONPATH": str(ROOT),
                            **env}, cwd=home, timeout=120, check=False)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("MODULES ")), None)
    assert line is not None, (r.returncode, r.stdout, r.stderr)
    return {m.split(".")[0] for m in json.loads(line.removeprefix("MODULES "))}


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in HEAVY if m in modules)


def test_importing_the_cli_loads_no_heavy_library(tmp_path: Path) -> None:
    assert heavy(loaded("import bisector.cli\ndone()", tmp_path)) == []


def test_help_loads_no_heavy_library(tmp_path: Path) -> None:
    mods = loaded("from bisector.cli import main\nmain(['--help'])\ndone()", tmp_path)
    assert heavy(mods) == [] and "bisector" in mods


def test_list_on_an_empty_store_loads_no_store_code_and_makes_no_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    mods = loaded("from bisector.cli import main\nmain(['list'])\ndone()", home)
    assert heavy(mods) == []
    assert list(home.iterdir()) == []  # no database, not even the data folder


def test_completion_loads_no_heavy_library(tmp_path: Path) -> None:
    body = ("from bisector.cli import main\ntry:\n    main(prog_name='bisect')\n"
            "except SystemExit:\n    done()\n")
    mods = loaded(body, tmp_path, _BISECT_COMPLETE="bash_complete", COMP_WORDS="bisect sh",
                  COMP_CWORD="1")
    assert heavy(mods) == []


def test_the_check_sees_a_heavy_import(tmp_path: Path) -> None:
    assert heavy(loaded("import bisector.store.db, alembic\ndone()", tmp_path)) == [
        "alembic", "sqlalchemy"]


def test_a_store_is_made_and_opened_without_alembic(tmp_path: Path) -> None:
    """A new store gets its schema in one step and one at head is only read: Alembic (a
    fifth of a second) is loaded only to migrate an older store."""
    db = tmp_path / "b.db"
    code = (f"from bisector.store.db import open_store\nopen_store({str(db)!r})\n"
            f"open_store({str(db)!r})\ndone()")
    assert heavy(loaded(code, tmp_path)) == ["sqlalchemy"]


def test_the_watch_loads_no_changepoint_library_until_a_series_is_long_enough(
        tmp_path: Path) -> None:
    """Every `bisect tick` imports the watch (and so core/changepoint), but most series are too
    short for a step: ruptures and SciPy's stats (a second of CPU a tick) wait for one."""
    mods = loaded("import bisector.app.watch.tick\n"
                  "from bisector.core import changepoint\n"
                  "assert changepoint.detect([1.0] * 5, 0.1) == []\ndone()", tmp_path)
    assert not {"scipy", "ruptures"} & mods, sorted({"scipy", "ruptures"} & mods)
    long = loaded("from bisector.core import changepoint\n"
                  "changepoint.detect([1.0, 1.1, 0.9, 1.0, 2.0, 2.1, 1.9, 2.0], 0.1)\ndone()",
                  tmp_path)
    assert {"scipy", "ruptures"} <= long
