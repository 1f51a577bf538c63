"""The pure search: tables for the named cases, a Hypothesis property over random histories."""

from __future__ import annotations

import math
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from bisector.core.search import (
    Culprit,
    Next,
    Problem,
    Stop,
    Verdict,
    Window,
    budget_window,
    max_probes,
    next_step,
)

G, B, S = Verdict.GOOD, Verdict.BAD, Verdict.SKIP


def drive(
    n: int, truth: dict[int, Verdict], width: int = 1, cost: Callable[[int], int] | None = None
) -> tuple[object, list[int]]:
    """Run the search against a known answer; returns the final step and the probes made."""
    known: dict[int, Verdict] = {}
    probed: list[int] = []
    for _ in range(10 * n + 10):
        step = next_step(n, known, width, cost=cost)
        if not isinstance(step, Next):
            return step, probed
        for p in step.positions:
            assert p not in known, "never probe the same commit twice"
            probed.append(p)
            known[p] = truth[p]
    raise AssertionError("search did not terminate")


def history(n: int, culprit: int, skips: set[int] = frozenset()) -> dict[int, Verdict]:  # type: ignore[assignment]
    return {p: S if p in skips else (B if p >= culprit else G) for p in range(n)}


def test_endpoints_are_probed_first() -> None:
    assert next_step(10, {}) == Next((0, 9))
    assert next_step(10, {0: G}) == Next((9,))


def test_good_endpoint_bad_stops() -> None:
    assert next_step(10, {0: B, 9: B}) == Stop(Problem.GOOD_IS_BAD, 0)


def test_bad_endpoint_good_stops() -> None:
    assert next_step(10, {0: G, 9: G}) == Stop(Problem.BAD_IS_GOOD, 9)


def test_untestable_endpoints_stop() -> None:
    assert next_step(10, {0: S, 9: B}) == Stop(Problem.GOOD_UNTESTABLE, 0)
    assert next_step(10, {0: G, 9: S}) == Stop(Problem.BAD_UNTESTABLE, 9)


def test_adjacent_endpoints_give_the_culprit_at_once() -> None:
    assert next_step(2, {0: G, 1: B}) == Culprit(1)


def test_midpoint_and_culprit() -> None:
    step, probed = drive(17, history(17, 11))
    assert step == Culprit(11)
    assert len(probed) <= max_probes(17)


def test_skip_steps_to_a_neighbour_not_the_skipped_commit() -> None:
    known = {0: G, 10: B, 5: S}
    step = next_step(11, known)
    assert isinstance(step, Next) and step.positions[0] in (4, 6)


def test_skips_next_to_culprit_give_a_window() -> None:
    step, _ = drive(12, history(12, 6, {5}))
    assert step == Window(5, 6)


def test_all_skipped_interior_gives_window() -> None:
    assert next_step(5, {0: G, 1: S, 2: S, 3: S, 4: B}) == Window(1, 4)


def test_bad_before_good_is_not_monotonic() -> None:
    assert next_step(10, {0: G, 9: B, 3: B, 6: G}) == Stop(Problem.NOT_MONOTONIC, 3)


def test_multisection_returns_several_distinct_points() -> None:
    step = next_step(101, {0: G, 100: B}, width=3)
    assert isinstance(step, Next) and step.positions == (25, 50, 75)


def test_multisection_uses_fewer_rounds() -> None:
    rounds = 0
    known: dict[int, Verdict] = {}
    truth = history(1001, 613)
    while True:
        step = next_step(1001, known, width=3)
        if not isinstance(step, Next):
            break
        rounds += 1
        for p in step.positions:
            known[p] = truth[p]
    assert step == Culprit(613)
    assert rounds <= 2 + math.ceil(math.log(1000, 4)) + 1


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_property_finds_culprit_or_window_containing_it(data: st.DataObject) -> None:
    n = data.draw(st.integers(2, 300), label="n")
    culprit = data.draw(st.integers(1, n - 1), label="culprit")
    interior = list(range(1, n - 1))
    skips = set(data.draw(st.lists(st.sampled_from(interior), unique=True), label="skips")
                if interior else [])
    skips.discard(culprit) if data.draw(st.booleans(), label="culprit testable") else None
    step, probed = drive(n, history(n, culprit, skips))
    if isinstance(step, Culprit):
        assert step.position == culprit
    else:
        assert isinstance(step, Window), step
        assert step.first <= culprit <= step.last
        # Every suspect but the last is skipped: the window is as small as the skips allow.
        assert all(p in skips for p in range(step.first, step.last))
    if not skips:
        assert isinstance(step, Culprit)
        assert len(probed) <= math.ceil(math.log2(n)) + 2


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 5000), st.data())
def test_property_probe_bound_without_skips(n: int, data: st.DataObject) -> None:
    culprit = data.draw(st.integers(1, n - 1))
    step, probed = drive(n, history(n, culprit))
    assert step == Culprit(culprit)
    assert len(probed) <= max_probes(n) <= math.ceil(math.log2(n)) + 2


@settings(max_examples=300, deadline=None)
@given(st.integers(2, 3000), st.data())
def test_property_cost_aware_search_keeps_the_probe_bound(n: int, data: st.DataObject) -> None:
    """Whatever the costs, preferring cheap commits never costs an extra oracle run."""
    culprit = data.draw(st.integers(1, n - 1))
    cheap = data.draw(st.sets(st.integers(0, n - 1), max_size=max(1, n // 8)))
    costs = {p: (0 if p in cheap else 3) for p in range(n)}
    step, probed = drive(n, history(n, culprit), cost=costs.__getitem__)
    assert step == Culprit(culprit)
    assert len(probed) <= math.ceil(math.log2(n)) + 2


def test_cost_aware_probe_takes_a_cheap_commit_inside_the_window() -> None:
    # 210 untested: any split with both sides <= 127 keeps the 8-probe bound.
    known = {0: G, 211: B}
    assert budget_window(list(range(1, 211))) == list(range(83, 129))
    plain = next_step(212, known)
    cheap = next_step(212, known, cost=lambda p: 0 if p == 90 else 3)
    assert plain == Next((105,)) and cheap == Next((90,))
    # A cheap commit outside the window is not worth an extra run.
    assert next_step(212, known, cost=lambda p: 0 if p == 40 else 3) == Next((105,))


def test_budget_window_is_the_middle_alone_when_tight() -> None:
    assert budget_window(list(range(15))) == [7]
    assert budget_window(list(range(16))) == list(range(16))
