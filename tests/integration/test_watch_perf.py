"""Performance over nightlies, end to end: real nightly wheels of a synthetic history on a real
index on 127.0.0.1, one `bisect tick` per published nightly, a performance oracle that times
the build, real SQLite, and the page in a real headless Chromium.

The history makes ``torchlet._pace.work()`` 3x slower at main[37]; nightlies are cut every 5
commits (main 0, 5, ..., 65), so the nightly of main[35] is the last fast one and that of
main[40] the first slow one. The watch must find that step once enough slow builds follow it,
start one performance bisection between those two commits, never a second as more nightlies
arrive, and draw it.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from bisector.app.demo.index import IndexServer
from bisector.app.demo.torchlet import SyntheticHistory
from bisector.store import models as m
from bisector.store.db import open_store
from tests.support import ROOT, built_world, invoke, run_cli, serving, staged_nightlies

ORACLE = ROOT / "tests" / "oracles" / "pace_time.py"
SLOW_AT, EVERY = 37, 5


@dataclass
class Watched:
    hist: SyntheticHistory
    env: dict[str, str]  # BISECTOR_HOME of the ticks
    ticks: list[subprocess.CompletedProcess[str]]  # one per published nightly
    events: Path
    cfg: Path


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory, shared_cache: Path) -> Iterator[Watched]:
    base = tmp_path_factory.mktemp("watch-perf")
    hist = built_world(base, base / "stage", commits=70, culprit=68, broken=(),
                       release_at=None, side_branch_at=None, nightly_every=EVERY,
                       slow_at=SLOW_AT)
    wheels = staged_nightlies(hist, base / "stage")
    env = {"BISECTOR_HOME": str(base / "home"), "BISECTOR_CACHE_DIR": str(shared_cache)}
    files = base / "index" / "nightly" / "files"
    files.mkdir(parents=True)
    with IndexServer(base / "index") as server:
        cfg = base / "bisector.toml"
        cfg.write_text(f"""
[watch]
events = "{base / 'events'}"

[[suite]]
name = "cpu-perf"
repo = "{hist.path}"
oracles = ["{ORACLE}"]
torch = "nightly"
index = "{server.index_url('nightly')}"
variant = "cpu"
python = "{sys.executable}"
""")
        ticks = []
        for wheel in wheels:  # a nightly a day, and the timer's tick after it
            shutil.copy(wheel, files / wheel.name)
            # In-process: 14 interpreters importing bisector were a minute of this file (the
            # oracle runs are processes either way; the last tick below is the CLI's own).
            res = invoke("tick", "--config", str(cfg), "--no-bisect", env=dict(env))
            r = subprocess.CompletedProcess(["tick"], res.exit_code, res.stdout, res.stderr)
            assert r.returncode == 0, r.stderr
            ticks.append(r)
        # A tick's process ends and with it its claim on what it created; in-process, this
        # test's process stays alive, so its ownership of the bisection is let go as an
        # exiting tick's is (the next tick then runs it, as after a real --no-bisect tick).
        with sqlite3.connect(Path(env["BISECTOR_HOME"]) / "data" / "bisector.db") as con:
            con.execute("UPDATE bisection SET owner = NULL, heartbeat_at = NULL")
        yield Watched(hist, env, ticks, base / "events", cfg)


def test_the_step_starts_one_bisection_between_the_right_nightlies(watched: Watched) -> None:
    main = watched.hist.main
    started = [i for i, r in enumerate(watched.ticks) if "1 bisection(s) started" in r.stdout]
    # Build 8 (main[40]) is the first slow one; the step is certain once 4 slow builds follow
    # 8 fast ones (the rank test over build medians), and never acted on twice after that.
    assert len(started) == 1, [r.stdout for r in watched.ticks]
    assert 10 <= started[0] <= 12
    assert all("0 bisection(s) started" in r.stdout for i, r in enumerate(watched.ticks)
               if i != started[0])
    said = watched.ticks[started[0]].stderr
    assert "got" in said and "% worse between torch" in said

    store = open_store(str(Path(watched.env["BISECTOR_HOME"]) / "data" / "bisector.db"),
                       create=False)
    with store.session() as s:
        flip = s.scalars(select(m.WatchFlip)).one()
        b = s.scalars(select(m.Bisection)).one()
        results = s.scalars(select(m.WatchResult)).all()
    assert flip.kind == "slowdown" and flip.bisection_id == b.id
    assert (flip.from_commit, flip.to_commit) == (main[35], main[40])
    assert (b.good_sha, b.bad_sha) == (main[35], main[40])
    assert flip.facts is not None and flip.facts["change"] > 1.0  # 20 ms -> 60 ms: +200 %
    assert flip.facts["threshold"] == pytest.approx(0.2)  # the oracle's own
    assert len(results) == 14 and all(len(r.facts["perf"]["samples"]) == 5 for r in results)

    table = json.loads(run_cli("watch", "--json", env=watched.env, check=True).stdout)
    (series,) = table["suites"][0]["series"]
    assert (series["oracle"], series["metric"], series["unit"]) == ("pace_time", "pace", "ms")
    assert [p["commit"] for p in series["points"]] == [main[i] for i in range(0, 70, EVERY)]
    assert all(p["date"].startswith("20") for p in series["points"])
    (step,) = series["steps"]
    assert (step["index"], step["kind"], step["bisection"]) == (8, "slowdown", b.id)
    plain = run_cli("watch", env=watched.env, check=True).stdout
    assert "┃ slowdown +" in plain and f"bisection {b.id}" in plain

    # The notification: its Markdown shows the series, drawn beside it as SVG.
    (event_file,) = watched.events.glob("flip-*-flip-*.json")
    event = json.loads(event_file.read_text())
    assert event["kind"] == "slowdown" and event["step"]["metric"] == "pace"
    picture = Path(event["picture_file"])
    assert ET.parse(picture).getroot().get("data-steps") == "1"
    assert f"]({picture.name})" in Path(event["issue_file"]).read_text()


def test_the_bisection_names_the_commit_and_its_report_shows_the_series(
        watched: Watched) -> None:
    r = run_cli("tick", "--config", str(watched.cfg), env=watched.env)
    assert "1 finished" in r.stdout, r.stderr
    shown = json.loads(run_cli("show", "last", "--json", env=watched.env, check=True).stdout)
    assert shown["culprit"]["sha"] == watched.hist.main[SLOW_AT]
    # The series showed the bad build bad: the search spends no pair on it (the nightlies'
    # runs are evidence), and says so; the confirmation still measures the culprit afresh.
    assert shown["result"]["perf"]["bad_shown"].startswith("the watch's series: +")
    store = open_store(str(Path(watched.env["BISECTOR_HOME"]) / "data" / "bisector.db"),
                       create=False)
    with store.session() as s:
        searched = {sha for sha, facts in s.execute(
            select(m.RunRow.commit_sha, m.RunRow.facts)) if not facts.get("confirmation")}
    assert watched.hist.main[40] not in searched and watched.hist.main[35] in searched
    assert shown["result"]["confirmation"]["status"] == "confirmed"
    html = run_cli("show", "last", "--format", "html", env=watched.env, check=True).stdout
    assert 'id="series"' in html and 'class="series"' in html
    assert 'class="step slowdown"' in html
    (culprit,) = watched.events.glob("flip-*-culprit-*.md")
    assert watched.hist.main[SLOW_AT] in culprit.read_text()
    assert culprit.with_suffix(".svg").is_file()


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium here: apt-get install chromium")
def test_the_watch_page_draws_the_series_in_a_real_browser(watched: Watched,
                                                           tmp_path: Path) -> None:
    assert CHROMIUM is not None
    with serving(env={**os.environ, **watched.env}) as base:
        api = httpx.get(base + "/api/watch").json()
        flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                 "--window-size=1280,1400", f"--user-data-dir={tmp_path / 'profile'}"]
        shot = tmp_path / "watch.png"
        subprocess.run([*flags, f"--screenshot={shot}", base + "/watch"],
                       capture_output=True, timeout=120, check=True)
        dom = subprocess.run([*flags, "--dump-dom", base + "/watch"], capture_output=True,
                             text=True, timeout=120, check=True).stdout
        bisection = httpx.get(f"{base}/bisections/{api['suites'][0]['flips'][0]['bisection']}")
    (series,) = api["suites"][0]["series"]
    (step,) = series["steps"]
    # The browser parsed the inline SVG: one dot per build, the step linked to its bisection.
    assert dom.count('class="build"') == len(series["points"]) == 14
    assert 'data-steps="1"' in dom and 'class="step slowdown"' in dom
    assert f'href="/bisections/{step["bisection"]}"' in dom
    assert series["points"][0]["date"] in dom and series["points"][-1]["date"] in dom
    for external in ("<link", "src=", "@import", "url("):
        assert external not in dom
    # The bisection's own page shows the series it was started from.
    assert bisection.status_code == 200 and 'id="series"' in bisection.text
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    if os.environ.get("BISECTOR_KEEP_SHOTS"):  # a person looks: BISECTOR_KEEP_SHOTS=DIR
        shutil.copy(shot, Path(os.environ["BISECTOR_KEEP_SHOTS"]) / "watch-perf.png")
