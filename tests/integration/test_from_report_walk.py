"""``bisect start --from-report`` and the watch's report suites walk a report through one
generator (``app/from_report.each_range``): the same ranges, each looked up in the store as it is
reached, so a range bisected by either is named, not started again, by the other."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bisector.app import from_report
from bisector.oracle.command import oracle_for
from bisector.run.request import Request
from bisector.store import bisections
from bisector.store.db import open_store
from tests.support import git, invoke
from tests.unit.fakes import new_bisection

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MAIN = [f"{i:040x}" for i in range(1, 40)]


def test_start_and_the_watch_walk_a_report_through_one_generator(
        home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "commit", "-q", "--allow-empty", "-m", "one")
    folder = tmp_path / "reports"
    folder.mkdir()
    text = re.sub(r"@C(\d+)@", lambda m: MAIN[int(m[1])],
                  (FIXTURES / "hud_regression_report.json").read_text())
    (folder / "report.json").write_text(text)
    # The report's one range, bisected already (its oracle and endpoints, as start makes them).
    db = tmp_path / "b.db"
    store = open_store(str(db))
    planned = from_report.requests(Request(good="", bad="", repo=repo), text)
    [(_r, req)] = planned.items
    oracle = oracle_for("", req.command, timeout=req.timeout, dependencies=req.dependency,
                        threshold=req.threshold)
    bid = new_bisection(store, [req.good, req.bad], oracle=oracle)

    walked: list[list[int | None]] = []
    real = from_report.each_range

    def spy(*args: object, **kw: object) -> Iterator[from_report.Reached]:
        seen: list[int | None] = []
        walked.append(seen)
        for step in real(*args, **kw):  # type: ignore[arg-type]
            seen.append(step.found)
            yield step

    monkeypatch.setattr(from_report, "each_range", spy)
    started = invoke("--db", str(db), "start", "--repo", str(repo), "--from-report",
                     str(folder / "report.json"))
    assert started.exit_code == 0, started.stderr
    assert f"already bisected as #{bid}" in started.stderr
    cfg = tmp_path / "watch.toml"
    cfg.write_text(f'[[suite]]\nname = "hud"\nrepo = "{repo}"\nreports = "{folder}"\n'
                   f'python = "{sys.executable}"\n')
    tick = invoke("--db", str(db), "tick", "--config", str(cfg), "--no-bisect")
    assert tick.exit_code == 0, tick.stderr
    assert "started bisection" not in tick.stderr
    # Both paths went through the one walk, and both found the range's bisection there.
    assert walked == [[bid], [bid]]
    assert len(bisections.listing(store, 10)) == 1
