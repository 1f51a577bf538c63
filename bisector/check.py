"""``bisect check``: run one oracle once and say what it decides, with the facts it ran under.

The quickest answer to "does it reproduce here?". It uses exactly the code a bisection uses
(facts collection, oracle run, classification), against one of three environments: the Python
already installed on this host (``system``), a given wheel, or a commit built from source.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bisector import history
from bisector.artifacts.build import build_key, failure_summary, obtain_wheel
from bisector.artifacts.cache import file_sha256
from bisector.artifacts.installable import Installable
from bisector.errors import BuildError, UsageError
from bisector.executors.base import RunResult
from bisector.executors.local import LocalExecutor, collect_facts, run_oracle
from bisector.oracle import Oracle, Polarity, load_oracle, to_verdict
from bisector.profiles import get_profile
from bisector.search import Verdict
from bisector.settings import logs_dir


@dataclass(frozen=True)
class CheckResult:
    oracle: Oracle
    verdict: Verdict
    polarity: Polarity
    run: RunResult
    environment: str

    def as_dict(self) -> dict[str, Any]:
        r = self.run
        return {
            "oracle": {"name": self.oracle.name, "sha256": self.oracle.sha256},
            "environment": self.environment,
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


def check(
    oracle_spec: str,
    *,
    python: str,
    system: bool = False,
    wheel: Path | None = None,
    commit: str | None = None,
    repo: Path = Path("."),
    profile_name: str = "pytorch",
    regress: Polarity | None = None,
) -> CheckResult:
    if sum((system, wheel is not None, commit is not None)) != 1:
        raise UsageError("give exactly one of --env system, --wheel FILE or --commit SHA")
    oracle = load_oracle(oracle_spec)
    polarity = regress or oracle.meta.polarity
    profile = get_profile(profile_name)
    run_dir = logs_dir() / "checks" / uuid.uuid4().hex[:12]
    if system:
        facts = collect_facts(python, profile.import_name, "system")
        sha = str(facts.get("torch_git_version") or facts.get("git_version") or "")
        result = run_oracle(python, oracle, sha, run_dir, facts)
        env = f"system Python {python}"
    else:
        if wheel is not None:
            if not wheel.is_file():
                raise UsageError(f"wheel {wheel} does not exist: check the path")
            key = hashlib.sha256(f"wheel:{file_sha256(wheel)}".encode()).hexdigest()
            sha, env = "", f"wheel {wheel.name}"
        else:
            assert commit is not None
            r = history.open_repo(repo)
            sha = history.resolve(r, commit, "commit")
            key, _ = build_key(profile, sha, python)
            built = obtain_wheel(r, sha, profile, python=python)
            if not built.ok or built.wheel is None:
                raise BuildError(f"building {sha[:12]} failed: {failure_summary(built.log_path)} "
                                 f"(log: {built.log_path})")
            wheel, env = built.wheel, f"source build of {sha[:12]}"
        executor = LocalExecutor(python, profile.import_name)
        inst = Installable(key, env, wheel=wheel)
        result = executor.run(inst=inst, oracle=oracle, commit=sha, run_dir=run_dir)
    return CheckResult(oracle, to_verdict(result.outcome, polarity), polarity, result, env)
