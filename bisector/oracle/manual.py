"""Manual mode (``bisect start --manual``): a person is the oracle, as with ``git bisect
good``/``bad`` typed by hand, for regressions only a person can judge (a plot that looks wrong,
an error message that reads worse, a slowdown felt in a notebook).

For each probe bisector still does everything but the judging: it obtains the commit's torch,
makes its environment and a private copy of its tree, then hands the person one command line
that opens a shell there (bash, the environment first after their start-up files) and asks.
The answer is stored as the verdict of a *manual oracle*: a small document with a marker and a
token made when the bisection is created, so ``resume`` keeps the answers given (the stored
oracle is the same) and another bisection never mistakes one person's judgement of one bug for
another's (a new ``start`` asks again).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from bisector.oracle.script import Oracle, parse_metadata

MARKER = "# bisector manual oracle: a person answers for each probe"
NAME = "manual"


class Reply:
    """What a person can answer, as the exit codes an oracle would give: the bug shows (1,
    "bad"), it does not (0, "good"), or this commit cannot be judged (125, "skip"). Two more
    replies are no verdict (negative, never an exit code): ``RETRY`` makes the commit's tree
    and environment again and opens the shell, then asks again; ``BACK`` takes the previous
    answer back (mozregression's and ``git bisect``'s habits, typed at the same prompt)."""

    BUG, NO_BUG, SKIP = 1, 0, 125
    RETRY, BACK = -1, -2


# Every word the prompt takes, as ``git bisect`` and mozregression take them: the question is
# "does it show the bug?", so yes is bad and no is good.
REPLIES = {
    "bad": Reply.BUG, "b": Reply.BUG, "yes": Reply.BUG, "y": Reply.BUG,
    "good": Reply.NO_BUG, "g": Reply.NO_BUG, "no": Reply.NO_BUG, "n": Reply.NO_BUG,
    "skip": Reply.SKIP, "s": Reply.SKIP,
    "retry": Reply.RETRY, "r": Reply.RETRY,
    "back": Reply.BACK, "undo": Reply.BACK,
}


def reply(word: str) -> int | None:
    """The code of a typed word (case and surrounding blanks ignored); None: not an answer."""
    return REPLIES.get(word.strip().lower())


class TakeBack(Exception):
    """The person typed ``back``: the probe being asked about is abandoned (nothing of it is
    recorded) and the runner takes the previous answer back, then asks about that commit."""


@dataclass(frozen=True)
class ManualProbe:
    """What the person is shown for one probe."""

    commit: str
    env: Path  # the probed environment (its ``bin`` holds the python to try)
    tree: Path  # a private copy of the commit's exported tree, removed after the answer
    shell: str  # one command line: bash in the tree, the environment first after ~/.bashrc
    obtained: str  # how its torch was obtained (a wheel, an overlay, a build)
    undo: str | None = None  # the answer ``back`` would take back ("good for abc123"); None: none
    retried: int = 0  # how many times ``retry`` made this probe again (>0: open the shell first)


@runtime_checkable
class Asks(Protocol):
    """Whoever can put the question to a person (the CLI's terminal display)."""

    def ask(self, probe: ManualProbe) -> int:
        """One of :class:`Reply`'s codes (``BACK`` only when ``probe.undo`` names an answer
        to take back); raises KeyboardInterrupt when the person quits (the bisection stops as
        on Ctrl-C, every answer given is stored, ``resume`` asks on)."""
        ...


def manual_oracle(token: str | None = None) -> Oracle:
    """A new manual oracle (``token`` None: a fresh one, as ``start --manual`` makes)."""
    text = MARKER + "\n" + json.dumps({"session": token or uuid.uuid4().hex}) + "\n"
    return Oracle(name=NAME, path=Path(NAME), content=text.encode(),
                  meta=parse_metadata(text, "the manual oracle"))


def is_manual_source(source: str) -> bool:
    """A stored oracle's text that is a manual session's (a person answered each probe)."""
    return source.startswith(MARKER + "\n")


def is_manual(oracle: Oracle) -> bool:
    return oracle.content.startswith(MARKER.encode() + b"\n")
