"""The bisection service: glue between history, search, artifacts, executors and the store.

Everything a run learns is committed the moment it exists: the bisection and its frozen
candidate list before the first probe, each verdict right after its oracle returns. Killing the
controller at any instant therefore loses at most the probe in flight, and ``resume`` continues
from the store alone (it even runs the oracle's stored bytes, not whatever the file holds now).

Verdicts are keyed by (commit, oracle sha256, environment fingerprint) and shared: at every step
the search sees every reusable verdict any bisection has stored for its candidates, so a second
bisection over an overlapping range pays for nothing already judged.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import socket
import sys
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import git
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from bisector import history
from bisector.artifacts.build import (
    build_key,
    build_settings,
    failure_summary,
    obtain_wheel,
    wheel_digest,
)
from bisector.errors import BusyError, EndpointError, NotFoundError, UsageError
from bisector.executors.base import RunResult
from bisector.executors.local import LocalExecutor
from bisector.oracle import (
    Oracle,
    Outcome,
    Polarity,
    default_oracles_dir,
    load_oracle,
    parse_metadata,
    to_verdict,
)
from bisector.profiles import Profile, detect_profile, get_profile
from bisector.search import (
    Culprit,
    Probe,
    Problem,
    Stop,
    Verdict,
    Window,
    next_step,
    remaining_estimate,
)
from bisector.settings import cache_dir, logs_dir
from bisector.store import models as m
from bisector.store.db import Store

HEARTBEAT_STALE = timedelta(minutes=10)


class Events(Protocol):
    """What the service tells its caller while it works (the CLI draws it with rich)."""

    def note(self, text: str) -> None: ...
    def probe_start(self, seq: int, position: int, sha: str, subject: str, left: int) -> None: ...
    def phase(self, text: str) -> None: ...
    def probe_done(
        self, position: int, sha: str, verdict: Verdict, reason: str, seconds: float, reused: bool
    ) -> None: ...


class QuietEvents:
    def note(self, text: str) -> None:
        pass

    def probe_start(self, seq: int, position: int, sha: str, subject: str, left: int) -> None:
        pass

    def phase(self, text: str) -> None:
        pass

    def probe_done(
        self, position: int, sha: str, verdict: Verdict, reason: str, seconds: float, reused: bool
    ) -> None:
        pass


@dataclass(frozen=True)
class StartOptions:
    repo: Path
    good: str
    bad: str
    oracle: str
    find_fix: bool = False
    regress: Polarity | None = None
    first_parent: bool = True
    profile: str | None = None
    python: str = field(default_factory=lambda: sys.executable)
    offline: bool = False
    build_timeout: float = 3600.0
    oracles_dir: Path | None = None


@dataclass(frozen=True)
class RunSettings:
    """What a run needs besides the candidates; stored as JSON so resume rebuilds it."""

    repo: str
    profile: str
    python: str
    offline: bool
    build_timeout: float
    first_parent: bool
    find_fix: bool
    reproduce: str


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _owner_alive(owner: str | None, heartbeat: datetime | None) -> bool:
    if not owner:
        return False
    host, _, pid = owner.rpartition(":")
    if host == socket.gethostname():
        try:
            os.kill(int(pid), 0)
        except (ProcessLookupError, ValueError):
            return False
        except PermissionError:
            return True
        return True
    if heartbeat is None:
        return False
    if heartbeat.tzinfo is None:
        heartbeat = heartbeat.replace(tzinfo=UTC)
    return datetime.now(UTC) - heartbeat < HEARTBEAT_STALE


def env_fingerprint(executor_facts: dict[str, Any], build: dict[str, Any]) -> str:
    blob = json.dumps({"executor": executor_facts, "build": build}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def reproduce_command(opts: StartOptions, oracle: Oracle, repo: str) -> str:
    """A command line that repeats this bisection from any directory."""
    bundled = oracle.path.parent == (opts.oracles_dir or default_oracles_dir()).resolve()
    parts = ["bisect", "start", "--repo", repo, "--good", opts.good, "--bad", opts.bad,
             "--oracle", oracle.name if bundled else str(oracle.path)]
    if opts.find_fix:
        parts.append("--find-fix")
    if opts.regress is not None:
        parts += ["--regress", opts.regress.value]
    if not opts.first_parent:
        parts.append("--ancestry-path")
    if opts.profile:
        parts += ["--profile", opts.profile]
    return shlex.join(parts)


def _polarity(opts: StartOptions, oracle: Oracle) -> Polarity:
    pol = opts.regress or oracle.meta.polarity
    if opts.find_fix:
        # Find-fix flips whatever the oracle calls regressed: we look for the first "fixed".
        pol = Polarity.SUCCESS if pol is Polarity.FAILURE else Polarity.FAILURE
    return pol


@dataclass(frozen=True)
class Prepared:
    """A validated start request: everything checked, nothing written yet."""

    plan: history.RangePlan
    oracle: Oracle
    polarity: Polarity
    fingerprint: str
    environment: dict[str, Any]
    settings: RunSettings


def prepare(opts: StartOptions) -> Prepared:
    """Check every input (repo, refs, range, oracle, profile) without touching the store."""
    repo = history.open_repo(opts.repo)
    plan = history.plan_range(repo, opts.good, opts.bad, first_parent=opts.first_parent)
    oracle = load_oracle(opts.oracle, opts.oracles_dir)
    profile = _pick_profile(repo, plan.bad_sha, opts.profile)
    executor = LocalExecutor(opts.python, profile.import_name, opts.offline)
    build = build_settings(profile, opts.python)
    environment = {"executor": executor.fingerprint_facts(), "build": build}
    repo_path = str(Path(repo.working_dir).resolve())
    settings = RunSettings(
        repo=repo_path,
        profile=profile.name,
        python=opts.python,
        offline=opts.offline,
        build_timeout=opts.build_timeout,
        first_parent=opts.first_parent,
        find_fix=opts.find_fix,
        reproduce=reproduce_command(opts, oracle, repo_path),
    )
    return Prepared(plan, oracle, _polarity(opts, oracle),
                    env_fingerprint(environment["executor"], build), environment, settings)


def record(store: Store, p: Prepared) -> int:
    """Store the bisection and its frozen candidate list in one transaction."""
    oracle, plan = p.oracle, p.plan
    with store.session() as s:
        if s.get(m.OracleRow, oracle.sha256) is None:
            s.add(m.OracleRow(
                sha256=oracle.sha256, name=oracle.name,
                content=oracle.content.decode("utf-8", errors="replace"),
                meta=_meta_json(oracle),
            ))
            s.flush()
        b = m.Bisection(
            state="running", repo_path=p.settings.repo, good_ref=plan.good_ref,
            bad_ref=plan.bad_ref, good_sha=plan.good_sha, bad_sha=plan.bad_sha,
            oracle_name=oracle.name, oracle_sha256=oracle.sha256, polarity=p.polarity.value,
            env_fingerprint=p.fingerprint, environment=p.environment,
            settings=asdict(p.settings), notes=list(plan.notes),
            n_candidates=len(plan.candidates), owner=_owner(),
            heartbeat_at=datetime.now(UTC), result={},
        )
        s.add(b)
        s.flush()
        s.add_all(
            m.Candidate(bisection_id=b.id, position=i, sha=sha)
            for i, sha in enumerate(plan.candidates)
        )
        return b.id


def start_bisection(store: Store, opts: StartOptions) -> int:
    return record(store, prepare(opts))


def _meta_json(oracle: Oracle) -> dict[str, Any]:
    meta = asdict(oracle.meta)
    plain: dict[str, Any] = json.loads(
        json.dumps(meta, default=lambda o: getattr(o, "value", str(o)))
    )
    return plain


def _pick_profile(repo: git.Repo, bad_sha: str, name: str | None) -> Profile:
    if name:
        return get_profile(name)

    def exists(path: str) -> bool:
        try:
            repo.git.cat_file("-e", f"{bad_sha}:{path}")
            return True
        except git.GitCommandError:
            return False

    return detect_profile(exists)


class Runner:
    """Drives one stored bisection to its end. Construct per run or resume."""

    def __init__(self, store: Store, bisection_id: int, events: Events | None = None) -> None:
        self.store = store
        self.id = bisection_id
        self.events: Events = events or QuietEvents()
        with store.session() as s:
            b = s.get(m.Bisection, bisection_id)
            if b is None:
                raise NotFoundError(
                    f"no bisection with id {bisection_id} in {store.url}: see `bisect list`"
                )
            self.b = b
            self.candidates = list(
                s.scalars(
                    select(m.Candidate.sha)
                    .where(m.Candidate.bisection_id == bisection_id)
                    .order_by(m.Candidate.position)
                )
            )
            orow = s.get(m.OracleRow, b.oracle_sha256)
            assert orow is not None
        self.settings = RunSettings(**b.settings)
        self.polarity = Polarity(b.polarity)
        self.position = {sha: i for i, sha in enumerate(self.candidates)}
        self.profile = get_profile(self.settings.profile)
        self.oracle = self._materialise_oracle(orow)
        self.executor = LocalExecutor(
            self.settings.python, self.profile.import_name, self.settings.offline
        )
        self._repo: git.Repo | None = None

    @property
    def repo(self) -> git.Repo:
        if self._repo is None:
            self._repo = history.open_repo(self.settings.repo)
        return self._repo

    def _materialise_oracle(self, row: m.OracleRow) -> Oracle:
        """The oracle as stored; resume must not pick up later edits of the file."""
        path = cache_dir() / "oracles" / row.sha256[:16] / f"{row.name}.py"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(row.content)
        content = path.read_bytes()
        return Oracle(row.name, path, content, parse_metadata(row.content, row.name))

    # -- ownership -------------------------------------------------------------------------

    def claim(self) -> None:
        with self.store.session() as s:
            b = s.get(m.Bisection, self.id, with_for_update=True)
            assert b is not None
            if b.state == "running" and b.owner != _owner() and _owner_alive(
                b.owner, b.heartbeat_at
            ):
                raise BusyError(
                    f"bisection {self.id} is being run by {b.owner}: wait for it, "
                    f"or stop that process and run `bisect resume {self.id}`"
                )
            b.state, b.owner, b.heartbeat_at = "running", _owner(), datetime.now(UTC)

    def _heartbeat(self) -> None:
        with self.store.session() as s:
            b = s.get(m.Bisection, self.id)
            assert b is not None
            b.heartbeat_at = datetime.now(UTC)

    def mark_interrupted(self) -> None:
        with self.store.session() as s:
            b = s.get(m.Bisection, self.id)
            if b is not None and b.state == "running":
                b.state, b.owner = "interrupted", None

    # -- verdicts --------------------------------------------------------------------------

    def known(self) -> dict[int, Verdict]:
        """This bisection's own probes plus every reusable verdict stored for its candidates.

        Verdicts first seen here are logged as reused probes, so ``bisect log`` shows them.
        """
        with self.store.session() as s:
            own = {
                p.position: Verdict(p.verdict)
                for p in s.scalars(select(m.Probe).where(m.Probe.bisection_id == self.id))
            }
            rows = s.execute(
                select(m.VerdictRow)
                .where(m.VerdictRow.oracle_sha256 == self.b.oracle_sha256)
                .where(m.VerdictRow.env_fingerprint == self.b.env_fingerprint)
                .where(m.VerdictRow.reusable.is_(True))
                .order_by(m.VerdictRow.id)
            ).scalars()
            latest: dict[int, m.VerdictRow] = {}
            for row in rows:
                pos = self.position.get(row.commit_sha)
                if pos is not None:
                    latest[pos] = row
            seq = self._next_seq(s)
            for pos, row in sorted(latest.items()):
                if pos in own:
                    continue
                v = to_verdict(Outcome(row.outcome), self.polarity)
                s.add(m.Probe(bisection_id=self.id, seq=seq, position=pos,
                              commit_sha=row.commit_sha, verdict_id=row.id, verdict=v.value,
                              reused=True))
                seq += 1
                own[pos] = v
                self.events.probe_done(pos, row.commit_sha, v, row.reason, 0.0, True)
        return own

    def _next_seq(self, s: Session) -> int:
        n = s.scalar(select(func.max(m.Probe.seq)).where(m.Probe.bisection_id == self.id))
        return 1 if n is None else int(n) + 1

    # -- one probe -------------------------------------------------------------------------

    def artifact_for(self, sha: str) -> m.Artifact:
        """The commit's artifact row: known (built, or known not to build), or made now."""
        key, settings = build_key(self.profile, sha, self.settings.python)
        with self.store.session() as s:
            art = s.scalar(select(m.Artifact).where(m.Artifact.key == key))
            usable = art is not None and art.path and Path(art.path).exists()
            if art is not None and (art.status == "failed" or usable):
                return art
        res = obtain_wheel(
            self.repo, sha, self.profile, python=self.settings.python,
            timeout_s=self.settings.build_timeout,
            on_build=lambda: self.events.phase(f"building {sha[:12]} from source"),
        )
        with self.store.session() as s:
            art = s.scalar(select(m.Artifact).where(m.Artifact.key == key))
            if art is None:
                art = m.Artifact(key=key, commit_sha=sha, kind="source", settings=settings)
                s.add(art)
            art.status = "ok" if res.ok else "failed"
            art.path = str(res.wheel) if res.wheel else None
            if res.wheel:
                art.sha256, art.size = wheel_digest(res.wheel)
            art.log_path, art.log_tail = str(res.log_path), res.log_tail
            art.duration_s = res.duration_s
            s.flush()
            return art

    def probe(self, position: int) -> Verdict:
        sha = self.candidates[position]
        started = datetime.now(UTC)
        art = self.artifact_for(sha)
        if art.status != "ok" or not art.path:
            summary = failure_summary(Path(art.log_path)) if art.log_path else "no log"
            result = RunResult(Outcome.SKIP, f"build failed: {summary}", None, art.duration_s,
                               reusable=True)
        else:
            self.events.phase(f"running {self.oracle.name} on {sha[:12]}")
            run_dir = logs_dir() / "runs" / f"{sha[:12]}-{uuid.uuid4().hex[:8]}"
            result = self.executor.run(wheel=Path(art.path), artifact_key=art.key,
                                       oracle=self.oracle, commit=sha, run_dir=run_dir)
        verdict = to_verdict(result.outcome, self.polarity)
        with self.store.session() as s:
            row = m.VerdictRow(
                commit_sha=sha, oracle_sha256=self.b.oracle_sha256,
                env_fingerprint=self.b.env_fingerprint, outcome=result.outcome.value,
                exit_code=result.exit_code, reason=result.reason, reusable=result.reusable,
                duration_s=result.duration_s, started_at=started, artifact_id=art.id,
                stdout_path=str(result.stdout_path) if result.stdout_path else None,
                stderr_path=str(result.stderr_path) if result.stderr_path else None,
                output_tail=result.output_tail, facts=result.facts,
            )
            s.add(row)
            s.flush()
            s.add(m.Probe(bisection_id=self.id, seq=self._next_seq(s), position=position,
                          commit_sha=sha, verdict_id=row.id, verdict=verdict.value, reused=False))
            b = s.get(m.Bisection, self.id)
            assert b is not None
            b.heartbeat_at = datetime.now(UTC)
        wall = (datetime.now(UTC) - started).total_seconds()
        self.events.probe_done(position, sha, verdict, result.reason, wall, False)
        return verdict

    # -- the loop --------------------------------------------------------------------------

    def run(self) -> m.Bisection:
        self.claim()
        for note in self.b.notes:
            self.events.note(str(note))
        n = len(self.candidates)
        seq = 0
        try:
            while True:
                known = self.known()
                step = next_step(n, known)
                if not isinstance(step, Probe):
                    return self._finish(step)
                for pos in step.positions:
                    seq += 1
                    sha = self.candidates[pos]
                    self.events.probe_start(seq, pos, sha, self._subject(sha),
                                            remaining_estimate(n, known))
                    known[pos] = self.probe(pos)
        except BaseException:
            self.mark_interrupted()
            raise

    def _subject(self, sha: str) -> str:
        try:
            return history.commit_info(self.repo, sha).subject
        except Exception:
            return ""

    def _finish(self, step: Culprit | Window | Stop) -> m.Bisection:
        with self.store.session() as s:
            b = s.get(m.Bisection, self.id)
            assert b is not None
            b.owner = None
            if isinstance(step, Culprit):
                b.state, b.culprit_sha = "done", self.candidates[step.position]
                b.result = {"kind": "culprit", "position": step.position}
                b.message = None
            elif isinstance(step, Window):
                b.state = "ambiguous"
                b.result = {
                    "kind": "window",
                    "suspects": self.candidates[step.first : step.last + 1],
                }
                b.message = (
                    f"skipped commits hide the first bad commit: it is one of "
                    f"{step.last - step.first + 1} suspects"
                )
            else:
                b.state = "failed"
                b.result = {"kind": "stop", "problem": step.problem.value,
                            "position": step.position}
                b.message = self._stop_message(step)
            s.flush()
            s.expunge(b)
        if isinstance(step, Stop):
            raise EndpointError(b.message or "")
        return b

    def _stop_message(self, step: Stop) -> str:
        sha = self.candidates[step.position][:12]
        old, new = ("broken", "fixed") if self.settings.find_fix else ("good", "bad")
        merge_base = self.candidates[0] != self.b.good_sha
        good_desc = "the merge-base of your refs" if merge_base else f"{old} {self.b.good_ref}"
        if step.problem is Problem.GOOD_IS_BAD:
            return (f"{good_desc} ({sha}) is already {new}: the change is older; "
                    f"pick an older --good")
        if step.problem is Problem.BAD_IS_GOOD:
            return (f"{new} {self.b.bad_ref} ({sha}) is {old} with this oracle: check that the "
                    f"oracle reproduces there (bisect check), or use --find-fix / --regress")
        if step.problem is Problem.GOOD_UNTESTABLE:
            return (f"the {old} endpoint {sha} could not be tested (see `bisect show "
                    f"{self.id}`): fix the cause or pick another --good")
        if step.problem is Problem.BAD_UNTESTABLE:
            return (f"the {new} endpoint {sha} could not be tested (see `bisect show "
                    f"{self.id}`): fix the cause or pick another --bad")
        return (f"commit {sha} is {new} but a newer commit is {old}: the oracle is flaky or the "
                f"behaviour comes and goes; make the oracle deterministic or add repeats")


def resume_bisection(runner: Runner) -> m.Bisection:
    """Finish a stored bisection; a finished one is only reported again."""
    if runner.b.state in ("done", "ambiguous"):
        return runner.b
    if runner.b.state == "failed":
        raise UsageError(
            f"bisection {runner.id} stopped: {runner.b.message} (start a new one instead)"
        )
    return runner.run()
