"""What steps took, read back from a real SQLite store: the figures ``bisect plan`` prices with,
the run's estimate of its time left, and the stored verdicts plan and runner both start from."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from bisector.base.events import QuietEvents
from bisector.base.kinds import ArtifactKind, ArtifactStatus
from bisector.core.search import Verdict
from bisector.core.verdict import Outcome, Polarity, Rules
from bisector.infra.owner import owner_id
from bisector.oracle.script import Oracle, OracleMeta
from bisector.run import pipeline
from bisector.run.runner import Runner
from bisector.run.strategies.plain import stored_verdicts
from bisector.run.wiring import Judging, Means
from bisector.store import bisections, durations
from bisector.store import runs as run_store
from bisector.store.artifacts import ArtifactStore
from bisector.store.db import Store
from bisector.store.records import NewArtifact, NewRun
from tests.clocks import SteppedClock
from tests.unit.fakes import ORACLE, FakeExecutor, FakeSource, shas


def bisection(store: Store, cands: list[str], repo: str = "/repo",
              oracle: Oracle = ORACLE) -> int:
    bisections.save_oracle(store, oracle.sha256, oracle.name, oracle.content.decode(), {})
    return bisections.create(
        store, candidates=cands, owner=owner_id(), repo_path=repo, good_ref="good",
        bad_ref="bad", good_sha=cands[0], bad_sha=cands[-1], oracle_name=oracle.name,
        oracle_sha256=oracle.sha256, polarity=Polarity.FAILURE.value, env_fingerprint="env0",
        environment={}, settings={}, notes=[])


class Recorded(QuietEvents):
    """Events that keep what the runner said about each probe it started."""

    def __init__(self) -> None:
        self.starts: list[tuple[int, float | None]] = []

    def probe_start(self, seq: int, position: int, sha: str, subject: str, left: int,
                    eta_s: float | None) -> None:
        self.starts.append((left, eta_s))


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[SteppedClock]:
    """The probes' wall time read on a clock each oracle run steps (run/pipeline.py measures a
    probe with ``time.monotonic``): a probe takes exactly what the test says, never a sleep."""
    stepped = SteppedClock()
    monkeypatch.setattr(pipeline, "time", SimpleNamespace(monotonic=stepped.now,
                                                          sleep=time.sleep))
    yield stepped


def run(store: Store, bid: int, cands: list[str], culprit: int, events: Recorded,
        clock: SteppedClock, oracle: Oracle = ORACLE) -> None:
    """A bisection whose every oracle run takes 0.02 s on ``clock`` (and says 0.01)."""
    ex = FakeExecutor(cands, culprit, hook=lambda _i, _c: clock.advance(0.02))
    Runner(store, bisections.get(store, bid), cands, Judging(oracle, Rules()),
           Means(FakeSource(), ex), events=events).run()


def test_build_seconds_count_builds_that_ran_of_this_repo_and_profile(store: Store) -> None:
    cands = shas(6)
    bisection(store, cands)
    arts = ArtifactStore(store)

    def art(i: int, commit: str, status: ArtifactStatus, seconds: float,
            profile: str = "torchlet") -> None:
        arts.save(NewArtifact(f"k{i}", commit, ArtifactKind.SOURCE, status,
                              {"profile": profile}, duration_s=seconds))

    art(1, cands[1], ArtifactStatus.OK, 30.0)
    art(2, cands[2], ArtifactStatus.FAILED, 10.0)  # a failed build cost its time too
    art(3, cands[3], ArtifactStatus.ERROR, 999.0)  # could not run: says nothing
    art(4, cands[4], ArtifactStatus.OK, 0.0)  # found already built
    art(5, cands[5], ArtifactStatus.OK, 999.0, profile="pytorch")
    art(6, "f" * 40, ArtifactStatus.OK, 999.0)  # a commit of another repository
    assert durations.build_seconds(store, "/repo", "torchlet") == durations.Measured(20.0, 2)
    assert durations.build_seconds(store, "/elsewhere", "torchlet") is None


def test_oracle_seconds_count_runs_where_the_oracle_ran(store: Store) -> None:
    cands = shas(4)
    bid = bisection(store, cands)
    arts = ArtifactStore(store)
    ok = arts.save(NewArtifact("ok", cands[1], ArtifactKind.SOURCE, ArtifactStatus.OK, {}))
    bad = arts.save(NewArtifact("no", cands[2], ArtifactKind.SOURCE, ArtifactStatus.FAILED, {},
                                duration_s=50.0))
    key = run_store.Key(ORACLE.sha256, "env0")
    now = datetime.now(UTC)
    for pos, seconds, artifact, outcome in ((1, 2.0, ok.id, Outcome.PASS),
                                            (3, 4.0, ok.id, Outcome.FAIL),
                                            (2, 50.0, bad.id, Outcome.SKIP)):
        run_id = run_store.save_run(store, key, NewRun(cands[pos], outcome, "r", True, now,
                                                      duration_s=seconds, artifact_id=artifact))
        run_store.add_probe(store, bid, owner_id(), position=pos, commit_sha=cands[pos],
                           run_id=run_id, verdict="good", round_=1)
    assert durations.oracle_seconds(store, ORACLE.sha256) == durations.Measured(3.0, 2)
    assert durations.oracle_seconds(store, "0" * 64) is None


def test_time_left_comes_from_probes_measured_on_this_repository(store: Store,
                                                                 clock: SteppedClock) -> None:
    cands = shas(64)
    first = Recorded()
    run(store, bisection(store, cands), cands, 40, first, clock)
    # Nothing was measured before the first round; from then on this run's own probes count.
    assert first.starts[0][1] is None and first.starts[1][1] is None
    later = first.starts[2:]
    assert later and all(eta is not None for _, eta in later)
    measured = durations.probe_seconds(store, "/repo")
    assert measured is not None and measured.count == len(first.starts)
    # What the probe took on the clock (its wall time), not the 0.01 s the oracle run said.
    assert measured.mean_s == pytest.approx(0.02)
    left, eta = first.starts[-1]
    assert eta == pytest.approx(left * 0.02)
    # A later bisection of the same repository knows the cost before its first probe...
    again, newer = Recorded(), [f"{i:040x}" for i in range(100, 120)]
    run(store, bisection(store, newer), newer, 10, again, clock)
    assert again.starts[0][1] is not None
    # ... and one of another repository does not.
    other, theirs = Recorded(), [f"{i:040x}" for i in range(200, 208)]
    run(store, bisection(store, theirs, repo="/other"), theirs, 5, other, clock)
    assert other.starts[0][1] is None


def test_time_left_counts_only_probes_of_the_same_oracle(store: Store,
                                                         clock: SteppedClock) -> None:
    """Another oracle's probes of the same repository are no estimate of this one's (a 30 s
    training step beside a 2 s check made "8 s left" take 35 s): a run of a new oracle says
    nothing until its own first probe is measured, then counts its own probes only."""
    training = Oracle("training", Path("training.py"), b"train()\n", OracleMeta())
    cands = shas(64)
    run(store, bisection(store, cands, oracle=training), cands, 40, Recorded(), clock, training)
    theirs = durations.probe_seconds(store, "/repo", training.sha256)
    assert theirs is not None and durations.probe_seconds(store, "/repo", ORACLE.sha256) is None

    check, newer = Recorded(), [f"{i:040x}" for i in range(300, 340)]
    run(store, bisection(store, newer), newer, 12, check, clock)
    assert check.starts[0][1] is None and check.starts[1][1] is None
    assert all(eta is not None for _, eta in check.starts[2:])
    mine = durations.probe_seconds(store, "/repo", ORACLE.sha256)
    assert mine is not None and mine.count == len(check.starts)
    # The repository's figure over both oracles still counts every paid-for probe.
    every = durations.probe_seconds(store, "/repo")
    assert every is not None and every.count == mine.count + theirs.count


def test_stored_verdicts_are_what_a_run_stored_judged_by_the_rules(store: Store,
                                                                   clock: SteppedClock) -> None:
    cands = shas(32)
    run(store, bisection(store, cands), cands, 20, Recorded(), clock)
    key = run_store.Key(ORACLE.sha256, "env0")
    probed = {p.position: Verdict(p.verdict) for p in run_store.probes(store, 1)}
    found = stored_verdicts(store, key, cands, Rules())
    assert {pos: v for pos, (_, v, _) in found.items()} == probed
    flipped = stored_verdicts(store, key, cands, Rules(find_fix=True))
    assert all(v is not probed[pos] for pos, (_, v, _) in flipped.items())
    assert stored_verdicts(store, run_store.Key(ORACLE.sha256, "env1"), cands, Rules()) == {}


def test_a_build_confirmation_paid_for_is_counted_once_with_what_it_was_for(
        store: Store) -> None:
    """Issue 35: the report said "Source builds: 6" for 7: the revert confirmation built was
    no probe. It counts now, once per artifact (its runs share it), and only when built here."""
    from bisector.app.report.show import builds_line, confirmation_builds

    cands = shas(4)
    bid = bisection(store, cands)
    arts = ArtifactStore(store)
    built = arts.save(NewArtifact("rev", "e" * 40, ArtifactKind.SOURCE, ArtifactStatus.OK, {},
                                  duration_s=42.0))
    cached = arts.save(NewArtifact("par", cands[1], ArtifactKind.SOURCE, ArtifactStatus.OK, {},
                                   duration_s=9.0))
    key = run_store.Key(ORACLE.sha256, "env0")
    now = datetime.now(UTC)

    def run(sha: str, artifact: int, fresh: bool) -> int:
        return run_store.save_run(store, key, NewRun(
            sha, Outcome.PASS, "exit 0", False, now, artifact_id=artifact,
            facts={"artifact_fresh": fresh, "confirmation": {"bisection": bid}}))

    revert = [run("e" * 40, built.id, True), run("e" * 40, built.id, False)]
    parent = [run(cands[1], cached.id, False)]
    result = {"confirmation": {
        "culprit": [], "parent": [{"run": r, "verdict": "good"} for r in parent],
        "revert": {"applied": True, "runs": [{"run": r, "verdict": "good"} for r in revert]}}}
    got = confirmation_builds(store, result)
    assert [(b["for"], b["seconds"]) for b in got] == [("revert", 42.0)]
    assert confirmation_builds(store, {}) == []
    d = {"probes": [{"build": {"seconds": 10.0}, "reused": False},
                    {"build": {"seconds": 5.0}, "reused": True}], "confirm_builds": got}
    assert builds_line(d) == "- Source builds: 2 (1 for confirmation: revert), 52s in all"
    assert builds_line({"probes": [], "confirm_builds": []}) is None


def test_a_reused_confirmation_brings_no_builds(store: Store) -> None:
    """A confirmation reused from another bisection names that bisection's runs: their builds
    were that one's, not this one's."""
    from bisector.app.report.show import confirmation_builds

    bisection(store, shas(4))  # the oracle's row
    arts = ArtifactStore(store)
    built = arts.save(NewArtifact("rev2", "d" * 40, ArtifactKind.SOURCE, ArtifactStatus.OK, {},
                                  duration_s=42.0))
    rid = run_store.save_run(store, run_store.Key(ORACLE.sha256, "env0"), NewRun(
        "d" * 40, Outcome.PASS, "exit 0", False, datetime.now(UTC), artifact_id=built.id,
        facts={"artifact_fresh": True}))
    revert = {"applied": True, "runs": [{"run": rid, "verdict": "good"}]}
    assert len(confirmation_builds(store, {"confirmation": {"revert": revert}})) == 1
    assert confirmation_builds(store, {"confirmation": {"revert": revert,
                                                        "reused_from": 3}}) == []
