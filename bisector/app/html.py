"""HTML views of bisections: the one-file report (``bisect show --format html``) and the pages of
``bisect serve``. Both render the same Jinja2 templates from the same ``show`` data, so the file a
user mails and the page a teammate opens cannot disagree.

Every string that reaches a template came from git, an oracle or a user (commit subjects, output
tails, refs): the environment autoescapes everything, and nothing is marked safe but what one
of these templates rendered (a series' SVG, placed into a page).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from bisector.app.reports import culprit_facts
from bisector.app.watch.picture import geometry

_env = jinja2.Environment(
    loader=jinja2.PackageLoader("bisector.app", "templates"),
    autoescape=True,  # every template, whatever its name: nothing here is trusted
    trim_blocks=True,
    lstrip_blocks=True,
)



def http_url(value: object) -> bool:
    """Only http(s) links become anchors: a PR link parsed from a commit message could be
    ``javascript:``, which escaping alone does not stop."""
    return isinstance(value, str) and value.startswith(("https://", "http://"))


_env.tests["http_url"] = http_url
_env.filters["http_url"] = http_url

# The timeline's geometry, in SVG user units.
WIDTH, LEFT, RIGHT, TOP, ROW = 1000, 24, 24, 34, 18
R_MIN, R_MAX = 4.0, 11.0
# Up to this many candidates each commit gets a tick; past it the range is a plain bar.
TICKS_UP_TO = 600


@dataclass(frozen=True)
class Marker:
    seq: int
    x: float
    y: float
    r: float
    verdict: str
    sha: str
    title: str
    culprit: bool


def _cost(p: dict[str, Any]) -> float:
    """What a probe cost: its oracle run and, when it built, the build."""
    return float(p["duration_s"]) + float((p.get("build") or {}).get("seconds", 0.0))


def timeline(d: dict[str, Any]) -> dict[str, Any]:
    """Geometry of the range: x is the position in the range, y the order probes ran in."""
    n = max(int(d["candidates"]), 2)
    span = WIDTH - LEFT - RIGHT

    def x(pos: int) -> float:
        return round(LEFT + span * pos / (n - 1), 2)

    probes = [p for p in d["probes"] if p.get("position") is not None]
    top = max((_cost(p) for p in probes), default=0.0)
    culprit_pos = (d["result"] or {}).get("position") if d["culprit"] else None
    old, new = d["terms"]["old"], d["terms"]["new"]
    markers = []
    for row, p in enumerate(probes):
        cost = _cost(p)
        r = R_MIN if top <= 0 else R_MIN + (R_MAX - R_MIN) * math.sqrt(cost / top)
        verdict = {"good": old, "bad": new}.get(p["verdict"], p["verdict"])
        how = "reused verdict" if p["reused"] else f"{cost:.1f} s"
        markers.append(Marker(
            p["seq"], x(p["position"]), TOP + ROW * (row + 1), round(r, 2), p["verdict"],
            p["sha"], f"probe {p['seq']}: {p['sha'][:12]} {verdict} ({how}) "
            f"{p.get('subject', '')}", p["position"] == culprit_pos))
    height = TOP + ROW * (len(markers) + 1) + 12
    nightlies = [{"x": x(pb["position"]), "label": f"{pb['kind']} {pb['version']}",
                  "short": _wheel_day(str(pb["version"]))}
                 for pb in d["prebuilts"] if pb["position"] is not None]
    return {
        "width": WIDTH, "height": height, "left": LEFT, "right": WIDTH - RIGHT, "axis": TOP - 10,
        "ticks": [x(i) for i in range(n)] if n <= TICKS_UP_TO else [],
        "nightlies": nightlies, "markers": markers,
        "culprit_x": x(culprit_pos) if culprit_pos is not None else None,
        "n": int(d["candidates"]),
    }


def _wheel_day(version: str) -> str:
    """What a timeline line is labelled with: a nightly's day (``2.9.0.dev20250110+cu128``
    -> ``2025-01-10``), else the version itself."""
    m = re.search(r"\.dev(\d{4})(\d{2})(\d{2})", version)
    return f"{m[1]}-{m[2]}-{m[3]}" if m else version


def _context(d: dict[str, Any], issue: str) -> dict[str, Any]:
    # The culprit's own facts, as the issue report's Versions block: not the first probe's.
    return {"d": d, "t": timeline(d), "issue": issue, "facts": culprit_facts(d),
            "repo_name": d["github"] or Path(d["repo"]).name}


def render_report(d: dict[str, Any], issue: str, series: str | None = None) -> str:
    """The self-contained file: no links back to a server, the outputs inline; ``series``:
    the SVG of the watch's series this bisection was started from (``render_series``)."""
    return _env.get_template("report.html").render(
        **_context(d, issue), served=False,
        series=Markup(series) if series is not None else None)


def render_page(d: dict[str, Any], issue: str, series: str | None = None) -> str:
    """A bisection's page in ``bisect serve``: the report with links to full logs and JSON."""
    return _env.get_template("report.html").render(
        **_context(d, issue), served=True,
        series=Markup(series) if series is not None else None)


def render_list(rows: list[dict[str, Any]], query: dict[str, str],
                choices: dict[str, list[str]]) -> str:
    return _env.get_template("list.html").render(rows=rows, q=query, choices=choices)


def render_watch(data: dict[str, Any]) -> str:
    """``/watch``: the nightly watch's table (``bisect watch --json`` data), each performance
    series drawn as inline SVG with its steps linked to their bisections."""
    for s in data["suites"]:
        for series in s.get("series", []):
            series["svg"] = render_series(series, links=True)
    return _env.get_template("watch.html").render(d=data)


def render_series(series: dict[str, Any], links: bool = False) -> Markup:
    """One performance series as SVG (``templates/series.svg``, autoescaped: every string in
    it came from an oracle or git); whole on its own, so also the file beside a notification
    and the picture in a bisection's HTML report. Markup: rendered here, not to be escaped
    again where it is placed."""
    return Markup(
        _env.get_template("series.svg").render(g=geometry(series, links=links)))
