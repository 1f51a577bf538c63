"""``bisect show``, ``log`` and ``list`` answer the quick way (cli/quick.py: a snapshot, rows read
without the ORM) exactly as the full way does, for every kind of stored bisection, not only a
plain one (tests/integration/test_quick_reads.py has that): verdicts reused from an earlier
run, ``--skip`` marks, a window of skipped commits around the culprit, other words
(``--term-old``/``--term-new``), and a start that stopped at its endpoints."""

from __future__ import annotations

from pathlib import Path

from bisector.app.demo.torchlet import SyntheticHistory
from bisector.app.report import snapshots
from tests.support import bisect, invoke, run_cli

FULL = {"BISECTOR_QUICK_READS": "0"}
PER_BISECTION = (("show",), ("show", "--json"), ("show", "--format", "json"), ("log",),
                 ("log", "--json"))
LISTS = (("list",), ("list", "--json"), ("list", "--format", "csv"), ("list", "--all"),
         ("list", "--limit", "2"), ("list", "--limit", "2", "--offset", "2", "--json"))


def answers(db: Path, *args: str) -> tuple[str, str]:
    """The command's stdout the quick way and the full way (both must succeed)."""
    quick = invoke("--db", str(db), *args)
    full = invoke("--db", str(db), *args, env=FULL)
    assert quick.exit_code == full.exit_code == 0, quick.stderr + full.stderr
    return quick.stdout, full.stdout


def test_every_kind_of_bisection_reads_the_same_the_quick_way(home: Path, tmp_path: Path,
                                                               world: SyntheticHistory) -> None:
    db = tmp_path / "kinds.db"
    m = world.main
    oracle = ("--oracle", "torchlet_norm")
    ids = {
        "plain": bisect(db, world, *oracle)["id"],
        "reused": bisect(db, world, *oracle, "--jobs", "2")["id"],  # every verdict reused
        "skipped": bisect(db, world, *oracle, "--skip", m[4], "--skip", f"{m[6]}..{m[8]}",
                          "--env", "QUICK_SKIP=1")["id"],
        "window": bisect(db, world, *oracle, "--skip", f"{m[14]}..{m[16]}",
                         "--env", "QUICK_WINDOW=1")["id"],
        "terms": bisect(db, world, *oracle, "--term-old", "fast", "--term-new", "slow",
                        "--env", "QUICK_TERMS=1")["id"],
    }
    # Stopped at its endpoints: the good end is bad already.
    r = run_cli("--db", str(db), "start", "--repo", str(world.path), "--good", m[-2],
                "--bad", m[-1], "--no-confirm", "--json", *oracle)
    assert r.returncode != 0
    newest = max(ids.values()) + 1
    ids["failed start"] = newest
    served = {kind: snapshots.served(str(db), bid) is not None for kind, bid in ids.items()}
    assert all(served[k] for k in ("plain", "reused", "skipped", "window", "terms")), served
    for kind, bid in ids.items():
        for args in PER_BISECTION:
            quick, full = answers(db, *args, str(bid))
            assert quick == full, f"bisect {' '.join(args)} of the {kind} bisection differs"
    for args in ((*a, "last") for a in PER_BISECTION):
        quick, full = answers(db, *args)
        assert quick == full, f"bisect {' '.join(args)} differs the quick way"
    for args in LISTS:
        quick, full = answers(db, *args)
        assert quick == full, f"bisect {' '.join(args)} differs the quick way"
