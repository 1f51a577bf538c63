"""A performance oracle's numbers over nightlies: one series per suite x oracle x metric.

The watch runs a performance oracle once per build, and its result row keeps the run's samples
(``facts["perf"]``, as every probe's). A series is those rows of one suite and oracle (and the
``metric`` the oracle names, if any), ordered by build (``store.watch.build_order``), one point
per build: its samples, their median and spread, the build's date (a nightly's ``.devYYYYMMDD``,
else the day it was judged) and commit.

:func:`new_steps` is what a tick asks after recording a result: the change points of the
series (:mod:`bisector.core.changepoint`, threshold from the oracle, level
``defaults.WATCH_STEP_ALPHA``) that no flip of this oracle covers yet. A step "covered" lies
within ``defaults.WATCH_STEP_MOVE_BUILDS`` builds of a flip of the same kind: change points
move when more nightlies arrive (the segment after a step grows and the best cut shifts by a
build), and a moved step must not start a second bisection.

Built from the store alone, so ``bisect watch`` and the web view draw what any tick recorded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from bisector.base import defaults, escape
from bisector.base.escape import line
from bisector.core import changepoint
from bisector.core.perf import Direction, median
from bisector.store import watch as ws
from bisector.store.db import Store

NIGHTLY_DATE = re.compile(r"\.dev(\d{4})(\d{2})(\d{2})")


@dataclass(frozen=True)
class Point:
    """One build of a series."""

    result_id: int
    version: str
    commit: str
    date: str  # YYYY-MM-DD
    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return median(self.samples)


@dataclass(frozen=True)
class Series:
    suite: str
    oracle: str
    metric: str  # the oracle's "metric", else its name
    unit: str | None
    direction: Direction
    points: tuple[Point, ...]

    def index_of(self, result_id: int) -> int | None:
        return next((i for i, p in enumerate(self.points) if p.result_id == result_id), None)


def build_date(r: ws.ResultRecord) -> str:
    m = NIGHTLY_DATE.search(r.key.torch_version)
    return f"{m[1]}-{m[2]}-{m[3]}" if m else r.at.date().isoformat()


def _perf(r: ws.ResultRecord) -> dict[str, Any] | None:
    perf = r.facts.get("perf")
    if r.state != ws.DONE or not isinstance(perf, dict):
        return None
    samples = perf.get("samples")
    if not isinstance(samples, list) or not samples:
        return None
    return perf


def all_series(store: Store, suite: str | None = None,
               oracle: str | None = None) -> list[Series]:
    """Every series the store holds (of ``suite`` and ``oracle`` when given), each oldest
    build first; in the order their first results were recorded."""
    groups: dict[tuple[str, str, str], list[tuple[ws.ResultRecord, dict[str, Any]]]] = {}
    for r in ws.results(store):
        if (suite and r.key.suite != suite) or (oracle and r.key.oracle != oracle):
            continue
        perf = _perf(r)
        if perf is None:
            continue
        # An oracle's words, one line each: a newline or an escape in them would write a line
        # of the oracle's choosing into the watch's table.
        metric = line(str(perf.get("metric") or r.key.oracle))
        groups.setdefault((r.key.suite, r.key.oracle, str(metric)), []).append((r, perf))
    out = []
    for (s, o, metric), rows in groups.items():
        rows.sort(key=lambda rp: ws.build_order(rp[0]))
        last = rows[-1][1]
        try:
            direction = Direction(last.get("direction", Direction.LOWER.value))
        except ValueError:
            direction = Direction.LOWER
        unit = last.get("unit")
        out.append(Series(s, o, metric, line(str(unit)) if unit else None, direction, tuple(
            Point(r.id, r.key.torch_version, r.key.commit_sha, build_date(r),
                  tuple(float(x) for x in perf["samples"])) for r, perf in rows)))
    return out


@dataclass(frozen=True)
class NewStep:
    """A change point no flip covers yet: the builds it lies between, and its numbers."""

    series: Series
    step: changepoint.Step
    older: int  # result ids
    newer: int
    undoes: int | None  # the flip of the step it gives back


def steps_of(series: Series, threshold: float) -> list[changepoint.Step]:
    return changepoint.detect([p.median for p in series.points], threshold, series.direction,
                              alpha=defaults.WATCH_STEP_ALPHA)


def new_steps(store: Store, series: Series, threshold: float) -> list[NewStep]:
    flips = [f for f in ws.flips(store) if f.suite == series.suite
             and f.oracle == series.oracle and f.performance
             and f.facts.get("metric", series.metric) == series.metric]
    placed = [(f, series.index_of(f.to_result_id)) for f in flips]
    out = []
    for step in steps_of(series, threshold):
        kind = ws.SLOWDOWN if step.worse else ws.SPEEDUP
        if any(f.kind == kind and i is not None
               and abs(i - step.index) <= defaults.WATCH_STEP_MOVE_BUILDS for f, i in placed):
            continue  # the step a flip was made for, moved by the builds since
        undoes = None
        if step.undoes is not None:
            undoes = next((f.id for f, i in placed if f.kind != kind and i is not None and abs(
                i - step.undoes) <= defaults.WATCH_STEP_MOVE_BUILDS), None)
        out.append(NewStep(series, step, series.points[step.index - 1].result_id,
                           series.points[step.index].result_id, undoes))
    return out


def step_facts(new: NewStep, threshold: float) -> dict[str, Any]:
    """What the flip row keeps of a step (``watch_flip.facts``)."""
    s = new.step
    return {"metric": new.series.metric, "unit": new.series.unit,
            "direction": new.series.direction.value, "threshold": threshold,
            "change": s.change, "p_value": s.p_value, "before": s.before, "after": s.after,
            "builds_before": s.builds_before, "builds_after": s.builds_after,
            "undoes": new.undoes, "alpha": defaults.WATCH_STEP_ALPHA}


def view(store: Store, series: Series, flips: list[ws.FlipRecord] | None = None
         ) -> dict[str, Any]:
    """A series as ``bisect watch --json`` and ``/api/watch`` serve it: per build its date,
    version, commit, samples, median and spread; the steps the watch acted on, each with its
    bisection's state and culprit."""
    # lazy: reports reads bisections' rows; only views with steps need it
    from bisector.app.list_rows import effective_state
    from bisector.store import bisections

    points = [{"result": p.result_id, "version": p.version, "commit": p.commit,
               "date": p.date, "samples": list(p.samples), "n": len(p.samples),
               "median": p.median, "low": min(p.samples), "high": max(p.samples)}
              for p in series.points]
    steps = []
    for f in flips if flips is not None else ws.flips(store):
        if (f.suite, f.oracle) != (series.suite, series.oracle) or not f.performance \
                or f.facts.get("metric", series.metric) != series.metric:
            continue
        index = series.index_of(f.to_result_id)
        if index is None:
            continue
        step: dict[str, Any] = {"flip": f.id, "index": index, "kind": f.kind,
                                **{k: f.facts.get(k) for k in (
                                    "change", "p_value", "before", "after", "undoes")},
                                "bisection": f.bisection_id, "state": None, "culprit": None,
                                "message": f.message}
        if f.bisection_id is not None:
            b = bisections.get(store, f.bisection_id)
            step["state"], step["culprit"] = effective_state(b), b.culprit_sha
        steps.append(step)
    return {"suite": series.suite, "oracle": series.oracle, "metric": series.metric,
            "unit": series.unit, "direction": series.direction.value, "points": points,
            "steps": sorted(steps, key=lambda s: s["index"])}


def flip_picture(store: Store, flip: ws.FlipRecord) -> str | None:
    """The SVG of the series a performance flip was found in (None: its results are gone)."""
    # lazy: the HTML templates load only when a picture is drawn
    from bisector.app.report.html import render_series

    metric = flip.facts.get("metric")
    for s in all_series(store, flip.suite, flip.oracle):
        if metric is None or s.metric == metric:
            return str(render_series(escape.safe(view(store, s)), links=False))
    return None
