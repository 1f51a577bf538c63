"""What every executor returns, and the one function that gives a raw run its meaning.

Infrastructure failure is never a regression: a timeout (unless the oracle says otherwise), a
signal, an OOM kill or an install failure is a SKIP with a reason the report shows.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bisector.artifacts.installable import Installable
from bisector.oracle import Oracle, Outcome


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


def classify(
    returncode: int | None,
    *,
    timed_out: bool,
    oom_killed: bool = False,
    timeout_outcome: Outcome = Outcome.SKIP,
    timeout_s: float = 0.0,
) -> tuple[Outcome, str, bool]:
    """Map a finished process to (outcome, reason, reusable), as ``git bisect run`` does.

    ``reusable`` is False for results that say more about the machine than about the commit
    (timeouts, signals, OOM): a later bisection should try again instead of trusting them.
    """
    if oom_killed:
        return Outcome.SKIP, "killed for using too much memory (OOM)", False
    if timed_out:
        what = {Outcome.SKIP: "skip", Outcome.FAIL: "fail", Outcome.PASS: "pass"}[timeout_outcome]
        return timeout_outcome, f"timed out after {timeout_s:.0f}s (counted as {what})", False
    if returncode is None:
        return Outcome.SKIP, "the oracle did not finish", False
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return Outcome.SKIP, f"killed by {name}", False
    if returncode == 0:
        return Outcome.PASS, "exit 0", True
    if returncode == 125:
        return Outcome.SKIP, "the oracle asked to skip (exit 125)", True
    if returncode <= 127:
        return Outcome.FAIL, f"exit {returncode}", True
    return Outcome.SKIP, f"abnormal exit {returncode} (>127, as git bisect run aborts)", False


class Executor(Protocol):
    """Runs an oracle against an installed artifact and describes the environment it used."""

    name: str

    def fingerprint_facts(self) -> dict[str, Any]:
        """Stable facts that make two verdicts comparable (they key the verdict cache)."""
        ...

    def run(
        self, *, inst: Installable, oracle: Oracle, commit: str, run_dir: Path
    ) -> RunResult: ...
