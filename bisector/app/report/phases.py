"""Where each probe's time went: obtaining its torch, making its environment, learning its
facts, the oracle's own run, and bisector's overhead (``facts["phases"]``, run/pipeline.py).

A probe that costs far more than its oracle is the first thing to look at when a bisection is
slow (issue 21: GPU probes paid ~40 % over the oracle); ``show`` (Markdown and JSON) and the
HTML report print the same rows, made here once. A probe prepared while an earlier oracle ran
(run/prefetch.py) also says how much was made ahead (``facts["ahead"]``): its phases are what
it still waited, and "download 21 s, 19 s of it during the previous oracle" is the two read
together; the HTML report draws each probe on one time axis, what was made ahead under the
oracle it overlapped.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bisector.run.pipeline import PHASES


def phase_rows(d: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per probe that ran here (not reused) and recorded its phases: seq, sha,
    each phase in seconds and the total."""
    rows = []
    for p in d["probes"]:
        ph = (p.get("facts") or {}).get("phases")
        if p["reused"] or not isinstance(ph, dict):
            continue
        vals = {k: float(ph.get(k) or 0.0) for k in PHASES}
        ahead = {k: float(v) for k, v in ((p.get("facts") or {}).get("ahead") or {}).items()
                 if k in PHASES and isinstance(v, int | float)}
        rows.append({"seq": p["seq"], "sha": p["sha"], **vals, "total": sum(vals.values()),
                     "ahead": ahead, "started_at": p.get("started_at")})
    return rows


def ahead_text(row: dict[str, Any]) -> str:
    """``obtain 21.0 s, 19.0 s of it ahead`` for each phase made ahead ("" for none)."""
    return "; ".join(f"{k} {row[k] + v:.1f} s, {v:.1f} s of it during an earlier oracle"
                     for k, v in row["ahead"].items() if v > 0)


def hidden_total(rows: list[dict[str, Any]]) -> float:
    """Seconds of obtaining and environments made while earlier oracles ran."""
    return sum(sum(r["ahead"].values()) for r in rows)


def timeline(rows: list[dict[str, Any]], width: float = 640.0) -> dict[str, Any]:
    """Bars on one time axis for the HTML report: per probe, what was made ahead (ending
    where the probe began, under the oracle it overlapped), then its phases one after the
    other. Empty when the probes' start times are not known (an older store)."""
    starts = [r["started_at"] for r in rows]
    if not rows or any(not isinstance(t, str) for t in starts):
        return {}
    t0 = min(datetime.fromisoformat(t) for t in starts)
    spans = []
    for r in rows:
        at = (datetime.fromisoformat(r["started_at"]) - t0).total_seconds()
        ahead = sum(r["ahead"].values())
        bars = [("ahead", at - ahead, ahead)] if ahead > 0 else []
        x = at
        for k in PHASES:
            if r[k] > 0:
                bars.append((k, x, r[k]))
                x += r[k]
        spans.append((r, bars))
    lo = min([0.0, *(b[1] for _, bars in spans for b in bars)])
    hi = max([lo + 1e-9, *(b[1] + b[2] for _, bars in spans for b in bars)])
    scale = width / (hi - lo)
    return {"width": width, "seconds": round(hi - lo, 1), "rows": [
        {"seq": r["seq"], "sha": r["sha"], "y": i * 16, "bars": [
            {"phase": k, "x": round((x - lo) * scale, 1), "w": max(1.0, round(w * scale, 1)),
             "seconds": round(w, 1)} for k, x, w in bars]}
        for i, (r, bars) in enumerate(spans)], "height": len(spans) * 16}


def phase_markdown(d: dict[str, Any]) -> list[str]:
    """The rows as a Markdown table (empty when no probe recorded its phases)."""
    rows = phase_rows(d)
    if not rows:
        return []
    out = ["", "Where each probe's time went (seconds):", "",
           "| # | commit | " + " | ".join(PHASES) + " | total | made ahead |",
           "|---|---|" + "---|" * (len(PHASES) + 2)]
    for r in rows:
        cells = " | ".join(f"{r[k]:.1f}" for k in (*PHASES, "total"))
        out.append(f"| {r['seq']} | `{r['sha'][:12]}` | {cells} | {ahead_text(r)} |")
    hidden = hidden_total(rows)
    if hidden > 0:
        out += ["", f"{hidden:.1f} s of obtaining and environments were made while earlier "
                    f"oracles ran (the prefetch): the phases above are what each probe still "
                    f"waited."]
    return out
