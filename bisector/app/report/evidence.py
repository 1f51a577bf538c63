"""The evidence behind an answer that is not a plain verdict, drawn (issue 31, item 6).

A performance answer rests on paired changes against a reference that itself moved; a flaky
answer on a posterior over commits. The timeline shows where probes ran and what each said,
which for those oracles is not the evidence: a reader of the report (or the page) must see the
numbers the decision was made on. So the HTML report and ``bisect serve``'s page draw, beside
the timeline and on the same x axis (the range):

- performance: each judged commit's median paired change (positive = worse) with the threshold
  as a dashed line, coloured by its verdict; under it, the reference's own run medians in the
  order they ran (the drift pairing took out);
- flaky: the probability of each commit being the culprit, with the error rates integrated out
  as the search judged it (:class:`bisector.core.joint.Joint`: "a regression, and there"), one
  bar per run of commits that share it, and the probability of no regression at all.

Geometry only (numbers and labels); ``templates/evidence.svg`` draws it, autoescaped.
"""

from __future__ import annotations

from typing import Any

from bisector.core.joint import Joint

WIDTH, LEFT, RIGHT, TOP, HEIGHT, STRIP = 1000, 56, 24, 24, 150, 60


def _x(pos: int, n: int) -> float:
    return round(LEFT + (WIDTH - LEFT - RIGHT) * pos / max(n - 1, 1), 2)


def evidence(d: dict[str, Any]) -> dict[str, Any] | None:
    """The picture's geometry for this bisection's answer, or None (nothing to add to the
    timeline: a deterministic oracle's verdicts are the evidence)."""
    result = d.get("result") or {}
    if result.get("perf"):
        return _perf(d, result["perf"])
    if result.get("noisy") is not None:
        return _posterior(d)
    return None


def _perf(d: dict[str, Any], pf: dict[str, Any]) -> dict[str, Any] | None:
    n = int(d["candidates"])
    rows = [r for r in pf.get("commits", []) if r.get("change") is not None]
    if not rows:
        return None
    threshold = float(pf["threshold"])
    changes = [float(r["change"]) for r in rows]
    hi = max(max(changes), threshold) * 1.15
    lo = min(min(changes), 0.0) - 0.05 * max(hi, 0.1)
    bottom = TOP + HEIGHT

    def y(change: float) -> float:
        return round(bottom - HEIGHT * (change - lo) / (hi - lo), 2)

    unit = pf.get("unit") or ""
    points = [{"x": _x(int(r["position"]), n), "y": y(float(r["change"])),
               "verdict": r["verdict"],
               "title": f"{r['sha'][:12]}: {100 * float(r['change']):+.1f} % "
                        f"({r['verdict']}, {r.get('pairs', r['runs'])} pairs)"} for r in rows]
    ref = [p for p in d["probes"] if p.get("position") == 0
           and ((p.get("facts") or {}).get("perf") or {}).get("samples")]
    medians = [sorted(p["facts"]["perf"]["samples"])[len(p["facts"]["perf"]["samples"]) // 2]
               for p in ref]
    strip_top = bottom + 40
    drift = []
    if len(medians) >= 2:
        m_lo, m_hi = min(medians), max(medians)
        span = (m_hi - m_lo) or 1.0
        step = (WIDTH - LEFT - RIGHT) / (len(medians) - 1)
        drift = [{"x": round(LEFT + step * i, 2),
                  "y": round(strip_top + STRIP - STRIP * (m - m_lo) / span, 2),
                  "title": f"reference run {i + 1}: median {m:.4g} {unit}"}
                 for i, m in enumerate(medians)]
    ticks = [{"y": y(v), "text": f"{100 * v:+.0f} %"} for v in (0.0, threshold, hi / 1.15)]
    return {"kind": "perf", "width": WIDTH, "left": LEFT, "right": WIDTH - RIGHT,
            "top": TOP, "bottom": bottom, "zero": y(0.0), "threshold": y(threshold),
            "threshold_text": f"threshold {100 * threshold:.3g} %", "points": points,
            "ticks": ticks, "drift": drift, "drift_line": " ".join(
                f"{p['x']},{p['y']}" for p in drift),
            "strip_top": strip_top, "strip_bottom": strip_top + STRIP,
            "height": (strip_top + STRIP + 16) if drift else bottom + 24,
            "drift_text": (f"the good endpoint's own runs in the order they ran "
                           f"({min(medians):.4g} to {max(medians):.4g} {unit})")
            if drift else ""}


def _posterior(d: dict[str, Any]) -> dict[str, Any] | None:
    n = int(d["candidates"])
    seen = [(int(p["position"]), p["verdict"] == "bad") for p in d["probes"]
            if p.get("position") is not None and p["verdict"] in ("good", "bad")
            and int(p["position"]) < n and not p.get("inside")]
    if n < 3 or not seen:
        return None
    post = Joint(n, seen)
    segments = post.segments()
    top = max(q for _, _, q in segments) or 1.0
    bottom = TOP + HEIGHT
    bars = []
    for first, last, q in segments:
        x0, x1 = _x(first - 1, n), _x(last, n)
        h = round(HEIGHT * q / top, 2)
        bars.append({"x": x0, "w": max(round(x1 - x0, 2), 1.0), "y": round(bottom - h, 2),
                     "h": h, "title": (f"commit {first}" if first == last else
                                       f"commits {first}-{last}")
                     + f": probability {q:.4f} each"})
    return {"kind": "posterior", "width": WIDTH, "left": LEFT, "right": WIDTH - RIGHT,
            "top": TOP, "bottom": bottom, "bars": bars, "height": bottom + 24,
            "top_text": f"{top:.3f}",
            "caption": f"no regression at all: probability {post.p0:.4f}"}
