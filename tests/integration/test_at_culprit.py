"""What runs at the culprit after the answer (run/at_culprit.py), end to end on a pure-Python
``torch`` whose history breaks one lowering (tests/compile_world.py): torch's compiler
bisector names the lowering and the node, collect_env gives the versions block, both are
stored once per environment and shown in show, the issue, the HTML report and the JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.compile_world import CompileWorld, make_compile_world
from tests.issue_rules import check
from tests.support import cli, run_cli

PYTHON = sys.executable


def _start(db: Path, w: CompileWorld, *extra: str) -> dict[str, Any]:
    r = run_cli("--db", str(db), "start", "--repo", str(w.path), "--good", w.good, "--bad",
                w.bad, "--oracle", str(w.oracle), "--python", PYTHON, "--offline", "--json",
                *extra)
    assert r.returncode == 0, r.stderr
    data: dict[str, Any] = json.loads(r.stdout)
    return data


@pytest.mark.e2e
def test_the_compiler_pass_and_the_environment_at_the_culprit(home: Path,
                                                              tmp_path: Path) -> None:
    w = make_compile_world(tmp_path)
    db = tmp_path / "b.db"
    d = _start(db, w)
    assert d["culprit"]["sha"] == w.culprit
    c = d["result"]["compiler_bisector"]
    assert c["available"] and c["sha"] == w.culprit and not c["reused"]
    assert c["found"]["backend"] == "inductor" and c["found"]["subsystem"] == "lowerings"
    # The third lowering of the graph (0-based: 2) is argmin's; the last run named its node.
    assert c["found"]["bisect_number"] == 2 and c["found"]["kind"] == "bisect"
    assert c["found"]["node"] == {"node": "argmin", "target": "aten.argmin.default",
                                  "op": "call_function"}
    assert c["found"]["check_exit"] == 1  # with that application last on, it still fails
    assert c["runs"] == 7  # 3 backends, lowerings off, 3 halvings of [0, 8]
    env = d["result"]["environment_report"]
    assert env["text"].startswith("PyTorch version: 2.99.0") and "overlay" in env["obtained"]
    # Stored as runs of their own, no probes of the bisection.
    assert all(p["sha"] != w.culprit or p["verdict"] == "bad" for p in d["probes"])

    issue = cli(db, "show", str(d["id"]), "--format", "issue")
    assert "`inductor / lowerings / aten.argmin.default`, application 2 of the lowerings" \
        in issue
    assert ("TORCH_BISECT_BACKEND=inductor TORCH_BISECT_SUBSYSTEM=lowerings "
            "TORCH_BISECT_MAX=1 python ./argmin_compiled.py  # passes") in issue
    assert "python -m torch._inductor.compiler_bisector run python ./argmin_compiled.py" \
        in issue
    versions = issue.split("### Versions", 1)[1]
    assert "Is debug build: False" in versions  # collect_env's own block, not imitated
    assert "How the culprit's torch was installed: overlay of" in versions
    assert str(tmp_path) not in issue
    check(issue, [tmp_path])
    page = cli(db, "show", str(d["id"]), "--format", "html")
    assert 'id="compiler-pass"' in page and "inductor / lowerings / aten.argmin.default" in page
    assert "application 2 of the lowerings" in cli(db, "show", str(d["id"]))

    # A second bisection of the same range: both are found stored (once per environment).
    again = _start(db, w, "--no-confirm")
    assert again["result"]["compiler_bisector"]["reused"]
    assert again["result"]["environment_report"]["reused"]
    assert again["result"]["compiler_bisector"]["found"] == c["found"]


@pytest.mark.e2e
def test_no_compiler_bisector_is_a_line_and_the_option_turns_it_off(home: Path,
                                                                    tmp_path: Path) -> None:
    w = make_compile_world(tmp_path, bisector=False)
    db = tmp_path / "b.db"
    d = _start(db, w, "--no-confirm")
    c = d["result"]["compiler_bisector"]
    assert c["available"] is False and "found" not in c
    issue = cli(db, "show", str(d["id"]), "--format", "issue")
    assert "has no `torch._inductor.compiler_bisector`; it was not run" in issue
    assert "Replay it" not in issue
    off = _start(tmp_path / "off.db", w, "--no-confirm", "--no-compiler-bisect")
    assert "compiler_bisector" not in off["result"]
    assert off["result"]["environment_report"]["text"]  # collect_env still runs


@pytest.mark.e2e
def test_a_command_oracle_is_bisected_by_the_compiler_bisector_in_its_tree(
        home: Path, tmp_path: Path) -> None:
    """A command runs in the commit's tree; the helper and torch's compiler bisector import
    the environment's installed torch, never the tree's (a real PyTorch tree's torch/ has no
    compiled parts)."""
    w = make_compile_world(tmp_path)
    r = run_cli("--db", str(tmp_path / "c.db"), "start", "--repo", str(w.path), "--good",
                w.good, "--bad", w.bad, "--python", PYTHON, "--offline", "--no-confirm",
                "--json", "--", "python", str(w.oracle))
    assert r.returncode == 0, r.stderr
    c = json.loads(r.stdout)["result"]["compiler_bisector"]
    assert c["found"]["node"]["target"] == "aten.argmin.default", c
