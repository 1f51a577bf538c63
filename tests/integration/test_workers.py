"""Workers on a real PostgreSQL server: `bisect worker` processes take the probes of a
`bisect start` from Procrastinate's queue, and survive `kill -9`, all of them at once, and
`bisect cancel`. Every test generates the same history (a fixed seed: the right answer is
known, and its wheels are built once); each test has its own database, so nothing it stores is
seen by another.

The figures of each crash test are printed on a `CRASH-FIGURES` line (`pytest -s` shows them).
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from bisector.app.demo.torchlet import SyntheticHistory, generate
from bisector.base.kinds import TaskState
from bisector.core.verdict import Outcome
from bisector.run.remote import Superseded, TaskRecorder
from bisector.store import bisections, tasks, workers
from bisector.store.db import Store, open_store
from bisector.store.records import NewRun
from bisector.store.runs import Key
from tests.support import BISECT, ROOT, _alive, run_cli

FAST = {"BISECTOR_WORKER_BEAT_S": "1", "BISECTOR_WORKER_STALE_S": "4",
        "BISECTOR_TASK_POLL_S": "0.3"}


@pytest.fixture
def fast(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    for k, v in FAST.items():
        monkeypatch.setenv(k, v)


SEED = 27040  # fixed: a failure reproduces with the same history


def _history(path: Path, seed: int = SEED) -> SyntheticHistory:
    return generate(path, commits=40, culprit=27, broken=(), seed=seed, release_at=None,
                    side_branch_at=None)


def _oracle(path: Path, marks: Path, sleep_s: float = 0.0,
            held: tuple[Path, set[str]] | None = None) -> Path:
    """torchlet_norm, leaving a mark per run (commit and pid) while it runs, then ending after
    ``sleep_s``; or, ``held`` (a gate file, the commits that pass freely), every other commit's
    run waits until the test writes the gate: it stays in flight until the test says, however
    loaded the machine (a kill or a cancel can never come after it ended)."""
    marks.mkdir(parents=True, exist_ok=True)
    gate, free = (str(held[0]), sorted(held[1])) if held else (None, [])
    path.write_text(f'''"""torchlet's norm, judged slowly; marks where it runs."""
import os, pathlib, sys, time
import torchlet
commit = os.environ['BISECTOR_COMMIT']
mark = pathlib.Path({str(marks)!r}) / f"{{commit}}-{{os.getpid()}}"
mark.write_text("")
gate = {gate!r}
end = time.monotonic() + (900 if gate and commit not in {free!r} else {sleep_s})
while time.monotonic() < end and not (gate and os.path.exists(gate)):
    time.sleep(0.05)
ok = abs(torchlet.norm([3.0, 4.0]) - 5.0) < 1e-9
mark.rename(mark.with_suffix(".done"))
sys.exit(0 if ok else 1)
''')
    return path


class Fleet:
    """`bisect worker` processes of one test, with their logs."""

    def __init__(self, db: str, logs: Path) -> None:
        self.db, self.logs = db, logs
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.coordinators: list[subprocess.Popen[str]] = []  # killed at teardown if left
        self.started = 0
        logs.mkdir(parents=True, exist_ok=True)

    def start(self, gpus: range, *extra: str) -> list[int]:
        pids = []
        for gpu in gpus:
            self.started += 1
            log = (self.logs / f"worker-{self.started}.log").open("wb")
            p = subprocess.Popen([*BISECT, "--db", self.db, "worker", "--gpu", str(gpu), *extra],
                                 cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                 env=os.environ.copy())
            self.procs[p.pid] = p
            pids.append(p.pid)
        return pids

    def kill(self, pid: int) -> None:
        os.kill(pid, signal.SIGKILL)
        self.procs.pop(pid).wait()

    def stop(self) -> None:
        for c in self.coordinators:
            if c.poll() is None:
                c.kill()
                c.communicate()
        for p in self.procs.values():
            p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        self.procs.clear()

    def log_tail(self) -> str:
        return "\n".join(f.read_text(errors="replace")[-3000:]
                         for f in sorted(self.logs.glob("*.log")))


@pytest.fixture
def fleet(pg_url: str, tmp_path: Path) -> Iterator[Fleet]:
    f = Fleet(pg_url, tmp_path / "logs")
    yield f
    f.stop()


def _wait(what: str, cond: Any, timeout: float = 120.0, every: float = 0.2) -> Any:
    end = time.time() + timeout
    while time.time() < end:
        got = cond()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


def _running(marks: Path) -> list[tuple[str, int]]:
    """(commit, pid) of oracle runs in progress."""
    out = []
    for m in marks.iterdir():
        if not m.suffix:
            sha, pid = m.name.rsplit("-", 1)
            out.append((sha, int(pid)))
    return out


def _ppid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _probe_processes(owner_pids: set[int]) -> list[int]:
    """Processes marked as probes (BISECTOR_PROBE) of the given worker processes."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for item in env:
            if item.startswith(b"BISECTOR_PROBE="):
                owner = item.split(b"=", 1)[1].decode().split("|", 1)[0]
                if int(owner.split(":")[1]) in owner_pids and _alive(int(entry)):
                    found.append(int(entry))
    return found


def _coordinator(fleet: Fleet, hist: SyntheticHistory, oracle: Path,
                 *extra: str) -> subprocess.Popen[str]:
    c = subprocess.Popen([*BISECT, "--db", fleet.db, "start", "--repo", str(hist.path),
                          "--good", hist.main[0], "--bad", hist.main[-1], "--oracle",
                          str(oracle), "--no-confirm", "--json", *extra],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=os.environ.copy())
    fleet.coordinators.append(c)
    return c


def _figures(store: Store, bisection_id: int) -> dict[str, Any]:
    with store.engine.connect() as c:
        per_commit = dict(c.execute(text(
            "SELECT commit_sha, count(*) FROM run GROUP BY commit_sha")).all())
        jobs = dict(c.execute(text(
            "SELECT status::text, count(*) FROM procrastinate_jobs GROUP BY status")).all())
        attempts = [int(a) for (a,) in c.execute(text(
            "SELECT attempt FROM probe_task WHERE bisection_id = :b"), {"b": bisection_id})]
        claims = c.execute(text("SELECT count(*) FROM claim")).scalar()
        rounds = c.execute(text("SELECT max(round) FROM probe WHERE bisection_id = :b"),
                           {"b": bisection_id}).scalar()
        gpus = {r[0] for r in c.execute(text(
            "SELECT facts->>'gpu_index' FROM run"))}
    return {"jobs": sum(jobs.values()), "job_states": jobs, "tasks": len(attempts),
            "retried_tasks": sum(1 for a in attempts if a > 1),
            "attempts": sum(attempts), "verdicts": sum(per_commit.values()),
            "commits": len(per_commit),
            "verdicts_per_commit": sorted(set(per_commit.values())),
            "claims_left": claims, "rounds": rounds, "gpus": sorted(g for g in gpus if g)}


def _check_clean(store: Store, bisection_id: int, figures: dict[str, Any]) -> None:
    assert figures["verdicts_per_commit"] == [1], figures
    assert figures["claims_left"] == 0
    assert tasks.open_tasks(store) == []
    assert all(t.recorded for t in tasks.of_bisection(store, bisection_id)
               if t.state is TaskState.DONE)
    assert set(figures["job_states"]) <= {"succeeded", "aborted", "cancelled"}, figures


def test_four_workers_survive_a_kill_9_mid_probe(fast: None, pg_url: str, tmp_path: Path,
                                                 fleet: Fleet) -> None:
    hist = _history(tmp_path / "repo")
    marks, gate = tmp_path / "marks", tmp_path / "go"
    # The probes past the endpoints hold until the gate opens: the kill comes mid-probe.
    oracle = _oracle(tmp_path / "slow_norm_marked.py", marks,
                     held=(gate, {hist.main[0], hist.main[-1]}))
    fleet.start(range(4))
    store = open_store(pg_url)
    _wait("4 live workers", lambda: len(workers.live(store)) == 4)
    listed = json.loads(run_cli("--db", pg_url, "workers", "--json", check=True).stdout)
    assert sorted(w["gpu"] for w in listed["workers"] if w["alive"]) == ["0", "1", "2", "3"]
    table = run_cli("--db", pg_url, "workers", check=True).stdout
    assert "/gpu3" in table and "idle" in table

    coord = _coordinator(fleet, hist, oracle)  # no --enqueue: live workers are found
    # Once the endpoints are judged, kill the worker of the first oracle run seen.
    _wait("the endpoints", lambda: len(list(marks.glob("*.done"))) >= 2, timeout=300)
    sha, oracle_pid = _wait("an oracle run", lambda: _running(marks), timeout=120)[0]
    victim = _ppid(_ppid(oracle_pid))  # oracle -> its reaper -> the worker
    assert victim in fleet.procs, (victim, list(fleet.procs))
    seen = workers.listing(store)
    assert any(w.pid == victim and w.commit_sha == sha for w in seen), seen
    fleet.kill(victim)
    _wait("the killed worker's oracle to die", lambda: not _alive(oracle_pid), timeout=120)
    gate.write_text("")  # the other probes, and the killed one's retry, run at once

    stdout, stderr = coord.communicate(timeout=600)
    assert coord.returncode == 0, stderr + fleet.log_tail()
    assert "live worker(s)" in stderr
    d = json.loads(stdout)
    assert d["culprit"]["sha"] == hist.culprit
    bid = int(d["id"])
    retried = [t for t in tasks.of_bisection(store, bid) if t.commit_sha == sha]
    assert retried[-1].attempt >= 2 and retried[-1].state is TaskState.DONE
    assert not (marks / f"{sha}-{oracle_pid}.done").exists()  # the killed run never ended
    figures = _figures(store, bid)
    _check_clean(store, bid, figures)
    n = len(bisections.candidates(store, bid))
    assert figures["rounds"] <= math.ceil(math.log(n, 5)) + 1
    assert len(figures["gpus"]) > 1  # the probes of a round ran on different workers
    pids = set(fleet.procs) | {victim}
    fleet.stop()
    assert _probe_processes(pids) == []
    logs = fleet.log_tail()
    assert "of a silent worker back to the queue" in logs, logs
    print(logs)
    print("CRASH-FIGURES kill-one", json.dumps({**figures, "kills": 1, "workers": 4,
                                                 "candidates": n}))


def test_all_workers_killed_then_restarted_finish_the_bisection(
        fast: None, pg_url: str, tmp_path: Path, fleet: Fleet) -> None:
    hist = _history(tmp_path / "repo")
    marks, gate = tmp_path / "marks", tmp_path / "go"
    oracle = _oracle(tmp_path / "slow_norm_marked.py", marks,
                     held=(gate, {hist.main[0], hist.main[-1]}))
    first = fleet.start(range(4))
    store = open_store(pg_url)
    _wait("4 live workers", lambda: len(workers.live(store)) == 4)
    coord = _coordinator(fleet, hist, oracle, "--enqueue", "--jobs", "4")
    _wait("the endpoints", lambda: len(list(marks.glob("*.done"))) >= 2, timeout=300)
    running = _wait("oracle runs", lambda: _running(marks), timeout=120)
    for pid in first:
        fleet.kill(pid)
    for _sha, pid in running:
        _wait("the oracles of the killed workers to die", lambda p=pid: not _alive(p),
              timeout=120)
    _wait("every probe process of the killed workers to die",
          lambda: not _probe_processes(set(first)), timeout=120)
    _wait("no live worker", lambda: not workers.live(store), timeout=120)
    # No worker left, and the coordinator, which looks every BISECTOR_TASK_POLL_S, waits for
    # workers; it does not give up.
    assert coord.poll() is None
    gate.write_text("")
    fleet.start(range(4))
    stdout, stderr = coord.communicate(timeout=600)
    assert coord.returncode == 0, stderr + fleet.log_tail()
    d = json.loads(stdout)
    assert d["culprit"]["sha"] == hist.culprit
    bid = int(d["id"])
    figures = _figures(store, bid)
    _check_clean(store, bid, figures)
    assert figures["retried_tasks"] >= len(running)
    for sha, pid in running:  # no killed run was judged: each commit's one verdict is later
        assert not (marks / f"{sha}-{pid}.done").exists()
    pids = set(fleet.procs)
    fleet.stop()
    assert _probe_processes(pids | set(first)) == []
    print("CRASH-FIGURES kill-all", json.dumps({**figures, "kills": len(first),
                                                 "killed_mid_probe": len(running),
                                                 "workers": 8}))


def test_cancel_stops_the_probe_in_flight_and_resume_finishes(
        fast: None, pg_url: str, tmp_path: Path, fleet: Fleet) -> None:
    """Nothing here waits for a time: the probes past the endpoints hold until the test opens
    their gate, so the cancel always finds them in flight, and every wait is for a thing the
    test sees happen (a mark, a dead process, an idle worker); the deadlines only turn a hang
    into a failure. (It failed on a loaded machine when a 6 s oracle ended before the cancel.)
    """
    hist = _history(tmp_path / "repo")
    marks, gate = tmp_path / "marks", tmp_path / "go"
    oracle = _oracle(tmp_path / "slow_norm_marked.py", marks,
                     held=(gate, {hist.main[0], hist.main[-1]}))
    fleet.start(range(2))
    store = open_store(pg_url)
    _wait("2 live workers", lambda: len(workers.live(store)) == 2)
    coord = _coordinator(fleet, hist, oracle, "--enqueue")
    _wait("the endpoints", lambda: len(list(marks.glob("*.done"))) >= 2, timeout=600)
    running = _wait("an oracle run", lambda: _running(marks), timeout=600)
    bid = bisections.listing(store, 1)[0].id
    r = run_cli("--db", pg_url, "cancel", str(bid), "--json")
    assert r.returncode == 0, r.stderr
    stopped = json.loads(r.stdout)["stopped"]
    assert {s["commit"] for s in stopped} >= {sha for sha, _ in running}
    _, stderr = coord.communicate(timeout=600)
    assert coord.returncode == 130, stderr
    assert f"bisection {bid} was cancelled" in stderr and f"bisect resume {bid}" in stderr
    for _sha, pid in running:
        _wait("the cancelled oracle to die", lambda p=pid: not _alive(p), timeout=120)
    assert bisections.get(store, bid).state.value == "cancelled"
    # Each worker is done with its cancelled job (idle again: whatever it would write is
    # written by now), and none wrote a verdict for it.
    _wait("the workers to be idle", lambda: all(
        w.task_id is None for w in workers.listing(store)), timeout=120)
    for sha, pid in running:  # no cancelled run ended
        assert not (marks / f"{sha}-{pid}.done").exists()
    with store.engine.connect() as c:
        judged = {sha for (sha,) in c.execute(text("SELECT commit_sha FROM run"))}
    assert not judged & {s["commit"] for s in stopped}  # no verdict for a cancelled probe
    again = run_cli("--db", pg_url, "cancel", str(bid))
    assert again.returncode == 0 and "no probe was in flight" in again.stderr
    gate.write_text("")  # the resumed probes run at once
    r = run_cli("--db", pg_url, "resume", str(bid), "--json", timeout=600)
    assert r.returncode == 0, r.stderr + fleet.log_tail()
    assert json.loads(r.stdout)["culprit"]["sha"] == hist.culprit
    figures = _figures(store, bid)
    _check_clean(store, bid, figures)
    done = run_cli("--db", pg_url, "cancel", str(bid))
    assert done.returncode == 2 and "already done" in done.stderr
    print("CRASH-FIGURES cancel", json.dumps({**figures, "cancelled": len(stopped)}))


def test_a_burst_worker_drains_the_waiting_probes_in_process_and_returns(
        fast: None, pg_url: str, tmp_path: Path, fleet: Fleet) -> None:
    """A worker with ``burst`` (rq's ``burst=True``, Procrastinate's ``wait=False``) run in
    this process takes the probe jobs a coordinator queued, one after the other, and returns
    once none waits: the test then asserts what it did, with no worker process to start and
    no polling for its results."""
    from bisector.run.policy import LOCAL
    from bisector.worker.process import serve

    hist = _history(tmp_path / "repo")
    oracle = _oracle(tmp_path / "norm_marked.py", tmp_path / "marks")
    store = open_store(pg_url)
    _coordinator(fleet, hist, oracle, "--enqueue")  # no worker yet: its first round waits
    queued = _wait("the first round's probes in the queue", lambda: [
        t for b in bisections.listing(store, 1) for t in tasks.of_bisection(store, b.id)
        if t.state is TaskState.QUEUED])
    said: list[str] = []
    serve(store, gpu=None, queues=("probe",), name="burst", say=said.append, policy=LOCAL,
          burst=True)  # returns: nothing waits any more
    done = {t.id: t for t in tasks.get(store, [t.id for t in queued])}
    assert all(t.state is TaskState.DONE and t.verdict and t.run_id for t in done.values()), \
        (done, said)
    verdicts = {t.commit_sha: t.verdict for t in done.values()}
    if hist.main[0] in verdicts:  # the endpoints: good, then bad
        assert verdicts[hist.main[0]] == "good"
    if hist.main[-1] in verdicts:
        assert verdicts[hist.main[-1]] == "bad"
    [me] = [w for w in workers.listing(store) if w.name == "burst"]
    assert me.state.value == "stopped" and me.jobs == len(queued), said
    assert said[-1] == "worker burst stopped"


def test_two_bisections_side_by_side_share_the_workers_and_their_verdicts(
        fast: None, pg_url: str, tmp_path: Path, fleet: Fleet) -> None:
    """Two coordinators at once over overlapping ranges, one oracle: each finds the culprit,
    and a commit both need is judged once (the second job waits for the first's verdict)."""
    hist = _history(tmp_path / "repo")
    oracle = _oracle(tmp_path / "slow_norm_marked.py", tmp_path / "marks", sleep_s=1)
    fleet.start(range(3))
    store = open_store(pg_url)
    _wait("3 live workers", lambda: len(workers.live(store)) == 3)
    coords = [_coordinator(fleet, hist, oracle, "--enqueue", "--jobs", "2"),
              subprocess.Popen([*BISECT, "--db", pg_url, "start", "--repo", str(hist.path),
                                "--good", hist.main[5], "--bad", hist.main[-1], "--oracle",
                                str(oracle), "--no-confirm", "--json", "--enqueue", "--jobs",
                                "2"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=os.environ.copy())]
    fleet.coordinators.append(coords[1])
    answers = []
    for c in coords:
        stdout, stderr = c.communicate(timeout=600)
        assert c.returncode == 0, stderr + fleet.log_tail()
        answers.append(json.loads(stdout))
    assert [a["culprit"]["sha"] for a in answers] == [hist.culprit] * 2
    with store.engine.connect() as c:
        per_commit = dict(c.execute(text(
            "SELECT commit_sha, count(*) FROM run GROUP BY commit_sha")).all())
    assert set(per_commit.values()) == {1}, per_commit
    shared = {p["sha"] for p in answers[0]["probes"]} & {p["sha"] for p in answers[1]["probes"]}
    assert hist.main[-1] in shared  # the bad endpoint of both, judged once
    for a in answers:
        _check_clean(store, int(a["id"]), _figures(store, int(a["id"])))


def test_a_build_worker_builds_ahead_of_the_probes(fast: None, pg_url: str, tmp_path: Path,
                                                   fleet: Fleet,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A CPU-only `--queue build` worker builds each probe's commit before a GPU worker runs
    the probe, which then finds the wheel built (one box here: one cache)."""
    monkeypatch.setenv("BISECTOR_WORKER_STALE_S", "30")  # nobody dies here: no false "gone"
    # Its own seed: the other tests of this module built the shared history's wheels already.
    hist = _history(tmp_path / "repo", seed=SEED + 1)
    oracle = _oracle(tmp_path / "slow_norm_marked.py", tmp_path / "marks", sleep_s=0.5)
    fleet.start(range(2))
    fleet.start(range(1), "--queue", "build", "--name", "builder")
    store = open_store(pg_url)
    _wait("the workers", lambda: len(workers.live(store)) == 3
          and len(workers.live(store, "build")) == 1)
    coord = _coordinator(fleet, hist, oracle, "--enqueue", "--jobs", "2", "--no-prebuilt")
    stdout, stderr = coord.communicate(timeout=600)
    assert coord.returncode == 0, stderr + fleet.log_tail()
    d = json.loads(stdout)
    assert d["culprit"]["sha"] == hist.culprit
    logs = {f.name: f.read_text() for f in fleet.logs.glob("*.log")}
    builder = logs.pop("worker-3.log")
    said = f"{builder}\n{logs}\n{[(p['sha'][:12], p['round']) for p in d['probes']]}"
    assert builder.count("ahead of its probe") == len(d["probes"]), said
    # Each was built there, but for the root commit, whose wheel another test of the session
    # may have built already (every generated history shares its root).
    assert len(d["probes"]) - 1 <= builder.count("from source") <= len(d["probes"]), said
    assert all("from source" not in text for text in logs.values()), said
    _check_clean(store, int(d["id"]), _figures(store, int(d["id"])))


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_late_write_of_a_replaced_attempt_is_refused(
        backend: str, tmp_path: Path, home: Path, request: pytest.FixtureRequest) -> None:
    url = str(tmp_path / "b.db") if backend == "sqlite" else request.getfixturevalue("pg_url")
    store = open_store(url)
    bid, key, shas = _bisection(store)
    t = tasks.open_round(store, bid, "coord:1:1", 1, [(0, shas[0])])
    assert t is not None
    killed = tasks.start(store, t[0].id, owner="box-a:11:1", worker="box-a/gpu0")
    retry = tasks.start(store, t[0].id, owner="box-b:22:1", worker="box-b/gpu0")
    assert killed is not None and retry is not None and retry.number == killed.number + 1
    assert retry.previous_owner == "box-a:11:1"
    assert tasks.finish(store, t[0].id, killed.number, key, verdict="bad",
                        run=_run(shas[0], Outcome.FAIL)) is None
    assert _verdicts(store) == 0  # the late write left nothing, not even history
    assert not tasks.current(store, t[0].id, killed.number)
    vid = tasks.finish(store, t[0].id, retry.number, key, verdict="good",
                       run=_run(shas[0], Outcome.PASS))
    assert vid is not None and _verdicts(store) == 1
    assert tasks.finish(store, t[0].id, killed.number, key, verdict="bad",
                        run=_run(shas[0], Outcome.FAIL)) is None  # still refused after
    assert tasks.start(store, t[0].id, owner="box-c:3:1", worker="c") is None  # done
    [row] = tasks.get(store, [t[0].id])
    assert (row.state, row.verdict, row.run_id, row.attempt) == (TaskState.DONE, "good",
                                                                     vid, 2)
    # The recorder a worker uses says so, and a cancelled task fences its attempt out too.
    t2 = tasks.open_round(store, bid, "coord:1:1", 1, [(1, shas[1])])
    assert t2 is not None
    a = tasks.start(store, t2[0].id, owner="box-a:11:1", worker="box-a/gpu0")
    assert a is not None
    tasks.cancel_open(store, bid)
    rec = TaskRecorder(store, key, "box-a:11:1", a, sampled=False)
    from bisector.core.search import Verdict
    with pytest.raises(Superseded):
        rec.record(1, shas[1], _run(shas[1], Outcome.FAIL), Verdict.BAD, 1)
    assert _verdicts(store) == 1


def test_racing_attempts_write_one_verdict(pg_url: str, home: Path) -> None:
    """Eight attempts of one task started and finished from threads in any interleaving:
    exactly one result lands, the one of the attempt that was current when it wrote."""
    store = open_store(pg_url)
    bid, key, shas = _bisection(store)
    [t] = tasks.open_round(store, bid, "coord:1:1", 1, [(0, shas[0])]) or []
    wins: list[int] = []

    def attempt(i: int) -> None:
        a = tasks.start(store, t.id, owner=f"box-{i}:{i}:1", worker=f"w{i}")
        if a is None:
            return
        time.sleep(random.random() / 20)
        if tasks.finish(store, t.id, a.number, key, verdict="good",
                        run=_run(shas[0], Outcome.PASS)) is not None:
            wins.append(a.number)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    [row] = tasks.get(store, [t.id])
    assert len(wins) == 1 and row.attempt == wins[0] and _verdicts(store) == 1


def _bisection(store: Store) -> tuple[int, Key, list[str]]:
    shas = [f"{i:040x}" for i in range(1, 4)]
    bisections.save_oracle(store, "0" * 64, "o", "print()", {})
    bid = bisections.create(
        store, candidates=shas, owner="coord:1:1", repo_path="/r", good_ref="g", bad_ref="b",
        good_sha=shas[0], bad_sha=shas[-1], oracle_name="o", oracle_sha256="0" * 64,
        polarity="failure", env_fingerprint="f" * 64, environment={}, settings={}, notes=[])
    return bid, Key("0" * 64, "f" * 64), shas


def _run(sha: str, outcome: Outcome) -> NewRun:
    return NewRun(commit_sha=sha, outcome=outcome, reason="", reusable=True,
                  started_at=datetime.now(UTC))


def _verdicts(store: Store) -> int:
    with store.engine.connect() as c:
        return int(c.execute(text("SELECT count(*) FROM run")).scalar() or 0)


@pytest.mark.adversarial
def test_a_killed_worker_is_not_shown_beside_the_attempt_another_ran(
        tmp_path: Path, home: Path) -> None:
    """Issue 32, item 8: ``bisect workers`` showed a worker killed with -9 beside attempt 2,
    which another worker ran."""
    from bisector.store import workers as ws

    store = open_store(str(tmp_path / "b.db"))
    bid, _key, shas = _bisection(store)
    [t] = tasks.open_round(store, bid, "coord:1:1", 1, [(0, shas[0])]) or []
    a = ws.register(store, name="box-a/gpu0", owner="box-a:11:1", host="box-a", pid=11,
                    gpu="0", queues=["probe"])
    b = ws.register(store, name="box-b/gpu0", owner="box-b:22:1", host="box-b", pid=22,
                    gpu="0", queues=["probe"])
    tasks.start(store, t.id, owner="box-a:11:1", worker="box-a/gpu0")
    ws.busy(store, a, t.id)  # then killed: its row keeps the task
    tasks.start(store, t.id, owner="box-b:22:1", worker="box-b/gpu0")
    ws.busy(store, b, t.id)
    rows = {w.name: w for w in ws.listing(store)}
    assert rows["box-b/gpu0"].attempt == 2
    assert rows["box-a/gpu0"].task_id is None and rows["box-a/gpu0"].attempt is None
