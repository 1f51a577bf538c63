"""``bisect start --from-log FILE``: a bad log is one line and an untouched store; a log git
itself wrote seeds a bisection the oracle finishes; ``bisect log``'s output round-trips (the
same culprit, nothing run again); the marks are stored as a manual oracle's verdicts."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from bisector.app.demo.torchlet import SyntheticHistory
from tests.support import bisect, copy_world, invoke, one_line_error, run_cli


def _start(hist: SyntheticHistory, *args: str) -> list[str]:
    return ["start", "--repo", str(hist.path), *args]


@pytest.mark.parametrize(("log", "needle", "code"), [
    ("Bisecting: 11 revisions left to test after this\n", "line 1 is not a git bisect log "
     "line ('Bisecting: 11 revisions left to test after this'): give the output of git "
     "bisect log", 2),
    (f"git bisect start\ngit bisect good {'0' * 40}\n", "line 2: '" + "0" * 40 + "' is "
     "not a commit of", 3),
    ("git bisect start 'MAIN_END' 'MAIN_START'\ngit bisect good MAIN_MID\n"
     "git bisect bad MAIN_EARLY\n", "lines 2 and 3 contradict", 2),
    ("git bisect start --term-old=broken --term-new=fixed\ngit bisect broken MAIN_START\n"
     "git bisect fixed MAIN_END\n", "is the log of a --find-fix bisection", 2),
    ("git bisect start 'MAIN_END' 'MAIN_START' 'MAIN_MID'\n", "starts from 2 good commits; "
     "bisector takes one: give --good", 2),
    ("git bisect start\ngit bisect good MAIN_START\n", "marks no commit bad: give --bad", 2),
])
def test_a_bad_log_is_one_line_and_leaves_no_store(home: Path, world: SyntheticHistory,
                                                   tmp_path: Path, log: str, needle: str,
                                                   code: int) -> None:
    m = world.main
    for name, sha in (("MAIN_START", m[0]), ("MAIN_EARLY", m[3]), ("MAIN_MID", m[12]),
                      ("MAIN_END", m[-1])):
        log = log.replace(name, sha)
    f = tmp_path / "bisect.log"
    f.write_text(log)
    r = invoke(*_start(world, "--from-log", str(f), "--oracle", "torchlet_norm"))
    one_line_error(r, needle, code)
    assert not (home / "data" / "bisector.db").exists()


def test_missing_range_or_file_is_one_line(home: Path, world: SyntheticHistory,
                                           tmp_path: Path) -> None:
    one_line_error(invoke(*_start(world, "--good", world.main[0], "--oracle", "x")),
                   "give --good REF and --bad REF (bisect start also takes them from a git "
                   "bisect log: --from-log FILE)", 2)
    one_line_error(invoke(*_start(world, "--from-log", str(tmp_path / "none.log"), "--manual")),
                   "none.log: cannot read it", 2)
    (tmp_path / "bin.log").write_bytes(b"\xff\xfe git bisect")
    one_line_error(invoke(*_start(world, "--from-log", str(tmp_path / "bin.log"), "--manual")),
                   "not UTF-8 text", 2)
    assert not (home / "data" / "bisector.db").exists()


def test_a_log_git_wrote_is_finished_by_the_oracle(home: Path, world: SyntheticHistory,
                                                   tmp_path: Path) -> None:
    hist = copy_world(world, tmp_path / "repo")
    m, culprit = hist.main, hist.main.index(hist.culprit)
    git = ["git", "-C", str(hist.path)]
    # A person began in git: the range, then one commit judged by hand, then stopped.
    subprocess.run([*git, "bisect", "start", "--no-checkout", m[-1], m[0]], check=True,
                   capture_output=True)
    mid = m[11]
    subprocess.run([*git, "bisect", "bad" if culprit <= 11 else "good", mid], check=True,
                   capture_output=True)
    log = subprocess.run([*git, "bisect", "log"], check=True, capture_output=True,
                         text=True).stdout
    assert "git bisect start '--no-checkout'" in log and f"# bad: [{m[-1]}]" in log
    (tmp_path / "git.log").write_text(log)
    r = run_cli("--db", str(home / "b.db"), *_start(hist, "--from-log", str(tmp_path / "git.log"),
                "--oracle", "torchlet_norm", "--no-confirm", "--json"))
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["culprit"]["sha"] == hist.culprit
    seeded = [p for p in d["probes"] if "git bisect log git.log" in p["reason"]]
    assert [p["sha"] for p in seeded] == [m[-1], m[0], mid]  # the log's order
    ran = {p["sha"] for p in d["probes"] if not p["reused"]}
    assert ran and not ran & {m[0], m[-1], mid}  # the oracle ran only what the log left
    assert f"--from-log {tmp_path / 'git.log'}" in d["reproduce"]
    assert any("3 verdict(s) taken from the git bisect log git.log" in n for n in d["notes"])
    # Stored as a person's verdicts: runs of a manual oracle, not of torchlet_norm.
    with sqlite3.connect(home / "b.db") as c:
        names = {n for (n,) in c.execute(
            "select o.name from run r join oracle o on o.sha256 = r.oracle_sha256 "
            "where r.commit_sha in (?, ?, ?)", (m[0], m[-1], mid))}
    assert names == {"manual"}


def test_bisect_log_round_trips(home: Path, world: SyntheticHistory, tmp_path: Path) -> None:
    db = home / "b.db"
    first = bisect(db, world, "--oracle", "torchlet_norm")
    log = invoke("--db", str(db), "log", str(first["id"])).stdout
    (tmp_path / "b.log").write_text(log)
    r = invoke("--db", str(db), *_start(world, "--from-log", str(tmp_path / "b.log"),
               "--oracle", "torchlet_norm", "--no-confirm", "--json"))
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["culprit"]["sha"] == first["culprit"]["sha"] == world.culprit
    assert d["oracle_runs"] == 0 and all(p["reused"] for p in d["probes"])
    # As git has them: the endpoints on the start line (bad, then good), then the marks.
    ends = [first["bad"]["sha"], first["good"]["sha"]]
    assert [(p["sha"], p["verdict"]) for p in d["probes"]] == [
        (ends[0], "bad"), (ends[1], "good"),
        *((p["sha"], p["verdict"]) for p in first["probes"] if p["sha"] not in ends)]
    # Its own log says the same again.
    again = invoke("--db", str(db), "log", str(d["id"])).stdout
    assert again == log
