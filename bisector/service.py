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
import sys
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import git
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from bisector import history
from bisector.artifacts.build import (
    Builder,
    HostBuilder,
    build_settings,
    detect_cuda_arch,
    failure_summary,
    python_tag,
)
from bisector.artifacts.docker_build import BUILDER_IMAGE, DockerBuilder, repository_id
from bisector.artifacts.installable import InstalledBase
from bisector.artifacts.prebuilt import Discoverer, Discovery, Prebuilt
from bisector.artifacts.provider import Provider, find_installed
from bisector.errors import BusyError, EndpointError, NotFoundError, UsageError
from bisector.executors.base import Executor, RunResult
from bisector.executors.container import (
    DEFAULT_IMAGE,
    DockerExecutor,
    client,
    local_owner_alive,
    sweep_orphans,
)
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
from bisector.owner import local_pid_alive, owner_id
from bisector.plan import PlanReport, make_plan
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
    prebuilt: bool = True
    nightly_index: str | None = None  # None: the profile's; "" turns nightlies off
    release_index: str | None = None  # None: the configured index for PyTorch, else none
    variant: str | None = None  # cu128, cpu ...; None: the profile's default
    installed_base: str | None = None  # a ref: the torch installed for --python is this commit
    executor: str = "local"  # or "docker"
    image: str | None = None
    gpus: str | None = None
    memory: str = "16g"
    pids: int = 4096
    build_in: str | None = None  # host or docker; None: docker with --executor docker
    builder_image: str | None = None
    cuda_arch: str | None = None  # None: the target GPU's, else the profile's default
    max_jobs: int | None = None
    build_env: tuple[str, ...] = ()  # KEY=VALUE overrides of the profile's build variables


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
    variant: str | None = None
    nightly_index: str | None = None
    release_index: str | None = None
    prebuilts: list[dict[str, Any]] = field(default_factory=list)
    installed: dict[str, Any] | None = None
    executor: str = "local"
    docker: dict[str, Any] = field(default_factory=dict)
    # Where builds run: {"in": "host"} or {"in": "docker", "image", "repo_id", ...}, plus the
    # GPU architectures and the user's build variable overrides.
    build: dict[str, Any] = field(default_factory=dict)


_owner = owner_id


def _owner_alive(owner: str | None, heartbeat: datetime | None) -> bool:
    if not owner:
        return False
    local = local_pid_alive(owner)
    if local is not None:
        return local
    if heartbeat is None:
        return False
    if heartbeat.tzinfo is None:
        heartbeat = heartbeat.replace(tzinfo=UTC)
    return datetime.now(UTC) - heartbeat < HEARTBEAT_STALE


def make_executor(
    kind: str, docker_opts: dict[str, Any], python: str, import_name: str | None, offline: bool,
    labels: dict[str, str] | None = None,
) -> Executor:
    if kind == "docker":
        ex = DockerExecutor(import_name, image=docker_opts.get("image") or DEFAULT_IMAGE,
                            gpus=docker_opts.get("gpus"), memory=docker_opts.get("memory", "16g"),
                            pids=int(docker_opts.get("pids", 4096)), offline=offline,
                            labels=labels)
        if labels is None and not ex.image_id:
            raise UsageError(f"image {ex.image_name} does not exist: run `make images` "
                             f"(or pass --image)")
        return ex
    return LocalExecutor(python, import_name, offline)


def make_builder(b: dict[str, Any], python: str, offline: bool,
                 labels: dict[str, str] | None = None) -> Builder:
    """The place builds run, from the stored settings (so resume builds the same way)."""
    if b.get("in") == "docker":
        return DockerBuilder(
            str(b["repo_id"]), image=b.get("image") or BUILDER_IMAGE,
            cuda_arch=b.get("cuda_arch"), max_jobs=b.get("max_jobs"), offline=offline,
            requires=tuple(b.get("requires", ())), labels=labels)
    return HostBuilder(python, b.get("cuda_arch"))


def profile_for(st: RunSettings) -> Profile:
    """The stored profile with the user's ``--build-env`` overrides applied."""
    prof = get_profile(st.profile)
    env = st.build.get("env") or {}
    return replace(prof, build_env={**prof.build_env, **env}) if env else prof


def parse_build_env(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        k, sep, v = pair.partition("=")
        if not sep or not k or not k.replace("_", "").isalnum():
            raise UsageError(f"--build-env {pair!r}: write KEY=VALUE, e.g. USE_DISTRIBUTED=1")
        out[k] = v
    return out


def resolve_cuda_arch(profile: Profile, opts: StartOptions) -> str | None:
    """TORCH_CUDA_ARCH_LIST: asked for, else the GPUs the probes will use, else the default.

    None when the profile's build does not use it, so it never splits the cache for nothing.
    """
    if not any("{cuda_arch}" in v for v in profile.build_env.values()):
        return None
    return opts.cuda_arch or detect_cuda_arch(opts.gpus) or profile.default_cuda_arch


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
    if opts.executor != "local":
        parts += ["--executor", opts.executor]
        if opts.image:
            parts += ["--image", opts.image]
        if opts.gpus:
            parts += ["--gpus", opts.gpus]
    if opts.build_in:
        parts += ["--build-in", opts.build_in]
    if opts.builder_image:
        parts += ["--builder-image", opts.builder_image]
    if opts.cuda_arch:
        parts += ["--cuda-arch", opts.cuda_arch]
    for pair in opts.build_env:
        parts += ["--build-env", pair]
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
    discovery: Discovery | None = None


def prepare(opts: StartOptions) -> Prepared:
    """Check every input (repo, refs, range, oracle, profile) without touching the store."""
    repo = history.open_repo(opts.repo)
    plan = history.plan_range(repo, opts.good, opts.bad, first_parent=opts.first_parent)
    oracle = load_oracle(opts.oracle, opts.oracles_dir)
    profile = _pick_profile(repo, plan.bad_sha, opts.profile)
    if opts.executor not in ("local", "docker"):
        raise UsageError(f"--executor {opts.executor!r}: choose local or docker")
    docker_opts = {"image": opts.image or "bisector/runtime:latest", "gpus": opts.gpus,
                   "memory": opts.memory, "pids": opts.pids}
    if opts.executor == "docker" and opts.installed_base:
        raise UsageError("--installed-base needs --executor local: a container cannot see the "
                         "host's installed torch")
    executor = make_executor(opts.executor, docker_opts, opts.python, profile.import_name,
                             opts.offline)
    build_in = opts.build_in or ("docker" if opts.executor == "docker" else "host")
    if build_in not in ("host", "docker"):
        raise UsageError(f"--build-in {build_in!r}: choose host or docker")
    overrides = parse_build_env(opts.build_env)
    profile = replace(profile, build_env={**profile.build_env, **overrides})
    build_opts: dict[str, Any] = {"in": build_in, "cuda_arch": resolve_cuda_arch(profile, opts),
                                  "env": overrides}
    if build_in == "docker":
        build_opts |= {"image": opts.builder_image or BUILDER_IMAGE,
                       "repo_id": repository_id(repo), "max_jobs": opts.max_jobs,
                       "requires": list(profile.build_requires)}
    builder = make_builder(build_opts, opts.python, opts.offline)
    if isinstance(builder, DockerBuilder):
        builder.require_image()
        runs_on = (executor.python_tag if isinstance(executor, DockerExecutor)
                   else python_tag(opts.python))
        if builder.python_tag != runs_on:
            raise UsageError(
                f"the builder image makes {builder.python_tag} wheels but probes run on "
                f"{runs_on}: build both images on one BASE_IMAGE (make images), or --build-in host")
    build = build_settings(profile, opts.python, builder)
    environment = {"executor": executor.fingerprint_facts(), "build": build}
    repo_path = str(Path(repo.working_dir).resolve())
    installed = _installed_base(repo, plan, profile, opts)
    variant = opts.variant or profile.default_variant
    use_index = opts.prebuilt and not opts.offline and profile.distribution is not None
    nightly = opts.nightly_index if opts.nightly_index is not None else (
        profile.nightly_index.format(variant=variant) if profile.nightly_index else None)
    release = opts.release_index if opts.release_index is not None else (
        configured_index() if profile.name == "pytorch" else None)
    settings = RunSettings(
        repo=repo_path,
        profile=profile.name,
        python=opts.python,
        offline=opts.offline,
        build_timeout=opts.build_timeout,
        first_parent=opts.first_parent,
        find_fix=opts.find_fix,
        reproduce=reproduce_command(opts, oracle, repo_path),
        variant=variant,
        nightly_index=(nightly or None) if use_index else None,
        release_index=(release or None) if use_index else None,
        installed=asdict(installed) if installed else None,
        executor=opts.executor,
        docker=docker_opts if opts.executor == "docker" else {},
        build=build_opts,
    )
    return Prepared(plan, oracle, _polarity(opts, oracle),
                    env_fingerprint(environment["executor"], build), environment, settings)


def configured_index() -> str | None:
    """The release index pip/uv are configured with (never a host written in this code)."""
    for var in ("UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"):
        if os.environ.get(var):
            return os.environ[var]
    import subprocess

    r = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.index-url"],
                       capture_output=True, text=True, check=False)
    if r.returncode == 0 and r.stdout.strip():
        return r.stdout.strip()
    try:
        from pip._internal.models.index import PyPI  # pip's own default

        return str(PyPI.simple_url)
    except ImportError:
        return None


def _installed_base(
    repo: git.Repo, plan: history.RangePlan, profile: Profile, opts: StartOptions
) -> InstalledBase | None:
    if not opts.installed_base:
        return None
    sha = history.resolve(repo, opts.installed_base, "installed-base")
    roots = tuple(dict.fromkeys(p.split("/")[0] for p in profile.overlay_install))
    site, packages = find_installed(opts.python, roots)
    if not packages:
        raise UsageError(
            f"--installed-base: {opts.python} has none of {', '.join(roots)} installed; "
            f"pass --python of the environment that has it"
        )
    return InstalledBase(sha, opts.python, site, packages)


def discover(store: Store, p: Prepared) -> Prepared:
    """Map the indexes' wheels onto the candidates (cached in the store), before any probe.

    Wheels gone from the index are found here and reported, so the search never plans around
    one it cannot download.
    """
    st = p.settings
    if not (st.nightly_index or st.release_index):
        return p
    repo = history.open_repo(st.repo)
    profile = get_profile(st.profile)
    with store.session() as s:
        cached = {r.url: Prebuilt.from_json(r.data) for r in s.scalars(select(m.PrebuiltRow))}
    cands = list(p.plan.candidates)
    dates = _date_span(repo, cands)
    found = Discoverer(repo, profile, python_tag(st.python), st.variant,
                       cached).discover(cands, nightly_index=st.nightly_index,
                                        release_index=st.release_index, dates=dates)
    with store.session() as s:
        for pb in found.fresh:
            h = hashlib.sha256(pb.url.encode()).hexdigest()
            if s.scalar(select(m.PrebuiltRow).where(m.PrebuiltRow.url_hash == h)) is None:
                s.add(m.PrebuiltRow(url=pb.url, url_hash=h, filename=pb.filename, kind=pb.kind,
                                    version=pb.version, commit_sha=pb.commit,
                                    data=pb.to_json()))
    notes = list(p.plan.notes)
    kinds = [pb.kind for pb in found.by_position.values()]
    notes.append(f"{len(kinds)} prebuilt wheels inside the range "
                 f"({kinds.count('release')} releases, {kinds.count('nightly')} nightlies)")
    if found.missing:
        names = ", ".join(pb.filename for pb in found.missing[:5])
        notes.append(f"{len(found.missing)} prebuilt wheels of the range are gone from the "
                     f"index and will not be used: {names}")
    if found.unmapped:
        notes.append(f"{len(found.unmapped)} wheels could not be mapped to a commit "
                     f"(first: {found.unmapped[0].filename}: {found.unmapped[0].reason})")
    settings = replace(st, prebuilts=[
        {"position": pos, **pb.to_json()} for pos, pb in sorted(found.by_position.items())
    ])
    plan = replace(p.plan, notes=tuple(notes))
    return replace(p, settings=settings, plan=plan, discovery=found)


def _date_span(repo: git.Repo, cands: list[str]) -> tuple[date, date]:
    stamps = [int(repo.git.show("-s", "--format=%ct", sha)) for sha in (cands[0], cands[-1])]
    days = [datetime.fromtimestamp(t, UTC).date() for t in stamps]
    return min(days), max(days)


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
    return record(store, discover(store, prepare(opts)))


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
        self.profile = profile_for(self.settings)
        self.oracle = self._materialise_oracle(orow)
        self.executor = make_executor(
            self.settings.executor, self.settings.docker, self.settings.python,
            self.profile.import_name, self.settings.offline,
            labels={"bisector.bisection": str(bisection_id)},
        )
        self._repo: git.Repo | None = None
        self.provider = make_provider(store, self.settings, self.candidates,
                                      lambda: self.repo, self.events,
                                      labels={"bisector.bisection": str(bisection_id)})

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

    def probe(self, position: int) -> Verdict:
        sha = self.candidates[position]
        started = datetime.now(UTC)
        art, inst = self.provider.obtain(position)
        if inst is None and art.status == "error":
            why = (art.stats or {}).get("error", "unknown")
            result = RunResult(Outcome.SKIP, f"build could not run: {why}", None,
                               art.duration_s, reusable=False)
        elif inst is None:
            summary = failure_summary(Path(art.log_path)) if art.log_path else "no log"
            result = RunResult(Outcome.SKIP, f"build failed: {summary}", None, art.duration_s,
                               reusable=True)
        else:
            self.events.phase(f"running {self.oracle.name} on {sha[:12]}")
            run_dir = logs_dir() / "runs" / f"{sha[:12]}-{uuid.uuid4().hex[:8]}"
            result = self.executor.run(inst=inst, oracle=self.oracle, commit=sha,
                                       run_dir=run_dir)
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
        if self.settings.executor == "docker" or self.settings.build.get("in") == "docker":
            for name in sweep_orphans(client(), local_owner_alive):
                self.events.note(f"removed container {name} left by a controller that is gone")
        for note in self.b.notes:
            self.events.note(str(note))
        n = len(self.candidates)
        seq = 0
        try:
            while True:
                known = self.known()
                step = next_step(n, known, cost=self.provider.cost)
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


def make_provider(
    store: Store, st: RunSettings, candidates: list[str], repo: Callable[[], git.Repo],
    events: Events, labels: dict[str, str] | None = None,
) -> Provider:
    prebuilts = {int(d["position"]): Prebuilt.from_json({k: v for k, v in d.items()
                                                          if k != "position"})
                 for d in st.prebuilts}
    installed = InstalledBase(**{**st.installed, "packages": tuple(st.installed["packages"])}) \
        if st.installed else None
    def progress(name: str, done: int, total: int) -> None:
        pct = f" {100 * done / total:.0f}%" if total else ""
        events.phase(f"downloading {name}: {done / 2**20:.0f} of {total / 2**20:.0f} MiB{pct}")

    return Provider(store, repo, profile_for(st), st.python, candidates, prebuilts,
                    installed, st.build_timeout, on_phase=events.phase, on_note=events.note,
                    on_progress=progress,
                    builder=make_builder(st.build, st.python, st.offline, labels))


def plan_range_costs(store: Store, opts: StartOptions, costs: dict[str, float]) -> PlanReport:
    """``bisect plan``: the projection for a range, from the same parts a run uses."""
    p = discover(store, prepare(opts))
    cands = list(p.plan.candidates)
    repo = history.open_repo(p.settings.repo)
    provider = make_provider(store, p.settings, cands, lambda: repo, QuietEvents())
    found = p.discovery
    prebuilt = [{"position": d["position"], "commit": d["commit"], "kind": d["kind"],
                 "filename": d["filename"]} for d in p.settings.prebuilts]
    if p.settings.installed:
        sha = p.settings.installed["commit"]
        prebuilt.append({"position": cands.index(sha) if sha in cands else None, "commit": sha,
                         "kind": "installed", "filename": p.settings.installed["site"]})
    return make_plan(
        provider, len(cands), costs,
        missing=[pb.filename for pb in found.missing] if found else [],
        unmapped=[f"{pb.filename}: {pb.reason}" for pb in found.unmapped] if found else [],
        prebuilt=prebuilt, notes=list(p.plan.notes),
    )


def resume_bisection(runner: Runner) -> m.Bisection:
    """Finish a stored bisection; a finished one is only reported again."""
    if runner.b.state in ("done", "ambiguous"):
        return runner.b
    if runner.b.state == "failed":
        raise UsageError(
            f"bisection {runner.id} stopped: {runner.b.message} (start a new one instead)"
        )
    return runner.run()
