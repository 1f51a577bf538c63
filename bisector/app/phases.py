"""Where each probe's time went: obtaining its torch, making its environment, learning its
facts, the oracle's own run, and bisector's overhead (``facts["phases"]``, run/pipeline.py).

A probe that costs far more than its oracle is the first thing to look at when a bisection is
slow (issue 21: GPU probes paid ~40 % over the oracle); ``show`` (Markdown and JSON) and the
HTML report print the same rows, made here once.
"""

from __future__ import annotations

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
        rows.append({"seq": p["seq"], "sha": p["sha"], **vals, "total": sum(vals.values())})
    return rows


def phase_markdown(d: dict[str, Any]) -> list[str]:
    """The rows as a Markdown table (empty when no probe recorded its phases)."""
    rows = phase_rows(d)
    if not rows:
        return []
    out = ["", "Where each probe's time went (seconds):", "",
           "| # | commit | " + " | ".join(PHASES) + " | total |",
           "|---|---|" + "---|" * (len(PHASES) + 1)]
    for r in rows:
        cells = " | ".join(f"{r[k]:.1f}" for k in (*PHASES, "total"))
        out.append(f"| {r['seq']} | `{r['sha'][:12]}` | {cells} |")
    return out
