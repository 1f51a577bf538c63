"""The search ``bisect plan`` simulates, run by the shipped plain strategy over a simulated view.

For each culprit position it tries, the plan asks :class:`~bisector.run.strategies.plain.Plain`
itself for each round, as a run does, and answers its probes as that culprit would (a commit
that does not build a skip), pricing each commit the way the provider would obtain it then
(:class:`Reuse`: a built commit becomes an overlay base). Only what the strategy reads of the
store is replaced (:class:`Replay`): the in-flight round (none), what is known (the stored
verdicts a run would reuse, then the simulated ones) and the answer of a stop (no message to
read from stored runs). The split points, their cost ranking, the rounds and the answer are
the strategy's own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any, Protocol

from sqlalchemy import create_engine

from bisector.base.kinds import State, Way
from bisector.core.search import Step, Stop, Verdict
from bisector.core.verdict import Rules
from bisector.oracle.metadata import OracleMeta
from bisector.run.strategies.base import Adopted, Conclusion, Round, View
from bisector.run.strategies.plain import Plain
from bisector.store import runs as run_store
from bisector.store.db import Store
from bisector.store.records import BisectionRecord


class Ranking(Protocol):
    """What the projection needs of the artifact provider: how each commit would be obtained
    (a :class:`Way`) and the rank the search uses."""

    def kind(self, pos: int) -> Way: ...
    def cost(self, pos: int) -> int: ...
    def safe_between(self, a: int, b: int) -> bool: ...


class Reuse:
    """The ranking as it changes during one simulated run: a commit built from source becomes
    an overlay base (build once, overlay many), so a later commit whose difference to it is
    overlay-safe is an overlay, not a second build, exactly as the provider does it."""

    def __init__(self, provider: Ranking) -> None:
        self.provider = provider
        self.built: list[int] = []

    def kind(self, pos: int) -> Way:
        k = self.provider.kind(pos)
        if k is Way.BUILD and any(self.provider.safe_between(b, pos) for b in self.built):
            return Way.OVERLAY
        return k

    def cost(self, pos: int) -> int:
        return self.kind(pos).rank

    def paid(self, pos: int, kind: Way) -> None:
        if kind is Way.BUILD:
            self.built.append(pos)


def consistent_culprits(n: int, known: Mapping[int, Verdict]) -> list[int]:
    """Positions the first bad commit can still be at, given verdicts already known: after
    every good, at or before every bad (a skip rules out nothing). Empty when they contradict
    each other (then a run stops as soon as it sees that)."""
    goods = [p for p, v in known.items() if v is Verdict.GOOD]
    bads = [p for p, v in known.items() if v is Verdict.BAD]
    return list(range(max([0, *goods]) + 1, min([n - 1, *bads]) + 1))


class Replay(Plain):
    """The plain strategy over a simulated run: what it knows is ``verdicts`` (the stored ones
    a run would reuse, then each simulated probe's), nothing is in flight, and a stop is the
    end of the walk (its message, read from stored runs, is a real run's)."""

    def __init__(self, view: View, verdicts: dict[int, Verdict]) -> None:
        super().__init__(view)
        self.verdicts = verdicts

    def begin(self) -> tuple[dict[str, Any], int]:
        return {}, 0

    def known(self) -> tuple[dict[int, Verdict], Adopted]:
        return {**self.view.implied, **self.verdicts}, []

    def answer(self, step: Step) -> Conclusion:
        if isinstance(step, Stop):
            return Conclusion(State.FAILED, {"kind": "stop"}, stop=True)
        return super().answer(step)


@dataclass(frozen=True)
class _Nowhere:
    """The store and record of a simulated view: :class:`Replay` never reads them."""

    store: Store
    record: BisectionRecord


@cache
def _nowhere() -> _Nowhere:
    never = datetime.fromtimestamp(0, UTC)
    record = BisectionRecord(0, State.RUNNING, "", "", "", "", "", "", "", "", "", {}, {}, [],
                             0, None, None, {}, None, None, never)
    return _Nowhere(Store(create_engine("sqlite://")), record)


def simulated_view(n: int, cost: Callable[[int], int]) -> View:
    """A view of ``n`` candidates searched one probe at a time, ranked by ``cost``."""
    nowhere = _nowhere()
    return View(nowhere.store, nowhere.record, tuple(map(str, range(n))),
                run_store.Key("", ""), Rules(), OracleMeta(), 1, cost)


def searches(n: int, cost: Callable[[int], int], seeded: Mapping[int, Verdict]) -> bool:
    """Whether a run that starts from the ``seeded`` verdicts probes anything (False: they
    already answer, and a run only reports them)."""
    return isinstance(Replay(simulated_view(n, cost), dict(seeded)).decide().then, Round)


def walk(n: int, provider: Ranking, culprit: int, seeded: Mapping[int, Verdict]
         ) -> tuple[list[tuple[int, Way]], bool]:
    """The positions the plain strategy probes when the culprit is at ``culprit``, each with
    how it was obtained then, and whether the search names a culprit (a window of skips is
    not confirmed)."""
    verdicts = dict(seeded)
    now = Reuse(provider)
    search = Replay(simulated_view(n, now.cost), verdicts)
    probed = []
    while isinstance(then := search.decide().then, Round):
        for p in then.positions:
            k = now.kind(p)
            probed.append((p, k))
            now.paid(p, k)
            verdicts[p] = (Verdict.SKIP if k is Way.BROKEN else
                           Verdict.BAD if p >= culprit else Verdict.GOOD)
    return probed, then.culprit is not None
