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

from bisector.artifacts.build import build_key, obtain_wheel
from bisector.artifacts.build_logs import failure_summary
from bisector.artifacts.cache import wheel_file_key
from bisector.artifacts.installable import Installable
from bisector.base import oracle_env
from bisector.base.errors import BisectorError, BuildError, UsageError
from bisector.base.events import Events, QuietEvents
from bisector.core.search import Verdict
from bisector.core.verdict import Polarity
from bisector.executors.base import RunResult
from bisector.oracle.command import oracle_for
from bisector.oracle.script import Oracle
from bisector.project import history
from bisector.project.interpreter import choose_python
from bisector.project.profiles import Profile, get_profile
from bisector.run.config import CheckRequest
from bisector.run.factory import CachedHostBuilder, env_executor, judge_for, ready_pipeline
from bisector.run.torch_place import pick_profile


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
          events: Events | None = None) -> CheckResult:
    """Obtain the environment, then the one probe pipeline with a recorder that stores nothing.

    ``req.python`` None: the interpreter :func:`~bisector.project.interpreter.choose_python`
    picks for the profile's package, told to ``note`` before anything runs (a long build
    included). A command oracle runs in ``req.commit``'s exported tree with a commit, else in the
    current folder (there is no commit to export). ``events`` hears each step as a bisection's
    probe does (building, its newest log line, making the environment, running the oracle):
    a check is never a silent wait either."""
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
        inst, where = Installable("system", "system"), f"system Python {python}"
        executor = env_executor(python, profile.import_name, system=True, env=env)
    elif wheel is not None:
        if not wheel.is_file():
            raise UsageError(f"wheel {wheel} does not exist: check the path")
        key, digest = wheel_file_key(wheel)
        where = f"wheel {wheel.name}"
        inst = Installable(key, where, wheel=wheel, sha256=digest)
    else:
        assert commit is not None
        r = history.open_repo(repo)
        sha = history.resolve(r, commit, "commit")
        executor = env_executor(python, profile.import_name, repo=repo, env=env)
        key, _ = build_key(profile, sha, python)
        built = obtain_wheel(r, sha, profile, python=python, builder=CachedHostBuilder(python),
                             on_build=lambda: events.phase(sha, f"building {sha[:12]} from "
                                                                "source"),
                             on_line=lambda line: events.build_line(sha, line))
        if not built.ok or built.wheel is None:
            raise BuildError(f"building {sha[:12]} failed: {failure_summary(built.log_path)} "
                             f"(log: {built.log_path})")
        where = f"source build of {sha[:12]}"
        inst = Installable(key, where, wheel=built.wheel)
    res = ready_pipeline(inst, executor, oracle, rules, events).probe(0, sha, gpu=req.gpu)
    run = res.run
    if system and not sha:  # the system torch's own commit, once its facts are known
        sha = str(run.facts.get("torch_git_version") or run.facts.get("git_version") or "")
    return CheckResult(oracle, res.verdict, rules.polarity, run, where, python)


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
