"""Building a run's parts from its configuration, in one place.

``start``, ``resume``, ``plan``, ``check``, the watch's tick and a worker's task all get their
judge, pipeline, executor, builder and artifact provider here, from the stored
:class:`~bisector.run.config.RunConfig`, so a resumed run builds and executes exactly the way
it started.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import threading
from collections.abc import Callable
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import Any

import git

from bisector.artifacts import remote
from bisector.artifacts.build import Builder, BuildRun, HostBuilder
from bisector.artifacts.docker_build import DockerBuilder
from bisector.artifacts.installable import Installable
from bisector.artifacts.obtained import Obtained, Recipe, Sources, Unobtainable
from bisector.artifacts.prebuilt import Prebuilt
from bisector.artifacts.provider import Provider
from bisector.artifacts.trees import Trees
from bisector.base import extras
from bisector.base.errors import StoreError, UsageError
from bisector.base.events import Events, QuietEvents
from bisector.base.kinds import BuildPlace, ExecutorKind
from bisector.base.paths import cache_dir, host_build_env
from bisector.core.verdict import Polarity, Rules
from bisector.executors.base import Executor
from bisector.executors.docker import DockerExecutor
from bisector.executors.local import LocalExecutor, SystemExecutor
from bisector.executors.manual import ManualExecutor
from bisector.oracle.command import bind_match
from bisector.oracle.manual import Asks
from bisector.oracle.script import Oracle, parse_metadata
from bisector.project import history
from bisector.project.profiles import Profile, get_profile
from bisector.run.config import RunConfig, decode, legacy_rules
from bisector.run.hunt import Hunt, hunt_for
from bisector.run.into_merge import Beside
from bisector.run.pipeline import NullRecorder, Pipeline, Recorder
from bisector.run.policy import LOCAL, Policy
from bisector.store import answers, bisections
from bisector.store import runs as run_store
from bisector.store.artifacts import ArtifactStore
from bisector.store.db import Store
from bisector.store.records import BisectionRecord, OracleRecord


def profile_of(cfg: RunConfig) -> Profile:
    """The stored profile with the user's ``--build-env`` overrides applied."""
    prof = get_profile(cfg.profile)
    env = cfg.build.env
    return replace(prof, build_env={**prof.build_env, **env}) if env else prof


def executor_for(cfg: RunConfig, labels: dict[str, str] | None = None) -> Executor:
    import_name = profile_of(cfg).import_name
    if cfg.executor is ExecutorKind.DOCKER:
        d = cfg.docker
        return DockerExecutor(import_name, image=d.image, gpus=cfg.device_spec,
                              memory=d.memory, pids=d.pids, offline=cfg.offline, labels=labels,
                              env=cfg.oracle_env)
    return LocalExecutor(cfg.python, import_name, cfg.offline, trees=Trees(cfg.repo),
                         env=cfg.oracle_env)


class CachedHostBuilder(HostBuilder):
    """A host build whose uv and ccache caches live in bisector's cache folder (see
    ``paths.host_build_env``), not in ``~/.cache``: ``bisect du`` counts them and
    ``bisect gc`` can reclaim them. The place's settings, and so the artifact keys, are
    HostBuilder's: wheels built before stay valid."""

    def run(self, cmd: list[str], env: dict[str, str], **kw: Any) -> BuildRun:
        return super().run(cmd, {**host_build_env(), **env}, **kw)


def env_executor(python: str, import_name: str | None, *, system: bool = False,
                 repo: Path | None = None, env: dict[str, str] | None = None) -> Executor:
    """The executor of one environment outside a bisection (``bisect check``, the watch's
    tick): the interpreter as it is (``system``), else a uv virtualenv per artifact, with the
    commit trees of ``repo`` for command oracles; ``env`` the oracle environment (None: the
    host's as it is)."""
    if system:
        return SystemExecutor(python, import_name, env=env)
    return LocalExecutor(python, import_name, trees=Trees(str(repo)) if repo else None,
                         env=env)


def builder_for(cfg: RunConfig, labels: dict[str, str] | None = None) -> Builder:
    b = cfg.build
    if b.place is BuildPlace.DOCKER:
        return DockerBuilder(b.repo_id, image=b.image, cuda_arch=b.cuda_arch,
                             max_jobs=b.max_jobs, offline=cfg.offline, requires=b.requires,
                             labels=labels)
    return CachedHostBuilder(cfg.python, b.cuda_arch)


class Repos:
    """One GitPython ``Repo`` per thread: its cat-file helper processes are not thread-safe."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._local = threading.local()

    def __call__(self) -> git.Repo:
        repo: git.Repo | None = getattr(self._local, "repo", None)
        if repo is None:
            repo = history.open_repo(self.path)
            self._local.repo = repo
        return repo


def provider_for(store: Store, cfg: RunConfig, candidates: list[str], repos: Callable[[],
                 git.Repo], events: Events, builder: Builder, policy: Policy) -> Provider:
    sources = Sources({p.position: p.wheel for p in cfg.prebuilts}, cfg.installed)
    recipe = Recipe(profile_of(cfg), cfg.python, builder, cfg.build.timeout_s, cfg.build_jobs,
                    reuse_builds=cfg.request.prebuilt)
    return Provider(ArtifactStore(store), repos, candidates, recipe, sources, events,
                    remote=remote_for(policy, events))


def remote_for(policy: Policy, events: Events) -> remote.Remote | None:
    """The team's object store the command was given (``--artifacts``, ...: resolved once,
    run/policy.py), or None. Each provider gets a client of its own, warning through its
    events; whether the store is down is remembered once for the process (artifacts/remote)."""
    bucket = policy.artifacts
    if bucket is None:
        return None
    extras.require("s3")
    return remote.Remote(bucket, events.note)


def obtain_prebuilt(store: Store, repo: git.Repo, commit: str, wheel: Prebuilt,
                    recipe: Recipe, events: Events | None = None, *,
                    policy: Policy) -> Obtained | Unobtainable:
    """One commit's prebuilt wheel outside a bisection (the watch's nightlies), through the
    chain every probe uses (local cache, object store, index; never a build)."""
    lone = _lone(store, repo, commit, recipe, Sources({0: wheel}), events, policy)
    return lone.obtain(0, lone.unbuilt)


def obtain_commit(store: Store, repo: git.Repo, commit: str, recipe: Recipe,
                  events: Events | None = None, *, policy: Policy) -> Obtained | Unobtainable:
    """One commit's wheel outside a bisection (``bisect check --commit``), through the chain
    every probe uses: the local cache, the team's object store, then a build (claimed, so two
    boxes checking one commit build it once), stored and uploaded for the next probe."""
    return _lone(store, repo, commit, recipe, Sources(), events, policy).obtain(0)


def _lone(store: Store, repo: git.Repo, commit: str, recipe: Recipe, sources: Sources,
          events: Events | None, policy: Policy) -> Provider:
    """The provider of one commit, outside any bisection."""
    events = events or QuietEvents()
    return Provider(ArtifactStore(store), lambda: repo, [commit], recipe, sources, events,
                    remote=remote_for(policy, events))


def materialise_oracle(row: OracleRecord) -> Oracle:
    """The oracle exactly as stored (resume never picks up later edits of the file), written
    to a cache file that is checked against the stored hash before every use.

    The identity is rebuilt from the bytes and what judges them (a signature and its
    polarity, kept in the row's meta), so an edit of either in the store is refused."""
    content = row.content.encode("utf-8")
    judging = tuple((str(k), str(v)) for k, v in row.meta.get("judging") or ())
    oracle = Oracle(row.name, Path(row.name), content, parse_metadata(row.content, row.name),
                    judging)
    if oracle.sha256 != row.sha256:

        raise StoreError(f"the stored oracle {row.name} does not match its hash "
                         f"{row.sha256[:12]}: the store was edited; start a new bisection")
    # A command oracle's name is its command line: never a path of its own.
    stem = re.sub(r"[^\w.-]", "_", row.name)[:80] or "oracle"
    path = cache_dir() / "oracles" / row.sha256[:16] / f"{stem}.py"
    want = oracle.content_sha256
    if not path.exists() or hashlib.sha256(path.read_bytes()).hexdigest() != want:
        path.parent.mkdir(parents=True, exist_ok=True)
        # A temporary name of its own: two processes (a coordinator and a worker, two
        # bisections) may write the same oracle at once; the last rename wins, same bytes.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{stem}-", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        os.replace(tmp, path)  # a copy edited in the cache is replaced, never run
    return replace(oracle, path=path)


def judge_for(oracle: Oracle, regress: Polarity | None = None, find_fix: bool = False,
              match: str | None = None) -> tuple[Oracle, Rules]:
    """The oracle as it will judge, and its rules: ``--regress`` over the oracle's own
    polarity, ``--find-fix``, its timeout rule; a ``match`` signature bound to the run that
    shows the bug under that polarity (both are part of the oracle's identity, the verdicts'
    key). Every probe of start, check and the watch is judged through this."""
    rules = Rules(regress or oracle.meta.polarity, find_fix, oracle.meta.on_timeout)
    return bind_match(oracle, match, rules.polarity), rules


def ready_pipeline(inst: Installable, executor: Executor, oracle: Oracle, rules: Rules,
                   events: Events | None = None) -> Pipeline:
    """One probe pipeline over an environment that is already obtained, recording nothing
    (``bisect check`` and the watch's runs: their results are theirs to keep)."""
    return Pipeline(lambda _pos: Obtained(inst, None), executor, oracle, rules,
                    NullRecorder(), events or QuietEvents())


def stored_oracle(store: Store, rec: BisectionRecord) -> Oracle:
    """A stored bisection's oracle, materialised and hash-checked (:func:`materialise_oracle`)."""
    return materialise_oracle(bisections.get_oracle(store, rec.oracle_sha256))


def stored_config(store: Store, rec: BisectionRecord | int) -> RunConfig:
    """The stored configuration, also of a bisection stored by an older bisector (``rec``:
    the record when the caller has it, else the bisection's id)."""
    if isinstance(rec, int):
        rec = bisections.get(store, rec)
    cfg = decode(rec.settings)
    if rec.settings.get("version") != 2:
        oracle = stored_oracle(store, rec)
        cfg = replace(cfg, request=replace(cfg.request, good=rec.good_ref, bad=rec.bad_ref,
                                           oracle=rec.oracle_name),
                      rules=legacy_rules(rec.polarity, cfg.request.find_fix,
                                         oracle.meta.on_timeout.value))
    return cfg


class Parts:
    """The executor, builder and provider of one stored run, made on first use."""

    def __init__(self, store: Store, cfg: RunConfig, candidates: list[str], events: Events,
                 labels: dict[str, str] | None = None, bisection_id: int | None = None,
                 walked: int | None = None, policy: Policy = LOCAL) -> None:
        # ``candidates``: the walk's ``walked`` commits, then those of the search inside a
        # merge when they are stored (run/into_merge.py); the provider ranks the walk's.
        self.store, self.cfg, self.candidates = store, cfg, candidates
        self.events, self.labels, self.bisection_id = events, labels, bisection_id
        self.walked = len(candidates) if walked is None else walked
        self.repos = Repos(cfg.repo)
        self.policy = policy  # the command's, handed down (run/policy.py)

    @cached_property
    def executor(self) -> Executor:
        made = executor_for(self.cfg, self.labels)
        if not self.cfg.request.manual:
            return made

        if not isinstance(self.events, Asks) or not isinstance(made, LocalExecutor):
            raise UsageError("--manual asks a person at a terminal: run it with bisect start "
                             "--manual or bisect resume in one, not from a worker or a script")
        bid = self.bisection_id
        return ManualExecutor(made, self.events, Trees(self.cfg.repo),
                              undo=lambda: None if bid is None else answers.last(self.store, bid))

    @cached_property
    def builder(self) -> Builder:
        return builder_for(self.cfg, self.labels)

    @cached_property
    def provider(self) -> Provider:
        return provider_for(self.store, self.cfg, self.candidates[:self.walked], self.repos,
                            self.events, self.builder, self.policy)

    @cached_property
    def source(self) -> Beside:
        """The provider, with the commits inside a merge (past the walk) obtained like it."""
        bid = self.bisection_id
        return Beside(self.provider, self.candidates, self.walked,
                      lambda: [] if bid is None else bisections.candidates(self.store, bid))

    def hunt(self, oracle: Oracle, key: run_store.Key) -> Hunt | None:
        """The judge of failing runs of this stored run (run/hunt.py), None where exit codes
        judge alone: the coordinator's and every worker's, read from the same store."""
        # The walk's candidates: its bad endpoint is the failure hunted, also inside a merge.
        return hunt_for(self.store, key, self.candidates[:self.walked], self.cfg.rules, oracle,
                        any_failure=self.cfg.request.any_failure,
                        manual=self.cfg.request.manual, bisection_id=self.bisection_id)

    def pipeline(self, oracle: Oracle, recorder: Recorder,
                 hunt: Hunt | None = None) -> Pipeline:
        """The probe pipeline of this stored run: its provider, executor, rules and hunt."""
        return Pipeline(self.source.obtain, self.executor, oracle, self.cfg.rules, recorder,
                        self.events, hunt)
