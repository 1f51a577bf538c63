"""``bisect plan`` simulates the search by running the shipped plain strategy
(app/plan_walk.py): the commits it walks for a culprit are the commits a run probes."""

from __future__ import annotations

import pytest

from bisector.app.plan_walk import walk
from bisector.base.kinds import Way
from bisector.store import runs as run_store
from bisector.store.db import Store
from tests.unit.fakes import FakeExecutor, FakeSource, make_runner, new_bisection, shas


class Broken:
    """Every commit prebuilt but ``broken`` (does not build), as FakeSource obtains them."""

    def __init__(self, broken: set[int]) -> None:
        self.broken = broken

    def kind(self, pos: int) -> Way:
        return Way.BROKEN if pos in self.broken else Way.PREBUILT

    def cost(self, pos: int) -> int:
        return self.kind(pos).rank

    def safe_between(self, a: int, b: int) -> bool:
        return False


@pytest.mark.parametrize(("n", "culprit", "broken"), [(40, 29, set()), (33, 7, {6, 15}),
                                                      (17, 16, {8})])
def test_the_plan_walks_the_commits_a_run_probes(store: Store, n: int, culprit: int,
                                                 broken: set[int]) -> None:
    cands = shas(n)
    bid = new_bisection(store, cands, env=f"walk-{n}")
    source = FakeSource(broken=set(broken))
    source.cost = lambda pos: Broken(broken).cost(pos)  # type: ignore[method-assign]
    make_runner(store, bid, cands, FakeExecutor(cands, culprit), source=source).run()
    ran = [p.position for p in run_store.probes(store, bid)]
    probed, named = walk(n, Broken(broken), culprit, {})
    assert [p for p, _ in probed] == ran
    assert named is (culprit - 1 not in broken)
    assert all(k is (Way.BROKEN if p in broken else Way.PREBUILT) for p, k in probed)
