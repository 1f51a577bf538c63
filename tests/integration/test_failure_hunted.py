"""The failure hunted (issue 31, item 3), end to end through the CLI on a generated torchlet
history, as measured: commits 18-23 of 40 break an import (``torchlet.nn.functional`` raises
a SyntaxError, fixed at 24), the regression hunted (an AssertionError) lands at 31. git's rule
(``--any-failure``) names a commit in the SyntaxError window; the default names 31 and lists
the window as "failed differently" in every report. Real builds, environments and trees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bisector.app.demo.torchlet import SyntheticHistory, generate
from tests.support import bisect, invoke, one_line_error

pytestmark = [pytest.mark.e2e]

WINDOW = range(18, 24)
# The bug's failure names the environment's own folder (different at every commit) and a
# number: what must not make two runs of the same failure look different.
CHECK = ("import torchlet\n"
         "import torchlet.nn.functional\n"
         "v = torchlet.norm([3.0, 4.0])\n"
         "assert abs(v - 5.0) < 1e-9, f'norm is wrong: {v} (torchlet from {torchlet.__file__})'\n")
COMMAND = ("python", "-P", "-c", CHECK)
# The same check exiting 1 with nothing printed at the bad endpoint: no failure to compare.
SILENT = ("python", "-P", "-c", "import sys, torchlet, torchlet.nn.functional\n"
          "sys.exit(0 if abs(torchlet.norm([3.0, 4.0]) - 5.0) < 1e-9 else 1)\n")


@pytest.fixture(scope="module")
def hist(tmp_path_factory: pytest.TempPathFactory) -> SyntheticHistory:
    return generate(tmp_path_factory.mktemp("hunted") / "torchlet", commits=40, culprit=31,
                    broken=(), release_at=None, side_branch_at=None, seed=31,
                    broken_import=(WINDOW[0], WINDOW[-1] + 1))


def test_a_failure_unlike_the_bad_endpoint_is_skipped_and_listed(home: Path,
                                                                  hist: SyntheticHistory) -> None:
    window = {hist.main[i] for i in WINDOW}
    db = home / "b.db"
    # git's rule, asked for: the SyntaxError is taken for the bug (exit 0, a wrong culprit).
    gits = bisect(db, hist, "--any-failure", "--", *COMMAND)
    assert gits["culprit"]["sha"] in window
    assert gits["hunted"]["rule"] == "any-failure" and gits["failed_differently"] == []
    assert "--any-failure" in gits["reproduce"]

    # The default, on the same store: every run stored above is reused and judged anew.
    d = bisect(db, hist, "--", *COMMAND)
    assert d["culprit"]["sha"] == hist.culprit == hist.main[31]
    assert d["hunted"]["rule"] == "same-failure"
    assert d["hunted"]["failure"].startswith("AssertionError: norm is wrong: ")
    differently = d["failed_differently"]
    assert differently and {r["sha"] for r in differently} <= window
    assert any(r["reused"] for r in differently)  # judged bad by the first, skip here
    assert all(r["failure"].startswith("SyntaxError") for r in differently)
    skipped = [p for p in d["probes"] if p["verdict"] == "skip"]
    assert {p["sha"] for p in skipped} == {r["sha"] for r in differently}
    assert all(p["reason"].startswith("fails differently: SyntaxError") for p in skipped)
    assert "--any-failure" not in d["reproduce"]

    shown = invoke("--db", str(db), "show", "2")
    assert shown.exit_code == 0
    assert "Failure hunted: `AssertionError: norm is wrong: " in shown.stdout
    assert "Failed differently (" in shown.stdout
    assert f"- `{differently[0]['sha'][:12]}`" in shown.stdout
    issue = invoke("--db", str(db), "show", "2", "--format", "issue")
    assert issue.exit_code == 0 and "Failed differently (" in issue.stdout
    assert "`SyntaxError" in issue.stdout
    page = invoke("--db", str(db), "show", "2", "--format", "html")
    assert page.exit_code == 0 and 'id="failed-differently"' in page.stdout
    as_json = json.loads(invoke("--db", str(db), "show", "2", "--json").stdout)
    assert as_json["failed_differently"] == differently


def test_an_oracle_that_prints_no_failure_keeps_the_exit_code_rule(
        home: Path, hist: SyntheticHistory) -> None:
    d = bisect(home / "b.db", hist, "--", *SILENT)
    assert d["culprit"]["sha"] in {hist.main[i] for i in WINDOW}
    assert d["hunted"] == {"rule": "same-failure", "failure": None}
    assert d["failed_differently"] == []


def test_match_and_any_failure_together_are_one_line(home: Path,
                                                     hist: SyntheticHistory) -> None:
    r = invoke("--db", str(home / "b.db"), "start", "--repo", str(hist.path), "--good",
               hist.main[0], "--bad", hist.main[-1], "--match", "AssertionError",
               "--any-failure", "--", *COMMAND)
    one_line_error(r, "--match and --any-failure both say which failure is the bug", 2)
    assert not (home / "b.db").exists() or invoke("--db", str(home / "b.db"), "list",
                                                  "--json").stdout.strip() in ("[]", "")
