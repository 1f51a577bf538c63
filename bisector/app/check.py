"""``bisect check``: run one oracle once and say what it decides, with the facts it ran under.

The quickest answer to "does it reproduce here?". It uses exactly the code a bisection uses
(facts collection, oracle run, classification), against one of three environments: the Python
already installed on this host (``system``), a given wheel, or a commit built from source.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bisector.artifacts.build import detect_cuda_arch
from bisector.artifacts.given import System, WheelFile
from bisector.artifacts.installable import Installable
from bisector.artifacts.obtained import Obtained, Recipe, Unobtainable
from bisector.artifacts.shared import Source
from bisector.base import oracle_env
from bisector.base.errors import BisectorError, BuildError, UsageError
from bisector.base.events import Events, QuietEvents
from bisector.base.kinds import Way
from bisector.core.search import Verdict
from bisector.core.verdict import Polarity
from bisector.executors.base import RunResult
from bisector.oracle.command import oracle_for
from bisector.oracle.script import Oracle
from bisector.project import history
from bisector.project.interpreter import choose_python
from bisector.project.profiles import Profile, get_profile
from bisector.run.config import CheckRequest
from bisector.run.factory import (
    CachedHostBuilder,
    env_executor,
    judge_for,
    obtain_commit,
    ready_pipeline,
)
from bisector.run.policy import LOCAL, Policy
from bisector.run.torch_place import pick_profile
from bisector.store.db import Store


@dataclass(frozen=True)
class CheckResult:
    oracle: Oracle
    verdict: Verdict
    polarity: Polarity
    run: RunResult
    environment: str
    python: str

    def as_dict(self) -> dict[str, Any]:
        r = self.run
        return {
            "oracle": {"name": self.oracle.name, "sha256": self.oracle.sha256},
            "environment": self.environment,
            "python": self.python,
            "verdict": self.verdict.value,
            "outcome": r.outcome.value,
            "polarity": self.polarity.value,
            "exit_code": r.exit_code,
            "reason": r.reason,
            "duration_s": round(r.duration_s, 3),
            "stdout": str(r.stdout_path) if r.stdout_path else None,
            "stderr": str(r.stderr_path) if r.stderr_path else None,
            "output_tail": r.output_tail,
            "facts": r.facts,
        }


def check(req: CheckRequest, note: Callable[[str], None] = lambda _text: None,
          events: Events | None = None, store: Callable[[], Store] | None = None, *,
          policy: Policy = LOCAL) -> CheckResult:
    """Obtain the environment, then the one probe pipeline with a recorder that stores nothing.

    ``req.python`` None: the interpreter :func:`~bisector.project.interpreter.choose_python`
    picks for the profile's package, told to ``note`` before anything runs (a long build
    included). A command oracle runs in ``req.commit``'s exported tree with a commit, else in the
    current folder (there is no commit to export). ``events`` hears each step as a bisection's
    probe does (building, its newest log line, making the environment, running the oracle):
    a check is never a silent wait either. ``store`` opens the store a commit's wheel is
    looked up in and recorded to (``--commit`` only: a check of a wheel or of the system
    Python writes nothing); ``policy``: the command's (the object store a commit's wheel is
    also looked up in and uploaded to)."""
    events = events or QuietEvents()
    req.check()
    system, wheel, commit, repo = req.system, req.wheel, req.commit, req.repo
    # What this shell passes on (TORCH_LOGS, ...) and --env: the run's facts say it.
    env = oracle_env.parse(oracle_env.resolve(req.env, os.environ))
    oracle = oracle_for(req.oracle, req.command, timeout=req.timeout,
                        dependencies=req.dependency)
    oracle, rules = judge_for(oracle, req.regress, match=req.match)
    profile = _profile(repo, commit, req.profile)
    interpreter = choose_python(req.python, profile.import_name)
    note(interpreter.note)
    python = interpreter.path
    executor = env_executor(python, profile.import_name, env=env)
    sha = ""
    if system:
        inst = _given(System())
        where = f"system Python {python}"
        executor = env_executor(python, profile.import_name, system=True, env=env)
    elif wheel is not None:
        inst = _given(WheelFile(wheel))
        where = inst.obtained
    else:
        assert commit is not None
        r = history.open_repo(repo)
        sha = history.resolve(r, commit, "commit")
        executor = env_executor(python, profile.import_name, repo=repo, env=env)
        if store is None:
            raise UsageError("bisect check --commit needs the store its wheel is kept in")
        # The arch a bisection on this box would build for, so its wheel serves both.
        arch = (detect_cuda_arch(req.gpu) or profile.default_cuda_arch
                if any("{cuda_arch}" in v for v in profile.build_env.values()) else None)
        got = obtain_commit(store(), r, sha,
                            Recipe(profile, python, CachedHostBuilder(python, arch)), events,
                            policy=policy)
        if isinstance(got, Unobtainable):
            log = got.artifact.log_path if got.artifact else None
            raise BuildError(f"no package of {sha[:12]}: {got.reason}"
                             + (f" (log: {log})" if log else ""))
        inst = got.installable
        where = f"the tree of {sha[:12]} (nothing to build)" if inst.tree else (
            f"source build of {sha[:12]}"
            + (" (from the team's object store)" if got.way is Way.BUCKET else ""))
    res = ready_pipeline(inst, executor, oracle, rules, events).probe(0, sha, gpu=req.gpu)
    run = res.run
    if system and not sha:  # the system torch's own commit, once its facts are known
        sha = str(run.facts.get("torch_git_version") or run.facts.get("git_version") or "")
    return CheckResult(oracle, res.verdict, rules.polarity, run, where, python)


def _given(source: Source) -> Installable:
    got = source.obtain(0, "")
    assert isinstance(got, Obtained)  # a given torch is never unobtainable
    return got.installable


def _profile(repo: Path, commit: str | None, name: str | None) -> Profile:
    """The profile ``start`` would pick for this repository (detected at the commit or HEAD);
    PyTorch's when there is no repository (checking an installed torch)."""
    if name:
        return get_profile(name)
    try:
        r = history.open_repo(repo)
        sha = history.resolve(r, commit or "HEAD", "commit")
    except BisectorError:
        return get_profile("pytorch")
    return pick_profile(r, sha, None)
