"""``bisect plan``'s projection: stored verdicts are free and narrow where the culprit can be,
commits known not to build are skips, and each per-step cost says where it came from."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from bisector.app.plan import (
    DEFAULT_COSTS,
    consistent_culprits,
    describe_source,
    make_plan,
    parse_costs,
    price,
    project_costs,
    simulate,
)
from bisector.base.errors import UsageError
from bisector.base.kinds import Way
from bisector.core.sampling import Kind, Sampling, sampling_for
from bisector.core.search import Verdict
from bisector.oracle.script import OracleMeta
from bisector.project.profiles import GENERIC, PYTORCH, TORCHLET
from bisector.store.durations import Measured

G, B, S = Verdict.GOOD, Verdict.BAD, Verdict.SKIP
COSTS = {**DEFAULT_COSTS, "oracle": 10.0, "build": 100.0}


@dataclass
class Kinds:
    """The plan's view of the provider: every commit needs a build unless listed."""

    other: dict[int, Way] = field(default_factory=dict)

    def kind(self, pos: int) -> Way:
        return self.other.get(pos, Way.BUILD)

    def cost(self, pos: int) -> int:
        return self.kind(pos).rank

    def safe_between(self, a: int, b: int) -> bool:
        return False  # every change between two commits needs a build


def test_consistent_culprits_follow_goods_and_bads_and_ignore_skips() -> None:
    assert consistent_culprits(100, {}) == list(range(1, 100))
    assert consistent_culprits(100, {0: G, 50: G, 60: S, 75: B, 99: B}) == list(range(51, 76))
    assert consistent_culprits(100, {40: B, 60: G}) == []  # contradictory


def test_stored_verdicts_cost_nothing_and_restrict_the_culprit() -> None:
    n = 100
    cold = simulate(n, Kinds(), COSTS)
    known = {0: G, 50: G, 75: B, 99: B}
    warm = simulate(n, Kinds(), COSTS, known)
    # One simulated search per position the culprit can still be at, and only those: 51..75.
    assert len(cold) == n - 1 and len(warm) == 25
    # The endpoints and the two inner verdicts are never paid for: only the 24 untested
    # commits between the last good and the first bad are searched.
    assert max(r for r, _, _ in warm) == math.ceil(math.log2(24 + 1))
    assert max(r for r, _, _ in cold) == 2 + math.ceil(math.log2(98 + 1))
    for runs, builds, seconds in warm:
        assert builds == runs and seconds == runs * (COSTS["build"] + COSTS["oracle"])


def test_stored_verdicts_that_already_answer_project_nothing() -> None:
    assert simulate(100, Kinds(), COSTS, {0: G, 41: G, 42: B, 99: B}) == [(0, 0, 0.0)]
    rep = make_plan(Kinds(), 100, COSTS, [], [], [], [], known={0: G, 41: G, 42: B, 99: B})
    assert rep.stored_verdicts == 4 and rep.probes_max == 0 and rep.seconds_max == 0.0


def test_a_commit_known_not_to_build_is_a_skip_without_an_oracle_run() -> None:
    # 0 good, 2 bad, 1 known broken: the search must probe 1, gets a skip, and ends on a
    # window; the broken commit is priced at its (zero) cost, never at an oracle run.
    sims = simulate(3, Kinds({1: Way.BROKEN}), COSTS, {0: G, 2: B})
    assert sims == [(0, 0, 0.0), (0, 0, 0.0)]
    paid = simulate(3, Kinds({1: Way.CACHED}), COSTS, {0: G, 2: B})
    assert paid == [(1, 0, COSTS["cached"] + COSTS["oracle"])] * 2


def test_costs_come_from_the_flag_then_measurements_then_defaults() -> None:
    measured = {"build": (Measured(42.0, 7), "source builds of this repository"),
                "oracle": (Measured(3.5, 12), "runs of this oracle")}
    costs, sources = price({"oracle": 1.0}, measured)
    assert costs["oracle"] == 1.0 and sources["oracle"] == {"from": "--cost"}
    assert costs["build"] == 42.0
    assert sources["build"] == {"from": "measured", "count": 7,
                                "over": "source builds of this repository"}
    assert costs["overlay"] == DEFAULT_COSTS["overlay"] and sources["overlay"] == {
        "from": "default"}
    assert set(costs) == set(sources) == set(DEFAULT_COSTS)
    assert describe_source(sources["build"]) == \
        "measured over 7 source builds of this repository"
    assert describe_source(sources["oracle"]) == "--cost"
    assert describe_source(sources["overlay"]) == "default"


def test_a_project_is_priced_by_its_profile_before_anything_is_measured() -> None:
    """PyTorch's hour-long build prices PyTorch only: a generic project is pure Python unless
    its tree has compiled sources, and what was measured still wins over any default."""
    pytorch, why = project_costs(PYTORCH, compiled=True)
    assert pytorch == {} and why == "pytorch projects"  # plan's defaults are PyTorch's
    small, why = project_costs(GENERIC, compiled=False)
    assert why == "a pure-Python project" and small["build"] < 60
    compiled, why = project_costs(GENERIC, compiled=True)
    assert why == "a project with compiled sources"
    assert small["build"] < compiled["build"] < DEFAULT_COSTS["build"]
    assert project_costs(TORCHLET, compiled=True)[0]["build"] < 60

    measured = {"oracle": (Measured(12.0, 3), "runs of this oracle")}
    costs, sources = price({}, measured, small, "a pure-Python project")
    assert costs["oracle"] == 12.0 and sources["oracle"]["from"] == "measured"
    assert costs["build"] == small["build"]
    assert describe_source(sources["build"]) == "default for a pure-Python project"
    # Ten probes of a small project: minutes, where PyTorch's defaults said hours.
    assert 10 * (costs["build"] + costs["oracle"]) < 3600 < 10 * DEFAULT_COSTS["build"]


def test_parse_costs_returns_only_what_was_given() -> None:
    assert parse_costs(("build=600", "oracle=5")) == {"build": 600.0, "oracle": 5.0}
    assert parse_costs(()) == {}
    with pytest.raises(UsageError, match="unknown step"):
        parse_costs(("compile=3",))
    with pytest.raises(UsageError, match="negative"):
        parse_costs(("build=-1",))


def test_confirmation_is_priced_only_when_a_culprit_is_named() -> None:
    # culprit + parent + revert, one run each; the revert of a culprit that needed a build is
    # a build too.
    plain = simulate(100, Kinds(), COSTS)
    confirmed = simulate(100, Kinds(), COSTS, sampling=Sampling(confirm_runs=1))
    assert [(r + 3, b + 1, s + COSTS["build"] + 3 * COSTS["oracle"]) for r, b, s in plain] \
        == confirmed
    # A search that ends on a window of skips confirms nothing.
    assert simulate(3, Kinds({1: Way.BROKEN}), COSTS, {0: G, 2: B},
                    sampling=Sampling(confirm_runs=1)) == [(0, 0, 0.0)] * 2


def test_a_flaky_oracle_costs_more_runs_than_probes_and_each_commit_is_obtained_once() -> None:
    n = 200
    plain = simulate(n, Kinds(), COSTS)
    flaky = simulate(n, Kinds(), COSTS, sampling=Sampling(Kind.FLAKY, fp=0.1, fn=0.1,
                                                          endpoint_runs=3))
    mean = sum(r for r, _, _ in flaky) / len(flaky)
    assert mean > 1.5 * sum(r for r, _, _ in plain) / len(plain)
    for runs, builds, _ in flaky:
        assert builds <= runs  # re-runs of a commit reuse its wheel
    assert flaky == simulate(n, Kinds(), COSTS, sampling=Sampling(
        Kind.FLAKY, fp=0.1, fn=0.1, endpoint_runs=3))  # seeded: the same plan every time
    # The run cap bounds what the plan projects, as it bounds a run: max-runs counts every
    # run, the endpoints' too, so 3 of each already reach 5 (an endpoint whose runs look wrong
    # still gets its vote first).
    capped = simulate(n, Kinds(), COSTS, sampling=Sampling(Kind.FLAKY, max_runs=5,
                                                           endpoint_runs=3))
    assert {r for r, _, _ in capped} == {6}


def test_a_performance_oracle_pays_its_pairs_a_commit() -> None:
    n = 100
    sampling = Sampling(Kind.PERFORMANCE, max_runs=8, endpoint_runs=3)
    rep = make_plan(Kinds({0: Way.CACHED}), n, COSTS, [], [], [], [], sampling=sampling)
    plain = make_plan(Kinds({0: Way.CACHED}), n, COSTS, [], [], [], [])
    probes = plain.probes_max - 1  # the good endpoint is the reference, priced with each
    # Paired: every commit at its cap of pairs (max-runs 8, never under 7), each pair its own
    # run and the reference's beside it.
    assert rep.probes_max == 1 + 2 * 8 * probes
    assert rep.sampling == "performance"
    assert any("paired" in note for note in rep.notes)


def test_the_sampling_follows_the_oracles_metadata() -> None:
    assert sampling_for(OracleMeta(), confirm=False) == Sampling()
    assert sampling_for(OracleMeta(), confirm=True).confirm_runs == 1
    flaky = sampling_for(OracleMeta(flaky=True, false_positive=0.05), confirm=True)
    assert (flaky.kind, flaky.fp, flaky.fn, flaky.confirm_runs) == (Kind.FLAKY, 0.05, 0.1, 1)
    perf = sampling_for(OracleMeta(threshold=0.05, max_runs=4), confirm=False)
    assert (perf.kind, perf.max_runs, perf.confirm_runs) == (Kind.PERFORMANCE, 4, 0)


@dataclass
class PythonOnly(Kinds):
    """Every commit needs a build, but only ``blockers`` change C code: a built commit is an
    overlay base for every commit with no blocker between them."""

    blockers: tuple[int, ...] = ()

    def safe_between(self, a: int, b: int) -> bool:
        lo, hi = min(a, b), max(a, b)
        return not any(lo < x <= hi for x in self.blockers)


def test_a_commit_built_once_is_the_overlay_base_of_its_python_only_neighbours() -> None:
    n = 200
    before = simulate(n, Kinds(), COSTS)  # no reuse: one build per probe
    after = simulate(n, PythonOnly(), COSTS)  # no C change at all: one build serves the rest
    assert all(b == r for r, b, _ in before)
    assert max(b for _, b, _ in after) == 1
    scattered = simulate(n, PythonOnly(blockers=(30, 90, 150)), COSTS)
    assert 1 <= sum(b for _, b, _ in scattered) / len(scattered) <= 5
    assert sum(b for _, b, _ in scattered) < sum(b for _, b, _ in before) / 2
