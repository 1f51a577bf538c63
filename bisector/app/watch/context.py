"""What the parts of one tick share (app/watch/tick.py runs them): the store and configuration,
this tick's owner id, what it reports, and each suite's torch place and oracles, resolved and
parsed once per tick however many flips and bisections ask for them again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from bisector.app.watch import sources
from bisector.app.watch.config import Suite, WatchConfig
from bisector.base import escape
from bisector.base.errors import BisectorError, UsageError
from bisector.base.events import Events
from bisector.oracle.script import Oracle, load_oracle
from bisector.project import history
from bisector.run import torch_place
from bisector.run.policy import LOCAL, Policy
from bisector.store.db import Store


@dataclass
class TickReport:
    """What one pass did: a line per thing, and the suites that failed (one line each)."""

    lines: list[str] = field(default_factory=list)
    ran: int = 0  # oracle runs this tick paid for
    started: list[int] = field(default_factory=list)  # bisections this tick created
    finished: list[int] = field(default_factory=list)  # bisections this tick ran to the end
    errors: list[BisectorError] = field(default_factory=list)


@dataclass
class Pass:
    """One tick's shared state."""

    store: Store
    cfg: WatchConfig
    me: str  # this tick's owner id: the claims it makes are its own
    events: Events
    tell: Callable[[str], None]
    only: tuple[str, ...] = ()  # --suite: the suites this tick looks at (empty: all)
    policy: Policy = LOCAL  # the command's (its object store): nightlies' and bisections'
    report: TickReport = field(default_factory=TickReport)
    tried: set[int] = field(default_factory=set)  # flips whose bisection it tried to start
    _places: dict[str, sources.Place] = field(default_factory=dict)
    _oracles: dict[str, Oracle] = field(default_factory=dict)

    def say(self, line: str) -> None:
        """One line of the tick: what it holds of an oracle's output or a report (a reason,
        a unit, a file's name) cannot start a line of its own (control characters visible)."""
        line = escape.line(line)
        self.report.lines.append(line)
        self.tell(line)

    def place(self, suite: Suite) -> sources.Place:
        """Where the suite's torch comes from: resolved by ``run/torch_place`` (as ``start``
        resolves a bisection's), once per tick."""
        if suite.name not in self._places:
            repo = sources.open_repo(suite.repo)
            where = torch_place.resolve(repo, history.resolve(repo, "HEAD", "HEAD"),
                                        profile=suite.profile, python=suite.python,
                                        variant=suite.variant)
            index = (where.index(suite.torch, suite.index)
                     if suite.torch in ("nightly", "release") else suite.index)
            if suite.torch in ("nightly", "release") and (
                    index is None or where.profile.distribution is None):
                raise UsageError(
                    f"{suite.where}: torch = {suite.torch!r} needs index = \"URL\" (the "
                    f"{where.profile.name} profile has no default {suite.torch} index)")
            self._places[suite.name] = sources.Place(suite.torch, repo, where.profile,
                                                     where.python, where.variant, index,
                                                     suite.wheel)
        return self._places[suite.name]

    def oracle(self, spec: str) -> Oracle:
        """The oracle a suite names, parsed once per tick."""
        if spec not in self._oracles:
            self._oracles[spec] = load_oracle(spec)
        return self._oracles[spec]

    def suite(self, name: str) -> Suite | None:
        return next((s for s in self.cfg.suites if s.name == name), None)
