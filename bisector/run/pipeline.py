"""One probe: obtain -> execute -> judge -> record.

Every probe of every bisection goes through :meth:`Pipeline.probe`, and so does ``bisect
check`` (with a recorder that stores nothing), so a verdict from ``check`` means exactly what a
probe's verdict means. A run that was killed because the user stopped the bisection is never
recorded: it says nothing about the commit, and ``resume`` runs it again.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from bisector.artifacts.obtained import Obtained, Unobtainable
from bisector.base.errors import LeaseLost
from bisector.base.events import MEASURED, Events, QuietEvents, steps_to
from bisector.base.kinds import Way
from bisector.base.paths import logs_dir
from bisector.core import perf, signature
from bisector.core.search import Verdict
from bisector.core.verdict import Outcome, Polarity, Rules
from bisector.executors.base import Executor, RunResult, running
from bisector.infra import cancel
from bisector.infra.owner import owner_alive
from bisector.oracle.script import Oracle
from bisector.run.hunt import Hunt
from bisector.store import claims
from bisector.store import runs as run_store
from bisector.store.db import Store
from bisector.store.records import NewRun, RunRecord


@dataclass(frozen=True)
class ProbeResult:
    position: int
    sha: str
    verdict: Verdict
    run: RunResult
    seconds: float  # wall time of the whole probe: obtaining included
    obtained: Obtained | None


class Source(Protocol):
    """Where a probe's torch comes from (the artifact provider), and what each costs."""

    def obtain(self, pos: int) -> Obtained | Unobtainable: ...
    def obtain_unbuilt(self, pos: int) -> Obtained | Unobtainable:
        """:meth:`obtain` short of a source build: what is made ahead without a build slot
        (run/prefetch.py); the probe builds it itself if it comes to that."""
        ...
    def cost(self, pos: int) -> int: ...
    def kind(self, pos: int) -> Way:
        """How ``pos`` would be obtained, without obtaining it: what the prefetch weighs
        (run/prefetch.py)."""
        ...
    def obtain_commit(self, sha: str, near: int) -> Obtained | Unobtainable:
        """A commit outside the candidates (a culprit's revert), obtained like ``near``."""
        ...


class Recorder(Protocol):
    def begin(self, sha: str) -> RunRecord | None:
        """Before judging: a verdict another process has (or is about to have), else None."""
        ...

    def end(self, sha: str) -> None: ...

    def adopt(self, position: int, sha: str, run: RunRecord, verdict: Verdict,
              round_: int | None) -> None: ...

    def record(self, position: int, sha: str, run: NewRun, verdict: Verdict,
               round_: int | None) -> None: ...


class StoreRecorder:
    """Stores the run as a verdict and appends the probe, while the lease is ours.

    Before a probe runs, its verdict key is claimed: a commit that another live process is
    judging right now is waited for (its verdict is then adopted), not judged twice.
    """

    poll_s = 1.0

    def __init__(self, store: Store, bisection_id: int, key: run_store.Key, me: str) -> None:
        self.store, self.bisection_id, self.key, self.me = store, bisection_id, key, me
        # Probes of one round finish in any order; their sequence numbers are taken one at a
        # time (only the lease holder appends, so a lock in this process is enough).
        self._append = threading.Lock()

    def begin(self, sha: str) -> RunRecord | None:
        k = self.key
        while True:
            found = run_store.reusable(self.store, k, [sha]).get(sha)
            if found is not None:
                return found
            holder = claims.claim(self.store, k.oracle_sha256, k.env_fingerprint, sha, self.me)
            if holder is None:
                # Decided just before we claimed it? Then reuse that, never run it again.
                found = run_store.reusable(self.store, k, [sha]).get(sha)
                if found is not None:
                    self.end(sha)
                return found
            if holder.owner and self.gone(holder):
                claims.take_over(self.store, k.oracle_sha256, k.env_fingerprint, sha, self.me,
                                 holder.owner)
                continue
            if cancel.stopping():
                raise cancel.Stopped("stopped while waiting for another process")
            time.sleep(self.poll_s)

    def gone(self, holder: claims.Holder) -> bool:
        """May the claim ``holder`` has be taken over (its process is gone)?"""
        return not owner_alive(holder.owner, holder.at)

    def end(self, sha: str) -> None:
        claims.release(self.store, self.key.oracle_sha256, self.key.env_fingerprint, sha,
                       self.me)

    def adopt(self, position: int, sha: str, run: RunRecord, verdict: Verdict,
              round_: int | None) -> None:
        with self._append:
            appended = run_store.add_probe(self.store, self.bisection_id, self.me,
                                          position=position, commit_sha=sha, run_id=run.id,
                                          verdict=verdict.value, round_=round_, reused=True)
        if not appended:
            raise LeaseLost(f"bisection {self.bisection_id} was taken over by another process")

    def record(self, position: int, sha: str, run: NewRun, verdict: Verdict,
               round_: int | None) -> None:
        run_id = run_store.save_run(self.store, self.key, run)  # kept even if the lease is gone
        with self._append:
            appended = run_store.add_probe(self.store, self.bisection_id, self.me,
                                          position=position, commit_sha=sha, run_id=run_id,
                                          verdict=verdict.value, round_=round_)
        if not appended:
            raise LeaseLost(f"bisection {self.bisection_id} was taken over by another process; "
                            f"this one stops (its last run is stored as a verdict)")


class SampleRecorder(StoreRecorder):
    """A flaky oracle's recorder: every probe runs (a second run of a commit is the point, not
    a waste), and every run is stored as a sample, never as the key's one reusable verdict.

    Storing it non-reusable would lose whether a skip is a fact about the commit (it does not
    build, the oracle's own exit 125) or a passing failure of the machine (an install that
    broke, a timeout), so a skip keeps that in ``facts["permanent"]``: later searches count
    only permanent skips of other bisections against a commit."""

    def begin(self, sha: str) -> RunRecord | None:
        return None

    def end(self, sha: str) -> None:
        pass

    def record(self, position: int, sha: str, run: NewRun, verdict: Verdict,
               round_: int | None) -> None:
        facts = ({**run.facts, "permanent": run.reusable} if verdict is Verdict.SKIP
                 else run.facts)
        super().record(position, sha, replace(run, reusable=False, facts=facts), verdict,
                       round_)


class NullRecorder:
    """``bisect check``: the verdict is shown, nothing is stored."""

    def begin(self, sha: str) -> RunRecord | None:
        return None

    def end(self, sha: str) -> None:
        pass

    def adopt(self, position: int, sha: str, run: RunRecord, verdict: Verdict,
              round_: int | None) -> None:
        pass

    def record(self, position: int, sha: str, run: NewRun, verdict: Verdict,
               round_: int | None) -> None:
        pass


class Pipeline:
    def __init__(
        self,
        obtain: Callable[[int], Obtained | Unobtainable],
        executor: Executor,
        oracle: Oracle,
        rules: Rules,
        recorder: Recorder,
        events: Events | None = None,
        hunt: Hunt | None = None,
    ) -> None:
        self.obtain, self.executor, self.oracle = obtain, executor, oracle
        self.rules, self.recorder = rules, recorder
        self.events: Events = events or QuietEvents()
        # The bisection's judge of failing runs (run/hunt.py); None: exit codes judge alone.
        self.hunt = hunt

    def verdict(self, position: int, outcome: Outcome, failure: str | None,
                output_tail: str) -> tuple[Verdict, str | None]:
        """A run's verdict for this bisection, and the reason of a skip the hunt made of it."""
        if self.hunt is None:
            return self.rules.judge(outcome), None
        return self.hunt.judge(position, outcome, failure, output_tail)

    def probe(self, position: int, sha: str, *, gpu: str | None = None,
              round_: int | None = None) -> ProbeResult:
        started, t0 = datetime.now(UTC), time.monotonic()
        decided = self.recorder.begin(sha)
        if decided is not None:  # judged by another process meanwhile: reuse, never re-run
            verdict, why = self.verdict(position, decided.outcome,
                                        signature.failure_of(decided.failure,
                                                             decided.output_tail),
                                        decided.output_tail)
            self.recorder.adopt(position, sha, decided, verdict, round_)
            self.events.probe_done(position, sha, verdict, why or decided.reason, 0.0, True)
            run = RunResult(decided.outcome, decided.reason, decided.exit_code,
                            decided.duration_s, decided.reusable)
            return ProbeResult(position, sha, verdict, run, time.monotonic() - t0, None)
        try:
            return self._judge(position, sha, gpu, round_, started, t0)
        finally:
            self.recorder.end(sha)

    def _judge(self, position: int, sha: str, gpu: str | None, round_: int | None,
               started: datetime, t0: float) -> ProbeResult:
        got = self.obtain(position)
        obtain_s = time.monotonic() - t0
        if isinstance(got, Unobtainable):
            # A commit that does not build is a fact (reusable); one the machine could not
            # build now is retried by a later probe.
            run = RunResult(Outcome.SKIP, got.reason, None,
                            got.artifact.duration_s if got.artifact else 0.0,
                            reusable=got.permanent, facts={"phases": {"oracle": 0.0}})
            artifact_id = got.artifact.id if got.artifact else None
            obtained = None
        else:
            self.events.phase(sha, running(self.oracle, sha, gpu))
            run_dir = logs_dir() / "runs" / f"{sha[:12]}-{uuid.uuid4().hex[:8]}"
            # The executor's own steps (an environment, its install, its facts, the oracle
            # again) are rows of this probe too.
            with steps_to(lambda text: self.events.phase(sha, text)):
                run = self.executor.run(inst=got.installable, oracle=self.oracle, commit=sha,
                                        run_dir=run_dir, gpu=gpu)
            run = with_signature(without_package(run, self.oracle), self.oracle,
                                 self.rules.polarity)
            artifact_id = got.artifact.id if got.artifact else None
            obtained = got
        if self.oracle.meta.performance and run.outcome is not Outcome.SKIP:
            run = with_samples(run)
        failure = failure_in(run) if run.outcome is Outcome.FAIL else None
        if failure is not None:  # a fact about the run, whatever rule judges it
            run = replace(run, facts={**run.facts, signature.FAILURE_FACT: failure})
        # The probe's whole wall time (obtaining and installing included, which the oracle's
        # own duration leaves out): what the estimate of a run's time left is made of.
        probe_s = time.monotonic() - t0
        facts = {**run.facts, "artifact_fresh": got.fresh, "probe_s": round(probe_s, 3),
                 "phases": phases(run, obtain_s, probe_s), "obtained_as": got.way}
        if gpu is not None:  # which GPU of which box: a performance search pairs within one
            facts["lane"] = f"{socket.gethostname()}/{gpu}"
        if isinstance(got, Obtained) and got.ahead:
            # Made while an earlier oracle ran (run/prefetch.py): seconds each phase took
            # before this probe asked, beside what it still waited ("phases").
            facts["ahead"] = dict(got.ahead)
        if cancel.stopping():
            raise cancel.Stopped("stopped by the user; this run is not recorded")
        verdict, why = self.verdict(position, run.outcome, failure or None, run.output_tail)
        self.recorder.record(position, sha, NewRun(
            commit_sha=sha, outcome=run.outcome, reason=run.reason, reusable=run.reusable,
            started_at=started, exit_code=run.exit_code, duration_s=run.duration_s,
            artifact_id=artifact_id,
            stdout_path=str(run.stdout_path) if run.stdout_path else None,
            stderr_path=str(run.stderr_path) if run.stderr_path else None,
            output_tail=run.output_tail, facts=facts), verdict, round_)
        seconds = time.monotonic() - t0
        self.events.probe_done(position, sha, verdict, why or run.reason, seconds, False)
        return ProbeResult(position, sha, verdict, run, seconds, obtained)


PHASES = ("obtain", "environment", "facts", "oracle", "overhead")


def phases(run: RunResult, obtain_s: float, probe_s: float) -> dict[str, float]:
    """Where a probe's wall time went, in seconds: obtaining its torch, making its
    environment, learning its facts, the oracle's own run (what the executor measured), and
    the rest (``overhead``: bisector's own bookkeeping, judging, starting processes)."""
    known = dict(run.facts.get("phases") or {})
    known.setdefault("oracle", run.duration_s)
    out = {"obtain": obtain_s, **{k: float(v) for k, v in known.items()
                                  if k in PHASES and isinstance(v, int | float)}}
    out["overhead"] = max(0.0, probe_s - sum(v for k, v in out.items() if k != "overhead"))
    return {k: round(out.get(k, 0.0), 3) for k in PHASES}


RESULT_READ = 2**20  # the result line is the last line: the last MiB of stdout holds it
SIGNATURE_READ = 16 * 2**20  # of each of stdout and stderr, from the end: where failures are


def _end_of(path: Path | None, size: int) -> str | None:
    if path is None or not path.is_file():
        return None
    with path.open("rb") as f:
        f.seek(max(0, f.seek(0, 2) - size))
        return f.read().decode("utf-8", "replace")


def with_signature(run: RunResult, oracle: Oracle, polarity: Polarity) -> RunResult:
    """A run that shows the bug without the oracle's signature becomes a skip saying which
    failure it was (``core/signature.py``); any other run is returned as it is.

    The signature and the polarity it judges under are the ones bound into the oracle's
    identity (``command_oracle.bind_match``: every bisection and ``check``); an oracle run
    unbound (the nightly watch's) is judged by its metadata's ``match`` and its rules."""
    match = oracle.match if oracle.judging else oracle.meta.match
    if match is None:
        return run
    bug = Polarity(dict(oracle.judging).get("bug", polarity))
    out = _end_of(run.stdout_path, SIGNATURE_READ)
    err = _end_of(run.stderr_path, SIGNATURE_READ)
    if out is None and err is None:
        out, err = run.output_tail, ""
    refined = signature.refine(run.outcome, out or "", err or "", match, bug)
    if refined is None:
        return run
    return replace(run, outcome=refined[0], reason=refined[1])


def failure_in(run: RunResult) -> str:
    """A failed run's failure line (``core/signature.failure_line``), "" when it shows none:
    stderr's, where tracebacks go, else stdout's (an oracle that echoes a repro's output), read
    from the whole output files, else the tail. ``bisect oracle new`` reads a repro's
    signature the same way."""
    out = _end_of(run.stdout_path, FAILURE_READ)
    err = _end_of(run.stderr_path, FAILURE_READ)
    if out is None and err is None:
        err, out = run.output_tail, ""
    line = signature.failure_line(err or "") or signature.failure_line(out or "")
    return (line or "")[:FAILURE_CHARS]


FAILURE_READ = 2**20  # of each output, from the end: the last traceback, whatever came before
FAILURE_CHARS = 1000  # of a failure line kept in a run's facts (compared on its first 200)


def without_package(run: RunResult, oracle: Oracle) -> RunResult:
    """A failed run whose output says the probed package itself cannot be imported (see
    :func:`bisector.core.signature.cannot_import`) becomes a skip saying so, never a verdict:
    it is a fact about the environment (the wrong interpreter, a broken install), not about
    the commit, and under either polarity it would be judged wrongly (bad, or good under
    ``--regress success``). Unless the oracle's own signature matches that output: then the
    oracle says this failure is the bug. Not reusable: a fixed environment answers again."""
    package = run.facts.get("probed") or run.facts.get("package")
    if run.outcome is not Outcome.FAIL or not isinstance(package, str) or not package:
        return run
    out = _end_of(run.stdout_path, SIGNATURE_READ)
    err = _end_of(run.stderr_path, SIGNATURE_READ)
    text = (f"{out or ''}\n{err or ''}" if out is not None or err is not None
            else run.output_tail)
    error = run.facts.get("package_error")
    line = signature.cannot_import(text, package, error if isinstance(error, str) else None)
    if line is None:
        return run
    match = oracle.match if oracle.judging else oracle.meta.match
    if match is not None and signature.compile_match(match).search(text):
        return run
    return replace(run, outcome=Outcome.SKIP, reusable=False,
                   reason=f"the environment cannot import {package}: {line}")


def with_samples(run: RunResult) -> RunResult:
    """A performance oracle's run with its samples in ``facts["perf"]``; a run whose
    BISECTOR_RESULT line is missing or malformed is a skip saying so (never a verdict)."""
    text = run.output_tail
    if run.stdout_path is not None and run.stdout_path.is_file():
        with run.stdout_path.open("rb") as f:
            f.seek(max(0, f.seek(0, 2) - RESULT_READ))
            text = f.read().decode("utf-8", "replace")
    try:
        result = perf.parse_result(text)
    except ValueError as e:
        return replace(run, outcome=Outcome.SKIP, reason=f"performance result: {e}",
                       reusable=False)
    if result is None:
        return replace(run, outcome=Outcome.SKIP, reusable=False,
                       reason="the performance oracle printed no BISECTOR_RESULT line")
    level = perf.median(result.samples)
    return replace(run, reason=f"{MEASURED}median {level:.4g} {result.unit or ''}".rstrip()
                   + f" over {len(result.samples)} samples; judged paired with the good "
                     f"endpoint's runs", facts={**run.facts, "perf": {
                         "samples": list(result.samples), "unit": result.unit,
                         "direction": result.direction.value, "metric": result.metric}})
