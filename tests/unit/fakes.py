"""Fakes of our own protocols (Source, Executor, Builder) for fast in-process runner tests.

Each has a real end-to-end counterpart in tests/integration (the demo history through the
local executor, the Docker executor, the builder container).
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bisector.artifacts.build import BuildRun
from bisector.artifacts.installable import Installable
from bisector.artifacts.obtained import Obtained, Unobtainable
from bisector.base.kinds import Way
from bisector.core.verdict import Outcome, Polarity, Rules
from bisector.executors.base import RunResult
from bisector.infra import cancel
from bisector.infra.owner import owner_id
from bisector.oracle.script import Oracle, OracleMeta
from bisector.run.lease import Lease
from bisector.run.runner import Runner
from bisector.run.wiring import Judging, Means
from bisector.store import bisections
from bisector.store.db import Store


def shas(n: int) -> list[str]:
    return [f"{i:040x}" for i in range(n)]


@dataclass
class FakeSource:
    """Every commit installs, except ``broken`` (does not build) and ``flaky_infra``, and
    outside the candidates ``broken_commits``; ``obtained`` counts every obtain call (a
    position, or a sha outside the candidates)."""

    broken: set[int] = field(default_factory=set)
    flaky_infra: set[int] = field(default_factory=set)
    broken_commits: set[str] = field(default_factory=set)
    obtained: list[int | str] = field(default_factory=list)

    def obtain(self, pos: int) -> Obtained | Unobtainable:
        self.obtained.append(pos)
        if pos in self.broken:
            return Unobtainable("build failed: x.c:1: error: no", permanent=True)
        if pos in self.flaky_infra:
            return Unobtainable("build could not run: engine down", permanent=False)
        return Obtained(Installable(f"key{pos}", "fake"), None)

    def obtain_unbuilt(self, pos: int) -> Obtained | Unobtainable:
        return self.obtain(pos)

    def cost(self, pos: int) -> int:
        return 0

    def kind(self, pos: int) -> Way:
        return Way.BROKEN if pos in self.broken else Way.PREBUILT

    def obtain_commit(self, sha: str, near: int) -> Obtained | Unobtainable:
        self.obtained.append(sha)
        if sha in self.broken_commits:
            return Unobtainable("build failed: revert.c:1: error: no", permanent=True)
        return Obtained(Installable(f"key-{sha}", "fake"), None)


@dataclass
class Call:
    commit: str
    gpu: str | None
    start: float
    end: float = 0.0


class FakeExecutor:
    """Judges by position: bad from ``culprit`` on (the oracle exits 1 there).

    ``hook(call_index, commit)`` runs inside each run (to interrupt, to steal a lease, to
    step a clock, to meet the other probes of its round at a barrier ...).
    """

    name = "fake"

    def __init__(self, candidates: list[str], culprit: int, *,
                 hook: Callable[[int, str], None] | None = None,
                 outcome: Callable[[int], Outcome] | None = None) -> None:
        self.position = {sha: i for i, sha in enumerate(candidates)}
        self.culprit, self.hook = culprit, hook
        self.outcome = outcome
        self.calls: list[Call] = []
        self._lock = threading.Lock()

    def fingerprint_facts(self) -> dict[str, Any]:
        return {"executor": self.name}

    def run(self, *, inst: Installable, oracle: Oracle, commit: str, run_dir: Path,
            gpu: str | None = None) -> RunResult:
        call = Call(commit, gpu, time.monotonic())
        with self._lock:
            self.calls.append(call)
            index = len(self.calls)
        if self.hook is not None:
            self.hook(index, commit)
        call.end = time.monotonic()
        pos = self.position[commit]
        out = self.outcome(pos) if self.outcome else (
            Outcome.FAIL if pos >= self.culprit else Outcome.PASS)
        rc = {Outcome.PASS: 0, Outcome.FAIL: 1}.get(out)
        return RunResult(out, f"exit {rc}", rc, 0.01, True, facts={"gpu_index": gpu})


def block_until_stopped(index: int, commit: str) -> None:
    """An oracle that runs until the controller stops it (registered like a real child)."""
    done = threading.Event()
    with cancel.killable(done.set):
        done.wait(5)


class FakeBuilder:
    """The Builder protocol without a compiler: writes a tiny wheel, or fails for ``broken``."""

    where = "host"

    def __init__(self, broken: set[str] | None = None) -> None:
        self.broken = broken or set()
        self.built: list[str] = []

    def settings(self) -> dict[str, Any]:
        return {"python": "cp3x", "fake": True}

    def places(self, src: Path, out: Path) -> dict[str, str]:
        return {"src": str(src), "out": str(out), "python": "python", "uv": "uv",
                "cuda_arch": "", "max_jobs": "1"}

    def run(self, cmd: list[str], env: dict[str, str], *, src: Path, out: Path, work: Path,
            log: Path, timeout_s: float, commit: str,
            on_line: Callable[[str], None] | None = None) -> BuildRun:
        self.built.append(commit)
        if commit in self.broken:
            log.write_text("x.c:1:1: error: this commit does not build\n")
            return BuildRun(1, False, 0.01)
        log.write_text("built\n")
        if on_line is not None:  # what following the log would have told
            on_line("built")
        shutil.make_archive(str(out / "pkg-0.0.0-py3-none-any"), "zip", src)
        (out / "pkg-0.0.0-py3-none-any.zip").rename(out / "pkg-0.0.0-py3-none-any.whl")
        return BuildRun(0, False, 0.01)


ORACLE = Oracle("fake", Path("fake.py"), b"raise SystemExit(0)\n", OracleMeta())


def new_bisection(store: Store, candidates: list[str], *, owner: str | None = None,
                  env: str = "env0", oracle: Oracle = ORACLE) -> int:
    bisections.save_oracle(store, oracle.sha256, oracle.name, oracle.content.decode(), {})
    return bisections.create(
        store, candidates=candidates, owner=owner or owner_id(), repo_path="/nowhere",
        good_ref="good", bad_ref="bad", good_sha=candidates[0], bad_sha=candidates[-1],
        oracle_name=oracle.name, oracle_sha256=oracle.sha256,
        polarity=Polarity.FAILURE.value, env_fingerprint=env, environment={}, settings={},
        notes=[])


@dataclass(frozen=True)
class FakeClone:
    """Confirmation's git without a clone (project/revert.Clone): the culprit's revert is
    ``reverted`` (None: it does not apply), a commit's parents ``parent_of`` it (else none)."""

    reverted: str | None = None
    parent_of: dict[str, list[str]] = field(default_factory=dict)

    def revert(self, culprit: str, onto: str) -> str | None:
        return self.reverted

    def parents(self, sha: str) -> list[str]:
        return self.parent_of.get(sha, [])


def make_runner(store: Store, bisection_id: int, candidates: list[str], executor: FakeExecutor,
                *, source: FakeSource | None = None, width: int = 1,
                gpus: bool = True, rules: Rules | None = None,
                lease: Lease | None = None, oracle: Oracle = ORACLE,
                confirm: bool = False, clone: FakeClone | None = None) -> Runner:
    slots: list[str | None] = [str(i) for i in range(width)] if gpus else [None] * width
    return Runner(store, bisections.get(store, bisection_id), candidates,
                  Judging(oracle, rules or Rules(), confirm=confirm, clone=clone),
                  Means(source or FakeSource(), executor, tuple(slots)), lease=lease)
