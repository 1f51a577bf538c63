"""``bisect start|plan --from-report FILE|-``: a HUD benchmark regression report in, one
bisection per distinct range and metric out (``project/dashboard.py`` reads the report,
``oracle/dashboard.py`` makes each range's benchmark oracle).

Each range becomes the request the user would have typed: ``--good``/``--bad`` the report's
commits, the oracle PyTorch's benchmark command for the range's models with the report
policy's threshold, everything else as given (``--repo`` the PyTorch clone, ``--python``,
``--gpus``...). A range already bisected in this store (the same oracle and endpoints) is not
bisected again: it is named with its id.

``bisect start --from-report`` and the watch's report suites walk a report the same way, through
:func:`each_range`: each range in turn, looked up in the store as it is reached (after the
previous range's bisection was started, so a report naming one range twice starts it once).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from bisector.base.errors import UsageError
from bisector.oracle.command import oracle_for
from bisector.oracle.dashboard import TIMEOUT_S, command, threshold
from bisector.project.dashboard import MAX_BYTES, Range, parse
from bisector.run.config import Request
from bisector.store import bisections
from bisector.store.db import Store


@dataclass(frozen=True)
class Planned:
    report_id: str
    items: tuple[tuple[Range, Request], ...]
    skipped: tuple[str, ...]  # series of the report not bisected, each with why


@dataclass(frozen=True)
class Reached:
    """One range of a report as the walk reaches it."""

    number: int  # from 1
    total: int
    range: Range
    request: Request  # what ``bisect start`` would have been given for it
    found: int | None  # the bisection of this store already made of it, if any

    @property
    def said(self) -> str:
        return describe(self.range)


def each_range(store: Callable[[], Store], planned: Planned) -> Iterator[Reached]:
    """Each range of the report in turn, with the bisection this store already has of it;
    looked up only when the range is reached, so what the caller started for an earlier
    range counts (``store``: opened on first use)."""
    total = len(planned.items)
    for number, (r, req) in enumerate(planned.items, 1):
        yield Reached(number, total, r, req, already(store(), req))


def read_text(source: str) -> str:
    """The report's text: a file, or standard input for ``-``."""
    if source == "-":
        return sys.stdin.read(MAX_BYTES + 1)
    path = Path(source)
    try:
        with path.open("rb") as f:  # one byte over the cap: parse() says it is too big
            return f.read(MAX_BYTES + 1).decode("utf-8", errors="replace")
    except OSError as e:
        raise UsageError(f"--from-report {source}: cannot read it ({e.strerror}): give the "
                         f"path of a HUD regression report's JSON, or - for standard input"
                         ) from None


def requests(base: Request, text: str) -> Planned:
    """One request per range of the report, the rest of ``base`` kept."""
    given = [f for f, v in (("--oracle", base.oracle), ("-- CMD", base.command),
                            ("--good", base.good), ("--bad", base.bad),
                            ("--timeout", base.timeout), ("--threshold", base.threshold))
             if v]
    if given:
        raise UsageError(f"--from-report takes the range and the oracle from the report: drop "
                         f"{', '.join(given)}")
    report = parse(text)
    if not report.ranges:
        why = "; ".join(report.skipped[:5]) or "none is labelled regression"
        raise UsageError(f"the report has no regressed series bisector can run ({why})")
    items = tuple((r, replace(base, good=r.good, bad=r.bad, command=command(r),
                              threshold=threshold(r), timeout=TIMEOUT_S,
                              profile=base.profile or "pytorch"))
                  for r in report.ranges)
    return Planned(report.report_id, items, report.skipped)


def describe(r: Range) -> str:
    """One line naming a range's series for the progress and the notes."""
    models = ", ".join(r.models)
    return (f"{r.suite} {r.metric} ({r.mode}, {r.dtype}, {r.device}) of {models}: "
            f"{r.good[:12]}..{r.bad[:12]}, threshold {100 * r.threshold:g}%")


def already(store: Store, req: Request) -> int | None:
    """The id of a bisection of this store with the request's oracle (hashed as ``start``
    makes it: its dependencies and timeout included) and endpoints, if any."""
    sha = oracle_for("", req.command, timeout=req.timeout, dependencies=req.dependency,
                     threshold=req.threshold).sha256
    return bisections.same_range(store, sha, req.good, req.bad)
