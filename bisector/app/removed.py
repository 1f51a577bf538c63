"""What ``bisect gc`` removed, as its ledger in the data folder says (``gc-removed.jsonl``,
appended by app/disk.record_removed): how ``show`` tells a log removed by gc from one that
was never on this machine. Apart from app/disk.py (which opens the store) so that the quick
``show`` of a finished bisection (app/report/snapshots.py) can ask it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bisector.base.paths import data_dir

LEDGER = "gc-removed.jsonl"
LOGS = "logs"  # the kind of a removed log folder or file (app/disk.LOGS)


def removed_logs() -> dict[str, str]:
    """path -> when, of every log folder or file gc removed."""
    out: dict[str, str] = {}
    try:
        with (data_dir() / LEDGER).open(encoding="utf-8") as f:
            for line in f:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut by a crash: the rest still counts
                if isinstance(row, dict) and row.get("kind") == LOGS:
                    out[str(row.get("path"))] = str(row.get("at"))
    except OSError:  # no ledger yet: gc removed nothing
        return {}
    return out


def mark_removed_logs(data: dict[str, Any]) -> dict[str, Any]:
    """``show`` data with the logs gc removed named: ``removed_logs`` on each probe (which of
    stdout, stderr and build_log) and one note, so every rendering says "log removed by gc"
    instead of pointing at a missing file. The stored tails are still shown."""
    gone = removed_logs()
    if not gone:
        return data
    count, latest = 0, ""
    for p in data.get("probes", []):
        for stream in ("stdout", "stderr", "build_log"):
            recorded = p.get(stream)
            if not recorded or Path(recorded).exists():
                continue
            hit = next((gone[str(q)] for q in (Path(recorded), *Path(recorded).parents)
                        if str(q) in gone), None)
            if hit is not None:
                p.setdefault("removed_logs", []).append(stream)
                count, latest = count + 1, max(latest, hit)
    if count:
        data["notes"] = [*data.get("notes", []),
                         f"{count} log file(s) of this bisection were removed by `bisect gc` "
                         f"(log removed by gc, last on {latest}); the stored tails remain"]
    return data
