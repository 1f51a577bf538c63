"""Command oracles (`bisect start ... -- CMD`), oracles with their own #! line, and the
signature rule (`--match`), end to end through the CLI on a generated torchlet history: real
builds, real uv environments, real exported trees."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from bisector.app.demo.torchlet import SyntheticHistory
from tests.support import bisect, copy_world, invoke, run_cli

# Run in the commit's tree (the file is found relative to it) with the environment's python
# (-P: the tree's own torchlet/ source folder must not shadow the installed package).
NORM = ("import pathlib, sys, torchlet; assert pathlib.Path('torchlet/ops.py').is_file(); "
        "assert 'site-packages' in torchlet.__file__, torchlet.__file__; "
        "sys.exit(0 if abs(torchlet.norm([3.0, 4.0]) - 5.0) < 1e-9 else 1)")
COMMAND = ("python", "-P", "-c", NORM)
e2e = pytest.mark.e2e


@pytest.fixture(scope="module")
def hist(world: SyntheticHistory, tmp_path_factory: pytest.TempPathFactory) -> SyntheticHistory:
    return copy_world(world, tmp_path_factory.mktemp("cmd") / "torchlet")


def runs(d: dict[str, object]) -> int:
    n = d["oracle_runs"]
    assert isinstance(n, int)
    return n


@e2e
def test_a_command_finds_the_culprit_and_its_verdicts_are_its_own(
        home: Path, hist: SyntheticHistory, shared_cache: Path) -> None:
    db = home / "b.db"
    d = bisect(db, hist, "--", *COMMAND)
    assert d["culprit"]["sha"] == hist.culprit  # type: ignore[index]
    assert runs(d) > 0
    assert (shared_cache / "trees" / hist.culprit / "torchlet" / "ops.py").is_file()
    # The reproduce line and `show` carry the command, quoted for a shell.
    assert d["reproduce"].endswith("-- " + shlex.join(COMMAND))  # type: ignore[union-attr]
    r = invoke("--db", str(db), "show", "1")
    assert r.exit_code == 0 and shlex.join(COMMAND) in r.stdout
    # The same command in another bisection reuses every verdict ...
    again = bisect(db, hist, "--", *COMMAND)
    assert again["culprit"]["sha"] == hist.culprit and runs(again) == 0  # type: ignore[index]
    # ... a different command none of them.
    other = bisect(db, hist, "--", "python", "-X", "utf8", "-P", "-c", NORM)
    assert other["culprit"]["sha"] == hist.culprit and runs(other) > 0  # type: ignore[index]


@e2e
def test_an_oracle_with_its_own_shebang_runs_as_it_says(home: Path, hist: SyntheticHistory,
                                                        tmp_path: Path) -> None:
    script = tmp_path / "norm_check"
    script.write_text(
        "#!/bin/sh\n# /// script\n# [tool.bisector]\n# timeout = 120\n# ///\n"
        "# python on PATH is the probed environment's\n"
        "exec python -c 'import sys, torchlet; "
        "sys.exit(0 if abs(torchlet.norm([3.0, 4.0]) - 5.0) < 1e-9 else 1)'\n")
    d = bisect(home / "b.db", hist, "--oracle", str(script))
    assert d["culprit"]["sha"] == hist.culprit  # type: ignore[index]


@e2e
def test_a_different_failure_is_a_skip_not_the_culprit(home: Path, hist: SyntheticHistory,
                                                       tmp_path: Path) -> None:
    """Commits 8-12 fail with an ImportError (an older API); the bug is the ValueError the
    culprit plants. Under git's rule (--any-failure) the ImportError is taken for the bug;
    --match names the bug's failure, and the ImportError is a skip."""
    older = {hist.main[i] for i in range(8, 13)}
    check = tmp_path / "check.py"
    check.write_text(
        "import os, torchlet\n"
        f"if os.environ['BISECTOR_COMMIT'] in {sorted(older)!r}:\n"
        "    raise ImportError(\"cannot import name 'new_api' from 'torchlet'\")\n"
        "value = torchlet.norm([3.0, 4.0])\n"
        "if abs(value - 5.0) > 1e-9:\n"
        "    raise ValueError(f'norm is wrong: {value}')\n")
    db = home / "b.db"
    plain = bisect(db, hist, "--any-failure", "--", "python", str(check))
    assert plain["culprit"]["sha"] == hist.main[8]  # type: ignore[index]
    d = bisect(db, hist, "--match", r"ValueError: norm is wrong: \d", "--", "python",
               str(check))
    assert d["culprit"]["sha"] == hist.culprit  # type: ignore[index]
    skips = [p for p in d["probes"] if p["verdict"] == "skip"]  # type: ignore[union-attr]
    assert skips and all(p["sha"] in older and not p["reused"] for p in skips)
    assert skips[0]["reason"] == ("a different failure: ImportError: cannot import name "
                                  "'new_api' from 'torchlet'")
    assert "--match" in str(d["reproduce"])


def test_plan_and_check_take_a_command(home: Path, hist: SyntheticHistory) -> None:
    p = invoke("--db", str(home / "b.db"), "plan", "--repo", str(hist.path), "--good",
               hist.main[0], "--bad", hist.main[-1], "--json", "--", *COMMAND)
    assert p.exit_code == 0, p.stderr
    assert json.loads(p.stdout)["candidates"] == len(hist.main)
    r = run_cli("check", "--commit", hist.culprit, "--repo", str(hist.path), "--profile",
                "torchlet", "--match", "never printed", "--json", "--", *COMMAND)
    data = json.loads(r.stdout)
    assert (r.returncode, data["verdict"]) == (125, "skip")
    assert data["reason"].startswith("a different failure: ")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--oracle", "torchlet_norm", "--", "python", "x.py"], "both name the oracle"),
        (["--match", "(", "--", "python", "x.py"], "--match '(' is not a valid regular "
                                                   "expression"),
        (["--executor", "docker", "--", "python", "x.py"], "needs --executor local"),
        (["--timeout", "5", "--oracle", "torchlet_norm"], "goes with a command oracle"),
        ([], "no oracle"),
    ],
)
def test_command_and_signature_mistakes_are_one_line(home: Path, hist: SyntheticHistory,
                                                     args: list[str], needle: str) -> None:
    db = home / "refused.db"
    r = invoke("--db", str(db), "start", "--repo", str(hist.path), "--good", hist.main[0],
               "--bad", hist.main[-1], *args)
    assert r.exit_code == 2, r.stderr
    assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not db.exists()


def test_another_environments_program_or_none_is_a_skip_naming_the_fix(
        home: Path, hist: SyntheticHistory, tmp_path: Path) -> None:
    """A program found after the probed environment's bin on PATH, whose #! names another
    Python (a developer's venv's pytest), would test that environment's packages at every
    probe: refused. One found nowhere says so, not "abnormal exit 255"."""
    tool = tmp_path / "bin" / "fake-pytest"
    tool.parent.mkdir()
    path = {"PATH": f"{tool.parent}{os.pathsep}{os.environ['PATH']}"}

    def check(*command: str) -> tuple[int, dict[str, str]]:
        r = run_cli("check", "--commit", hist.culprit, "--repo", str(hist.path), "--profile",
                    "torchlet", "--json", "--", *command, env=path)
        return r.returncode, json.loads(r.stdout)

    tool.write_text(f"#!{sys.executable}\nraise SystemExit(0)\n")
    tool.chmod(0o755)
    code, data = check("fake-pytest", "-q")
    assert (code, data["verdict"]) == (125, "skip")
    assert data["reason"].startswith(
        f"fake-pytest is {tool}, a script of another Python ({sys.executable}): it would test "
        f"that environment's packages, not the probed commit; add --dependency"), data["reason"]
    # Through env, PATH finds the probed environment's python first: it runs there.
    tool.write_text("#!/usr/bin/env python3\nimport sys, torchlet\n"
                    "sys.exit(0 if 'site-packages' in torchlet.__file__ else 3)\n")
    assert check("fake-pytest")[1]["verdict"] == "good"
    code, data = check("no-such-tool-here", "x")
    assert (code, data["verdict"]) == (125, "skip")
    assert data["reason"] == (
        "cannot run no-such-tool-here: no such program in the probed environment or on PATH "
        "(if a Python package provides it, add --dependency with that package, e.g. "
        "--dependency no-such-tool-here)")
