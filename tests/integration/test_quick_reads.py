"""Issue 36, quick commands: ``list``, ``show`` and ``log`` on a SQLite store read without the
ORM, git's Python library or the renderers (cli/quick.py, app/report/snapshots.py), and print
exactly what the full path prints; whatever the snapshot cannot vouch for goes the full way."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from bisector.app.demo.torchlet import SyntheticHistory
from bisector.app.removed import LEDGER
from bisector.app.report import snapshots
from bisector.base.paths import data_dir
from bisector.cli import quick
from tests.support import bisect, invoke

FULL = {"BISECTOR_QUICK_READS": "0"}
READS = (("show",), ("show", "--json"), ("show", "--format", "json"), ("log",),
         ("log", "--json"), ("list", "--json"), ("list",))


def both(db: Path, *args: str) -> tuple[str, str]:
    """The command's stdout the quick way and the full way."""
    fast = invoke("--db", str(db), *args)
    slow = invoke("--db", str(db), *args, env=FULL)
    assert fast.exit_code == 0 and slow.exit_code == 0, fast.stderr + slow.stderr
    return fast.stdout, slow.stdout


def test_the_quick_reads_print_what_the_full_path_prints(home: Path, tmp_path: Path,
                                                          world: SyntheticHistory) -> None:
    db = tmp_path / "q.db"
    first = bisect(db, world, "--oracle", "torchlet_norm")["id"]
    bisect(db, world, "--oracle", "torchlet_norm", "--jobs", "2")
    assert snapshots.served(str(db), first) is not None, "written when the bisection ended"
    for args in READS:
        for ref in ((str(first),) if args[0] in ("show", "log") else ()), ():
            fast, slow = both(db, *args, *ref)
            assert fast == slow, f"bisect {' '.join(args)} differs the quick way"
    rows = json.loads(invoke("--db", str(db), "list", "--json").stdout)
    assert [r["id"] for r in rows] == [first + 1, first]
    assert rows[0]["culprit"] == world.culprit and rows[0]["state"] == "done"


def test_a_changed_record_or_a_removed_log_is_read_the_full_way(home: Path, tmp_path: Path,
                                                                 world: SyntheticHistory) -> None:
    db = tmp_path / "q.db"
    bid = bisect(db, world, "--oracle", "torchlet_norm")["id"]
    where = snapshots.location(str(db), bid)
    assert where is not None and where.is_file()
    body = json.loads(where.read_text())
    body["markdown"] = "served from the snapshot"
    where.write_text(json.dumps(body))
    assert invoke("--db", str(db), "show", str(bid)).stdout == "served from the snapshot\n"
    # The record changes (here by hand): the snapshot no longer vouches for it.
    with sqlite3.connect(db) as con:
        con.execute("UPDATE bisection SET message = 'edited' WHERE id = ?", (bid,))
    shown = invoke("--db", str(db), "show", str(bid)).stdout
    assert "served from the snapshot" not in shown and "edited" in shown
    # That show wrote a fresh snapshot; then gc removes one of its logs.
    assert snapshots.served(str(db), bid) is not None
    log = next(p["stdout"] for p in json.loads(where.read_text())["data"]["probes"]
               if p.get("stdout"))
    Path(log).unlink()
    ledger = data_dir() / LEDGER
    ledger.write_text(json.dumps({"at": "2026-11-27T00:00:00", "kind": "logs", "path": log})
                      + "\n")
    assert snapshots.served(str(db), bid) is None
    assert "log removed by gc" in invoke("--db", str(db), "show", str(bid)).stdout


def test_a_store_at_another_schema_is_never_read_the_quick_way(home: Path, tmp_path: Path,
                                                               world: SyntheticHistory) -> None:
    db = tmp_path / "q.db"
    bid = bisect(db, world, "--oracle", "torchlet_norm")["id"]
    assert quick.list_rows(str(db), 5) is not None
    with sqlite3.connect(db) as con:
        con.execute("UPDATE alembic_version SET version_num = '0009'")
    assert quick.list_rows(str(db), 5) is None
    assert snapshots.served(str(db), bid) is None
    assert not quick.show(str(db), bid, json_out=False)


def test_the_quick_reads_import_no_orm_and_no_gitpython(home: Path, tmp_path: Path,
                                                        world: SyntheticHistory) -> None:
    db = tmp_path / "q.db"
    bid = bisect(db, world, "--oracle", "torchlet_norm")["id"]
    probe = ("import sys\nfrom bisector.cli import main\n"
             "for args in ({args}):\n"
             "    try:\n        main(['--db', {db!r}, *args])\n"
             "    except SystemExit:\n        pass\n"
             "print(sorted(m for m in ('sqlalchemy', 'git', 'rich', 'cattrs') "
             "if m in sys.modules))")
    code = probe.format(db=str(db), args=f"['list'], ['show', '{bid}'], ['log', '{bid}'], "
                                         f"['show', '{bid}', '--json']")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       check=True)
    assert r.stdout.strip().splitlines()[-1] == "[]", r.stderr


def test_other_code_renders_afresh(home: Path, tmp_path: Path,
                                   world: SyntheticHistory) -> None:
    """A snapshot another bisector wrote (an upgrade, another checkout) is not served: here
    the file says other code wrote it, as an older install's would."""
    db = tmp_path / "q.db"
    bid = bisect(db, world, "--oracle", "torchlet_norm")["id"]
    assert snapshots.served(str(db), bid) is not None
    where = snapshots.location(str(db), bid)
    assert where is not None
    body = json.loads(where.read_text())
    assert body["code"] == snapshots.code_stamp()
    body["code"] = "another bisector"
    where.write_text(json.dumps(body))
    assert snapshots.served(str(db), bid) is None
    fresh = invoke("--db", str(db), "show", str(bid))  # rendered afresh, and kept again
    assert fresh.exit_code == 0 and snapshots.served(str(db), bid) is not None
