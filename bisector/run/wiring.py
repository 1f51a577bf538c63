"""What a :class:`~bisector.run.runner.Runner` is given, in two parts that change for different
reasons: how a probe is judged (:class:`Judging`: the oracle, its rules, the search and what
follows the answer) and where probes run (:class:`Means`: the artifacts, the executor, the slots
or the queue, and how much is made ahead). ``run/opened.Opened`` fills both from a
stored bisection; tests fill them with fakes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from bisector.core.verdict import Rules
from bisector.executors.base import Executor
from bisector.oracle.script import Oracle
from bisector.project.revert import Clone
from bisector.run.at_culprit import Asked
from bisector.run.hunt import Hunt
from bisector.run.pipeline import Source
from bisector.run.prior import FailurePrior
from bisector.run.remote import Workers
from bisector.run.strategies import strategy_for
from bisector.run.strategies.base import Strategy, View


@dataclass(frozen=True)
class Judging:
    """How the bisection's probes are judged and its answer reached."""

    oracle: Oracle
    rules: Rules
    # The judge of failing runs (run/hunt.py): None where exit codes judge alone.
    hunt: Hunt | None = None
    prior: FailurePrior | None = None
    # Plain, noisy or performance, from the oracle's metadata (run/strategies).
    strategy: Callable[[View], Strategy] = strategy_for
    confirm: bool = False  # run the culprit and its parent again before saying done
    reconfirm: bool = False  # ... with fresh runs even where verdicts are stored
    into_merge: bool = False  # a first-parent culprit that is a merge: search inside it
    # What runs at a culprit once the answer is written (run/at_culprit.py).
    at_culprit: Asked = field(default_factory=Asked)
    # Confirmation's git (the culprit's revert and parents); None: the bisection's clone here.
    clone: Clone | None = None


@dataclass(frozen=True)
class Means:
    """Where and how the probes run."""

    source: Source
    executor: Executor
    # One probe slot per GPU (None: no GPU pinned); a round is as wide as this.
    slots: tuple[str | None, ...] = (None,)
    workers: Workers | None = None  # set: each round's probes go to workers through a queue
    prefetch: int = 0  # commits made ahead at once while the oracles run (run/prefetch.py)
    spare_builds: int = 0  # build slots the round does not need: speculative builds go there
    # Probes or builds run in containers: a run first sweeps those dead controllers left.
    contained: bool = False

    @property
    def width(self) -> int:
        return len(self.slots)
