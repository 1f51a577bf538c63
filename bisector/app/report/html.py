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

from bisector.app.report import compiler_pass, paste
from bisector.app.report.evidence import evidence
from bisector.app.report.phases import ahead_text, hidden_total, phase_rows
from bisector.app.report.phases import timeline as phase_timeline
from bisector.app.report.portable import scrubber
from bisector.app.report.result_text import probe_counts, range_commits, skipped_up_front
from bisector.app.report.show import culprit_facts
from bisector.app.watch.picture import geometry
from bisector.base import defaults
from bisector.base.kinds import State
from bisector.oracle.at_culprit import blamed
from bisector.run.pipeline import PHASES
from bisector.run.prior import note as prior_note

_env = jinja2.Environment(
    loader=jinja2.PackageLoader("bisector.app.report", "templates"),
    autoescape=True,  # every template, whatever its name: nothing here is trusted
    trim_blocks=True,
    lstrip_blocks=True,
)


def http_url(value: object) -> bool:
    """Only http(s) links become anchors: a PR link parsed from a commit message could be
    ``javascript:``, which escaping alone does not stop."""
    return isinstance(value, str) and value.startswith(("https://", "http://"))


_env.tests["http_url"] = http_url
_env.tests["skipped_up_front"] = skipped_up_front  # a --skip mark, no reused verdict
_env.filters["http_url"] = http_url

# The timeline's geometry, in SVG user units.
WIDTH, LEFT, RIGHT, TOP, ROW = 1000, 24, 24, 34, 18
R_MIN, R_MAX = 4.0, 11.0
# Up to this many candidates each commit gets a tick; past it the range is a plain bar.
TICKS_UP_TO = 600
# Nightly labels stand upright in a band under the rows, so dates of nightlies a few commits
# apart still fit side by side; closer than LABEL_GAP, a line keeps only its hover title.
LABEL_FONT, LABEL_GAP, LABEL_CHARS = 11, 15.0, 20
EM = 0.62  # the widest average glyph of the page's sans-serif fonts, in em: a label's length
REF_CHARS = 48  # an endpoint's ref in the timeline's heading (the full one is in the facts)


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


def _clip(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[:chars - 1] + "\u2026"


def timeline(d: dict[str, Any]) -> dict[str, Any]:
    """Geometry of the range: x is the position in the range, y the order probes ran in.

    Every label is placed to stay inside the picture: the culprit's reads leftwards from its
    line in the right half (else "culprit 45d9…" is cut at the edge), and nightly dates stand
    in a band of their own, thinned where lines crowd."""
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
        how = ("skipped up front" if skipped_up_front(p) else "reused verdict" if p["reused"]
               else f"{cost:.1f} s")
        # A probe inside a merge (past the walk) is drawn on the merge's line.
        at = d.get("merge_at") if p.get("inside") else p["position"]
        markers.append(Marker(
            p["seq"], x(min(p["position"], n - 1) if at is None else at),
            TOP + ROW * (row + 1), round(r, 2), p["verdict"], p["sha"],
            f"probe {p['seq']}: {p['sha'][:12]} {verdict} ({how}) {p.get('subject', '')}",
            p["position"] == culprit_pos))
    rows_end = TOP + ROW * (len(markers) + 1)
    nightlies = _nightlies(d, x, rows_end)
    band = max((len(nl["short"]) for nl in nightlies if nl["short"]), default=0)
    band_h = round(band * LABEL_FONT * EM + 10) if band else 0
    height = rows_end + 12 + band_h
    culprit_x = x(culprit_pos) if culprit_pos is not None else None
    right_half = culprit_x is not None and culprit_x > WIDTH / 2
    return {
        "width": WIDTH, "height": height, "left": LEFT, "right": WIDTH - RIGHT, "axis": TOP - 10,
        "ticks": [x(i) for i in range(n)] if n <= TICKS_UP_TO else [],
        "good_label": _clip(f"{d['good']['ref']} ({old})", REF_CHARS),
        "bad_label": _clip(f"{d['bad']['ref']} ({new})", REF_CHARS),
        "nightlies": nightlies, "rows_end": rows_end + 4, "band_top": rows_end + 10,
        "labelled": sum(1 for nl in nightlies if nl["short"]), "markers": markers,
        "culprit_x": culprit_x,
        "culprit_label_x": (culprit_x - 4 if right_half else culprit_x + 4)
        if culprit_x is not None else None,
        "culprit_anchor": "end" if right_half else "start",
        "n": int(d["candidates"]),
    }


def _nightlies(d: dict[str, Any], x: Any, rows_end: int) -> list[dict[str, Any]]:
    """The prebuilt wheels' lines, left to right; a line closer than LABEL_GAP to the last
    labelled one gets no label (its title still names it on hover)."""
    placed = sorted((pb for pb in d["prebuilts"] if pb["position"] is not None),
                    key=lambda pb: int(pb["position"]))
    out: list[dict[str, Any]] = []
    last = -math.inf
    for pb in placed:
        at = x(pb["position"])
        keep = at - last >= LABEL_GAP
        last = at if keep else last
        out.append({"x": at, "label": f"{pb['kind']} {pb['version']}",
                    # the baseline sits right of the line so the upright glyphs centre on it
                    "text_x": round(at + LABEL_FONT * 0.35, 2),
                    "short": _clip(_wheel_day(str(pb["version"])), LABEL_CHARS) if keep else ""})
    return out


def _wheel_day(version: str) -> str:
    """What a timeline line is labelled with: a nightly's day (``2.9.0.dev20250110+cu128``
    -> ``2025-01-10``), else the version itself."""
    m = re.search(r"\.dev(\d{4})(\d{2})(\d{2})", version)
    return f"{m[1]}-{m[2]}-{m[3]}" if m else version


def _context(d: dict[str, Any], issue: str) -> dict[str, Any]:
    # The culprit's own facts, as the issue report's Versions block: not the first probe's.
    # An unfinished bisection has no issue to report yet: its page says how far it got.
    finished = d["state"] in {s.value for s in State if s.finished}
    rows = phase_rows(d)
    for r in rows:
        r["ahead_text"] = ahead_text(r)
    return {"d": d, "t": timeline(d), "issue": issue, "facts": culprit_facts(d),
            "prior_line": prior_note(d["prior"]) if d.get("prior") else "",
            "range_commits": range_commits(d), "probe_counts": probe_counts(d),
            "repo_name": d["github"] or Path(d["repo"]).name, "finished": finished,
            "poll_ms": int(defaults.PAGE_POLL_S * 1000), "phases": rows,
            "phase_names": PHASES, "ev": evidence(d), "overlap": phase_timeline(rows),
            "hidden_s": hidden_total(rows), **_compiler_pass(d)}


def _compiler_pass(d: dict[str, Any]) -> dict[str, Any]:
    """The compiler bisector's finding at the culprit for the page (app/report/compiler_pass.py)."""
    c = compiler_pass.found_of(d)
    if c is None:
        return {"cpass": None}
    return {"cpass": c, "cpass_where": blamed(c),
            "cpass_replay": "\n".join(compiler_pass.replay(c, compiler_pass.oracle_words(
                d, compiler_pass.oracle_file(d)), paste.env(compiler_pass.env_of(d))))
            if c.get("available") and not c.get("error") else ""}


def render_report(d: dict[str, Any], issue: str, series: str | None = None) -> str:
    """The self-contained file: no links back to a server, the outputs inline; ``series``:
    the SVG of the watch's series this bisection was started from (``render_series``).
    It is the file a user mails, so this machine's paths are rewritten in it as in the issue
    text (:func:`mailable`); the served page, on the team's own server, keeps them."""
    return _env.get_template("report.html").render(
        **_context(mailable(d), issue), served=False,
        series=Markup(series) if series is not None else None)


def mailable(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` with every string's paths of this machine rewritten by the issue's scrubber
    (the clone ``<repo>``, bisector's folders, the home folder ``~``, site-packages
    prefixes): the probes' outputs printed them, and the issue text rewrote them while the
    HTML report beside it kept them. The clone is named by its folder, as the report's
    heading names it."""
    scrub = scrubber(d["repo"], (d.get("environment") or {}).get("paths"))

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return scrub(value)
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    out: dict[str, Any] = walk(d)
    out["repo"] = Path(d["repo"]).name
    return out


def render_page(d: dict[str, Any], issue: str, series: str | None = None) -> str:
    """A bisection's page in ``bisect serve``: the report with links to full logs and JSON."""
    return _env.get_template("report.html").render(
        **_context(d, issue), served=True,
        series=Markup(series) if series is not None else None)


def render_list(rows: list[dict[str, Any]], query: dict[str, str],
                choices: dict[str, list[str]], next_url: str | None = None) -> str:
    """The list page: its filters a GET form, so the page's URL holds them (a link to paste)."""
    return _env.get_template("list.html").render(rows=rows, q=query, choices=choices,
                                                 next_url=next_url)


def render_commit(d: dict[str, Any]) -> str:
    """A commit's page (``bisect commit --json``'s data)."""
    return _env.get_template("commit.html").render(d=d)


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
