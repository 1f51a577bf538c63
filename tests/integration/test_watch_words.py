"""Issue 31, item 5: the watch's table and page show a performance oracle's measurement and
its change, never ``good`` for a nightly 66 % slower (its exit code says nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from bisector.infra.owner import owner_id
from bisector.store import watch as ws
from bisector.store.db import open_store
from bisector.web.server import create_app
from tests.support import invoke


@pytest.mark.adversarial
def test_a_slowed_nightly_reads_as_its_measurement(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    store, me = open_store(str(db)), owner_id()
    for day, level in (("01", 10.0), ("02", 10.1), ("03", 16.8)):
        key = ws.ResultKey("nightly", "timer", f"2.9.0.dev202501{day}+cpu", day * 20)
        _, rec = ws.claim_result(store, key, source="index", git_version=None, me=me)
        perf = {"samples": [level] * 3, "unit": "ms", "direction": "lower-is-better"}
        assert ws.finish_result(store, rec.id, me, ws.Finding(
            "good", "pass", "exit 0", 0, 0.1, "", "0" * 64, {"perf": perf}))
    r = invoke("--db", str(db), "watch")
    assert r.exit_code == 0, r.stderr
    row = next(ln for ln in r.stdout.splitlines() if ln.lstrip().startswith("timer "))
    assert "16.8 ms +66%" in row and "good" not in row
    page = TestClient(create_app(store, ["testserver"])).get("/watch").text
    assert "16.8 ms +66%" in page
