"""The search for a deterministic oracle: one verdict per commit, K split points a round.

Each round the pure search (:func:`bisector.core.search.next_step`) is asked for K split points
(multisection), given every verdict known for the candidates: this bisection's own probes and
every reusable verdict any bisection has stored under the same (oracle, environment) key. A
round that was stopped (Ctrl-C, kill -9) and never recorded is run first, as that round: exactly
what was in flight, nothing else; the search being deterministic, ``resume`` reaches the same
culprit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bisector.core.lookahead import next_rounds
from bisector.core.search import Next, Step, Verdict, next_step, remaining_estimate
from bisector.core.verdict import Rules
from bisector.run.hunt import Hunt, judged
from bisector.run.strategies.base import (
    Adopted,
    Conclusion,
    Decision,
    Round,
    View,
    answer_for,
    in_round_later,
    prior_for,
)
from bisector.store import bisections
from bisector.store import runs as run_store
from bisector.store.db import Store
from bisector.store.records import RunRecord


def stored_verdicts(store: Store, key: run_store.Key, candidates: Sequence[str],
                    rules: Rules, hunt: Hunt | None = None
                    ) -> dict[int, tuple[RunRecord, Verdict, str | None]]:
    """position -> (stored run, its verdict under ``rules`` and ``hunt``, the reason of a skip
    the hunt made of it) for every reusable run stored under ``key`` for the candidates.

    A run seeds its search with all of them before its first probe, so they cost nothing;
    ``bisect plan`` calls this same function, so what it counts as free is what a run reuses.
    With a hunt whose failure is not known yet, only the endpoints' runs are read: a verdict
    at another position depends on the failure the bad endpoint shows (run/hunt.py).
    """
    position = {sha: i for i, sha in enumerate(candidates)}
    ends = (0, len(candidates) - 1)
    settled = hunt is None or hunt.known()
    out: dict[int, tuple[RunRecord, Verdict, str | None]] = {}
    for sha, run in run_store.reusable(store, key, list(candidates)).items():
        pos = position[sha]
        if settled or pos in ends:
            out[pos] = (run, *judged(hunt, rules, pos, run))
    return out


def known(view: View) -> tuple[dict[int, Verdict], Adopted]:
    """This bisection's probes plus every reusable verdict stored for its candidates, and the
    verdicts judged elsewhere that this bisection has not logged yet (a pure read)."""
    own = {pos: Verdict(v) for pos, (sha, v) in
           view.mine(run_store.probed_positions(view.store, view.record.id)).items()
           if sha == view.candidates[pos]}
    adopted: Adopted = []
    for pos, (run, v, why) in sorted(stored_verdicts(view.store, view.key, view.candidates,
                                                     view.rules, view.hunt).items()):
        if pos not in own:
            adopted.append((run_store.Adopted(view.offset + pos, view.candidates[pos], run.id,
                                              v.value), why or run.reason))
            own[pos] = v
    return {**view.implied, **own}, adopted


class Plain:
    """The plain search. What it reads of the store is three methods (:meth:`begin`,
    :meth:`known`, :meth:`answer`): ``bisect plan`` runs this very search over simulated
    verdicts by giving them other bodies (app/plan_walk.py)."""

    def __init__(self, view: View) -> None:
        self.view = view
        self.round: int | None = None  # the last round number used (read on the first ask)
        self.in_flight: dict[str, Any] = {}

    def decide(self) -> Decision:
        v = self.view
        if self.round is None:
            self.in_flight, last = self.begin()
            self.round = max(last, int(self.in_flight.get("round", 0)))
        have, adopted = self.known()
        flying = v.mine(dict.fromkeys(self.in_flight.get("positions", ()), True))
        positions = tuple(p for p in flying if p not in have)
        number = int(self.in_flight.get("round", 0)) if positions else self.round + 1
        self.in_flight = {}
        if not positions:
            ready = have.get(0) is Verdict.GOOD and have.get(v.n - 1) is Verdict.BAD
            step = next_step(v.n, have, width=v.width, cost=v.cost,
                             prior=prior_for(v, ready))
            if not isinstance(step, Next):
                return Decision(self.answer(step), adopted, None)
            positions = step.positions
        self.round = max(self.round, number)
        return Decision(Round(number, tuple(v.offset + p for p in positions),
                              remaining_estimate(v.n, have)), adopted, number)

    def begin(self) -> tuple[dict[str, Any], int]:
        """The round stored as in flight and the last round stored: read when first asked,
        after the runner settled what workers finished unseen."""
        v = self.view
        return (dict(bisections.get(v.store, v.record.id).in_flight or {}),
                run_store.last_round(v.store, v.record.id))

    def known(self) -> tuple[dict[int, Verdict], Adopted]:
        """What is known now (:func:`known`)."""
        return known(self.view)

    def answer(self, step: Step) -> Conclusion:
        """The answer of the search that ended in ``step``."""
        return answer_for(self.view, step)

    def ahead(self, r: Round) -> list[tuple[int, float]]:
        """Round ``r``'s later positions, then every commit the next round may probe, by the
        chance of each way ``r`` can come out (:func:`bisector.core.lookahead.next_rounds`)."""
        v = self.view
        have, _ = self.known()
        ready = have.get(0) is Verdict.GOOD and have.get(v.n - 1) is Verdict.BAD
        mine = [p - v.offset for p in r.positions if v.offset <= p < v.offset + v.n]
        # The endpoints' round ends well only one way: good, then bad (its prior is then read
        # from the bad endpoint's run, so the next round is priced without it).
        nxt = next_rounds(v.n, have, mine, width=v.width, cost=v.cost,
                          prior=prior_for(v, ready))
        later = in_round_later(v, r)
        seen = {p for p, _ in later}
        return [*later, *((v.offset + p, w) for p, w in nxt if v.offset + p not in seen)]
