"""The next probes made while the oracle runs (run/prefetch.py), end to end on the nightly
path: a real index on 127.0.0.1 whose every wheel takes a while to come, a real oracle that
takes about as long, real uv environments. The bisection names the planted culprit; the probes
record how much of their obtaining was made during an earlier oracle; ``show`` and the HTML
report say so (the table and the timeline); ``plan`` projects the run both ways."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from bisector.app.demo.index import IndexServer
from bisector.app.demo.torchlet import SyntheticHistory, generate
from tests.support import built_world, private_cache, run_cli

pytestmark = [pytest.mark.integration]
__all__ = ["private_cache"]

ORACLE = """# /// script
# dependencies = []
# [tool.bisector]
# description = "torchlet.norm([3, 4]) must be 5, then a second of work"
# timeout = 60
# ///
import sys, time
import torchlet
ok = abs(torchlet.norm([3.0, 4.0]) - 5.0) < 1e-9
time.sleep(1.0)
sys.exit(0 if ok else 1)
"""


@pytest.fixture(scope="module")
def slow_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SyntheticHistory,
                                                                           IndexServer]]:
    base = tmp_path_factory.mktemp("prefetch-world")
    hist = built_world(base, base / "index", nightly_every=16)
    with IndexServer(base / "index") as server:
        server.state.slow_s = 1.0  # every wheel about as long as the oracle
        yield hist, server


def test_the_next_probes_are_made_while_the_oracle_runs(
        home: Path, private_cache: Path, tmp_path: Path,
        slow_world: tuple[SyntheticHistory, IndexServer]) -> None:
    hist, server = slow_world
    oracle = tmp_path / "slow_norm.py"
    oracle.write_text(ORACLE)
    args = ["--repo", str(hist.path), "--good", "v0.1.0", "--bad", "v0.2.0", "--oracle",
            str(oracle), "--nightly-index", server.index_url("nightly-cpu")]
    plan = run_cli("plan", *args)
    assert plan.returncode == 0, plan.stderr
    m = re.search(r"with the next probes made while the oracle runs .*: (.+) on average",
                  plan.stdout)
    assert m, plan.stdout
    r = run_cli("start", *args, "--no-confirm", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    d = json.loads(r.stdout)
    assert d["culprit"]["sha"] == hist.culprit
    ran = [p for p in d["probes"] if not p["reused"]]
    ahead = [p["facts"]["ahead"] for p in ran if p["facts"].get("ahead")]
    # Every probe but the first was named ahead; the downloads and overlays of most were
    # made, whole or in part, under an earlier oracle.
    assert len(ahead) >= len(ran) // 2, [p["facts"].get("ahead") for p in ran]
    assert sum(a.get("obtain", 0.0) for a in ahead) > 1.0
    assert not ran[0]["facts"].get("ahead")  # nothing runs before the first probe
    shown = run_cli("show", "last")
    assert shown.returncode == 0, shown.stderr
    assert "made ahead" in shown.stdout and "of it during an earlier oracle" in shown.stdout
    assert re.search(r"[\d.]+ s of obtaining and environments were made while earlier "
                     r"oracles ran", shown.stdout)
    (html,) = (home / "data" / "reports").glob("bisection-1-*.html")
    page = html.read_text()
    assert 'id="overlap"' in page and 'class="phase-ahead"' in page


def test_source_builds_are_made_ahead_only_on_a_spare_build_slot(
        home: Path, private_cache: Path, tmp_path: Path) -> None:
    """Every probe built from source: with a build slot beyond the probe's (--build-jobs 2),
    the next round's builds run during the oracle; with none (the default), no build is
    speculated, and both name the same culprit with the same probes."""
    hist = generate(tmp_path / "t", commits=40, culprit=27, broken=(), release_at=None,
                    side_branch_at=None)
    args = ["--repo", str(hist.path), "--good", hist.main[0], "--bad", hist.main[-1],
            "--oracle", "torchlet_norm", "--no-prebuilt", "--no-confirm", "--json"]
    runs = {}
    for slots in ("1", "2"):
        r = run_cli("--db", str(tmp_path / f"b{slots}.db"), "start", *args, "--build-jobs",
                    slots)
        assert r.returncode == 0, r.stderr[-3000:]
        runs[slots] = json.loads(r.stdout)
    probed = {k: [(p["sha"], p["verdict"]) for p in d["probes"]] for k, d in runs.items()}
    assert probed["1"] == probed["2"] and runs["1"]["culprit"]["sha"] == hist.culprit
    built_ahead = [p for p in runs["2"]["probes"]
                   if p["artifact"] == "source" and (p["facts"].get("ahead") or {}).get("obtain")]
    assert len(built_ahead) >= len(probed["2"]) // 2, probed["2"]
    assert not [p for p in runs["1"]["probes"]
                if p["artifact"] == "source" and (p["facts"].get("ahead") or {}).get("obtain")]
