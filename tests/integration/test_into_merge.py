"""Into the merge: a first-parent culprit that is a merge is searched inside, and the commit
that did it is named beside the merge (issue 31, item 4). Command oracles on small
repositories made here: a pure-Python package whose ``VALUE`` decides."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bisector.app.list_rows import list_data
from bisector.app.report.html import timeline
from bisector.store.db import open_store
from bisector.store.queries import Filters
from tests.support import BISECT, ROOT, invoke, run_cli
from tests.support import git as run_git

ORACLE = ("python", "-c", "import pkg, sys; sys.exit(0 if pkg.VALUE == 'old' else 1)")


class Repo:
    """A package whose ``VALUE`` the oracle reads, committed on branches by name."""

    def __init__(self, path: Path) -> None:
        self.path = path
        (path / "src" / "pkg").mkdir(parents=True)
        (path / "pyproject.toml").write_text(
            '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = '
            '"setuptools.build_meta"\n\n[project]\nname = "pkg"\nversion = "1.0"\n')
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        return run_git(self.path, *args)

    def commit(self, message: str, value: str | None = None) -> str:
        if value is not None:
            (self.path / "src" / "pkg" / "__init__.py").write_text(f"VALUE = {value!r}\n")
        (self.path / f"{message.replace(' ', '-')}.txt").write_text(message)  # never empty
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")

    def merge(self, branch: str, message: str, value: str | None = None) -> str:
        self.git("merge", "-q", "--no-ff", "--no-commit", branch)
        if value is not None:  # what the merge itself changes (a conflict resolution)
            (self.path / "src" / "pkg" / "__init__.py").write_text(f"VALUE = {value!r}\n")
            self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")


def side_branch(tmp_path: Path, breaks: int | None = 2, merge_value: str | None = None,
                side_merges_main: bool = False) -> tuple[Repo, dict[str, str]]:
    """main: good, c1, c2, the merge of a 3-commit side branch forked at c1, after. Side
    commit ``breaks`` (1-3) makes VALUE new; ``merge_value`` is what the merge itself sets;
    ``side_merges_main``: the side merges c2 in last, so its tip has the merge's tree."""
    r = Repo(tmp_path / "repo")
    c: dict[str, str] = {"good": r.commit("good", "old"), "c1": r.commit("c1")}
    r.git("checkout", "-q", "-b", "side")
    for i in (1, 2, 3):
        c[f"s{i}"] = r.commit(f"side {i}", "new" if i == breaks else None)
    r.git("checkout", "-q", "main")
    c["c2"] = r.commit("c2")
    if side_merges_main:
        r.git("checkout", "-q", "side")
        c["s4"] = r.merge("main", "side takes main in")
        r.git("checkout", "-q", "main")
    c["merge"] = r.merge("side", "Merge the side branch (#7)", merge_value)
    c["after"] = r.commit("after")
    return r, c


def start(db: Path, r: Repo, c: dict[str, str], *extra: str) -> dict[str, object]:
    p = run_cli("--db", str(db), "start", "--repo", str(r.path), "--good", c["good"], "--bad",
                c["after"], "--no-confirm", "--json", *extra, "--", *ORACLE)
    assert p.returncode == 0, p.stderr
    d: dict[str, object] = json.loads(p.stdout)
    return d


def inside(d: dict[str, object]) -> dict[str, object]:
    result = d["result"]
    assert isinstance(result, dict)
    found: dict[str, object] = result["into_merge"]
    return found


def test_the_commit_inside_the_merge_is_named_beside_it(home: Path, tmp_path: Path) -> None:
    r, c = side_branch(tmp_path)
    db = home / "b.db"
    d = start(db, r, c)
    assert d["culprit"]["sha"] == c["merge"]  # type: ignore[index]
    found = inside(d)
    assert (found["kind"], found["sha"], found["commits"]) == ("culprit", c["s2"], 3)
    assert (found["subject"], found["author"]) == ("side 2", "V")  # kept with the answer
    # Beside the culprit: its subject, author and PR, in JSON and every report.
    assert d["inside"]["sha"] == c["s2"] and d["inside"]["subject"] == "side 2"  # type: ignore[index]
    # The merge's first parent and the merge were judged by the walk: reused, not run again.
    inner = [p for p in d["probes"] if p["position"] >= d["candidates"]]  # type: ignore[attr-defined,index,operator]
    assert {p["sha"] for p in inner if p["reused"]} == {c["c2"], c["merge"]}
    assert {p["sha"] for p in inner if not p["reused"]} <= {c["s1"], c["s2"], c["s3"]}
    md = invoke("--db", str(db), "show", "1").stdout
    assert f"Inside the merge: `{c['s2']}`" in md and "side 2" in md
    issue = invoke("--db", str(db), "show", "1", "--format", "issue").stdout
    assert (f"It is a merge; the commit inside it that did it is `{c['s2']}` (side 2) by V."
            in issue)
    assert f"Oracle output at the commit inside the merge `{c['s2'][:12]}` (bad" in issue
    html = invoke("--db", str(db), "show", "1", "--format", "html").stdout
    assert c["s2"] in html
    listed = json.loads(invoke("--db", str(db), "list", "--json").stdout)
    assert listed[0]["culprit"] == c["merge"] and listed[0]["inside"] == c["s2"]
    wide = invoke("--db", str(db), "list", "--wide").stdout
    assert f"{c['merge']} > {c['s2']}" in wide
    # The web view's culprit filter finds it by the commit inside too.
    store = open_store(str(db), create=False, reads_only=True)
    assert [x["id"] for x in list_data(store, Filters(culprit=c["s2"][:9]))] == [1]
    log = invoke("--db", str(db), "log", "1").stdout
    assert f"git bisect bad {c['s2']}" not in log and f"# inside the merge: [{c['s2']}]" in log
    # The same range again reuses every verdict, inside the merge too.
    again = start(db, r, c)
    assert inside(again)["sha"] == c["s2"] and again["oracle_runs"] == 0
    # The clone gone (the store outlives clones): the commit inside is still described.
    r.path.rename(tmp_path / "moved")
    md = invoke("--db", str(db), "show", "1").stdout
    assert f"Inside the merge: `{c['s2']}`" in md and "- **side 2**" in md


def test_stopping_at_the_merge_and_the_ancestry_path(home: Path, tmp_path: Path) -> None:
    r, c = side_branch(tmp_path)
    d = start(home / "b.db", r, c, "--no-into-merge")
    assert d["culprit"]["sha"] == c["merge"]  # type: ignore[index]
    assert "into_merge" not in d["result"] and d["inside"] is None  # type: ignore[operator]
    said = [n for n in d["notes"] if "brings 3 commit(s)" in n]  # type: ignore[attr-defined]
    assert said == [f"the culprit {c['merge'][:12]} is a merge that brings 3 commit(s), not "
                    f"searched inside (--no-into-merge; without it the search goes on among "
                    f"them); to look there: bisect start --good {c['c1'][:12]} --bad "
                    f"{c['s3'][:12]}"]
    assert "--no-into-merge" in str(d["reproduce"])
    # --ancestry-path walks the side itself: the commit is the culprit, nothing beside it.
    a = start(home / "b.db", r, c, "--ancestry-path")
    assert a["culprit"]["sha"] == c["s2"] and "into_merge" not in a["result"]  # type: ignore[index,operator]


def test_skips_inside_the_merge_leave_suspects_beside_it(home: Path, tmp_path: Path) -> None:
    """The commit that did it cannot be tested: the answer stays the merge, and the suspects
    inside it are named, not a commit."""
    r, c = side_branch(tmp_path)
    untestable = (f"import os, sys, pkg\n"
                  f"if os.environ['BISECTOR_COMMIT'] == {c['s2']!r}: sys.exit(125)\n"
                  f"sys.exit(0 if pkg.VALUE == 'old' else 1)\n")
    p = run_cli("--db", str(home / "b.db"), "start", "--repo", str(r.path), "--good",
                c["good"], "--bad", c["after"], "--no-confirm", "--json", "--", "python",
                "-c", untestable)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["state"] == "done" and d["culprit"]["sha"] == c["merge"]
    found = inside(d)
    assert (found["kind"], found["suspects"]) == ("window", [c["s2"], c["s3"]])
    assert d["inside"] is None
    md = invoke("--db", str(home / "b.db"), "show", "1").stdout
    assert ("Inside the merge: inside the merge skipped commits hide the first bad commit: "
            "it is one of 2 suspects") in md


def test_a_flaky_oracle_stops_at_the_merge_and_says_how_to_look(home: Path,
                                                                 tmp_path: Path) -> None:
    r, c = side_branch(tmp_path)
    oracle = tmp_path / "flaky_value.py"
    oracle.write_text("# /// script\n# [tool.bisector]\n# flaky = true\n# ///\n"
                      "import sys, pkg\nsys.exit(0 if pkg.VALUE == 'old' else 1)\n")
    p = run_cli("--db", str(home / "b.db"), "start", "--repo", str(r.path), "--good",
                c["good"], "--bad", c["after"], "--no-confirm", "--json", "--oracle",
                str(oracle))
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["culprit"]["sha"] == c["merge"] and "into_merge" not in d["result"]
    assert [n for n in d["notes"] if "is a merge that brings" in n] == [
        f"the culprit {c['merge'][:12]} is a merge that brings 3 commit(s), not searched "
        f"inside (a flaky or performance oracle's search stops at the merge); to look there: "
        f"bisect start --good {c['c1'][:12]} --bad {c['s3'][:12]}"]


def test_a_merge_whose_second_parent_is_good_says_so(home: Path, tmp_path: Path) -> None:
    """Every commit the side brings is good; the merge's own change (a conflict resolution)
    breaks it: no commit inside is named."""
    r, c = side_branch(tmp_path, breaks=None, merge_value="new")
    d = start(home / "b.db", r, c)
    found = inside(d)
    assert found["kind"] == "merge" and "sha" not in found
    assert str(found["said"]).startswith(f"the merge itself: its second parent "
                                         f"{c['s3'][:12]} is good")
    md = invoke("--db", str(home / "b.db"), "show", "1").stdout
    assert "the merge itself: its second parent" in md


def test_verdicts_that_contradict_inside_the_merge_name_no_commit(home: Path,
                                                                  tmp_path: Path) -> None:
    """The side breaks, mends and breaks again; three probes at once see a bad commit before a
    good one: the search inside cannot decide, and says so instead of naming one."""
    r = Repo(tmp_path / "repo")
    c = {"good": r.commit("good", "old"), "c1": r.commit("c1")}
    r.git("checkout", "-q", "-b", "side")
    for i, value in ((1, "new"), (2, "old"), (3, "new")):
        c[f"s{i}"] = r.commit(f"side {i}", value)
    r.git("checkout", "-q", "main")
    c["c2"] = r.commit("c2")
    c["merge"] = r.merge("side", "Merge the side branch")
    c["after"] = r.commit("after")
    d = start(home / "b.db", r, c, "--jobs", "3")
    assert d["state"] == "done" and d["culprit"]["sha"] == c["merge"]  # type: ignore[index]
    found = inside(d)
    assert found["kind"] == "undecided" and d["inside"] is None
    assert found["said"] == (
        "inside the merge the search could not decide (a commit it brings is bad and a later "
        "one good: its commits are not ordered as the change landed), so no commit inside is "
        "named; the answer is the merge")


def test_a_commit_with_the_merges_tree_is_never_run(home: Path, tmp_path: Path) -> None:
    """The side took main in last: its tip has the merge's own tree, so its verdict is the
    merge's, known without a run; the search still names the commit that did it."""
    r, c = side_branch(tmp_path, breaks=3, side_merges_main=True)
    assert r.git("rev-parse", f"{c['s4']}^{{tree}}") == r.git("rev-parse",
                                                               f"{c['merge']}^{{tree}}")
    d = start(home / "b.db", r, c)
    found = inside(d)
    assert (found["kind"], found["sha"], found["same_tree"]) == ("culprit", c["s3"], [c["s4"]])
    assert c["s4"] not in {p["sha"] for p in d["probes"]}  # type: ignore[attr-defined,index]


def test_resume_after_a_kill_inside_the_merge_gives_the_same_answer(
        home: Path, tmp_path: Path) -> None:
    r, c = side_branch(tmp_path)
    marker = tmp_path / "inside"
    # The first run inside the merge hangs (once): the coordinator is killed there.
    oracle = (f"import os, pathlib, sys, time, pkg\n"
              f"m = pathlib.Path({str(marker)!r})\n"
              f"if os.environ['BISECTOR_COMMIT'] in {[c['s1'], c['s2'], c['s3']]!r} "
              f"and not m.exists():\n    m.touch(); time.sleep(600)\n"
              f"sys.exit(0 if pkg.VALUE == 'old' else 1)\n")
    db = home / "b.db"
    args = ["--db", str(db), "start", "--repo", str(r.path), "--good", c["good"], "--bad",
            c["after"], "--no-confirm", "--json", "--", "python", "-c", oracle]
    env = {**os.environ, "BISECTOR_HOME": str(home)}
    p = subprocess.Popen([*BISECT, *args], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not marker.exists():
            assert p.poll() is None and time.monotonic() < deadline, "never went inside"
            time.sleep(0.2)
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    state = json.loads(invoke("--db", str(db), "list", "--json").stdout)[0]["state"]
    assert state == "interrupted"
    # Stopped inside the merge, before any answer: the timeline draws the probes inside on
    # the merge's line, never past the range's end.
    stopped = json.loads(invoke("--db", str(db), "show", "1", "--json").stdout)
    drawn = timeline(stopped)
    at = {m.sha: m.x for m in drawn["markers"]}
    walk = [p["sha"] for p in stopped["probes"] if not p["inside"]]
    assert stopped["merge_at"] == 3 and c["merge"] in walk
    assert [m.x for m in drawn["markers"] if m.seq > len(walk)] == [at[c["merge"]]] * (
        len(drawn["markers"]) - len(walk))
    assert max(m.x for m in drawn["markers"]) <= drawn["right"]
    res = run_cli("--db", str(db), "resume", "1", "--json")
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert d["culprit"]["sha"] == c["merge"] and inside(d)["sha"] == c["s2"]
    # Nothing the killed run finished was run again: each commit has one paid probe.
    paid = [p["sha"] for p in d["probes"] if not p["reused"]]
    assert len(paid) == len(set(paid)), paid


def test_workers_probe_inside_the_merge(home: Path, tmp_path: Path, pg_url: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the queue of a PostgreSQL store: a worker that served the walk (its context
    read before the merge's candidates were stored) probes the commits inside too."""
    for k, v in {"BISECTOR_WORKER_BEAT_S": "1", "BISECTOR_WORKER_STALE_S": "4",
                 "BISECTOR_TASK_POLL_S": "0.3"}.items():
        monkeypatch.setenv(k, v)
    r, c = side_branch(tmp_path)
    log = (tmp_path / "worker.log").open("wb")
    w = subprocess.Popen([*BISECT, "--db", pg_url, "worker"], cwd=ROOT, stdout=log,
                         stderr=subprocess.STDOUT, env=os.environ.copy())
    try:
        p = run_cli("--db", pg_url, "start", "--repo", str(r.path), "--good", c["good"],
                    "--bad", c["after"], "--no-confirm", "--json", "--enqueue", "--", *ORACLE,
                    timeout=300)
    finally:
        w.send_signal(signal.SIGTERM)
        w.wait(timeout=60)
    assert p.returncode == 0, p.stderr + (tmp_path / "worker.log").read_text()
    d = json.loads(p.stdout)
    assert d["culprit"]["sha"] == c["merge"] and inside(d)["sha"] == c["s2"]
    ran = (tmp_path / "worker.log").read_text()
    assert f"probing {c['s2'][:12]}" in ran


if sys.platform != "linux":  # pragma: no cover
    pytestmark = pytest.mark.skip("process groups and SIGKILL as on Linux")
