"""Issue 20, class 8: faults must neither lose state nor lie.

Bad luck, made on purpose: the PostgreSQL server restarted in the middle of a round (and one
that stays away), `bisect cancel` while an oracle runs, while a build runs and while the
culprit is being confirmed, a cancelled watch bisection meeting the next tick, a flip whose
bisection could not start meeting a fixed configuration, and notifiers that do not exist or
hang with children. Everything is real: a throwaway PostgreSQL cluster of this module's own
(stopped and started here without touching the run's shared one), real processes, real ticks.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import func, select

from bisector.app.demo.torchlet import SyntheticHistory
from bisector.store import models as m
from bisector.store.db import open_store
from tests.support import (
    BISECT,
    ROOT,
    _alive,
    built_world,
    run_cli,
    staged_nightlies,
    wait_for,
)

pytestmark = [pytest.mark.adversarial, pytest.mark.e2e]

PROMPT_S = 15.0  # a cancel is honoured within this

MARKED = '''"""torchlet's norm; marks each run (commit, pid; ".again" for a commit's second run)."""
import os, pathlib, sys, time
import torchlet
marks = pathlib.Path({marks!r})
sha = os.environ["BISECTOR_COMMIT"]
again = any(marks.glob(sha + "-*"))
mark = marks / f"{{sha}}-{{os.getpid()}}{{'.again' if again else ''}}"
mark.write_text("")
time.sleep({again_s} if again else {sleep_s})
ok = abs(torchlet.norm([3.0, 4.0]) - 5.0) < 1e-9
mark.with_name(mark.name + ".done").write_text("")
sys.exit(0 if ok else 1)
'''


def _oracle(tmp_path: Path, sleep_s: float, again_s: float = 0) -> tuple[Path, Path]:
    marks = tmp_path / "marks"
    marks.mkdir()
    path = tmp_path / "marked_norm.py"
    path.write_text(MARKED.format(marks=str(marks), sleep_s=sleep_s, again_s=again_s))
    return path, marks


def _running(marks: Path, suffix: str = "") -> list[int]:
    """Pids of the oracle runs in progress (their mark, not yet done)."""
    return [int(p.name.rsplit("-", 1)[1].split(".")[0]) for p in marks.iterdir()
            if not p.name.endswith(".done") and p.name.endswith(suffix)
            and not (marks / f"{p.name}.done").exists()]


def _start(db: str, hist: SyntheticHistory, oracle: Path, *extra: str,
           env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*BISECT, "--db", db, "start", "--repo", str(hist.path), "--good", hist.main[0],
         "--bad", hist.main[-1], "--oracle", str(oracle), "--json", *extra],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})})


def _state(db: str, bisection: int = 1) -> str:
    store = open_store(db, create=False)
    with store.session() as s:
        b = s.get(m.Bisection, bisection)
        assert b is not None
        return b.state


# -- a PostgreSQL server that goes away ------------------------------------------------------

@dataclass
class Cluster:
    info: dict[str, str]

    def ctl(self, *args: str) -> None:
        from tests.conftest import _as_user

        subprocess.run([*_as_user(), str(Path(self.info["bin"]) / "pg_ctl"), "-D",
                        str(Path(self.info["data"]) / "db"), *args], check=True,
                       capture_output=True)

    def stop(self) -> None:
        self.ctl("-m", "fast", "-w", "stop")

    def start(self) -> None:
        data, port = self.info["data"], self.info["url"].rsplit(":", 1)[1]
        self.ctl("-l", str(Path(data) / "log"), "-w", "-o",
                 f"-p {port} -k {data} -c listen_addresses=127.0.0.1", "start")

    def database(self, name: str) -> str:
        dsn = self.info["url"].replace("postgresql+psycopg://", "postgresql://") + "/postgres"
        with psycopg.connect(dsn, autocommit=True) as con:
            con.execute(f"CREATE DATABASE {name}")
        return f"{self.info['url']}/{name}"


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A cluster of this test's own: stopping it disturbs no other test."""
    from tests.conftest import _pg_start

    c = Cluster(_pg_start())
    yield c
    with contextlib.suppress(subprocess.CalledProcessError):  # already stopped
        c.ctl("-m", "immediate", "stop")
    shutil.rmtree(c.info["data"], ignore_errors=True)


def _runs(db: str) -> int:
    store = open_store(db, create=False)
    with store.session() as s:
        return int(s.scalar(select(func.count()).select_from(m.RunRow)) or 0)


def test_a_postgres_restart_mid_round_is_a_pause(home: Path, world: SyntheticHistory,
                                                tmp_path: Path, cluster: Cluster) -> None:
    db = cluster.database("restart")
    oracle, marks = _oracle(tmp_path, sleep_s=3)
    proc = _start(db, world, oracle, "--no-confirm")
    try:
        # Past both endpoints, an oracle run of a search round in progress: the server goes.
        assert wait_for(lambda: len(list(marks.glob("*.done"))) >= 2 and _running(marks),
                        timeout=300), proc.stderr
        in_flight = set(_running(marks))
        cluster.stop()
        # The runs in flight end (and want their verdicts stored) while the server is away.
        assert wait_for(lambda: not in_flight & set(_running(marks)), timeout=120)
        cluster.start()
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "Traceback" not in err, err
    assert json.loads(out)["culprit"]["sha"] == world.culprit
    # Every oracle run paid for is stored, none twice: the one that ended in the gap too.
    ran = len(list(marks.glob("*.done")))
    assert _runs(db) == ran, (ran, err)


def test_a_store_that_stays_away_is_one_line_and_resume_finishes(
        home: Path, world: SyntheticHistory, tmp_path: Path, cluster: Cluster) -> None:
    db = cluster.database("away")
    oracle, marks = _oracle(tmp_path, sleep_s=2)
    proc = _start(db, world, oracle, "--no-confirm", env={"BISECTOR_STORE_RETRY_S": "3"})
    try:
        assert wait_for(lambda: len(list(marks.glob("*.done"))) >= 3 and _running(marks),
                        timeout=300)
        cluster.stop()
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode != 0 and "Traceback" not in err, err
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "lost the store" in errors[0], err
    assert "bisect resume 1" in errors[0], errors[0]
    assert err.strip().splitlines()[-1] == errors[0]
    cluster.start()
    kept = _runs(db)
    assert kept >= 3  # what was judged before the server went is stored
    r = run_cli("--db", db, "resume", "1", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["culprit"]["sha"] == world.culprit


# -- bisect cancel -----------------------------------------------------------------------------

def _cancel_and_wait(db: str, proc: subprocess.Popen[str], pids: list[int],
                     said: str | None = None) -> str:
    """`bisect cancel 1`; the coordinator and ``pids`` must be gone within PROMPT_S."""
    t0 = time.monotonic()
    r = run_cli("--db", db, "cancel", "1")
    assert r.returncode == 0, r.stderr
    if said is not None:
        assert said in r.stderr, r.stderr
    try:
        _, err = proc.communicate(timeout=PROMPT_S + 30)
    finally:
        if proc.poll() is None:
            proc.kill()
    took = time.monotonic() - t0
    assert took < PROMPT_S, f"cancel took {took:.1f} s"
    assert proc.returncode == 130, err
    assert "was cancelled" in err and "Traceback" not in err, err
    for pid in pids:
        assert wait_for(lambda p=pid: not _alive(p), timeout=5), f"child {pid} survived"
    assert _state(db) == "cancelled"
    return err


def test_cancel_stops_an_in_process_oracle_run(home: Path, world: SyntheticHistory,
                                               tmp_path: Path) -> None:
    db = str(home / "b.db")
    oracle, marks = _oracle(tmp_path, sleep_s=300)
    proc = _start(db, world, oracle, "--no-confirm")
    pids = wait_for(lambda: _running(marks), timeout=300)
    assert pids, proc.stderr
    # Issue 32, item 8: it said "no probe was in flight" while one ran in its own process.
    _cancel_and_wait(db, proc, pids, said="probe(s) it runs")
    assert _runs(db) == 0  # the killed run was not judged


def test_cancel_stops_a_build_in_progress(home: Path, world: SyntheticHistory, tmp_path: Path,
                                          private_cache: Path) -> None:
    db = str(home / "b.db")
    pidfile = tmp_path / "cc.pid"
    cc = tmp_path / "slow-cc"
    cc.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 300\n")
    cc.chmod(0o755)
    proc = _start(db, world, Path("torchlet_norm"), "--no-confirm",
                  "--build-env", f"CC={cc}")
    assert wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), timeout=300), \
        proc.stderr
    _cancel_and_wait(db, proc, [int(pidfile.read_text())])


def test_cancel_is_honoured_during_confirmation(home: Path, world: SyntheticHistory,
                                                tmp_path: Path) -> None:
    db = str(home / "b.db")
    oracle, marks = _oracle(tmp_path, sleep_s=0, again_s=300)  # a commit's second run hangs
    proc = _start(db, world, oracle)
    pids = wait_for(lambda: _running(marks, ".again"), timeout=300)
    assert pids, proc.stderr
    _cancel_and_wait(db, proc, pids)
    store = open_store(db, create=False)
    with store.session() as s:
        b = s.get(m.Bisection, 1)
        assert b is not None and b.culprit_sha is None  # no answer written past the cancel


# -- the watch ---------------------------------------------------------------------------------

@dataclass
class Nightlies:
    hist: SyntheticHistory
    wheels: list[Path]  # oldest first: the nightlies of main 0, 12, 24


@pytest.fixture(scope="module")
def nightlies(tmp_path_factory: pytest.TempPathFactory) -> Nightlies:
    base = tmp_path_factory.mktemp("faults-watch")
    # Nightlies at main 0 and 12 are test_watch's too: built_world builds them once a run.
    hist = built_world(base, base / "stage", commits=30, culprit=20, broken=(),
                       release_at=None, side_branch_at=None, nightly_every=12)
    return Nightlies(hist, staged_nightlies(hist, base / "stage"))


def _watch(tmp_path: Path, n: Nightlies, wheel: Path, *, notify: str = "",
           bisect: str = "") -> Path:
    cfg = tmp_path / "bisector.toml"
    cfg.write_text(f'[watch]\nevents = "{tmp_path / "events"}"\n\n{notify}\n'
                   f'[[suite]]\nname = "local"\nrepo = "{n.hist.path}"\n'
                   f'oracles = ["torchlet_norm"]\npython = "{sys.executable}"\n'
                   f'torch = "wheel"\nwheel = "{wheel}"\n{bisect}')
    return cfg


def _tick(cfg: Path, *extra: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    r = run_cli("tick", "--config", str(cfg), *extra, timeout=timeout)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    return r


def _flip(cfg: Path, n: Nightlies, *, bisect: str = "",
          timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """A good nightly, then a bad one: the second tick sees a regression."""
    _tick(cfg, "--no-bisect", timeout=timeout)
    text = cfg.read_text().replace(str(n.wheels[1]), str(n.wheels[2]))
    cfg.write_text(text + bisect)
    return _tick(cfg, "--no-bisect", timeout=timeout)


def _one(home: Path, model: type[m.Base]) -> Any:
    store = open_store(str(home / "data" / "bisector.db"), create=False)
    with store.session() as s:
        return s.scalars(select(model)).one()


def test_a_cancelled_watch_bisection_stays_cancelled(home: Path, nightlies: Nightlies,
                                                     tmp_path: Path) -> None:
    cfg = _watch(tmp_path, nightlies, nightlies.wheels[1])
    r = _flip(cfg, nightlies)
    assert "1 bisection(s) started" in r.stdout, r.stderr
    bid = _one(home, m.Bisection).id
    c = run_cli("cancel", str(bid))
    assert c.returncode == 0, c.stderr
    assert _one(home, m.Bisection).state == "cancelled"
    r = _tick(cfg)  # a tick that runs bisections: not this one
    assert "0 finished" in r.stdout and f"running bisection {bid}" not in r.stderr, r.stderr
    b = _one(home, m.Bisection)
    assert b.state == "cancelled" and b.culprit_sha is None
    # `bisect resume` is how a person takes it up again.
    res = run_cli("resume", str(bid), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["culprit"]["sha"] == nightlies.hist.culprit


def test_a_flip_whose_bisection_could_not_start_starts_once_fixed(
        home: Path, nightlies: Nightlies, tmp_path: Path) -> None:
    cfg = _watch(tmp_path, nightlies, nightlies.wheels[1])
    broken = '\n[suite.bisect]\nbuild-env = ["NO_EQUALS_SIGN"]\n'
    r = _flip(cfg, nightlies, bisect=broken)
    assert "no bisection for this flip" in r.stderr and "--build-env" in r.stderr, r.stderr
    assert "starting its bisection again" not in r.stderr  # tried once a tick
    assert "0 bisection(s) started" in r.stdout
    again = _tick(cfg, "--no-bisect")  # still broken: still kept, nothing started
    assert "0 bisection(s) started" in again.stdout, again.stderr
    assert "starting its bisection again" in again.stderr, again.stderr
    cfg.write_text(cfg.read_text().replace(broken, "\n"))
    fixed = _tick(cfg, "--no-bisect")
    assert "1 bisection(s) started" in fixed.stdout, fixed.stderr
    flip, b = _one(home, m.WatchFlip), _one(home, m.Bisection)
    assert flip.bisection_id == b.id and flip.message is None
    assert (b.good_sha, b.bad_sha) == (nightlies.hist.main[12], nightlies.hist.main[24])


def test_a_missing_notifier_is_a_warning(home: Path, nightlies: Nightlies,
                                         tmp_path: Path) -> None:
    missing = tmp_path / "no-such-notifier"
    cfg = _watch(tmp_path, nightlies, nightlies.wheels[1],
                 notify=f'[notify]\ncommand = "{missing} --flag"\n')
    r = _flip(cfg, nightlies)
    assert "1 bisection(s) started" in r.stdout, r.stderr
    warned = [ln for ln in r.stderr.splitlines() if "warning:" in ln and "notify" in ln]
    assert warned and str(missing) in warned[0] and "[notify] command" in warned[0], r.stderr
    assert list((tmp_path / "events").glob("flip-*.json"))  # the event is kept to paste


HANGS = """\
import os, pathlib, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # deaf to the polite stop, as hung tools are
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
pathlib.Path(sys.argv[1]).write_text(f"{os.getpid()} {child.pid}")
time.sleep(120)
"""


def test_a_hung_notifier_is_killed_with_its_process_group(home: Path, nightlies: Nightlies,
                                                          tmp_path: Path) -> None:
    script, pids = tmp_path / "hangs.py", tmp_path / "notifier.pids"
    script.write_text(HANGS)
    cfg = _watch(tmp_path, nightlies, nightlies.wheels[1],
                 notify=f'[notify]\ncommand = "{sys.executable} {script} {pids}"\n'
                        f'timeout = 2\n')
    t0 = time.monotonic()
    r = _flip(cfg, nightlies, timeout=90)
    assert time.monotonic() - t0 < 90
    assert "ran past 2 s and was stopped" in r.stderr, r.stderr
    assert "1 bisection(s) started" in r.stdout
    for pid in map(int, pids.read_text().split()):
        assert wait_for(lambda p=pid: not _alive(p), timeout=5), f"notifier {pid} survived"
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
