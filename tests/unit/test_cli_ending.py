"""A command run as a process ends without the interpreter's last collections walking every
object it loaded (a quarter of a second after every command on a 2-core box: part of the fixed
cost ``make bench`` section 17 measures against ``git bisect run``), and with its store closed
as before: SQLite folds the WAL back into the file, none is left beside it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bisector.store.db import open_store

ROOT = Path(__file__).resolve().parents[2]

# Registered before main() runs, so it runs after main() has returned (atexit is last in,
# first out) and just before the interpreter's own collections: what they would walk.
CODE = """\
import atexit, gc, sys
atexit.register(lambda: print("LEFT", sum(len(gc.get_objects(g)) for g in range(3)),
                              flush=True))
from bisector.cli import main
{call}
"""


def _run(db: Path, tmp_path: Path, call: str) -> tuple[int, dict[str, object]]:
    args = ["--db", str(db), "workers", "--json"]
    code = CODE.format(call=call.format(args=args))
    env = {k: v for k, v in os.environ.items() if not k.startswith("BISECTOR_")}
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       env={**env, "BISECTOR_HOME": str(tmp_path / "home"),
                            "PYTHONPATH": str(ROOT)}, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    left = next(ln for ln in r.stdout.splitlines() if ln.startswith("LEFT "))
    shown = json.loads(r.stdout[:r.stdout.index("LEFT ")])
    return int(left.split()[1]), shown


def test_a_command_process_leaves_nothing_to_collect_and_closes_its_store(
        tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    open_store(str(db)).engine.dispose()  # a store at head, in WAL mode
    left, shown = _run(db, tmp_path, "sys.argv[0] = 'bisect'\nmain()")
    assert "workers" in shown
    # Before: ~100,000 objects (SQLAlchemy's, the models', click's) walked at every exit.
    assert left < 1000, left
    assert not (tmp_path / "b.db-wal").exists()  # closed: the WAL folded back, as before
    assert open_store(str(db), create=False, reads_only=True) is not None


def test_a_caller_running_commands_in_its_own_process_keeps_its_collector(
        tmp_path: Path) -> None:
    """main(args) (the tests' CliRunner, a script) is not the end of the process: nothing
    of the caller's is frozen."""
    db = tmp_path / "b.db"
    open_store(str(db)).engine.dispose()
    left, shown = _run(db, tmp_path, "main({args!r})")
    assert "workers" in shown
    assert left > 10_000, left
