"""What ``bisect watch``, ``/watch`` and ``/api/watch`` show: per suite, oracle x torch.

Built from the store alone (no config file), so the web view of a shared store and the CLI on
any host show the same table. Torches are newest first, one column each; a cell is the
result's verdict, ``running`` while a tick judges it, or empty when that oracle never ran on
that torch; the cell where a flip landed names the bisection it started.
"""

from __future__ import annotations

from typing import Any

from bisector.app.list_rows import effective_state
from bisector.app.watch import series as perf_series
from bisector.app.watch.picture import sparkline
from bisector.base import escape
from bisector.core.perf import median
from bisector.store import bisections
from bisector.store import watch as ws
from bisector.store.db import Store

COLUMNS = 14  # two weeks of nightlies


def table_data(store: Store, columns: int = COLUMNS) -> dict[str, Any]:
    results = ws.results(store)
    flips = ws.flips(store)
    by_result = {f.to_result_id: f for f in flips}
    suites: dict[str, list[ws.ResultRecord]] = {}
    for r in results:
        suites.setdefault(r.key.suite, []).append(r)
    out = []
    for name, rows in suites.items():
        torches: list[tuple[str, str]] = []
        for r in sorted(rows, key=ws.build_order, reverse=True):  # newest build first
            t = (r.key.torch_version, r.key.commit_sha)
            if t not in torches:
                torches.append(t)
        shown = torches[:columns]
        oracles = list(dict.fromkeys(r.key.oracle for r in rows))
        cells: dict[tuple[str, str, str], dict[str, Any]] = {}
        before: dict[str, float] = {}  # oracle -> the median of its previous build
        for r in sorted(rows, key=ws.build_order):
            cell = {"result": r.id, "verdict": r.verdict if r.state == ws.DONE else "running",
                    "reason": r.reason, "at": r.at.isoformat(timespec="seconds")}
            measured(cell, r, before)
            f = by_result.get(r.id)
            if f is not None:
                cell["flip"] = f.kind
                cell["bisection"] = f.bisection_id
            cells[(r.key.oracle, r.key.torch_version, r.key.commit_sha)] = cell
        out.append({
            "name": name,
            "torches": [{"version": v, "commit": c} for v, c in shown],
            "older": len(torches) - len(shown),
            "rows": [{"oracle": o, "cells": [cells.get((o, v, c)) for v, c in shown]}
                     for o in oracles],
            "flips": [_flip(store, f) for f in reversed(flips) if f.suite == name],
            # Performance oracles: every build's samples, and the steps the watch acted on.
            "series": [perf_series.view(store, s, flips)
                       for s in perf_series.all_series(store, name)],
        })
    # Reasons and messages came from oracles: redacted and printable, like every view.
    table: dict[str, Any] = escape.safe({"suites": out})
    return table


def measured(cell: dict[str, Any], r: ws.ResultRecord, before: dict[str, float]) -> None:
    """A performance oracle's cell shows what it measured and the change from the build
    before, never ``good`` (its exit code says nothing of a build 66 % slower)."""
    perf = r.facts.get("perf") if r.state == ws.DONE else None
    if not isinstance(perf, dict) or not perf.get("samples"):
        return
    samples = perf["samples"]
    level = median([float(x) for x in samples])
    prev = before.get(r.key.oracle)
    before[r.key.oracle] = level
    # The oracle's unit, one line (a result stored before its runs' units were read as one).
    cell.update(verdict="measured", median=level, unit=escape.line(str(perf.get("unit") or "")),
                change=None if not prev else round(level / prev - 1, 4))


def _flip(store: Store, f: ws.FlipRecord) -> dict[str, Any]:
    old = ws.get_result(store, f.from_result_id)
    new = ws.get_result(store, f.to_result_id)
    d: dict[str, Any] = {
        "id": f.id, "oracle": f.oracle, "kind": f.kind,
        "from": {"version": old.key.torch_version, "commit": f.from_commit},
        "to": {"version": new.key.torch_version, "commit": f.to_commit},
        "bisection": f.bisection_id, "state": None, "culprit": None, "message": f.message,
        "at": f.created_at.isoformat(timespec="seconds"),
        "step": f.facts or None,
    }
    if f.bisection_id is not None:
        b = bisections.get(store, f.bisection_id)
        d["state"] = effective_state(b)
        d["culprit"] = b.culprit_sha
    return d


def text_lines(data: dict[str, Any]) -> list[str]:
    """The table for a pipe or a log: one line per oracle, then one per flip."""
    lines: list[str] = []
    for s in data["suites"]:
        lines.append(f"suite {s['name']}")
        heads = ["oracle", *(t["version"] for t in s["torches"])]
        grid = [[r["oracle"], *(cell_text(c) for c in r["cells"])] for r in s["rows"]]
        widths = [max(len(x[i]) for x in [heads, *grid]) for i in range(len(heads))]
        for line in [heads, *grid]:
            lines.append("  " + "  ".join(v.ljust(w) for v, w in zip(line, widths,
                                                                       strict=True)).rstrip())
        for f in s["flips"]:
            lines.append("  " + flip_text(f))
        for series in s.get("series", []):
            lines.extend(series_lines(series))
    # Each one line: no value of an oracle's (a unit, a reason, a message) starts another.
    return [escape.line(x) for x in lines] or ["the watch has recorded nothing yet: run "
                                               "`bisect tick`"]


def cell_text(cell: dict[str, Any] | None) -> str:
    if cell is None:
        return "-"
    text = str(cell["verdict"])
    if cell.get("median") is not None:
        unit = f" {cell['unit']}" if cell.get("unit") else ""
        change = cell.get("change")
        text = f"{cell['median']:.4g}{unit}" + (f" {100 * change:+.0f}%" if change is not None
                                                  else "")
    if cell.get("bisection") is not None:
        text += f" #{cell['bisection']}"
    return text


def series_lines(series: dict[str, Any]) -> list[str]:
    """A performance series in a terminal: its sparkline (``┃`` where a step begins), the
    newest median, then a line per step with its bisection."""
    pts = series["points"]
    unit = f" {series['unit']}" if series["unit"] else ""
    name = series["oracle"] + (f" [{series['metric']}]" if series["metric"] != series["oracle"]
                               else "")
    lines = [f"  {name}  {sparkline(series)}  {pts[-1]['median']:.4g}{unit} "
             f"({len(pts)} builds, {series['direction']})"]
    for st in series["steps"]:
        i = st["index"]
        change = float(st.get("change") or 0.0)
        text = (f"    ┃ {st['kind']} {change:+.1%} between {pts[i - 1]['version']} and "
                f"{pts[i]['version']}")
        if st.get("undoes") is not None:
            text += f" (a step back: the fix of flip {st['undoes']})"
        if st["bisection"] is not None:
            text += f": bisection {st['bisection']} {st['state']}"
            text += f", culprit {st['culprit'][:12]}" if st["culprit"] else ""
        elif st.get("message"):
            text += f": {st['message']}"
        lines.append(text)
    return lines


def flip_text(f: dict[str, Any]) -> str:
    head = (f"{f['kind']} of {f['oracle']} between {f['from']['version']} and "
            f"{f['to']['version']}: ")
    if f["bisection"] is None:
        return head + f"no bisection ({f['message'] or 'being started'})"
    tail = f"bisection {f['bisection']} {f['state']}"
    return head + tail + (f", culprit {f['culprit']}" if f["culprit"] else "")
