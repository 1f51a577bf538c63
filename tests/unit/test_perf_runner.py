"""The runner with a performance oracle: a fake executor that prints samples (a planted
slowdown from the culprit on, with noise), a real SQLite store."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest

from bisector.artifacts.installable import Installable
from bisector.core.verdict import Outcome
from bisector.errors import EndpointError
from bisector.executors.base import RunResult
from bisector.kinds import State
from bisector.oracle import Oracle
from bisector.store import verdicts
from bisector.store.db import Store
from tests.unit.fakes import ORACLE, FakeExecutor, make_runner, new_bisection, shas

PERF = replace(ORACLE, content=b"# perf\n", meta=replace(ORACLE.meta, threshold=0.05))


class Timer(FakeExecutor):
    """Prints 20 samples around 10 ms, or 10 ms × ``slowdown`` from the culprit on."""

    def __init__(self, cands: list[str], culprit: int, slowdown: float, seed: int) -> None:
        super().__init__(cands, culprit)
        self.slowdown, self.rng = slowdown, random.Random(seed)

    def run(self, *, inst: Installable, oracle: Oracle, commit: str, run_dir: Path,
            gpu: str | None = None) -> RunResult:
        super().run(inst=inst, oracle=oracle, commit=commit, run_dir=run_dir, gpu=gpu)
        base = 10.0 * (self.slowdown if self.position[commit] >= self.culprit else 1.0)
        samples = [round(base * self.rng.uniform(0.97, 1.03), 4) for _ in range(20)]
        line = "BISECTOR_RESULT " + json.dumps({"samples": samples, "unit": "ms"})
        return RunResult(Outcome.PASS, "exit 0", 0, 0.01, True, output_tail=line + "\n")


def test_a_planted_slowdown_is_found_with_medians_and_changes(store: Store) -> None:
    cands = shas(120)
    bid = new_bisection(store, cands, oracle=PERF)
    ex = Timer(cands, 77, 1.3, 1)
    r = make_runner(store, bid, cands, ex, oracle=PERF)
    r.confirm = True
    r.revert = lambda culprit, onto: None  # type: ignore[method-assign]
    rec = r.run().record
    assert rec.state is State.DONE and rec.culprit_sha == cands[77]
    pf = rec.result["perf"]
    rows = {row["position"]: row for row in pf["commits"]}
    assert rows[77]["verdict"] == "bad" and 0.25 < rows[77]["change"] < 0.35
    assert rows[76]["verdict"] == "good" and abs(rows[76]["change"]) < 0.03
    assert pf["baseline_runs"] == 3 and abs(pf["baseline_median"] - 10.0) < 0.2
    assert rec.result["confirmation"]["status"] == "confirmed"


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
    key = verdicts.Key(PERF.sha256, "env0")
    runs = verdicts.samples(store, key, [cands[0]])[cands[0]]
    assert runs and all("no BISECTOR_RESULT line" in x.run.reason for x in runs)
