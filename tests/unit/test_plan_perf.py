"""``bisect plan`` for a performance oracle: the shipped search over simulated runs, so the plan
spends what a run would spend on the same runs, and more where the oracle is noisier."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from bisector.app import plan_perf
from bisector.app.plan import DEFAULT_COSTS, make_plan
from bisector.artifacts.installable import Installable
from bisector.base.kinds import Way
from bisector.core.sampling import Kind, Sampling
from bisector.core.verdict import Outcome
from bisector.executors.base import RunResult
from bisector.oracle.script import Oracle
from bisector.store import runs as run_store
from bisector.store.db import Store
from bisector.store.records import RunRecord
from tests.unit.fakes import ORACLE, FakeExecutor, make_runner, new_bisection, shas

COSTS = {**DEFAULT_COSTS, "oracle": 10.0, "build": 100.0}
PERF = Sampling(Kind.PERFORMANCE, endpoint_runs=3)  # --no-confirm: the search's runs alone


class Cached:
    """The plan's view of the provider: every commit is in the cache."""

    def kind(self, pos: int) -> Way:
        return Way.CACHED

    def cost(self, pos: int) -> int:
        return Way.CACHED.rank

    def safe_between(self, a: int, b: int) -> bool:
        return True


class Simulated(FakeExecutor):
    """An oracle whose every run prints the samples the plan's :class:`Machine` draws next."""

    def __init__(self, cands: list[str], machine: plan_perf.Machine) -> None:
        super().__init__(cands, machine.culprit)
        self.machine = machine

    def run(self, *, inst: Installable, oracle: Oracle, commit: str, run_dir: Path,
            gpu: str | None = None) -> RunResult:
        super().run(inst=inst, oracle=oracle, commit=commit, run_dir=run_dir, gpu=gpu)
        got = {"samples": list(self.machine.run(self.position[commit])), "unit": "ms"}
        line = "BISECTOR_RESULT " + json.dumps(got)
        return RunResult(Outcome.PASS, "exit 0", 0, 0.01, True, output_tail=line + "\n")


def test_the_plan_spends_what_the_performance_search_spends_on_the_same_runs(
        store: Store) -> None:
    """The plan's expected runs are the mean of its seeded hunts; a real bisection (the
    runner, the performance strategy, the store) handed each hunt's machine, same culprit and
    seed, makes exactly as many oracle runs."""
    n, model = 24, plan_perf.Model(0.2, plan_perf.Noise(0.02, 0.03, 5))
    rep = make_plan(Cached(), n, COSTS, [], [], [], [], sampling=PERF, perf=model)
    cands = shas(n)
    oracle = replace(ORACLE, content=b"# perf\n", meta=replace(ORACLE.meta, threshold=0.2))
    spent, seconds = [], []
    for culprit, seed in plan_perf.hunts(n):
        ex = Simulated(cands, plan_perf.Machine(model, culprit, seed))
        bid = new_bisection(store, cands, oracle=oracle)
        rec = make_runner(store, bid, cands, ex, oracle=oracle).run().record
        assert rec.culprit_sha == cands[culprit]  # a clear change in quiet runs: found
        hunt = plan_perf.hunt(model, n, culprit, seed)
        assert len(ex.calls) == hunt.runs and hunt.named == culprit
        assert {c.commit for c in ex.calls} == {cands[p] for p in hunt.obtained}
        spent.append(len(ex.calls))
        seconds.append(len(ex.calls) * COSTS["oracle"] + len(hunt.obtained) * COSTS[Way.CACHED])
    assert rep.probes_mean == sum(spent) / len(spent)
    assert rep.seconds_mean == sum(seconds) / len(seconds)  # each commit obtained once
    assert any("simulated hunts of the shipped search" in note for note in rep.notes)


def test_a_noisier_oracle_is_planned_to_spend_more_runs() -> None:
    n = 40
    runs = [make_plan(Cached(), n, COSTS, [], [], [], [], sampling=PERF,
                      perf=plan_perf.Model(0.1, plan_perf.Noise(sd, sd, 5))).probes_mean
            for sd in (0.005, 0.02, 0.04)]
    assert runs[0] < runs[1] < runs[2]
    # Deterministic: the same plan every time it is asked.
    assert runs[1] == make_plan(Cached(), n, COSTS, [], [], [], [], sampling=PERF,
                                perf=plan_perf.Model(0.1, plan_perf.Noise(0.02, 0.02, 5))
                                ).probes_mean


def _sample(sha: str, samples: list[float]) -> run_store.Sample:
    run = RunRecord(1, sha, Outcome.PASS, "exit 0", False, 0, 1.0,
                    started_at=datetime(2026, 11, 29, tzinfo=UTC))
    return run_store.Sample(run, {"perf": {"samples": samples, "unit": "ms"}})


def test_the_noise_is_the_oracles_stored_runs_else_a_quiet_machines() -> None:
    assert plan_perf.noise_of({}) == plan_perf.QUIET
    # Samples within a run 10 % apart (log sd about 0.07), runs of one commit 20 % apart.
    found = {"a": [_sample("a", [10.0, 11.0, 10.0, 11.0]),
                   _sample("a", [12.0, 13.2, 12.0, 13.2])],
             "b": [_sample("b", [5.0, 5.5, 5.0, 5.5])]}
    got = plan_perf.noise_of(found)
    assert got.measured == 3 and got.samples == 4
    assert 0.05 < got.sample_sd < 0.06
    assert 0.1 < got.run_sd < 0.15
    assert "from 3 stored runs of this oracle" in got.describe()
    assert "assumed" in plan_perf.QUIET.describe()
