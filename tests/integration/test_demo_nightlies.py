"""`bisect demo --nightlies` (issue 24): the headline path offline. The demo history's nightly
wheels are built and served from 127.0.0.1 for the run, the range is two dates, probes are
nightlies and overlays on them (no source build), the answer says which two nightlies the
regression fell between, and the HTML report labels the nightly lines with their dates."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support import run_cli

pytestmark = [pytest.mark.e2e]


def test_the_demo_of_the_nightly_path(home: Path) -> None:
    r = run_cli("demo", "--nightlies", "--json", timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    d = json.loads(r.stdout)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", d["good"]["ref"])
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", d["bad"]["ref"])
    kinds = {p["artifact"] for p in d["probes"]}
    assert kinds <= {"prebuilt", "overlay"} and "prebuilt" in kinds and "overlay" in kinds
    m = re.search(r"regressed between nightly (\S+) and nightly (\S+)", r.stderr)
    assert m and m[1] < m[2] and ".dev" in m[1], r.stderr[-1500:]
    assert "found the planted regression" in r.stderr
    (html,) = (home / "data" / "reports").glob("bisection-1-*.html")
    labels = re.findall(r'class="nightly-label"[^>]*>([^<]+)<', html.read_text())
    assert len(labels) == len(d["prebuilts"]) and all(
        re.fullmatch(r"\d{4}-\d{2}-\d{2}", s) for s in labels)
