"""Bisections of one oracle that disagree (`bisect list --disagree`): one named a culprit X,
another of the same oracle (the same bytes, the same polarity) searched a range that holds X
and said there was no regression there, or named another commit. Either a flaky verdict, an
environment that broke or hid the failure, or two regressions in one range: what a person
looks at first when the store's answers are in doubt.

"X is inside the other's range" is read from the candidates each bisection froze at its start
(``candidate``: its good endpoint at position 0, then every commit it could name): X is a
candidate past position 0. :func:`pairs` is the one SQL query that finds the pairs; it joins
every culprit to every range that holds it (most of another oracle), seconds on a store of
100,000 bisections, so the pairs are kept (table ``disagreement``): a bisection's are found
again by :func:`refresh` when it finishes (one culprit and one candidate list: two index
lookups), dropped by :func:`forget` when it runs again, and the list reads them
(:func:`condition`), both sides of each pair. Migration 0015 fills the table once with the
whole query. A merge culprit and the commit inside it (``culprit_inside``) are one answer.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Select, and_, delete, func, insert, or_, select, union
from sqlalchemy.orm import Session, aliased

from bisector.base.kinds import State
from bisector.store import models as m


def pairs() -> Select[int, int]:
    """(named, other): ``named`` named a culprit that ``other``'s range holds, and ``other``
    said no regression there or named another commit."""
    named, other, c = aliased(m.Bisection), aliased(m.Bisection), m.Candidate
    # Never NULL (NOT of a NULL would drop the pair): a missing commit inside is ''.
    same_answer = or_(other.culprit_sha == named.culprit_sha,
                      func.coalesce(other.culprit_inside, "") == named.culprit_sha,
                      other.culprit_sha == func.coalesce(named.culprit_inside, ""))
    return (select(named.id.label("named"), other.id.label("other"))
            .join(c, c.sha == named.culprit_sha)
            .join(other, other.id == c.bisection_id)
            .where(named.state == State.DONE.value, named.culprit_sha.is_not(None),
                   c.position > 0, other.id != named.id,
                   other.oracle_sha256 == named.oracle_sha256,
                   other.polarity == named.polarity,
                   or_(other.state == State.NO_REGRESSION.value,
                       and_(other.state == State.DONE.value, ~same_answer)))
            .distinct())


def refresh(s: Session, bisection_id: int) -> None:
    """Find again the pairs ``bisection_id`` is in (it just finished), in ``s``."""
    forget(s, bisection_id)
    for side in ("named", "other"):
        q = pairs()
        found = q.where(q.selected_columns[side] == bisection_id)
        s.execute(insert(m.Disagreement).from_select(["named", "other"], found))


def forget(s: Session, bisection_id: int) -> None:
    """Drop the pairs of ``bisection_id`` (it runs again: its answer is not known)."""
    d = m.Disagreement
    s.execute(delete(d).where(or_(d.named == bisection_id, d.other == bisection_id)))


def condition(bisection_id: Any) -> ColumnElement[bool]:
    """``bisection_id`` is on either side of a disagreeing pair."""
    d = m.Disagreement
    cond: ColumnElement[bool] = bisection_id.in_(union(select(d.named), select(d.other)))
    return cond
