"""Pictures of a performance series: a terminal sparkline and the geometry of an SVG chart.

Both read the series as ``table_data`` serves it (``bisect watch --json``, ``/api/watch``): a
point per build (median, lowest and highest sample, date) and the steps the watch acted on
(the flips). The SVG is drawn by a Jinja template (``templates/series.svg``, autoescaped like
every page) from :func:`geometry`; this module only computes where things go, so the page, the
HTML report and the ``.svg`` beside a notification draw one picture. Presentation is in the
SVG's own attributes, never in a stylesheet or a font from elsewhere: the file is whole alone.
"""

from __future__ import annotations

import math
from typing import Any

BARS = "▁▂▃▄▅▆▇█"
MARK = "┃"  # between the two builds of a step
SPARK_BUILDS = 60  # the newest builds a sparkline shows

WIDTH, HEIGHT = 760, 250
LEFT, RIGHT, TOP, BOTTOM = 64, 20, 58, 30  # steps' labels sit above the plot
X_LABELS = 8  # at most this many dates on the x axis
COLOURS = {"slowdown": "#cf222e", "speedup": "#1a7f37"}


def sparkline(series: dict[str, Any], width: int = SPARK_BUILDS) -> str:
    """The newest ``width`` build medians as block characters, ``┃`` before each build where
    a step begins; the scale is the shown builds' own."""
    points = series["points"][-width:]
    if not points:
        return ""
    first = len(series["points"]) - len(points)
    starts = {s["index"] - first for s in series["steps"]}
    values = [p["median"] for p in points]
    lo, hi = min(values), max(values)
    out = []
    for i, v in enumerate(values):
        if i in starts and i > 0:
            out.append(MARK)
        level = 0 if hi == lo else round((v - lo) / (hi - lo) * (len(BARS) - 1))
        out.append(BARS[level])
    return "".join(out)


def _fmt(v: float) -> str:
    return f"{v:.3g}"


def _ticks(lo: float, hi: float, count: int = 4) -> list[float]:
    """About ``count`` round values between lo and hi."""
    span = hi - lo
    raw = span / count
    step = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * step:
            step *= m
            break
    first = math.ceil(lo / step) * step
    return [first + k * step for k in range(int((hi - first) / step) + 1)]


def geometry(series: dict[str, Any], links: bool = True) -> dict[str, Any]:
    """Where each thing of the chart goes, in SVG units: per build a dot at its median and a
    bar from its lowest to its highest sample, the medians joined, dates along the bottom,
    each step a vertical line between its two builds with its size, and (with ``links``, on
    the served page) a link to its bisection and culprit."""
    pts = series["points"]
    n = len(pts)
    lows = [p["low"] for p in pts] or [0.0]
    highs = [p["high"] for p in pts] or [1.0]
    lo, hi = float(min(lows)), float(max(highs))
    if hi <= lo:
        lo, hi = lo * 0.95 or -1.0, hi * 1.05 or 1.0
    pad = (hi - lo) * 0.08
    lo, hi = lo - pad, hi + pad
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(i: float) -> float:
        return round(LEFT + (plot_w / 2 if n <= 1 else i * plot_w / (n - 1)), 1)

    def y(v: float) -> float:
        return round(TOP + (hi - v) / (hi - lo) * plot_h, 1)

    unit = f" {series['unit']}" if series.get("unit") else ""
    dots = [{"x": x(i), "y": y(p["median"]), "y_low": y(p["low"]), "y_high": y(p["high"]),
             "title": f"{p['version']} ({p['date']}, {p['commit'][:12]}): median "
                      f"{_fmt(p['median'])}{unit}, {p['n']} samples from {_fmt(p['low'])} "
                      f"to {_fmt(p['high'])}"} for i, p in enumerate(pts)]
    every = max(1, math.ceil(n / X_LABELS))
    dates = [{"x": x(i), "text": p["date"], "anchor": "end" if i == n - 1 and n > 1
              else "middle"} for i, p in enumerate(pts) if i % every == 0 or i == n - 1]
    if len(dates) > 1 and dates[-1]["x"] - dates[-2]["x"] < plot_w / X_LABELS:
        del dates[-2]  # the newest date always shows, its neighbour gives way
    steps = []
    for s in series["steps"]:
        i = s["index"]
        if not 0 < i < n:
            continue
        change = float(s.get("change") or 0.0)
        sx = round((x(i - 1) + x(i)) / 2, 1)
        right = sx > WIDTH - 200  # near the right edge its labels go to its left
        steps.append({
            "x": sx, "tx": sx - 4 if right else sx + 4, "anchor": "end" if right else "start",
            "kind": s["kind"],
            "colour": COLOURS.get(s["kind"], "#57606a"),
            "label": f"{change:+.0%}".replace("%", " %") + (" fix" if s.get("undoes") else ""),
            "href": f"/bisections/{s['bisection']}" if links and s.get("bisection") else None,
            "bisection": s.get("bisection"), "culprit": (s.get("culprit") or "")[:12],
            "title": f"{s['kind']} {change:+.1%} between {pts[i - 1]['version']} and "
                     f"{pts[i]['version']} (p = {float(s.get('p_value') or 1):.2g})"})
    return {
        "width": WIDTH, "height": HEIGHT, "left": LEFT, "right": WIDTH - RIGHT, "top": TOP,
        "bottom": HEIGHT - BOTTOM, "dots": dots, "dates": dates, "steps": steps,
        "line": " ".join(f"{d['x']},{d['y']}" for d in dots),
        "yticks": [{"y": y(v), "text": _fmt(v)} for v in _ticks(lo, hi) if lo <= v <= hi],
        "title": f"{series['suite']} · {series['oracle']} · {series['metric']}"
                 f"{' (' + series['unit'] + ', ' if series.get('unit') else ' ('}"
                 f"{series['direction']})",
        "builds": n,
    }
