"""Bisections of one oracle that disagree (`bisect list --disagree`): one named a culprit X,
another of the same oracle (the same bytes, the same polarity) searched a range that holds X
and said there was no regression there, or named another commit. Either a flaky verdict, an
environment that broke or hid the failure, or two regressions in one range: what a person
looks at first when the store's answers are in doubt.

"X is inside the other's range" is read from the candidates each bisection froze at its start
(``candidate``: its good endpoint at position 0, then every commit it could name): X is a
candidate past position 0. One SQL query finds every pair, from the culprits (an index on
``bisection.culprit_sha`` side) to the candidate lists that hold them (``ix_candidate_sha``,
migration 0014); the list keeps both sides of each pair. A merge culprit and the commit inside
it (``culprit_inside``) are one answer, not two.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Select, and_, func, or_, select, union
from sqlalchemy.orm import aliased

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
                       and_(other.state == State.DONE.value, ~same_answer))))


def condition(bisection_id: Any) -> ColumnElement[bool]:
    """``bisection_id`` is on either side of a disagreeing pair."""
    p = pairs().cte("disagreeing")
    either = union(select(p.c.named), select(p.c.other))
    cond: ColumnElement[bool] = bisection_id.in_(either)
    return cond
