"""The one place where a finished oracle run becomes a verdict.

Two steps, kept apart on purpose:

1. :func:`classify` turns what the process did (exit status, timed out, signal, OOM) into a raw
   :class:`Outcome` plus a reason, as ``git bisect run`` does. Outcomes are what the store keeps,
   so bisections with opposite polarity (a regression hunt and a find-fix) share them.
2. :meth:`Rules.judge` gives an outcome its meaning for one bisection: the polarity (which exit
   means "the bug"), find-fix (we look for the first commit without it), and the oracle's
   ``on-timeout`` rule, which speaks of the bug, not of exit codes, so ``--regress success``
   can never turn "a hang is the bug" into "good".

Infrastructure failure is never a regression: a signal, an OOM kill, a start failure or an
install failure is a SKIP with a reason the report shows.
"""

from __future__ import annotations

import enum
import re
import signal
from dataclasses import dataclass

from bisector.base.errors import UsageError
from bisector.base.kinds import Polarity as Polarity  # a typed choice of the CLI: base/kinds
from bisector.core.search import Verdict


class Outcome(enum.StrEnum):
    """What the oracle process did, before a bisection gives it a meaning."""

    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"
    TIMEOUT = "timeout"


class TimeoutRule(enum.StrEnum):
    """What a timeout means, in the oracle's own words: a hang can be the bug itself."""

    SKIP = "skip"
    BAD = "bad"  # the bug is present (a hang is the regression)
    GOOD = "good"  # the bug is absent


@dataclass(frozen=True)
class Rules:
    """Everything that turns one bisection's outcomes into verdicts."""

    polarity: Polarity = Polarity.FAILURE
    find_fix: bool = False
    on_timeout: TimeoutRule = TimeoutRule.SKIP
    # --term-old/--term-new: the user's words for the two sides (git bisect's terms).
    term_old: str | None = None
    term_new: str | None = None

    def judge(self, outcome: Outcome) -> Verdict:
        """BAD means "the new behaviour we search for": the bug, or its fix under find-fix."""
        if outcome is Outcome.SKIP:
            return Verdict.SKIP
        if outcome is Outcome.TIMEOUT:
            if self.on_timeout is TimeoutRule.SKIP:
                return Verdict.SKIP
            bug = self.on_timeout is TimeoutRule.BAD
        else:
            bug = (outcome is Outcome.FAIL) == (self.polarity is Polarity.FAILURE)
        return Verdict.BAD if bug != self.find_fix else Verdict.GOOD

    @property
    def terms(self) -> tuple[str, str]:
        """The words for the old and the new behaviour in reports and ``git bisect log``."""
        if self.term_old and self.term_new:
            return self.term_old, self.term_new
        return ("broken", "fixed") if self.find_fix else ("good", "bad")


# git bisect's own subcommands: a term spelled like one would make ``git bisect TERM`` ambiguous
# in a replayed log (git refuses them for the same reason).
RESERVED_TERMS = frozenset({"help", "start", "skip", "next", "reset", "visualize", "view",
                            "replay", "log", "run", "terms"})
TERM = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,39}")


def check_terms(old: str | None, new: str | None) -> None:
    """``--term-old``/``--term-new`` as git accepts them: both or neither, one word each, not
    a ``git bisect`` subcommand, not each other, and ``good``/``bad`` only on their own side."""
    if old is None and new is None:
        return
    if not old or not new:
        raise UsageError("give --term-old and --term-new together (the words for the old and "
                         "the new behaviour), or neither")
    for flag, word, other in (("--term-old", old, "bad"), ("--term-new", new, "good")):
        if not TERM.fullmatch(word) or word in RESERVED_TERMS or word == other:
            raise UsageError(f"{flag} {word!r}: give one word of letters, digits, - or _ "
                             f"(not a git bisect subcommand, and not {other!r} on this side), "
                             f"like fast/slow")
    if old == new:
        raise UsageError(f"--term-old and --term-new are both {old!r}: give two words")


@dataclass(frozen=True)
class Classified:
    outcome: Outcome
    reason: str
    # False for results that say more about the machine than about the commit (timeouts,
    # signals, OOM): a later bisection should try again instead of trusting them.
    reusable: bool


def classify(
    returncode: int | None, *, timed_out: bool, oom_killed: bool = False, timeout_s: float = 0.0
) -> Classified:
    """Map a finished process to an outcome, as ``git bisect run`` does."""
    if oom_killed:
        return Classified(Outcome.SKIP, "killed for using too much memory (OOM)", False)
    if timed_out:
        return Classified(Outcome.TIMEOUT, f"timed out after {timeout_s:.0f}s", False)
    if returncode is None:
        return Classified(Outcome.SKIP, "the oracle did not finish", False)
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return Classified(Outcome.SKIP, f"killed by {name}", False)
    if returncode == 0:
        return Classified(Outcome.PASS, "exit 0", True)
    if returncode == 125:
        return Classified(Outcome.SKIP, "the oracle asked to skip (exit 125)", True)
    if returncode <= 127:
        return Classified(Outcome.FAIL, f"exit {returncode}", True)
    return Classified(
        Outcome.SKIP, f"abnormal exit {returncode} (>127, as git bisect run aborts)", False
    )
