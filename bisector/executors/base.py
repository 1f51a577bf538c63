"""What every executor returns, and the protocol the run pipeline calls.

An executor only runs an oracle and reports what the process did (a raw outcome from
:func:`bisector.core.verdict.classify`); what that means for a bisection (polarity, find-fix,
``on-timeout``) is decided in :mod:`bisector.core.verdict` alone.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bisector.artifacts.installable import Installable
from bisector.core.verdict import Outcome
from bisector.oracle.script import Oracle


@dataclass(frozen=True)
class RunResult:
    outcome: Outcome
    reason: str
    exit_code: int | None
    duration_s: float
    reusable: bool
    stdout_path: Path | None = None
    stderr_path: Path | None = None
    output_tail: str = ""
    facts: dict[str, Any] = field(default_factory=dict)


def infra_skip(reason: str) -> RunResult:
    """The oracle could not run (install failed, engine down): a skip that is retried later."""
    return RunResult(Outcome.SKIP, reason, None, 0.0, reusable=False)


def running(oracle: Oracle, commit: str, gpu: str | None) -> str:
    """The oracle's progress step, said again by an executor after the steps of making its
    environment (the pipeline says it first, before the executor starts)."""
    return f"running {oracle.name} on {commit[:12]}" + (f" on GPU {gpu}" if gpu else "")


def env_name(artifact_key: str, deps: tuple[str, ...] | list[str], place: str) -> str:
    """The folder name of the environment of one artifact with an oracle's dependencies, on one
    ``place`` (the Python tag locally, the runtime image id in Docker). One formula for both
    executors and for ``bisect gc``, which must find the environments a bisection still needs."""
    blob = json.dumps([artifact_key, sorted(deps), place])
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


class Executor(Protocol):
    """Runs an oracle against an installable and describes the environment it used."""

    name: str
    # Probes run in containers, which a controller killed mid-probe leaves behind: a run
    # sweeps those of dead controllers first (app/bisections.run).
    contained: bool

    @property
    def python_tag(self) -> str:
        """The Python the probed environments run (``cp312``): wheels must be built for it."""
        ...

    def unready(self, oracle: Oracle) -> str | None:
        """Why this executor cannot run ``oracle`` here (a missing image, an oracle it does
        not know how to start), one line naming the fix; None when it can."""
        ...

    def fingerprint_facts(self) -> dict[str, Any]:
        """Stable facts that make two verdicts comparable (they key the verdict cache)."""
        ...

    def run(self, *, inst: Installable, oracle: Oracle, commit: str, run_dir: Path,
            gpu: str | None = None) -> RunResult:
        """Run once; ``gpu`` pins the run to that GPU index (None: as configured)."""
        ...


def prepare(executor: Executor, inst: Installable, oracle: Oracle) -> None:
    """Make ahead what ``executor`` would make for a probe of ``inst`` (its environment), for
    an executor that knows how (``prepare``); one that makes nothing ahead (the system
    Python) is left alone."""
    ahead = getattr(executor, "prepare", None)
    if ahead is not None:
        ahead(inst, oracle)
