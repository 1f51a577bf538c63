"""``back`` at a ``--manual`` prompt, as the run takes it: the probe asked about is abandoned
(nothing recorded), the previous answer leaves the bisection (``store/answers.take_back``) and
its commit is the round in flight again, so a fresh strategy, reading that as ``resume``
would, asks about it next (the prompt itself is ``oracle/manual.py``'s)."""

from __future__ import annotations

from bisector.base.errors import LeaseLost
from bisector.base.events import Events
from bisector.store import answers
from bisector.store.db import Store


def take_back(store: Store, bisection_id: int, me: str, events: Events) -> int | None:
    """Take the last answer back while the lease is ``me``'s; its position, or None when no
    answer was given yet."""
    owned, taken = answers.take_back(store, bisection_id, me)
    if not owned:
        raise LeaseLost(f"bisection {bisection_id} was taken over by another process")
    if taken is None:
        events.note("nothing to undo: no answer was given yet")
        return None
    events.note(f"took back {taken.verdict} for {taken.commit_sha[:12]}: asking about it again")
    return taken.position
