"""The runner with a performance oracle: a fake executor that prints samples (a planted
slowdown from the culprit on, with noise), a real SQLite store."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bisector.artifacts.installable import Installable
from bisector.base.errors import EndpointError, UsageError
from bisector.base.kinds import State
from bisector.core import paired, perf, perf_confirm
from bisector.core import perf_search as pure
from bisector.core.perf_search import Run
from bisector.core.search import Verdict
from bisector.core.verdict import Outcome, Polarity, Rules
from bisector.executors.base import RunResult
from bisector.oracle.script import Oracle
from bisector.run.config import Request
from bisector.run.prepare import prepare
from bisector.run.strategies import perf as perf_search
from bisector.run.strategies.base import Round
from bisector.store import runs as run_store
from bisector.store.db import Store, open_store
from bisector.store.records import BisectionRecord, NewRun
from tests.unit.fakes import ORACLE, FakeClone, FakeExecutor, make_runner, new_bisection, shas

PERF = replace(ORACLE, content=b"# perf\n", meta=replace(ORACLE.meta, threshold=0.05))


class Timer(FakeExecutor):
    """Prints 20 samples around 10 ms, or 10 ms × ``slowdown`` from the culprit on.

    ``spread``: each run's level moves by up to that fraction (a GPU's clocks per process),
    with ``noise`` the relative noise inside one run. ``level``: the machine's speed."""

    def __init__(self, cands: list[str], culprit: int, slowdown: float, seed: int, *,
                 spread: float = 0.0, noise: float = 0.03, level: float = 10.0,
                 drift: float = 0.0, gpu_speed: dict[str, float] | None = None) -> None:
        super().__init__(cands, culprit)
        self.gpu_speed = gpu_speed or {}  # a GPU this much slower than another
        self.slowdown, self.rng = slowdown, random.Random(seed)
        self.spread, self.noise, self.level = spread, noise, level
        self.drift = drift  # each run this much slower than the one before (a loaded box)

    def run(self, *, inst: Installable, oracle: Oracle, commit: str, run_dir: Path,
            gpu: str | None = None) -> RunResult:
        super().run(inst=inst, oracle=oracle, commit=commit, run_dir=run_dir, gpu=gpu)
        self.level *= 1 + self.drift
        base = self.level * (self.slowdown if self.position[commit] >= self.culprit else 1.0)
        base *= self.rng.uniform(1 - self.spread, 1 + self.spread)
        base *= self.gpu_speed.get(gpu or "", 1.0)
        samples = [round(base * self.rng.uniform(1 - self.noise, 1 + self.noise), 4)
                   for _ in range(20)]
        line = "BISECTOR_RESULT " + json.dumps({"samples": samples, "unit": "ms"})
        return RunResult(Outcome.PASS, "exit 0", 0, 0.01, True, output_tail=line + "\n")


def test_a_planted_slowdown_is_found_with_medians_and_changes(store: Store) -> None:
    cands = shas(120)
    bid = new_bisection(store, cands, oracle=PERF)
    ex = Timer(cands, 77, 1.3, 1)
    r = make_runner(store, bid, cands, ex, oracle=PERF, confirm=True,
                    clone=FakeClone())
    rec = r.run().record
    assert rec.state is State.DONE and rec.culprit_sha == cands[77]
    pf = rec.result["perf"]
    rows = {row["position"]: row for row in pf["commits"]}
    assert rows[77]["verdict"] == "bad" and 0.25 < rows[77]["change"] < 0.35
    assert rows[76]["verdict"] == "good" and abs(rows[76]["change"]) < 0.03
    assert pf["compared"] == "paired" and abs(pf["baseline_median"] - 10.0) < 0.2
    assert pf["scale"]["dof"] >= 1 and pf["scale"]["sd"] > 0
    assert rec.result["confirmation"]["status"] == "confirmed"
    assert rec.result["confirmation"]["judged_by"] == "paired"
    # A clear step in quiet runs: once the scale is learnt (the bad endpoint's and the first
    # probes' second pairs), commits are told by one pair (the Wilcoxon rule needed 7 each).
    decided = [row for row in pf["commits"] if row["verdict"] in ("good", "bad")]
    assert sum(row["pairs"] == 1 for row in decided) >= len(decided) - 3
    assert len(ex.calls) <= 2 * sum(row["runs"] for row in pf["commits"]) + 12


def test_a_drifting_machine_still_gets_the_right_culprit(store: Store) -> None:
    """Issue 31, item 1, as measured: +50 % at commit 27 of 40, threshold 20 %, each run
    about 3 % slower than the one before. Against a baseline measured first every later
    commit looked slower and the first commit after good was named, ``done``; paired with
    the reference runs beside them, the slowdown is placed, and the reference's own drift is
    shown."""
    cands = shas(40)
    oracle = replace(PERF, meta=replace(PERF.meta, threshold=0.2))
    bid = new_bisection(store, cands, oracle=oracle)
    ex = Timer(cands, 27, 1.5, 7, drift=0.03)
    r = make_runner(store, bid, cands, ex, oracle=oracle, confirm=True,
                    clone=FakeClone())
    rec = r.run().record
    assert rec.state is State.DONE and rec.culprit_sha == cands[27]
    ref = rec.result["perf"]["reference"]
    assert ref["change"] > 0.3  # the good endpoint itself got much slower meanwhile
    assert rec.result["confirmation"]["status"] == "confirmed"


def confirmed_after(store: Store, ex: Timer, cands: list[str],
                    on_answer: Callable[[], None]) -> BisectionRecord:
    """A bisection with confirmation (no revert) whose executor is told, by ``on_answer``,
    when the search has answered: what it runs from then on is confirmation."""
    bid = new_bisection(store, cands, oracle=PERF)
    r = make_runner(store, bid, cands, ex, oracle=PERF, confirm=True,
                    clone=FakeClone())
    real = perf_search.Performance.decide

    def then(self: perf_search.Performance) -> object:
        got = real(self)
        if not isinstance(got.then, Round):
            on_answer()
        return got

    perf_search.Performance.decide = then  # type: ignore[assignment,method-assign]
    try:
        return r.run().record
    finally:
        perf_search.Performance.decide = real  # type: ignore[method-assign]


def test_a_culprit_that_does_not_hold_up_is_never_done(store: Store) -> None:
    """The search's verdicts said 27; fresh runs of it beside its parent say no change (the
    machine's slowdown went away): the state is ``not reproducible``, not ``done``."""
    cands = shas(20)
    ex = Timer(cands, 12, 1.3, 8)

    def no_change() -> None:  # from confirmation on, the culprit is as fast as its parent
        ex.slowdown = 1.0

    rec = confirmed_after(store, ex, cands, no_change)
    assert rec.culprit_sha == cands[12]
    assert rec.result["confirmation"]["status"] == "not reproducible"
    assert rec.state is State.NOT_REPRODUCIBLE and State.NOT_REPRODUCIBLE.exit_code == 13


def test_the_search_s_pairs_of_the_culprit_and_parent_save_fresh_pairs(
        store: Store, migrated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 10 % slowdown against 5 %, runs moving 4 %: the search's own pairs of the culprit and
    its parent count in its confirmation (beside at least one fresh pair, agreeing with the
    fresh ones): fewer fresh pairs than the same confirmation on fresh pairs alone."""
    cands = shas(20)

    def confirmation(stored: Store) -> dict[str, Any]:
        ex = Timer(cands, 12, 1.10, 21, spread=0.04)
        rec = confirmed_after(stored, ex, cands, lambda: None)
        assert rec.state is State.DONE and rec.culprit_sha == cands[12]
        return dict(rec.result["confirmation"])

    lent = confirmation(store)
    shutil.copy(migrated, tmp_path / "alone.db")
    other = open_store(str(tmp_path / "alone.db"))
    with monkeypatch.context() as m:  # the same hunt, its confirmation on fresh pairs alone
        m.setattr(perf_confirm, "lent", lambda *_: None)
        alone = confirmation(other)
    other.engine.dispose()
    assert lent["status"] == alone["status"] == "confirmed"
    searched = lent["search_pairs"]
    assert searched["counted"] and not searched["contradicted"]
    assert searched["culprit"] >= 1 and searched["parent"] >= 1
    assert "search_pairs" not in alone
    assert 1 <= lent["pairs"] < alone["pairs"]


def test_a_slowdown_only_the_search_saw_is_never_done(store: Store) -> None:
    """A 12 % slowdown against 5 % that went away once the search answered (another job's
    load that left): the search's pairs of the culprit show the step, the fresh ones none.
    They contradict the search's, which are set aside: not reproducible, never done."""
    cands = shas(20)
    ex = Timer(cands, 12, 1.12, 9, spread=0.02)

    def gone() -> None:
        ex.slowdown = 1.0

    rec = confirmed_after(store, ex, cands, gone)
    conf = rec.result["confirmation"]
    assert rec.culprit_sha == cands[12]
    assert conf["status"] == "not reproducible" and rec.state is State.NOT_REPRODUCIBLE
    assert conf["search_pairs"]["contradicted"]


class OneFastRun(Timer):
    """A Timer whose culprit, once ``confirming`` is set, runs its first time at the margin
    (5 % slower than its parent, the threshold): that pair can decide nothing."""

    confirming = False
    culprit_runs = 0

    def run(self, *, inst: Installable, oracle: Oracle, commit: str, run_dir: Path,
            gpu: str | None = None) -> RunResult:
        slowdown = self.slowdown
        if self.confirming and self.position[commit] == self.culprit:
            self.culprit_runs += 1
            if self.culprit_runs == 1:
                self.slowdown = 1.05
        try:
            return super().run(inst=inst, oracle=oracle, commit=commit, run_dir=run_dir,
                               gpu=gpu)
        finally:
            self.slowdown = slowdown


def test_a_confirmation_undecided_grows_a_pair_at_a_time(store: Store) -> None:
    """The first fresh culprit run lands at the threshold: the confirmation runs more pairs,
    one at a time as the search does, and confirms (on fresh runs only)."""
    cands = shas(20)
    ex = OneFastRun(cands, 12, 1.3, 8)

    def confirming() -> None:
        ex.confirming = True

    rec = confirmed_after(store, ex, cands, confirming)
    conf = rec.result["confirmation"]
    assert rec.culprit_sha == cands[12] and conf["status"] == "confirmed"
    # the pair at the margin widens the fresh runs' own spread too: two or three more pairs
    assert 2 <= conf["pairs"] <= 4 and len(conf["culprit"]) == conf["pairs"]
    assert len(conf["parent"]) == conf["pairs"] + 1
    assert rec.state is State.DONE


class Loaded(Timer):
    """A Timer on a GPU shared with another job, on for 5 runs, off for 7 (``offset``: where
    the first run falls), 2.3 times slower while it is on (as a matrix-product load made
    softmax on an H100). With odd spans the load comes and goes on opposite sides of a pair."""

    offset = 0
    made = 0

    def run(self, *, inst: Installable, oracle: Oracle, commit: str, run_dir: Path,
            gpu: str | None = None) -> RunResult:
        self.made += 1
        self.level = 10.0 * (2.3 if (self.made + self.offset) % 12 < 5 else 1.0)
        return super().run(inst=inst, oracle=oracle, commit=commit, run_dir=run_dir, gpu=gpu)


def test_pairs_straddling_another_job_s_load_do_not_stall_the_search(store: Store) -> None:
    """On the H100 a harmless commit changing nothing stayed undecided for 32 pairs: the runs
    whose two references straddled the load's coming or going differed by +-40 %, and the
    answer was a window. Those pairs are left out; every commit is decided."""
    cands = shas(20)
    oracle = replace(PERF, meta=replace(PERF.meta, threshold=0.2))
    bid = new_bisection(store, cands, oracle=oracle)
    ex = Loaded(cands, 12, 1.5, 3)
    rec = make_runner(store, bid, cands, ex, oracle=oracle).run().record
    assert rec.state is State.DONE and rec.culprit_sha == cands[12]
    rows = rec.result["perf"]["commits"]
    assert rows and all(row["verdict"] in ("good", "bad") for row in rows)
    assert rec.result["perf"]["reference"]["spread"] > 1.0  # the load was there


def test_a_change_below_the_threshold_is_not_a_regression(store: Store) -> None:
    cands = shas(40)
    bid = new_bisection(store, cands, oracle=PERF)
    ex = Timer(cands, 20, 1.01, 2)  # 1 % slower: under the 5 % threshold
    r = make_runner(store, bid, cands, ex, oracle=PERF)
    with pytest.raises(EndpointError, match="is good with this oracle"):
        r.run()  # the bad endpoint is not worse by the threshold


def test_runs_without_samples_are_skips_saying_why(store: Store) -> None:
    cands = shas(10)
    bid = new_bisection(store, cands, oracle=PERF)
    ex = FakeExecutor(cands, 5)  # prints nothing
    r = make_runner(store, bid, cands, ex, oracle=PERF)
    with pytest.raises(EndpointError, match="could not be tested"):
        r.run()
    key = run_store.Key(PERF.sha256, "env0")
    runs = run_store.samples(store, key, [cands[0]])[cands[0]]
    assert runs and all("no BISECTOR_RESULT line" in x.run.reason for x in runs)


def test_a_round_never_runs_a_commit_twice(store: Store) -> None:
    # Three GPUs, and a slowdown near the threshold so that commits need several runs: each
    # round holds a commit at most once, and runs of one commit never overlap in time.
    cands = shas(40)
    bid = new_bisection(store, cands, oracle=PERF)
    ex = Timer(cands, 20, 1.07, 3)
    r = make_runner(store, bid, cands, ex, width=3, oracle=PERF)
    rounds: list[tuple[int, ...]] = []
    run_round = r.run_round

    def spy(r_: Round) -> None:
        rounds.append(r_.positions)
        run_round(r_)

    r.run_round = spy  # type: ignore[method-assign]
    rec = r.run().record
    assert rec.state in (State.DONE, State.AMBIGUOUS)
    assert all(len(set(ps)) == len(ps) for ps in rounds)
    assert all(0 in ps for ps in rounds)  # the reference runs beside the candidates
    assert any(len(ps) > 1 for ps in rounds)  # the slots are still used side by side
    runs = Counter(c.commit for c in ex.calls)
    assert max(runs.values()) > 1  # some commit did need several runs
    for sha in runs:
        mine = sorted((c.start, c.end) for c in ex.calls if c.commit == sha)
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in pairwise(mine))


def test_two_gpus_each_pair_against_their_own_reference_runs(store: Store) -> None:
    """Two GPUs of one box, the second 30 % slower (another model of card, or one kept busy):
    a 12 % slowdown against a 5 % threshold. Each GPU runs the reference and a candidate in
    turn (A B A B on each), and a candidate run is paired only with its own GPU's reference
    runs: across the two GPUs a commit before the change would look 30 % slower, or faster."""
    cands = shas(24)
    bid = new_bisection(store, cands, oracle=PERF)
    ex = Timer(cands, 13, 1.12, 4, noise=0.01, gpu_speed={"1": 1.3})
    r = make_runner(store, bid, cands, ex, width=2, oracle=PERF)
    rec = r.run().record
    assert rec.state is State.DONE and rec.culprit_sha == cands[13]
    for gpu in ("0", "1"):
        mine = [ex.position[c.commit] == 0 for c in ex.calls if c.gpu == gpu]
        assert len(mine) >= 4 and all(a != b for a, b in pairwise(mine[2:]))  # A B A B
    lanes = {x.facts.get("lane") for xs in run_store.samples(
        store, run_store.Key(PERF.sha256, "env0"), cands).values() for x in xs}
    assert {lane.rsplit("/", 1)[1] for lane in lanes if lane} == {"0", "1"}


def stored_run(store: Store, sha: str, samples: list[float]) -> None:
    """A run stored under the PERF key as another bisection (another day) left it."""
    line = {"samples": samples, "unit": "ms", "direction": "lower-is-better"}
    run_store.save_run(store, run_store.Key(PERF.sha256, "env0"), NewRun(
        commit_sha=sha, outcome=Outcome.PASS, reason="exit 0", reusable=False,
        started_at=datetime.now(UTC), exit_code=0, facts={"perf": line}))


def test_the_references_are_made_by_this_bisection(store: Store) -> None:
    # Earlier runs at the good endpoint, on a day the machine ran at 20 ms: paired with them
    # the 30 % slowdown (13 ms) of the bad endpoint would look like a speed-up.
    cands = shas(30)
    bid = new_bisection(store, cands, oracle=PERF)
    for i in range(4):
        stored_run(store, cands[0], [20.0 + 0.1 * j + i for j in range(20)])
    ex = Timer(cands, 17, 1.3, 4)
    rec = make_runner(store, bid, cands, ex, oracle=PERF).run().record
    assert rec.state is State.DONE and rec.culprit_sha == cands[17]
    pf = rec.result["perf"]
    assert abs(pf["baseline_median"] - 10.0) < 0.2
    # A second bisection makes its own references and its own pairs.
    bid2 = new_bisection(store, cands, oracle=PERF)
    ex2 = Timer(cands, 17, 1.3, 5)
    rec2 = make_runner(store, bid2, cands, ex2, oracle=PERF).run().record
    assert rec2.culprit_sha == cands[17]
    assert [c.commit for c in ex2.calls].count(cands[0]) >= 4  # its own, each pair beside


def test_runs_alternate_with_the_reference_on_one_slot() -> None:
    assert pure.layout([5], None, 1, 1) == (0, 5, 0)
    assert pure.layout([5, 9], 0, 1, 2) == (5, 0, 9, 0)
    assert pure.layout([], 3, 1, 3) == (0,)
    assert pure.layout([5, 9, 12], 0, 3, 1) == (5, 9, 0)


def ms(*samples: float, unit: str | None = "ms",
       direction: perf.Direction = perf.Direction.LOWER, own: bool = True) -> Run:
    return Run(tuple(samples), unit, direction, own)


def test_runs_in_another_unit_or_direction_are_not_paired() -> None:
    refs = [ms(10.0, 10.1, 10.2), ms(9.9, 10.0, 10.1), ms(10.0, 10.2, 9.8),
            ms(10_000.0, unit="us"), ms(10.0, own=False)]
    refs = [replace(r, start=float(2 * i)) for i, r in enumerate(refs)]
    like, kept = pure.references(refs)
    assert like is not None and len(kept) == 3  # the µs run and another bisection's left out
    rule = paired.Rule(perf.Direction.LOWER, 0.05)
    other_unit = [replace(ms(13_000.0, 13_100.0, unit="us"), start=1.0),
                  replace(ms(13_000.0, 12_900.0, unit="us"), start=3.0)]
    spread = paired.Scale(0.01, 10)
    a = pure.assess(other_unit, kept, like, rule, 8, spread)
    assert a.verdict is Verdict.SKIP and a.mismatched == 2 and a.comparison is None
    flipped = replace(ms(20.0, 21.0, 22.0, direction=perf.Direction.HIGHER), start=1.0)
    b = pure.assess([flipped, replace(ms(13.0, 13.1, 13.2, 12.9), start=3.0)], kept,
                           like, rule, 8, spread)
    assert b.mismatched == 1 and b.runs == 2 and b.comparison is not None
    assert b.median == pytest.approx(13.05)  # the ms run alone
    row = perf_search._row(SimpleNamespace(candidates=shas(10), rules=Rules()), 5, b, like)  # type: ignore[arg-type]
    assert row["mismatched"] == 1 and "not paired" in row["note"]


def git_repo(path: Path) -> Path:
    path.mkdir()
    git = ["git", "-C", str(path), "-c", "user.name=a", "-c", "user.email=a@b"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    for msg in ("a", "b", "c"):
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", msg], check=True)
    return path


def test_regress_is_refused_for_a_performance_oracle(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    oracle = tmp_path / "timer.py"
    oracle.write_text('# /// script\n# [tool.bisector]\n# threshold = "5%"\n# ///\n')
    req = Request(good="main~2", bad="main", oracle=str(oracle), repo=repo)
    with pytest.raises(UsageError, match=r"--regress with the performance oracle .*drop"):
        prepare(replace(req, regress=Polarity.SUCCESS))


def test_find_fix_finds_the_commit_that_made_it_faster(store: Store) -> None:
    """--find-fix with a performance oracle (the watch's speed-up bisections): the change is a
    step *better* by the threshold, found and confirmed like a slowdown."""
    cands = shas(60)
    bid = new_bisection(store, cands, oracle=PERF)
    ex = Timer(cands, 41, 0.7, 5)  # 30 % faster from position 41 on
    r = make_runner(store, bid, cands, ex, oracle=PERF, rules=Rules(find_fix=True),
                    confirm=True,
                    clone=FakeClone())
    rec = r.run().record
    assert rec.state is State.DONE and rec.culprit_sha == cands[41]
    pf = rec.result["perf"]
    assert pf["sought"] == "better"
    rows = {row["position"]: row for row in pf["commits"]}
    assert rows[41]["verdict"] == "bad" and rows[41]["change"] < -0.25
    assert rec.result["confirmation"]["status"] == "confirmed"
    # The same speed-up is no change at all to a slowdown hunt.
    bid2 = new_bisection(store, cands, oracle=PERF, env="env1")
    with pytest.raises(EndpointError, match="is good with this oracle"):
        make_runner(store, bid2, cands, Timer(cands, 41, 0.7, 5), oracle=PERF).run()
