"""A performance culprit's claim with the search's pairs counted (core/perf_confirm.py): they
save fresh pairs where they are decisive, and never confirm a slowdown the fresh pairs do not
show (a slowdown that came and went while the search measured)."""

from __future__ import annotations

import math
import random

import pytest

from bisector.core import paired, perf_confirm
from bisector.core.perf import Direction, PerfVerdict

pytestmark = pytest.mark.unit

SCALE = paired.Scale(sd=0.04, dof=40)  # the search's: a pair moves 4 % between runs
RULE = paired.Rule(Direction.LOWER, 0.05, spread=SCALE)  # a 5 % threshold


def searched(culprit: list[float], parent: list[float]) -> paired.Rule:
    """The rule as the search hands it over: its pairs of the culprit (5) and parent (4)."""
    return paired.Rule(Direction.LOWER, 0.05, spread=SCALE,
                       searched=((4, tuple(parent)), (5, tuple(culprit))))


def fresh_pairs_until_decided(rule: paired.Rule, lent: perf_confirm.Lent | None,
                              slowdown: float, seed: int,
                              cap: int = 64) -> tuple[PerfVerdict, int, perf_confirm.Claim]:
    """Fresh runs ``parent, culprit, parent, ...`` (the confirmation's order), each run's
    level moving 2.5 %, the culprit ``slowdown`` times its parent; judged after each pair."""
    rng = random.Random(seed)
    claim = perf_confirm.Claim(rule, lent)

    def run(t: int, level: float) -> paired.Timed:
        return paired.Timed(float(t), level * math.exp(rng.gauss(0, 0.025)))

    refs, tests = [run(0, 10.0)], []
    while True:
        tests.append(run(2 * len(tests) + 1, 10.0 * slowdown))
        refs.append(run(2 * len(tests), 10.0))
        got = claim(refs, tests)
        if got.verdict is not PerfVerdict.UNDECIDED or len(tests) >= cap:
            return got.verdict, len(tests), claim


def test_the_search_s_pairs_count_fewer_fresh_pairs_when_they_are_decisive() -> None:
    """A 10 % slowdown against 5 %: fresh pairs alone take many to reach the confirmation's
    level; with the search's 12 pairs of the culprit and 12 of the parent at the two levels,
    fewer; with one pair of each, hardly fewer than alone (they say little)."""
    step, spread = math.log(1.10), [0.04 * (-1) ** i for i in range(12)]
    decisive = searched([step + e for e in spread], spread)
    weak = searched([step], [0.0])
    alone, with_weak, with_decisive = [], [], []
    for seed in range(20):
        for rule, into in ((RULE, alone), (weak, with_weak), (decisive, with_decisive)):
            verdict, pairs, claim = fresh_pairs_until_decided(
                rule, perf_confirm.lent(rule, 5, 4), 1.10, seed)
            assert verdict is PerfVerdict.BAD
            assert not claim.contradicted
            into.append(pairs)
    assert min(with_decisive) >= 1  # never on the search's pairs alone
    assert sum(with_decisive) < 0.8 * sum(alone)
    assert sum(with_decisive) < sum(with_weak) <= sum(alone)
    assert all(d <= a for d, a in zip(with_decisive, alone, strict=True))


def test_a_slowdown_only_the_search_saw_is_never_confirmed() -> None:
    """The search's pairs show +50 % at the culprit (a slowdown that came and went); fresh
    runs of it beside its parent show none: the fresh pairs contradict the search's, which
    are set aside, and the claim ends not worse by the threshold, never confirmed."""
    rng = random.Random(5)
    step = math.log(1.5)
    rule = searched([step + rng.gauss(0, 0.04) for _ in range(16)],
                    [rng.gauss(0, 0.04) for _ in range(16)])
    lent = perf_confirm.lent(rule, 5, 4)
    assert lent is not None and lent.culprit == 16 and lent.parent == 16
    for seed in range(200):
        verdict, _, claim = fresh_pairs_until_decided(rule, lent, 1.0, seed)
        assert verdict is PerfVerdict.GOOD
        assert claim.contradicted


def test_a_parent_that_is_the_reference_lends_its_level_and_one_without_pairs_nothing() -> None:
    rule = searched([0.3, 0.4], [0.01])
    at_reference = perf_confirm.lent(rule, 5, 0)
    assert at_reference is not None and at_reference.parent == 0
    assert at_reference.change == pytest.approx(0.35)
    assert perf_confirm.lent(rule, 5, 3) is None  # a parent the search never ran
    assert perf_confirm.lent(rule, 6, 5) is None  # a culprit it never ran
