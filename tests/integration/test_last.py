"""Issue 24, a CLI that remembers: `show`, `log` and `resume` mean the store's newest bisection
when no id is given (or `last`)."""

from __future__ import annotations

import json
from pathlib import Path

from bisector.app.demo.torchlet import SyntheticHistory
from bisector.store.db import open_store
from tests.support import bisect, invoke, one_line_error


def test_show_log_and_resume_default_to_the_newest(home: Path, tmp_path: Path,
                                                   world: SyntheticHistory) -> None:
    db = tmp_path / "b.db"
    open_store(str(db)).engine.dispose()  # a store with no bisection yet
    one_line_error(invoke("--db", str(db), "show"), "no bisection in this store yet")
    bisect(db, world, "--oracle", "torchlet_norm")
    newest = bisect(db, world, "--oracle", "torchlet_norm", "--jobs", "2")["id"]
    for args in (("show", "--json"), ("show", "last", "--json"), ("show", "LAST", "--json")):
        r = invoke("--db", str(db), *args)
        assert r.exit_code == 0, r.stderr
        assert json.loads(r.stdout)["id"] == newest
    r = invoke("--db", str(db), "log", "--json")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == invoke("--db", str(db), "log", str(newest), "--json").stdout
    r = invoke("--db", str(db), "resume", "--json")  # finished: resume says so for that id
    assert str(newest) in r.stdout + r.stderr
    one_line_error(invoke("--db", str(db), "show", "lst"), "or last")
