"""What the reports say beside the culprit, on a real bisection of a generated torchlet history:
the project's own words (issue 24 item 4), which prior was used and what it saved (issue 23),
and, for a PyTorch compile failure, how to look inside it at the culprit (issue 24 item 6)."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bisector.app.demo.torchlet import SyntheticHistory
from bisector.app.report import compile_debug
from bisector.app.report.html import render_report
from bisector.app.report.issue import issue_markdown
from bisector.app.report.show import show_markdown
from bisector.cli import start
from bisector.cli.tools import check
from bisector.project.profiles import report_names
from bisector.run.config import request_from
from tests.issue_rules import check as check_issue
from tests.support import bisect, failing_in_ops, forty_commits, invoke, run_cli

pytestmark = [pytest.mark.e2e]

# Fails inside torchlet/ops.py (the evidence of the prior) with an inductor-like message.
COMMAND = failing_in_ops('def lower(v):\n    raise RuntimeError("torch._inductor.exc.'
                         'InductorError: " + str(v))\nlower(v)\n')


@pytest.fixture(scope="module")
def hist(tmp_path_factory: pytest.TempPathFactory) -> SyntheticHistory:
    return forty_commits(tmp_path_factory, "sections")


def _plan(db: Path, hist: SyntheticHistory) -> dict[str, Any]:
    r = run_cli("--db", str(db), "plan", "--repo", str(hist.path), "--good", hist.main[0],
                "--bad", hist.main[-1], "--json", "--", *COMMAND)
    assert r.returncode == 0, r.stderr
    prior: dict[str, Any] = json.loads(r.stdout)["prior"]
    return prior


def _show(db: Path, *args: str) -> str:
    r = invoke("--db", str(db), "show", "1", *args)
    assert r.exit_code == 0, r.stderr
    return r.stdout


def test_reports_name_the_project_the_prior_and_the_compile_debugging(
        home: Path, hist: SyntheticHistory) -> None:
    db = home / "r.db"
    before = _plan(db, hist)  # nothing stored: the evidence cannot be known yet
    assert before["used"] is None
    both = before["projection"]
    assert both["plain"] > 0 and both["prior"]["at_most"] == 8  # ceil(log2 40) + 2
    assert both["prior"]["best"] <= both["prior"]["at_most"]

    d = bisect(db, hist, "--", *COMMAND)
    assert d["culprit"]["sha"] == hist.culprit
    shown = json.loads(_show(db, "--json"))
    assert shown["project"] == {"profile": "torchlet", "name": "torchlet",
                                "package": "torchlet"}
    assert shown["compile_debug"] is None  # not PyTorch: no TORCH_LOGS advice
    prior = shown["prior"]
    assert prior["used"] is True and prior["plain_bound"] == 8
    assert prior["saved"] == prior["plain_probes"] - prior["probes"]

    md = _show(db)
    assert "| torchlet from |" in md and "torch from" not in md
    # The range's size as git counts it (the good endpoint is no commit of the range).
    count = subprocess.run(["git", "-C", str(hist.path), "rev-list", "--count", "--first-parent",
                            f"{hist.main[0]}..{hist.main[-1]}"], capture_output=True,
                           text=True, check=True).stdout.strip()
    assert f"{count} commits (first-parent)" in md and shown["range_commits"] == int(count)
    assert "Prior: auto, from the failure" in md and "for this culprit" in md
    issue = _show(db, "--format", "issue")
    check_issue(issue, [hist.path, home])  # a plain bisection's issue
    assert "torchlet version:" in issue and "PyTorch" not in issue
    # Each probe's output names how its package was obtained (here, built from the commit).
    assert "; torchlet: " in issue
    # How bisector searched and ran is no part of the pasted issue (HTML and JSON have it).
    assert "Prior:" not in issue and "bisector executor" not in issue
    page = _show(db, "--format", "html")
    assert 'id="prior"' in page and "torchlet from" in page and "torch from" not in page

    after = _plan(db, hist)  # the bad endpoint's failure is stored: the prior's own figure
    assert after["used"] is True and isinstance(after["projection"]["prior"], float)

    # The same bisection as a PyTorch one: the failure names inductor, so every report says
    # how to get logs, a minified repro and a trace at the culprit, as lines the CLI takes.
    req = request_from(dict(start.make_context(
        "start", shlex.split(shown["reproduce"])[2:]).params))
    torch_d = {**shown, "project": report_names("pytorch", str(hist.path))}
    torch_d["compile_debug"] = compile_debug.hints(torch_d, req)
    assert torch_d["compile_debug"]["after"] == "aot"
    issue = issue_markdown(torch_d, req)
    for text in (show_markdown(torch_d), issue, render_report(torch_d, issue)):
        assert "Debugging the compile failure" in text
        assert f"bisect check --commit {hist.culprit}" in text
        assert "TORCHDYNAMO_REPRO_AFTER=aot" in text and "tlparse" in text
    for step in torch_d["compile_debug"]["steps"]:
        args = shlex.split(step["command"])
        params = check.make_context("check", args[2:]).params
        assert params["commit"] == hist.culprit and params["command"] == COMMAND
    # The issue's lines are portable: the clone by name, no path of this machine.
    assert str(hist.path) not in issue and "--repo torchlet" in issue
