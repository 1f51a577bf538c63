"""The small truths (issue 50, item 8): what a new user read in one place agrees with what the
same bisection says in another. Each test is one defect a reviewer met, on a real repository
made here (``generate_small``: pure Python, no build) and the real CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bisector.app.demo.small_project import NAME, SmallHistory, generate_small
from tests.support import invoke, run_cli

pytestmark = pytest.mark.integration

F_IS_ONE = f"import {NAME}, sys; sys.exit(0 if {NAME}.f() == 1 else 1)"


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> SmallHistory:
    # Commit i touches src/<name>/mod{i % 5}.py; the culprit (15) breaks f().
    return generate_small(tmp_path_factory.mktemp("truths") / "proj", commits=24, culprit=15)


def _start(db: Path, hist: SmallHistory, *args: str, command: str = F_IS_ONE,
           ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
    r = run_cli("--db", str(db), "start", "--repo", str(hist.path), "--no-confirm", *args,
                "--", "python", "-c", command)
    assert r.returncode in ok, r.stderr
    return r


def _range(db: Path, hist: SmallHistory, *args: str) -> dict[str, object]:
    r = _start(db, hist, "--good", hist.main[0], "--bad", hist.main[-1], "--json", *args)
    data: dict[str, object] = json.loads(r.stdout)
    return data


def _show(db: Path, *args: str) -> str:
    r = invoke("--db", str(db), "show", *args)
    assert r.exit_code == 0, r.stderr
    return r.stdout


# -- (d) a failed start's message is stored and shown by `show`: it never points at itself ---

def test_a_failed_start_points_at_show_once_and_show_not_at_itself(
        home: Path, small: SmallHistory) -> None:
    db = home / "d.db"
    # Every commit is untestable (git's 125): the good endpoint cannot be tested.
    r = _start(db, small, "--good", small.main[0], "--bad", small.main[-1],
               command="import sys; sys.exit(125)", ok=(7,))
    assert "could not be tested" in r.stderr
    assert f"bisect --db {db} show 1" in r.stderr  # the line the user reads once, at the end
    shown = _show(db, "1")
    assert "could not be tested" in shown and "bisect show 1" not in shown, shown
    issue = _show(db, "1", "--format", "issue")
    assert "bisect show 1" not in issue
