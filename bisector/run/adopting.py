"""Verdicts judged elsewhere, logged as this bisection's reused probes.

A strategy reads every stored verdict (or run) of its candidates under the bisection's key:
other bisections of the same oracle and environment judged some positions already. The
strategy names those this bisection has not logged yet in its
:class:`~bisector.run.strategies.base.Decision`; the loop logs them here, labelled with the
round they informed, so ``bisect log`` and ``show`` list every verdict the search used, and the
display hears of each as a reused probe. What workers finish is appended as probes by the
queue's :class:`~bisector.run.remote.Workers` instead.
"""

from __future__ import annotations

from bisector.base.errors import LeaseLost
from bisector.base.events import Events
from bisector.core.search import Verdict
from bisector.run.strategies.base import Adopted
from bisector.store import runs as run_store
from bisector.store.db import Store


def adopt(store: Store, bisection_id: int, me: str, adopted: Adopted, round_: int | None,
          events: Events) -> None:
    """Log ``adopted`` as reused probes of ``round_`` while the lease is ``me``'s (else
    :class:`LeaseLost`, nothing written), then tell ``events`` of each."""
    if not run_store.adopt(store, bisection_id, me, [a for a, _ in adopted], round_):
        raise LeaseLost(f"bisection {bisection_id} was taken over by another process")
    for a, reason in adopted:
        events.probe_done(a.position, a.commit_sha, Verdict(a.verdict), reason, 0.0, True)
