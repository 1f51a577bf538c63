"""A performance oracle's series in the watch's store: what a tick would record, which steps
are new, that a moved step is not new again, and how series are served and drawn (JSON,
sparkline, SVG). Real SQLite, no oracle runs: results are written as a tick writes them."""

from __future__ import annotations

import random
import re
import xml.etree.ElementTree as ET

import pytest

from bisector.app.report.html import render_series, render_watch
from bisector.app.watch import series as ps
from bisector.app.watch.notify import flip_words
from bisector.app.watch.picture import sparkline
from bisector.app.watch.table import table_data, text_lines
from bisector.store import watch as ws
from bisector.store.db import Store

pytestmark = pytest.mark.unit

SUITE, ORACLE = "cpu", "matmul_time"


def record(store: Store, day: int, samples: list[float], metric: str | None = "matmul") -> int:
    """One build's result as a tick records it (claim, then finish with the run's facts)."""
    version = f"2.10.0.dev202511{day:02d}+cpu"
    sha = f"{day:040x}"
    state, rec = ws.claim_result(store, ws.ResultKey(SUITE, ORACLE, version, sha),
                                 source="index", git_version=sha, me="t", position=day)
    assert state == "mine"
    assert ws.finish_result(store, rec.id, "t", ws.Finding(
        verdict="good", outcome="pass", reason="", exit_code=0, duration_s=1.0,
        output_tail="", oracle_sha256="0" * 64, facts={"perf": {
            "samples": samples, "unit": "ms", "direction": "lower-is-better",
            "metric": metric}, "reusable": True}))
    return rec.id


def level(day: int, value: float, rng: random.Random) -> list[float]:
    return [value * (1 + rng.gauss(0, 0.02)) for _ in range(5)]


def act(store: Store, threshold: float = 0.05) -> list[ws.FlipRecord]:
    """What a tick does with new steps (the claim), without starting bisections."""
    out = []
    for s in ps.all_series(store, SUITE, ORACLE):
        for new in ps.new_steps(store, s, threshold):
            f = ws.claim_flip(store, suite=SUITE, oracle=ORACLE,
                              kind=ws.SLOWDOWN if new.step.worse else ws.SPEEDUP,
                              older=ws.get_result(store, new.older),
                              newer=ws.get_result(store, new.newer), me="t",
                              facts=ps.step_facts(new, threshold))
            if f is not None:
                out.append(f)
    return out


def test_a_series_keeps_every_build_with_its_date_commit_and_samples(store: Store) -> None:
    rid = record(store, 3, [1.0, 3.0, 2.0])
    record(store, 4, [2.0])
    record(store, 5, [9.0], metric=None)  # another metric: the oracle's name
    a, b = ps.all_series(store)
    assert (a.suite, a.oracle, a.metric, a.unit) == (SUITE, ORACLE, "matmul", "ms")
    assert [p.date for p in a.points] == ["2025-11-03", "2025-11-04"]
    assert a.points[0].result_id == rid and a.points[0].samples == (1.0, 3.0, 2.0)
    assert a.points[0].median == 2.0 and a.points[0].commit == f"{3:040x}"
    assert b.metric == ORACLE and len(b.points) == 1


def test_a_step_is_acted_on_once_even_when_it_moves(store: Store) -> None:
    rng = random.Random(1)
    for d in range(1, 13):
        record(store, d, level(d, 10.0, rng))
    for d in range(13, 16):
        record(store, d, level(d, 12.0, rng))
    (flip,) = act(store)
    assert flip.kind == ws.SLOWDOWN
    assert (flip.from_commit, flip.to_commit) == (f"{12:040x}", f"{13:040x}")
    assert flip.facts["change"] == pytest.approx(0.2, abs=0.03)
    assert flip.facts["threshold"] == 0.05 and flip.facts["p_value"] < 0.01
    assert re.fullmatch(r"got (19|20|21) % worse", flip_words(flip.kind, flip.facts))
    # More nightlies; the next one is a little slow too, so the best cut may move a build.
    record(store, 16, level(16, 11.4, rng))
    for d in range(17, 22):
        record(store, d, level(d, 12.0, rng))
    assert act(store) == []
    assert len(ws.flips(store)) == 1


def test_the_fix_is_reported_as_a_step_back_of_the_slowdown(store: Store) -> None:
    rng = random.Random(2)
    for d in range(1, 11):
        record(store, d, level(d, 10.0, rng))
    for d in range(11, 19):
        record(store, d, level(d, 13.0, rng))
    (slow,) = act(store)
    for d in range(19, 24):
        record(store, d, level(d, 10.0, rng))
    (fix,) = act(store)
    assert fix.kind == ws.SPEEDUP and fix.facts["undoes"] == slow.id
    assert "a step back: the fix of flip" in flip_words(fix.kind, fix.facts)
    # Neither is waiting for a bisection the way an exit-code flip without one is.
    ws.started(store, fix.id, bisection_id=None, message="a speed-up: reported, not bisected")
    waiting = ws.unstarted_flips(store, "other") + ws.orphaned_flips(store, "other")
    assert fix.id not in {f.id for f in waiting}


def test_served_and_drawn(store: Store) -> None:
    rng = random.Random(3)
    for d in range(1, 13):
        record(store, d, level(d, 10.0, rng))
    for d in range(13, 17):
        record(store, d, level(d, 14.0, rng))
    act(store)
    data = table_data(store)
    (series,) = data["suites"][0]["series"]
    assert len(series["points"]) == 16 and series["points"][0]["n"] == 5
    assert series["points"][0]["samples"] and series["points"][-1]["date"] == "2025-11-16"
    (step,) = series["steps"]
    assert step["index"] == 12 and step["kind"] == "slowdown"
    spark = sparkline(series)
    assert len(spark) == 17 and spark.index("┃") == 12
    lines = "\n".join(text_lines(data))
    assert "┃ slowdown +" in lines and "matmul_time [matmul]" in lines
    svg = str(render_series(series))
    root = ET.fromstring(svg)  # well-formed, standalone
    assert root.get("data-builds") == "16" and root.get("data-steps") == "1"
    assert "2025-11-01" in svg and "href" not in svg  # no links out of a file
    assert not re.search(r"(?:src|href)=\"https?:", svg)
    page = render_watch(table_data(store))
    assert page.count("<svg") == 1 and 'class="step slowdown"' in page
    assert 'href="/bisections/"' not in page  # cells without a flip link nowhere


def test_text_from_an_oracle_is_escaped_in_the_picture(store: Store) -> None:
    for d in range(1, 4):
        record(store, d, [1.0, 2.0], metric="<script>alert(1)</script>")
    (series,) = table_data(store)["suites"][0]["series"]
    svg = str(render_series(series))
    assert "<script>" not in svg and "&lt;script&gt;" in svg


@pytest.mark.parametrize(("kind", "find_fix"), [
    (ws.SLOWDOWN, False), (ws.SPEEDUP, True), ("regression", False), ("fix", True)])
def test_a_speed_up_is_bisected_as_the_commit_that_made_it_faster(kind: str,
                                                                   find_fix: bool) -> None:
    """A slowdown is bisected as worse-than-good; a speed-up that undoes nothing as the commit
    that made it better (``--find-fix``, which a performance oracle takes for that)."""
    from types import SimpleNamespace

    from bisector.app.watch.starts import request

    flip = SimpleNamespace(kind=kind, from_commit="a" * 40, to_commit="b" * 40,
                           facts={"change": 0.474, "p_value": 0.0095})
    suite = SimpleNamespace(repo="/r", start={})
    place = SimpleNamespace(python="python3", profile=SimpleNamespace(name="torch"),
                            variant=None, index=None, kind="wheel")
    req = request(flip, suite, "perf.py", place)  # type: ignore[arg-type]
    assert req.find_fix is find_fix
    assert (req.good, req.bad) == ("a" * 40, "b" * 40)
    # a slowdown's step showed the bad build bad: its search spends no pair on it
    assert req.bad_shown == ("the watch's series: +47.4 % between the builds (p 0.0095)"
                             if kind == "slowdown" else "")
