"""What an untrusted repository, a misbehaving oracle, a crash or a second process can do.

One test (or more) per class of the hardening issue, each with a generated repository or oracle
that tries the attack, asserting that no command ran, nothing outside the tree was read, no
verdict was changed or reused wrongly, the store is intact, and the user got one line.
Class 1 (file names reaching a shell in the Docker executor) and class 10 (tests seeing other
processes' containers) are guarded in tests/integration/test_docker.py
(``test_overlay_paths_are_data_never_shell``, ``test_env_container_is_unprivileged`` and the
per-test container scope), marked ``adversarial`` too.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import git
import pytest

from bisector.app.demo.torchlet import SyntheticHistory, generate
from bisector.artifacts.export import export_tree, tree_entries
from tests.support import (
    BISECT,
    ROOT,
    _alive,
    copy_world,
    invoke,
    one_line_error,
    run_cli,
    wait_for,
)
from tests.support import git as git_in

pytestmark = [pytest.mark.adversarial, pytest.mark.e2e]


@pytest.fixture(scope="module")
def hist(world: SyntheticHistory, tmp_path_factory: pytest.TempPathFactory) -> SyntheticHistory:
    return copy_world(world, tmp_path_factory.mktemp("adv") / "repo")


def oracle_file(tmp: Path, name: str, body: str) -> Path:
    p = tmp / f"{name}.py"
    p.write_text(body)
    return p


# -- 2. an oracle that edits its environment -------------------------------------------------

POISON = """\
import pathlib, sys, torchlet
init = pathlib.Path(torchlet.__file__)
try:
    init.write_text(init.read_text() + "\\ndef norm(xs):\\n    return 42.0\\n")
except OSError:
    pass
sys.exit(0)
"""


def test_an_oracle_that_edits_its_environment_poisons_no_later_verdict(
        home: Path, hist: SyntheticHistory, tmp_path: Path) -> None:
    db = home / "b.db"
    evil = oracle_file(tmp_path, "poison", POISON)
    r = run_cli("--db", str(db), "start", "--repo", str(hist.path), "--good", hist.main[2],
                "--bad", hist.main[20], "--oracle", str(evil))
    assert r.returncode == 7, r.stderr  # it calls everything good: an endpoint stop
    # The honest oracle over the same commits, same environments: the right culprit.
    r = run_cli("--db", str(db), "start", "--repo", str(hist.path), "--good", hist.main[2],
                "--bad", hist.main[20], "--oracle", "torchlet_norm", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["culprit"]["sha"] == hist.culprit
    con = sqlite3.connect(db)
    reasons = [row[0] for row in con.execute(
        "SELECT reason FROM run v JOIN oracle o ON o.sha256 = v.oracle_sha256 "
        "WHERE o.name = 'poison'")]
    con.close()
    assert any("changed its environment" in x for x in reasons), reasons


# -- 3. symlinks, climbing submodule names, export attributes --------------------------------

def test_the_export_is_the_commits_tree_and_reads_nothing_outside(
        hist: SyntheticHistory, tmp_path: Path) -> None:
    repo = tmp_path / "clone"
    git.Repo.clone_from(str(hist.path), repo)
    outside = tmp_path / "x"  # what a climbing submodule name would point at
    git_in(tmp_path, "init", "-q", str(outside))
    git_in(outside, "commit", "-q", "--allow-empty", "-m", "SECRET")
    (repo / "abs_link").symlink_to("/etc/passwd")
    (repo / "up_link").symlink_to("../..")
    (repo / ".gitattributes").write_text("torchlet/*.py export-ignore\nREADME* export-subst\n")
    (repo / "README.md").write_text("$Format:%H$\n")
    secret_sha = git_in(outside, "rev-parse", "HEAD")
    (repo / ".gitmodules").write_text(
        '[submodule "../../../x"]\n\tpath = vendor\n\turl = ./nowhere\n')
    git_in(repo, "add", "-A")
    git_in(repo, "update-index", "--add", "--cacheinfo", f"160000,{secret_sha},vendor")
    git_in(repo, "commit", "-q", "-m", "hostile tree")
    sha = git_in(repo, "rev-parse", "HEAD")
    r = git.Repo(repo)
    # The climbing name is not followed: vendor is a submodule the clone does not have, so it
    # is exported empty (and named should the build fail), and nothing outside is read.
    assert export_tree(r, sha, tmp_path / "out") == [("vendor", "vendor")]
    assert list((tmp_path / "out" / "vendor").iterdir()) == []
    # Without the submodule, the rest equals the tree exactly.
    git_in(repo, "rm", "-q", "--cached", "vendor")
    git_in(repo, "commit", "-q", "-m", "drop the submodule")
    sha = git_in(repo, "rev-parse", "HEAD")
    dest = tmp_path / "out2"
    export_tree(r, sha, dest)
    assert os.readlink(dest / "abs_link") == "/etc/passwd"
    assert os.readlink(dest / "up_link") == "../.."
    assert (dest / "README.md").read_text() == "$Format:%H$\n"  # no export-subst
    for mode, obj, path in tree_entries(r, sha):
        p = dest / path
        if mode == "120000":
            assert p.is_symlink()
        else:
            blob = subprocess.run(["git", "-C", str(repo), "cat-file", "blob", obj],
                                  capture_output=True, check=True).stdout
            assert p.read_bytes() == blob, path
    on_disk = {str(p.relative_to(dest)) for p in dest.rglob("*")
               if p.is_file() or p.is_symlink()}
    assert on_disk == {path for _, _, path in tree_entries(r, sha)}


def test_a_hostile_tree_is_bisected_without_a_traceback(home: Path, hist: SyntheticHistory,
                                                       tmp_path: Path) -> None:
    repo = tmp_path / "clone"
    git.Repo.clone_from(str(hist.path), repo, branch="main")
    (repo / "abs_link").symlink_to("/etc/passwd")
    (repo / "up_link").symlink_to("../..")
    git_in(repo, "add", "-A")
    git_in(repo, "commit", "-q", "-m", "symlinks out of the tree")
    db = home / "b.db"
    r = run_cli("--db", str(db), "start", "--repo", str(repo), "--good", hist.main[2],
                "--bad", "HEAD", "--oracle", "torchlet_norm", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["culprit"]["sha"] == hist.culprit
    assert run_cli("--db", str(db), "resume", "1").returncode == 0


# -- 4. what was hashed is what runs ---------------------------------------------------------

def test_resume_runs_the_stored_oracle_not_an_edited_copy(home: Path, hist: SyntheticHistory,
                                                           tmp_path: Path,
                                                           private_cache: Path) -> None:
    slow = oracle_file(tmp_path, "slow", (ROOT / "tests/oracles/slow_norm.py").read_text())
    db = home / "b.db"
    proc = subprocess.Popen([*BISECT, "--db", str(db), "start", "--repo", str(hist.path),
                             "--good", hist.main[2], "--bad", hist.main[20], "--oracle",
                             str(slow)], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and not list(private_cache.glob("oracles/*/slow.py")):
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    copies = list(private_cache.glob("oracles/*/slow.py"))
    assert copies, "the run never materialised its oracle"
    for copy in copies:  # the stored copy, edited
        copy.write_text("import sys\nsys.exit(1)\n")
    slow.write_text("import sys\nsys.exit(1)\n")  # and the original
    r = run_cli("--db", str(db), "resume", "1", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["culprit"]["sha"] == hist.culprit


def test_a_modified_cached_wheel_is_never_trusted(home: Path, hist: SyntheticHistory,
                                                  private_cache: Path) -> None:
    db = home / "b.db"
    args = ["--db", str(db), "start", "--repo", str(hist.path), "--good", hist.main[2],
            "--bad", hist.main[20], "--json"]
    assert run_cli(*args, "--oracle", "torchlet_norm").returncode == 0
    wheels = list(private_cache.rglob("torchlet-*.whl"))
    assert wheels
    for whl in wheels:  # every cached wheel, tampered
        with open(whl, "ab") as f:
            f.write(b"tampered")
    for env in (private_cache / "envs").iterdir():  # force new environments
        subprocess.run(["rm", "-rf", str(env)], check=True)
    slow = str(ROOT / "tests/oracles/slow_norm.py")
    r = run_cli(*args, "--oracle", slow)
    assert r.returncode == 7, r.stderr  # both endpoints untestable: nothing judged
    con = sqlite3.connect(db)
    rows = con.execute("SELECT v.outcome, v.reason, v.reusable FROM probe p JOIN run v "
                       "ON v.id = p.run_id WHERE p.bisection_id = 2").fetchall()
    con.close()
    assert rows and all(o == "skip" and "changed since it was stored" in why and not reuse
                        for o, why, reuse in rows), rows


def test_non_utf8_and_crlf_oracles(home: Path, hist: SyntheticHistory, tmp_path: Path) -> None:
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"# caf\xe9\nimport sys\nsys.exit(0)\n")
    r = invoke("--db", str(home / "b.db"), "start", "--repo", str(hist.path), "--good",
               hist.main[2], "--bad", hist.main[20], "--oracle", str(latin))
    one_line_error(r, "not UTF-8")
    assert not (home / "b.db").exists()
    # CRLF: the metadata still counts (here: exit 0 means the bug, so it is inverted).
    crlf = tmp_path / "crlf.py"
    body = ("# /// script\n# [tool.bisector]\n# polarity = \"success\"\n# ///\n"
            "import sys, torchlet\nsys.exit(1 if abs(torchlet.norm([3.0, 4.0]) - 5.0) < 1e-9 "
            "else 0)\n")
    crlf.write_bytes(body.replace("\n", "\r\n").encode())
    r = run_cli("--db", str(home / "c.db"), "start", "--repo", str(hist.path), "--good",
                hist.main[2], "--bad", hist.main[20], "--oracle", str(crlf), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["culprit"]["sha"] == hist.culprit


# -- 5. limits that change results are in the fingerprint ------------------------------------

def test_limits_that_change_a_verdict_change_the_fingerprint() -> None:
    from bisector.executors.docker import DockerExecutor

    def facts(**kw: object) -> dict[str, object]:
        ex = DockerExecutor("torch", **kw)  # type: ignore[arg-type]
        ex.__dict__["image_id"] = "sha256:x"  # no engine needed for the facts
        ex.__dict__["python_tag"] = "cp311"
        return ex.fingerprint_facts()

    assert facts(pids=64) != facts(pids=4096)
    assert facts(memory="1g") != facts(memory="16g")


# -- 6. processes that outlive their probe ---------------------------------------------------

DAEMON = """\
import os, sys, time
run = os.environ["BISECTOR_RUN_DIR"]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open(os.path.join(run, "daemon.pid"), "w") as f:
            f.write(str(os.getpid()))
        time.sleep(300)
        os._exit(0)
    os._exit(0)
time.sleep(0.5)
sys.exit(0)
"""


def test_a_detached_daemon_dies_with_its_probe(home: Path, tmp_path: Path) -> None:
    daemon = oracle_file(tmp_path, "daemon", DAEMON)
    r = run_cli("check", "--oracle", str(daemon), "--env", "system", "--json")
    assert r.returncode == 0, r.stderr
    pidfile = Path(json.loads(r.stdout)["stdout"]).parent / "daemon.pid"
    assert pidfile.exists()
    pid = int(pidfile.read_text())
    deadline = time.time() + 10
    while time.time() < deadline and _alive(pid):
        time.sleep(0.1)
    assert not _alive(pid), "the daemon outlived its probe"


def test_kill_9_of_the_controller_leaves_no_oracle_running(home: Path, hist: SyntheticHistory,
                                                           tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    hang = oracle_file(tmp_path, "hangs", f"import time\n# {mark}\ntime.sleep(300)\n")
    db = home / "b.db"
    proc = subprocess.Popen([*BISECT, "--db", str(db), "start", "--repo", str(hist.path),
                             "--good", hist.main[2], "--bad", hist.main[20], "--oracle",
                             str(hang)], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)

    def oracles() -> list[int]:
        out = subprocess.run(["pgrep", "-f", str(home / "data" / "logs" / "runs")],
                             capture_output=True, text=True).stdout.split()
        return [int(p) for p in out if int(p) != proc.pid and _alive(int(p))]

    deadline = time.time() + 120
    while time.time() < deadline and not oracles():
        time.sleep(0.2)
    assert oracles(), "the oracle never started"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 15
    while time.time() < deadline and oracles():
        time.sleep(0.2)
    assert not oracles(), "the oracle outlived its controller"


# -- 7. two processes at once ----------------------------------------------------------------

def test_four_starts_at_once_on_a_fresh_store(home: Path, hist: SyntheticHistory) -> None:
    db = home / "b.db"
    procs = [subprocess.Popen([*BISECT, "--db", str(db), "start", "--repo", str(hist.path),
                               "--good", hist.main[2 + i], "--bad", hist.main[20],
                               "--oracle", "torchlet_norm"], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for i in range(4)]
    errs = [p.communicate(timeout=600)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, errs
    assert not any("IntegrityError" in e or "Traceback" in e for e in errs)


def test_a_commit_being_judged_elsewhere_is_waited_for(home: Path,
                                                       hist: SyntheticHistory) -> None:
    db = home / "b.db"
    slow = str(ROOT / "tests/oracles/slow_norm.py")
    procs = [subprocess.Popen([*BISECT, "--db", str(db), "start", "--repo", str(hist.path),
                               "--good", hist.main[2], "--bad", hist.main[20], "--oracle", slow,
                               "--no-confirm"],  # confirmation re-runs on purpose
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    errs = [p.communicate(timeout=600)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    con = sqlite3.connect(db)
    per_commit = con.execute("SELECT commit_sha, COUNT(*) FROM run "
                             "GROUP BY commit_sha HAVING COUNT(*) > 1").fetchall()
    culprits = {row[0] for row in con.execute("SELECT culprit_sha FROM bisection")}
    con.close()
    assert per_commit == [], "a commit was judged twice"
    assert culprits == {hist.culprit}


def test_list_does_not_show_a_dead_run_as_running(home: Path, hist: SyntheticHistory) -> None:
    db = home / "b.db"
    proc = subprocess.Popen([*BISECT, "--db", str(db), "start", "--repo", str(hist.path),
                             "--good", hist.main[2], "--bad", hist.main[20], "--oracle",
                             str(ROOT / "tests/oracles/slow_norm.py")], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def running() -> bool:  # its row says running: the run is under way, owned by proc
        if not db.exists():
            return False
        try:
            with sqlite3.connect(db) as con:
                row = con.execute("SELECT state FROM bisection WHERE id = 1").fetchone()
        except sqlite3.OperationalError:  # the store is still being made
            return False
        return row is not None and row[0] == "running"

    assert wait_for(running), "the run never started"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    rows = json.loads(run_cli("--db", str(db), "list", "--json").stdout)
    assert rows[0]["state"] == "interrupted", rows


# -- 8. inputs that got a traceback or a wrong message ---------------------------------------

BAD_META = {
    "tool = 3": "# /// script\n# tool = 3\n# ///\n",
    "timeout = nan": "# /// script\n# [tool.bisector]\n# timeout = nan\n# ///\n",
    "unclosed block": "# /// script\n# [tool.bisector]\n# timeout = 5\nprint(1)\n",
    "option as dependency": '# /// script\n# dependencies = ["--index-url=http://127.0.0.1:9"]'
                            '\n# ///\n',
}


@pytest.mark.parametrize("case", sorted(BAD_META))
def test_bad_oracle_metadata_is_one_line(home: Path, hist: SyntheticHistory, tmp_path: Path,
                                         case: str) -> None:
    o = oracle_file(tmp_path, "bad", BAD_META[case] + "import sys\nsys.exit(0)\n")
    r = invoke("--db", str(home / "b.db"), "start", "--repo", str(hist.path), "--good",
               hist.main[2], "--bad", hist.main[20], "--oracle", str(o))
    one_line_error(r, "bad.py", code=4)
    assert not (home / "b.db").exists()


@pytest.mark.parametrize(("args", "needle"), [
    (["--memory", "lots"], "--memory 'lots'"),
    (["--gpus", "0"], "--gpus"),
    (["--pids", "0"], "--pids"),
])
def test_bad_limits_are_refused_before_anything_is_stored(home: Path, hist: SyntheticHistory,
                                                          args: list[str], needle: str) -> None:
    if args[0] == "--gpus" and subprocess.run(["sh", "-c", "nvidia-smi -L"],
                                              capture_output=True).returncode == 0:
        pytest.skip("this machine has an NVIDIA GPU")
    r = invoke("--db", str(home / "b.db"), "start", "--repo", str(hist.path), "--good",
               hist.main[2], "--bad", hist.main[20], "--oracle", "torchlet_norm", *args)
    one_line_error(r, needle)
    assert not (home / "b.db").exists()


def test_store_paths_and_ids_that_are_not_usable(home: Path, hist: SyntheticHistory,
                                                 tmp_path: Path) -> None:
    (tmp_path / "adir").mkdir()
    one_line_error(invoke("--db", str(tmp_path / "adir"), "list"), "is a directory")
    ro = tmp_path / "ro"
    ro.mkdir()
    if os.geteuid() != 0:  # root writes anywhere: the check below needs an ordinary user
        ro.chmod(0o500)
        one_line_error(invoke("--db", str(ro / "b.db"), "start", "--repo", ".", "--good",
                              "HEAD~1", "--bad", "HEAD", "--oracle", "torchlet_norm"),
                       "cannot write")
    db = home / "b.db"  # a store holding a finished bisection (the world's: cached wheels)
    run_cli("--db", str(db), "start", "--repo", str(hist.path), "--good", hist.main[2],
            "--bad", hist.main[20], "--oracle", "torchlet_norm", check=True)
    for big in (str(2**63), str(2**70), "0"):
        r = invoke("--db", str(db), "show", big)
        one_line_error(r, "give a bisection id from 1 to 2147483647")


def test_refs_and_subjects_are_text_not_markup_or_escapes(home: Path, tmp_path: Path) -> None:
    # A path and an oracle name that read as rich markup ("[/x]" closes a tag never opened).
    hist = generate(tmp_path / "r[" / "x]" / "repo", commits=12, culprit=7, broken=(),
                    release_at=None, side_branch_at=None)
    repo = hist.path
    git_in(repo, "tag", "v0.0.1", hist.main[2])
    git_in(repo, "checkout", "-q", "-b", "evil", hist.main[-1])
    git_in(repo, "commit", "-q", "--allow-empty", "-m", "boom \x1b[2J\x1b]0;owned\x07 [bold]x")
    db = home / "b.db"
    r = run_cli("--db", str(db), "start", "--repo", str(repo), "--good", "v0.0.1", "--bad",
                "evil", "--oracle", "torchlet_norm")
    assert r.returncode == 0, r.stderr
    for out in (r.stdout, r.stderr, run_cli("--db", str(db), "list").stdout,
                run_cli("--db", str(db), "show", "1").stdout):
        assert "\x1b" not in out and "\x07" not in out
    listing = run_cli("--db", str(db), "list", "--json")
    assert listing.returncode == 0 and "r[/x]" in listing.stdout
    plain = run_cli("--db", str(db), "list")
    assert plain.returncode == 0 and "Traceback" not in plain.stderr


# -- 9. leftovers ----------------------------------------------------------------------------

def test_a_half_made_environment_is_rebuilt_not_a_skip_forever(home: Path,
                                                              hist: SyntheticHistory) -> None:
    from bisector.artifacts.installable import Installable
    from bisector.executors.local import LocalExecutor

    ex = LocalExecutor(sys.executable, "torchlet")
    inst = Installable("k" * 64, "nothing to install")
    half = ex.env_dir(inst.key, ())
    (half / "bin").mkdir(parents=True)  # left by a kill -9 before the ready marker
    env = ex.ensure_env(inst, ())
    assert (env / ".bisector-ready").exists()


def test_a_flood_of_output_is_capped(home: Path, tmp_path: Path) -> None:
    flood = oracle_file(tmp_path, "flood", "import sys\nfor _ in range(300):\n"
                        "    sys.stdout.write('x' * (1 << 20))\nsys.exit(0)\n")
    script = ("import resource, subprocess, sys\n"
              f"subprocess.run({[*BISECT, 'check', '--oracle', str(flood), '--json']!r}, "
              "stdout=subprocess.DEVNULL, check=True)\n"
              "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       cwd=ROOT, check=False)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.strip()) < 200 * 1024, "peak RSS of the controller in KiB"
    outs = list((home / "data" / "logs").rglob("stdout.txt"))
    assert outs and max(p.stat().st_size for p in outs) <= 64 * 2**20 + 100  # + the cut note


def test_oracles_listing_ignores_a_folder_named_like_an_oracle(tmp_path: Path) -> None:
    d = tmp_path / "oracles"
    (d / "x.py").mkdir(parents=True)
    (d / "real.py").write_text('"""A real one."""\n')
    r = invoke("oracles", "--json", env={"BISECTOR_ORACLES_DIR": str(d)})
    assert r.exit_code == 0, r.stderr
    names = [o["name"] for o in json.loads(r.stdout)]
    # The team's directory comes first, then the bundled oracles; the folder is no oracle.
    assert names[0] == "real" and "torchlet_norm" in names and "x" not in names


def test_scratch_folders_of_killed_processes_are_swept(home: Path,
                                                       private_cache: Path) -> None:
    from bisector.artifacts.cache import scratch_dir, sweep_scratch

    mine = scratch_dir("build-abc-")
    dead = private_cache / "tmp" / "build-abc-999999999-xyz"
    dead.mkdir(parents=True)
    (dead / "half-built.o").write_text("x")
    assert sweep_scratch() == [dead.name]
    assert mine.exists() and not dead.exists()


@pytest.mark.parametrize(("script", "expected"), [
    ("exit 3", 3), ("kill -9 $$", -signal.SIGKILL), ("kill -TERM $$", -signal.SIGTERM),
])
def test_the_reaper_reports_the_oracle_exactly(script: str, expected: int) -> None:
    """An oracle killed by SIGKILL (the OOM killer) must not look like exit 1 (a verdict)."""
    from bisector.infra.proc import reaped

    r = subprocess.run(reaped(["sh", "-c", script], "test|x"), check=False)
    assert r.returncode == expected


def test_an_oracle_under_the_reaper_gets_the_signals_a_shell_gives_it() -> None:
    """Python ignores SIGPIPE and SIGXFSZ for itself; an oracle started by the reaper must not
    inherit that (``yes | head -1`` in a script would end 1, "Broken pipe", instead of as it
    does run by hand)."""
    from bisector.infra.proc import reaped

    r = subprocess.run(reaped(["sh", "-c", "kill -PIPE $$; exit 0"], "test|x"), check=False)
    assert r.returncode == -signal.SIGPIPE
    r = subprocess.run(reaped(["sh", "-c", "kill -XFSZ $$; exit 0"], "test|x"), check=False)
    assert r.returncode == -signal.SIGXFSZ


def test_the_reapers_own_failure_is_never_a_verdict() -> None:
    from bisector.core.verdict import Outcome, classify
    from bisector.infra.proc import reaped

    r = subprocess.run(reaped(["/no/such/interpreter"], "test|x"), capture_output=True,
                       check=False)
    c = classify(r.returncode, timed_out=False)
    assert c.outcome is Outcome.SKIP and not c.reusable
