"""The small truths (issue 50, item 8): what a new user read in one place agrees with what the
same bisection says in another. Each test is one defect a reviewer met, on a real repository
made here (``generate_small``: pure Python, no build) and the real CLI."""

from __future__ import annotations

import json
import re
import shutil
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


# -- (a) counts: one number for the range, and reuse that is reuse ---------------------------

def _one(pattern: str, text: str) -> int:
    # in-process commands share this worker's console: one an earlier test made a terminal
    # prints bold numbers; the count is what is read
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    found = re.findall(pattern, text, re.M)
    assert len(set(found)) == 1, (pattern, found, text)
    return int(found[0])


def test_path_plan_and_show_count_the_range_alike(home: Path, small: SmallHistory) -> None:
    db, m = home / "a.db", small.main
    path = f"src/{NAME}/mod0.py"  # touched by commits 0, 5, 10, 15, 20
    d = _range(db, small, "--path", path)
    shown = _show(db, str(d["id"]))
    # show's range line, the --path note and plan: one count of candidates.
    in_range = _one(r"\), (\d+) commits \(first-parent\)", shown)
    in_note = _one(r"they and the bad endpoint, (\d+) commits, are the candidates", shown)
    assert "4 of the 22 commits between the endpoints touch it" in shown
    plan = run_cli("--db", str(db), "plan", "--repo", str(small.path), "--good", m[0],
                   "--bad", m[-1], "--path", path, "--", "python", "-c", F_IS_ONE)
    assert plan.returncode == 0, plan.stderr
    in_plan = _one(r"^(\d+) candidate commits", plan.stdout)
    assert in_range == in_note == in_plan == 5, (in_range, in_note, in_plan)
    # Without --path: plan's count is git's (rev-list --count GOOD..BAD), as show's is.
    whole = run_cli("plan", "--repo", str(small.path), "--good", m[0], "--bad", m[-1],
                    "--json", "--", "python", "-c", F_IS_ONE)
    count = subprocess.run(["git", "-C", str(small.path), "rev-list", "--count",
                            "--first-parent", f"{m[0]}..{m[-1]}"], capture_output=True,
                           text=True, check=True).stdout.strip()
    assert json.loads(whole.stdout)["range_commits"] == int(count) == len(m) - 1


def test_skip_marks_are_no_reused_verdicts_and_reuse_saves_no_probe(
        home: Path, small: SmallHistory) -> None:
    db, m = home / "s.db", small.main
    first = _range(db, small, "--skip", m[3])
    assert first["oracle_runs"] > 0  # type: ignore[operator]
    words = f"{first['oracle_runs']} oracle runs, 0 reused verdicts, 1 skipped up front (--skip)"
    assert f"- Probes: {len(first['probes'])} ({words})" in _show(db, "1")  # type: ignore[arg-type]
    assert f"probes ({words})." in _show(db, "1", "--format", "issue")
    assert words in _show(db, "1", "--format", "html")
    # The same range again: every verdict stored, no run made. The search is plain bisection
    # (the output names no file), so against plain bisection from the same verdicts it saved
    # nothing; "saved 6 probes" with 0 runs was reuse counted as the prior's.
    again = _range(db, small)
    assert again["oracle_runs"] == 0
    prior = _show(db, str(again["id"]))
    assert "this bisection: 0 oracle runs, plain bisection 0 for this culprit" in prior
    assert "saved none" in prior and not re.search(r"saved \d", prior), prior


# -- (b) --from-log: the range is shown by the refs the log started from ----------------------

def test_from_log_shows_the_log_s_refs_and_searches_its_commits(
        home: Path, small: SmallHistory, tmp_path: Path) -> None:
    repo, m = tmp_path / "proj", small.main
    shutil.copytree(small.path, repo, symlinks=True)

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), "-c", "user.name=V", "-c",
                               "user.email=v@example.com", *args], check=True,
                              capture_output=True, text=True).stdout

    branch = git("branch", "--show-current").strip()
    git("tag", "truths-good", m[0])
    git("bisect", "start", "--no-checkout", branch, "truths-good")
    git("bisect", "good", m[5])
    log = git("bisect", "log")
    git("bisect", "reset")
    assert f"git bisect start '--no-checkout' '{branch}' 'truths-good'" in log
    (tmp_path / "git.log").write_text(log)
    # The branch moves on after the log was written: the search stays where the log began.
    (repo / "later.txt").write_text("later\n")
    git("add", "later.txt")
    git("commit", "-qm", "later")
    db = home / "b.db"
    r = run_cli("--db", str(db), "start", "--repo", str(repo), "--from-log",
                str(tmp_path / "git.log"), "--no-confirm", "--json", "--", "python", "-c",
                F_IS_ONE)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert (d["good"]["ref"], d["bad"]["ref"]) == ("truths-good", branch)
    assert (d["good"]["sha"], d["bad"]["sha"]) == (m[0], m[-1])
    assert d["culprit"]["sha"] == small.culprit
    shown = _show(db, str(d["id"]))
    assert (f"- Range: `truths-good` (`{m[0][:12]}`) .. `{branch}` (`{m[-1][:12]}`)"
            in shown), shown
    listed = invoke("--db", str(db), "list")
    assert f"truths-good..{branch}" in listed.stdout, listed.stdout
    # The reproduce line keeps the commits: the branch has moved since.
    assert f"--good {m[0]} --bad {m[-1]}" in d["reproduce"]


# -- (c) the HTML report, the file to mail, keeps no path of this machine --------------------

# Prints where the package is installed, where the oracle runs and the home folder: paths of
# this machine, which the issue text rewrites.
WHERE = (f"import os, sys, {NAME}; print('installed at', {NAME}.__file__); "
         f"print('ran in', os.getcwd()); print('home', os.path.expanduser('~')); "
         f"sys.exit(0 if {NAME}.f() == 1 else 1)")


def test_the_html_report_rewrites_local_paths_as_the_issue_does(
        home: Path, small: SmallHistory, tmp_path: Path) -> None:
    db = home / "c.db"
    r = _start(db, small, "--good", small.main[0], "--bad", small.main[-1], "--json",
               command=WHERE)
    d = json.loads(r.stdout)
    cache = Path(subprocess.run(["sh", "-c", "echo $BISECTOR_CACHE_DIR"], capture_output=True,
                                text=True, check=True).stdout.strip())
    local = [p for p in (small.path, home, cache, Path.home()) if str(p) not in ("", "/")]
    tails = "\n".join(p["output_tail"] for p in d["probes"])
    assert any(str(p) in tails for p in local), tails  # the probes did print them
    issue = _show(db, "1", "--format", "issue")
    page = _show(db, "1", "--format", "html")
    written = list((home / "data" / "reports").glob("bisection-1-*.html"))
    assert len(written) == 1  # the file written when the bisection ended
    for text in (issue, page, written[0].read_text()):
        for p in local:
            assert f"{p}/" not in text and f"{p}<" not in text, (p, text[:2000])
    # The outputs are still there, rewritten as in the issue text.
    assert "installed at" in page and ("&lt;bisector-cache&gt;" in page or "site-packages"
                                       in page)


# -- (e) commands to type carry --env, not what the machine's image set ----------------------

SEES = (f"import os, sys, {NAME}; "
        f"assert os.environ.get('TORCH_SYMM_MEM_DISABLE_MULTICAST') == '1'; "
        f"assert os.environ.get('TORCH_LOGS') == 'recompiles'; "
        f"sys.exit(0 if {NAME}.f() == 1 else 1)")


def _blocks(markdown: str) -> list[str]:
    return re.findall(r"^```[^\n]*\n(.*?)^```", markdown, flags=re.S | re.M)


def test_suggested_commands_carry_env_given_and_name_the_inherited_as_facts(
        home: Path, small: SmallHistory) -> None:
    db = home / "e.db"
    # What an H200 box's image exports; the user typed only --env TORCH_LOGS=recompiles.
    r = run_cli("--db", str(db), "start", "--repo", str(small.path), "--good", small.main[0],
                "--bad", small.main[-1], "--no-confirm", "--json", "--env",
                "TORCH_LOGS=recompiles", "--", "python", "-c", SEES,
                env={"TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"})
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["culprit"]["sha"] == small.culprit  # the oracle saw both variables
    assert d["environment"]["executor"]["oracle_env"] == {
        "TORCH_LOGS": "recompiles", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}  # keyed, recorded
    assert "--env TORCH_LOGS=recompiles" in d["reproduce"]
    assert "MULTICAST=1" not in d["reproduce"]
    had = "The runs also had `TORCH_SYMM_MEM_DISABLE_MULTICAST=1`"
    shown = _show(db, "1")
    assert had in shown
    issue = _show(db, "1", "--format", "issue")
    commands, versions = issue.split("### Versions")
    assert had in commands and "TORCH_SYMM_MEM_DISABLE_MULTICAST=1" in versions
    typed = _blocks(commands)
    assert any("bisect start" in b for b in typed) and any("TORCH_LOGS=recompiles" in b
                                                           for b in typed)
    assert not [b for b in typed if "MULTICAST=1" in b], typed
