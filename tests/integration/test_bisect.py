"""End to end through the real CLI: real git history, real builds, real uv environments, SQLite.

Each test knows the right answer because the generator planted it.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from bisector.app.demo.torchlet import SyntheticHistory, generate
from bisector.core.search import max_probes
from tests.issue_rules import check
from tests.support import (
    BISECT,
    ORACLES,
    ROOT,
    _alive,
    _probes,
    invoke,
    oracles_running,
    run_cli,
    start,
    wait_for,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def hist(tmp_path_factory: pytest.TempPathFactory) -> SyntheticHistory:
    # 90 commits on main: release/0.1 forks at 5, release/0.2 at 85; regression at 57;
    # a broken build at 45 (the first midpoint) and a merged side branch at 40.
    return generate(tmp_path_factory.mktemp("hist") / "torchlet", commits=90, culprit=57,
                    broken=(45,), release_at=(5, 85), side_branch_at=40, fixed_at=None)


def test_release_tags_find_the_planted_regression(home: Path, hist: SyntheticHistory) -> None:
    db = home / "b.db"
    # --no-prebuilt: every probe a build, so the midpoint's broken build is met (with build
    # reuse on, the search would step to a Python-only neighbour overlaid on a built wheel).
    r = start(db, hist.path, "v0.1.0", "v0.2.0", "torchlet_norm", "--no-prebuilt")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["state"] == "done"
    assert d["culprit"]["sha"] == hist.culprit
    # The clone has no origin: no forge of its own, so the trailer's number without a link.
    assert d["culprit"]["pr"] and d["culprit"]["pr_url"] is None
    assert d["culprit"]["author"]
    assert "merge-base" in d["notes"][0]
    n = d["candidates"]
    skips = [p for p in d["probes"] if p["verdict"] == "skip"]
    assert len(d["probes"]) <= max_probes(n) + len(skips)
    # The broken build was met, skipped with a reason, and its log is kept and shown.
    assert [p["sha"] for p in skips] == [hist.main[45]]
    assert skips[0]["reason"].startswith("build failed")
    assert Path(skips[0]["build_log"]).exists()
    assert "this commit does not build" in skips[0]["build_log_tail"]
    # Environment facts of the run came from inside the probed environment.
    good = next(p for p in d["probes"] if p["verdict"] == "good")
    assert good["facts"]["git_version"] == good["sha"]
    assert "probe" in r.stderr  # live progress went to stderr
    md = invoke("--db", str(db), "show", str(d["id"])).stdout
    assert hist.culprit in md and "Reproduce with" in md and "Build log of" in md
    assert d["reproduce"].endswith("--oracle torchlet_norm --no-prebuilt")  # by name
    log = invoke("--db", str(db), "log", str(d["id"])).stdout
    # The walk as git spells it: without it, git replays to other commits on a merged history.
    # ... and the range searched: v0.1.0 is on a release branch, so from the merge-base, which
    # git would otherwise stop to have tested.
    start_line = next(ln for ln in log.splitlines() if not ln.startswith("#"))
    assert d["good"]["searched"] != d["good"]["sha"]
    assert start_line == (f"git bisect start '--first-parent' '{d['bad']['sha']}' "
                          f"'{d['good']['searched']}'")
    assert f"git bisect skip {hist.main[45]}" in log
    assert f"# first bad commit: [{hist.culprit}]" in log
    # git itself, replaying our log in a clone, names the same first bad commit.
    clone = home / "replay"
    subprocess.run(["git", "clone", "-q", str(hist.path), str(clone)], check=True)
    (home / "bisect.log").write_text(log)
    replay = subprocess.run(["git", "-C", str(clone), "bisect", "replay", str(home / "bisect.log")],
                            capture_output=True, text=True, check=True)
    assert f"{hist.culprit} is the first bad commit" in replay.stdout
    rows = json.loads(invoke("--db", str(db), "list", "--json").stdout)
    assert rows[0]["culprit"] == hist.culprit and rows[0]["state"] == "done"


def test_a_second_bisection_reuses_every_verdict(home: Path, hist: SyntheticHistory) -> None:
    db = home / "b.db"
    first = json.loads(start(db, hist.path, hist.main[2], hist.main[88]).stdout)
    judged = {p["sha"] for p in first["probes"]}
    same = json.loads(start(db, hist.path, hist.main[2], hist.main[88]).stdout)
    assert same["culprit"]["sha"] == hist.culprit
    assert same["oracle_runs"] == 0 and all(p["reused"] for p in same["probes"])
    overlap = json.loads(start(db, hist.path, hist.main[20], hist.main[70]).stdout)
    assert overlap["culprit"]["sha"] == hist.culprit
    ran = {p["sha"] for p in overlap["probes"] if not p["reused"]}
    assert not ran & judged, "an already judged commit was run again"


def test_regress_success_for_seed_style_repro(home: Path, hist: SyntheticHistory) -> None:
    r = start(home / "b.db", hist.path, hist.main[2], hist.main[88],
              str(ORACLES / "repro_norm.py"), "--regress", "success")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["culprit"]["sha"] == hist.culprit
    # The reproduce line names the oracle by absolute path and keeps the polarity flag.
    assert f"--oracle {ORACLES / 'repro_norm.py'}" in d["reproduce"]
    assert "--regress success" in d["reproduce"] and f"--repo {hist.path}" in d["reproduce"]


def test_find_fix(home: Path, tmp_path: Path) -> None:
    h = generate(tmp_path / "fix", commits=40, culprit=10, broken=(), release_at=None,
                 side_branch_at=None, fixed_at=27)
    r = start(home / "b.db", h.path, h.main[12], h.main[39], "torchlet_norm", "--find-fix")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["culprit"]["sha"] == h.fix
    assert d["terms"] == {"old": "broken", "new": "fixed"}
    # The live lines in the same words as the report (they once said good/bad).
    lines = [x.split()[0] for x in r.stderr.splitlines() if x.startswith("  ")]
    assert set(lines) == {"broken", "fixed"}, r.stderr
    md = invoke("--db", str(home / "b.db"), "show", str(d["id"])).stdout
    assert "First fixed commit" in md
    issue = invoke("--db", str(home / "b.db"), "show", str(d["id"]), "--format", "issue")
    check(issue.stdout, [h.path, tmp_path])  # a find-fix bisection's issue
    assert "is fixed by" in issue.stdout


def test_skip_next_to_the_culprit_gives_a_window(home: Path, tmp_path: Path) -> None:
    h = generate(tmp_path / "w", commits=30, culprit=20, broken=(19,), release_at=None,
                 side_branch_at=None)
    r = start(home / "b.db", h.path, h.main[0], h.main[29])
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["state"] == "ambiguous"
    assert [s["sha"] for s in d["suspects"]] == [h.main[19], h.main[20]]


def test_good_endpoint_already_bad_stops_with_message(home: Path, hist: SyntheticHistory) -> None:
    r = start(home / "b.db", hist.path, hist.main[60], hist.main[80])
    assert r.returncode == 7
    assert "already bad" in r.stderr and hist.main[60][:12] in r.stderr
    # What the oracle said there, so a failure of the oracle itself is not taken for an
    # older change (both endpoints failing one import once read "pick an older --good").
    assert "(exit 1; " in r.stderr and "norm([3, 4]) = 25.0): if that is the failure" in r.stderr
    assert "fix the oracle (bisect check --commit" in r.stderr


def test_bad_endpoint_that_is_good_stops(home: Path, hist: SyntheticHistory) -> None:
    r = start(home / "b.db", hist.path, hist.main[2], hist.main[30])
    assert r.returncode == 7 and "is good with this oracle" in r.stderr


def test_oracle_timeout_kills_the_process_group_and_skips(home: Path,
                                                          hist: SyntheticHistory) -> None:
    r = start(home / "b.db", hist.path, hist.main[2], hist.main[4], str(ORACLES / "hang.py"))
    # The reason on the error's one line, not only in `bisect show`.
    assert r.returncode == 7 and "could not be tested: timed out after 2s" in r.stderr, r.stderr
    d = json.loads(run_cli("--db", str(home / "b.db"), "show", "1", "--json").stdout)
    p = d["probes"][0]
    assert p["verdict"] == "skip" and "timed out after 2s" in p["reason"]
    pid = int((Path(p["stdout"]).parent / "grandchild.pid").read_text())
    assert wait_for(lambda: not _alive(pid), timeout=60), "the oracle's grandchild outlived it"


@pytest.mark.parametrize("jobs", [1, 2])
def test_kill_9_then_resume_finishes_with_the_same_answer(home: Path, hist: SyntheticHistory,
                                                          jobs: int) -> None:
    """With K probes in flight too: resume re-runs exactly those, nothing else."""
    slow = str(ORACLES / "slow_norm.py")
    ref_db = home / "ref.db"
    # --no-confirm: every stored run is then a probe, so the count below is exact. The
    # reference is the same check without slow_norm's 1.5 s a run (slow only so that the run
    # below can be killed mid-probe): same verdicts, so the same walk, a dozen seconds sooner.
    ref = json.loads(start(ref_db, hist.path, hist.main[2], hist.main[88], "torchlet_norm",
                           "--jobs", str(jobs), "--no-confirm").stdout)
    db = home / "b.db"
    proc = subprocess.Popen([*BISECT, "--db", str(db), "start", "--repo", str(hist.path),
                             "--good", hist.main[2], "--bad", hist.main[88], "--oracle", slow,
                             "--jobs", str(jobs), "--no-confirm"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # Three probes stored, then killed while the oracle of a probe not stored yet runs.
    assert wait_for(lambda: db.exists() and len(_probes(db, 1)) >= 3)
    assert wait_for(lambda: oracles_running(proc.pid) - set(_probes(db, 1)))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = _probes(db, 1)
    assert 3 <= len(before) < len(ref["probes"])
    r = run_cli("--db", str(db), "resume", "1", "--json")
    assert r.returncode == 0, r.stderr
    # Its probes are numbered on from the stored ones, as `bisect show` numbers them.
    numbers = [int(x.split()[1]) for x in r.stderr.splitlines() if x.startswith("probe ")]
    assert numbers and numbers[0] > len(before), r.stderr
    d = json.loads(r.stdout)
    assert d["culprit"]["sha"] == hist.culprit == ref["culprit"]["sha"]
    # Same probes as an uninterrupted run: nothing measured was lost or re-run twice (with
    # several at once, the order inside a round is the order they finished in).
    assert sorted((p["round"], p["sha"]) for p in d["probes"]) == \
        sorted((p["round"], p["sha"]) for p in ref["probes"])
    if jobs == 1:
        assert [p["sha"] for p in d["probes"]] == [p["sha"] for p in ref["probes"]]
    con = sqlite3.connect(db)
    runs = con.execute("SELECT COUNT(*) FROM run").fetchone()[0]
    con.close()
    assert runs == len(ref["probes"])


@pytest.mark.parametrize("jobs", [1, 2])
def test_ctrl_c_prints_the_resume_command(home: Path, hist: SyntheticHistory, jobs: int) -> None:
    db = home / "b.db"
    proc = subprocess.Popen([*BISECT, "--db", str(db), "start", "--repo", str(hist.path),
                             "--good", hist.main[2], "--bad", hist.main[88], "--oracle",
                             str(ORACLES / "slow_norm.py"), "--jobs", str(jobs)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and (not db.exists() or len(_probes(db, 1)) < 2):
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert f"bisect --db {db} resume 1" in stderr
    con = sqlite3.connect(db)
    state = con.execute("SELECT state FROM bisection WHERE id=1").fetchone()[0]
    con.close()
    assert state == "interrupted"
    r = run_cli("--db", str(db), "resume", "1", "--json")
    assert json.loads(r.stdout)["culprit"]["sha"] == hist.culprit


def test_resume_refuses_while_the_owner_is_alive(home: Path, hist: SyntheticHistory) -> None:
    db = home / "b.db"
    proc = subprocess.Popen([*BISECT, "--db", str(db), "start", "--repo", str(hist.path),
                             "--good", hist.main[2], "--bad", hist.main[88], "--oracle",
                             str(ORACLES / "slow_norm.py")],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and (not db.exists() or len(_probes(db, 1)) < 1):
            time.sleep(0.2)
        r = run_cli("--db", str(db), "resume", "1")
        assert r.returncode == 8 and "is being run by" in r.stderr
    finally:
        proc.kill()
        proc.wait()


def test_two_bisections_at_once_on_one_sqlite_file(home: Path, hist: SyntheticHistory) -> None:
    db = home / "b.db"
    slow = str(ORACLES / "slow_norm.py")
    procs = [
        subprocess.Popen([*BISECT, "--db", str(db), "start", "--repo", str(hist.path),
                          "--good", good, "--bad", bad, "--oracle", oracle, "--json"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for good, bad, oracle in [(hist.main[2], hist.main[88], slow),
                                  (hist.main[10], hist.main[80], "torchlet_norm")]
    ]
    results = [p.communicate(timeout=300) for p in procs]
    for p, (stdout, stderr) in zip(procs, results, strict=True):
        assert p.returncode == 0, stderr
        assert json.loads(stdout)["culprit"]["sha"] == hist.culprit
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()


def test_show_names_the_walk_and_counts_only_builds_it_paid_for(
        home: Path, hist: SyntheticHistory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BISECTOR_CACHE_DIR", str(home / "cache"))  # builds happen here
    db = home / "b.db"
    first = start(db, hist.path, hist.main[50], hist.main[62], "torchlet_norm",
                  "--ancestry-path")
    assert first.returncode == 0, first.stderr
    shown = run_cli("--db", str(db), "show", "1").stdout
    assert "(ancestry-path)" in shown and "(first-parent)" not in shown
    assert "Source builds:" in shown
    # Another oracle over the same commits (the same check, another file: no verdict of the
    # first is reused, and no 1.5 s a run as slow_norm's): every wheel comes from the cache.
    other = home / "norm_again.py"
    other.write_text("import sys\nimport torchlet\n"
                     "sys.exit(0 if abs(torchlet.norm([3.0, 4.0]) - 5.0) < 1e-9 else 1)\n")
    second = start(db, hist.path, hist.main[50], hist.main[62], str(other))
    assert second.returncode == 0, second.stderr
    d = json.loads(second.stdout)
    assert d["probes"] and all(not p["reused"] for p in d["probes"])
    shown = run_cli("--db", str(db), "show", "2").stdout
    assert "(first-parent)" in shown and "Source builds:" not in shown
