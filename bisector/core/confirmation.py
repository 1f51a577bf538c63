"""A flaky oracle's confirmation, weighed: the culprit's runs and its parent's as evidence.

A flaky oracle's fresh runs are not put to a vote: a vote of three at 20 % wrong answers is
lost about one time in ten per commit, so a right culprit would be called "not reproducible"
about one time in five. They join the search's runs instead, and the culprit's probability
under the search's own model (:mod:`bisector.core.joint`: "a regression, and there", the rates
integrated out) decides (:func:`weigh`).

The search's own runs of the culprit and of its parent count toward the first group
(:func:`owed`). The joint search cannot name a culprit without running both (until it has, the
culprit and its neighbour share one likelihood), and its end game runs them where they tell
most; a fresh group on top of them cost 2 of 33 runs at 1000 commits and 20 % spurious
failures and changed no answer (simulated, ``make bench`` section 14). A commit the search ran
fewer times than the oracle's ``repeats`` gets the rest fresh; later groups, while undecided,
are fresh. Pure: the runner's :mod:`bisector.run.confirm` runs what this asks for.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from bisector.base import defaults
from bisector.core import noisy
from bisector.core.joint import Joint
from bisector.core.search import Verdict

# One run as confirmation keeps it: (run id, verdict value, reason).
Seen = list[tuple[int, str, str]]

# A flaky oracle's culprit is "not reproducible" once its fresh runs leave it less likely than
# not to be the culprit (another commit may then be the most likely one).
NOT_REPRODUCIBLE_BELOW = 0.5


class Confirmation(enum.StrEnum):
    CONFIRMED = "confirmed"
    NOT_REPRODUCIBLE = "not reproducible"
    INCONCLUSIVE = "inconclusive"  # a fresh run could not decide (skipped, or undecided)
    REVERT_DID_NOT_FIX = "the revert did not fix it"


def confirm_rounds(times: int) -> int:
    """Groups of ``times`` runs of each a flaky confirmation may run, the first included.

    A flaky culprit whose runs leave it between :data:`NOT_REPRODUCIBLE_BELOW` and the
    confidence gets more, a group (one run of each, or the oracle's ``repeats``) at a time, up
    to ``defaults.NOISY_CONFIRM_RUNS_MAX`` of each (a last group runs whole), before it is
    called inconclusive. Nine runs of each left a right culprit at 40 % spurious failures
    inconclusive about 3 times in 100 (simulated, ``make bench`` section 14); eighteen, under 1
    in 100."""
    return max(1, -(-defaults.NOISY_CONFIRM_RUNS_MAX // max(1, times)))


def searched(history: Sequence[tuple[int, bool]], position: int) -> tuple[int, int]:
    """(failed, runs) of the search's own runs at ``position``."""
    mine = [bad for p, bad in history if p == position]
    return sum(mine), len(mine)


def owed(history: Sequence[tuple[int, bool]], position: int, parent_position: int,
         times: int) -> tuple[int, int]:
    """Fresh runs of the culprit and of its parent the first group still needs: ``times``
    each, less the search's own runs of that commit."""
    return (max(0, times - searched(history, position)[1]),
            max(0, times - searched(history, parent_position)[1]))


def weigh(posterior: noisy.Posterior, position: int, culprit: Seen, parent: Seen,
          confidence: float, parent_position: int | None = None,
          ) -> tuple[Confirmation, float, float]:
    """(status, probability before, probability after) of the culprit at ``position``.

    The fresh runs of the culprit and its parent join the search's runs. **Confirmed** when
    the culprit's probability still reaches the oracle's ``confidence`` (the bar the search
    stopped at) and both commits have an answer (a fresh run that did not skip, or, where no
    fresh run was asked for, the search's own); **not reproducible** when it falls below
    :data:`NOT_REPRODUCIBLE_BELOW` (it is now more likely not the culprit); otherwise
    **inconclusive**."""
    pp = position - 1 if parent_position is None else parent_position
    fresh = [(p, v == Verdict.BAD.value)
             for p, seen in ((position, culprit), (pp, parent))
             for _, v, _ in seen if v != Verdict.SKIP.value]
    before_p = Joint(posterior.n, posterior.history).prob(position)
    after_p = Joint(posterior.n, [*posterior.history, *fresh]).prob(position)
    # A commit has an answer when a fresh run of it did not skip, or when none was asked for
    # and the search ran it; fresh runs asked for that all skipped (it no longer builds, say)
    # leave it without one, whatever the search saw.
    decided = all(any(v != Verdict.SKIP.value for _, v, _ in s) if s
                  else searched(posterior.history, p)[1] > 0
                  for p, s in ((position, culprit), (pp, parent)))
    if after_p < NOT_REPRODUCIBLE_BELOW:
        status = Confirmation.NOT_REPRODUCIBLE
    elif decided and after_p >= confidence:
        status = Confirmation.CONFIRMED
    else:
        status = Confirmation.INCONCLUSIVE
    return status, before_p, after_p
