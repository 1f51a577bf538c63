"""`bisect demo --nightlies` (issue 24): the headline path offline. The demo history's nightly
wheels are built and served from 127.0.0.1 for the run, the range is two dates, probes are
nightlies and overlays on them (no source build), the answer says which two nightlies the
regression fell between, and the HTML report labels the nightly lines with their dates.

It follows `bisect demo` in the same BISECTOR_HOME, as `make demo` suggests it (issue 50, item
5): in the first demo's store its verdicts and source builds answered all but 2 probes, and the
culprit was an overlay on a source build; the nightly demo has a store of its own."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support import run_cli

pytestmark = [pytest.mark.e2e]


def test_the_demo_of_the_nightly_path(home: Path) -> None:
    first = run_cli("demo", timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    r = run_cli("demo", "--nightlies", "--json", timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    d = json.loads(r.stdout)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", d["good"]["ref"])
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", d["bad"]["ref"])
    kinds = {p["artifact"] for p in d["probes"]}
    assert kinds <= {"prebuilt", "overlay"} and "prebuilt" in kinds and "overlay" in kinds
    # Every probe paid for here, each a nightly or an overlay on one, the culprit's too.
    assert not any(p["reused"] for p in d["probes"]), r.stderr[-2000:]
    overlays = [p["facts"]["obtained"] for p in d["probes"] if p["artifact"] == "overlay"]
    assert overlays and all(" on prebuilt " in o for o in overlays), overlays
    store = home / "data" / "demo" / "nightlies.db"
    assert f"a store of its own, made anew (the first demo's would answer most probes with " \
           f"its own builds): {store}" in r.stderr
    assert f"bisection 1 (store: sqlite:///{store})" in r.stderr
    assert len(json.loads(run_cli("list", "--json").stdout)) == 1  # the first demo's, alone
    m = re.search(r"regressed between nightly (\S+) and nightly (\S+)", r.stderr)
    assert m and m[1] < m[2] and ".dev" in m[1], r.stderr[-1500:]
    assert "found the planted regression" in r.stderr
    found = re.search(r"HTML report: (\S+\.html)", r.stderr)
    assert found is not None, r.stderr[-1500:]
    html = Path(found[1])
    labels = re.findall(r'class="nightly-label"[^>]*>([^<]+)<', html.read_text())
    assert len(labels) == len(d["prebuilts"]) and all(
        re.fullmatch(r"\d{4}-\d{2}-\d{2}", s) for s in labels)


def test_publishing_the_same_nightlies_again_builds_none(
        home: Path, private_cache: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A nightly's (and a release's) wheel is taken from the cache under its versioned key:
    a second ``bisect demo --nightlies``, or another test module publishing the same history,
    builds nothing, and serves the same files byte for byte."""
    from bisector.app.demo import nightlies
    from bisector.app.demo.torchlet import generate

    hist = generate(tmp_path / "repo", commits=8, culprit=5, broken=(), release_at=(1, 6),
                    side_branch_at=None, nightly_every=4)
    first = nightlies.publish(hist, tmp_path / "a", releases=True)
    assert len(first) == len(hist.nightlies) + len(hist.tags) >= 3

    def no_build(*_: object, **__: object) -> None:
        raise AssertionError("built again")

    monkeypatch.setattr(nightlies, "build_wheel", no_build)
    assert nightlies.publish(hist, tmp_path / "b", releases=True) == first
    for name in first:
        (a,) = (tmp_path / "a").rglob(name)
        (b,) = (tmp_path / "b").rglob(name)
        assert a.read_bytes() == b.read_bytes() and a.parent.name == b.parent.name
