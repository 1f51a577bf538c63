"""A HUD benchmark regression report, read: which series regressed between which commits.

PyTorch's dashboards compare a baseline window with a target window every day
(pytorch/test-infra ``aws/lambda/benchmark_regression_summary_report``) and keep a report per
run: ``{"report_id", "policy", "report": {"summary", "results": [...], "baseline_meta_data",
"new_meta_data", ...}}`` (the bare ``report`` object is taken too). Each result is one series:
``group_info`` (suite, model, metric, device, arch, dtype, mode, ...), the baseline window's
points (``all_baseline_points``, or ``baseline_point``), the target window's ``points`` with
their ``flag`` (worse than the policy allows), a ``label`` and its ``policy`` (``condition``
``greater_equal``/``less_equal`` and ``threshold``, a ratio to the baseline).

For a series labelled ``regression`` the good commit is the last one before the trailing run
of flagged points (the baseline window's last when the whole target window is flagged) and the
bad one the first of that run: the narrowest range the report itself supports. Series of one
report with the same range and metric become one :class:`Range`. The GitHub issue the report
files carries only counts and a link to the report page, no commits: :func:`read` says so in
one line and names the JSON to give instead.

The report is untrusted input: commits must be hexadecimal, names short words, numbers finite.
It is bounded before anything is read from it: :data:`MAX_BYTES` of text, :data:`MAX_DEPTH`
levels of nesting, numbers of :data:`MAX_NUMBER_CHARS` characters, :data:`MAX_RESULTS` results
and :data:`MAX_MODELS` models a range; past any of them :func:`parse` refuses it in one line.
Its text is shown as data: every string of it that a note or an error repeats is one line with
its control characters made visible (:func:`bisector.base.escape.line`).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from bisector.base.errors import UsageError
from bisector.base.escape import line

SHA = re.compile(r"[0-9a-fA-F]{7,40}")
WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}")
REPORT_PAGE = re.compile(r"https://hud\.pytorch\.org/benchmark/regression/report/([\w-]{1,64})")
MAX_BYTES = 32 * 2**20
# A report as the dashboard saves it nests 6 levels (report, results, a result, its points, a
# point, its values) and its numbers are values, ratios, ids and times: far inside these.
MAX_DEPTH = 32
MAX_NUMBER_CHARS = 40  # characters of one number (a 4000-digit integer overflows a float)
MAX_RESULTS = 100_000  # results (series) of one report
# Models of one range: a probe runs PyTorch's benchmark for every one of them, each compiled,
# RUNS times (oracle/dashboard.py), inside one timeout. A dashboard's suite has about 100.
MAX_MODELS = 256
# The dashboards' compiler suites: the script of PyTorch's tree that runs each.
SUITES = {"torchbench": "torchbench", "huggingface": "huggingface", "timm_models": "timm_models",
          "timm": "timm_models"}
# The flags of the benchmark scripts a series' dtype and mode become.
DTYPES = {"amp": "--amp", "bfloat16": "--bfloat16", "float16": "--float16",
          "float32": "--float32"}
MODES = {"inference": "--inference", "training": "--training"}
# A metric, the CSV column of ``--performance`` that holds it, and which way is better.
METRICS = {"speedup": ("speedup", "higher-is-better"),
           "geomean_speedup": ("speedup", "higher-is-better"),
           "compilation_latency": ("compilation_latency", "lower-is-better"),
           "compression_ratio": ("compression_ratio", "higher-is-better"),
           "passrate": ("accuracy", "pass")}


@dataclass(frozen=True)
class Series:
    """One regressed series of a report."""

    suite: str
    model: str
    metric: str
    device: str
    dtype: str
    mode: str
    good: str
    bad: str
    threshold: float  # the policy's allowed change, as a fraction (0.05: 5 %)


@dataclass(frozen=True)
class Range:
    """What one bisection is: the series of one report with the same range and metric."""

    good: str
    bad: str
    metric: str
    suite: str
    device: str
    dtype: str
    mode: str
    threshold: float
    series: tuple[Series, ...]

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(sorted({s.model for s in self.series}))


@dataclass(frozen=True)
class Report:
    report_id: str
    ranges: tuple[Range, ...]
    skipped: tuple[str, ...]  # series not bisected, each with why


def _shown(value: Any, cap: int) -> str:
    """A value of the report as a note or an error repeats it: one line, at most ``cap``
    characters of it, every control character visible."""
    return line(str(value)[:cap])


def _quoted(value: Any) -> str:
    """A value of the report as an error names it: quoted, cut, one line."""
    return line(repr(value if isinstance(value, str | int | float | bool) else
                     str(value))[:60])


def _word(value: Any, what: str) -> str:
    if isinstance(value, str) and WORD.fullmatch(value):
        return value
    if value is None:
        raise ValueError(f"group_info has no {what}")
    raise ValueError(f"group_info.{what} {_quoted(value)} is not a plain name")


def _point(p: Any, where: str) -> dict[str, Any]:
    """A point of a window, checked: an object whose commit is a sha and whose flag, if any,
    is true or false. The error names the point, its field and the value at fault (a point
    skipped silently once turned a placeholder commit into "no flagged point ends its target
    window")."""
    if not isinstance(p, dict):
        raise ValueError(f"{where} is {_quoted(p)}, not an object with a commit")
    c = p.get("commit")
    if c is None:
        raise ValueError(f"{where} has no commit")
    if not (isinstance(c, str) and SHA.fullmatch(c)):
        raise ValueError(f"{where}: commit {_quoted(c)} is not a sha (7 to 40 hexadecimal "
                         f"digits)")
    if p.get("flag") not in (None, True, False):
        raise ValueError(f"{where}: flag {_quoted(p['flag'])} is not true or false")
    return p


def _points(result: dict[str, Any], field: str) -> list[dict[str, Any]]:
    """The points of the result's ``field`` (absent: none), each checked (:func:`_point`)."""
    raw = result.get(field)
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ValueError(f"{field} is {_quoted(raw)}, not a list of points")
    return [_point(p, f"point {i} of {field}") for i, p in enumerate(raw, 1)]


def _threshold(policy: dict[str, Any]) -> float:
    """The policy's ratio as the fraction a commit may be worse (0.95 or 1.15: 5 % or 15 %)."""
    ratio = policy.get("threshold")
    if ratio is None:
        raise ValueError("its policy has no threshold")
    if isinstance(ratio, bool) or not isinstance(ratio, int | float) or \
            not math.isfinite(ratio) or ratio <= 0:
        raise ValueError(f"its policy's threshold {_quoted(ratio)} is not a positive ratio")
    change = abs(1.0 - float(ratio))
    if not 0 < change < 1:
        raise ValueError(f"its policy threshold {ratio} allows no change")
    return round(change, 6)


def _range(result: dict[str, Any]) -> tuple[str, str]:
    """(good, bad): around the trailing run of flagged points of the target window."""
    points = _points(result, "points")
    base = _points(result, "all_baseline_points")
    if not base and result.get("baseline_point") is not None:
        base = [_point(result["baseline_point"], "baseline_point")]
    run = 0
    for p in reversed(points):
        if not p.get("flag"):
            break
        run += 1
    if not points:
        raise ValueError("its target window has no points (points)")
    if not run:
        raise ValueError(f"no flagged point ends its target window (point {len(points)} of "
                         f"points, {points[-1]['commit'][:12]}, is not flagged)")
    first_bad = points[len(points) - run]
    before = points[:len(points) - run] or base[-1:]
    if not before:
        raise ValueError("no point before its flagged points (every point of points is "
                         "flagged, and all_baseline_points and baseline_point are absent)")
    return str(before[-1]["commit"]), str(first_bad["commit"])


def _series(result: dict[str, Any], policy: dict[str, Any]) -> Series:
    """One regressed result, ``policy`` its own or the report's for its metric."""
    gi = result.get("group_info")
    if not isinstance(gi, dict):
        raise ValueError("no group_info")
    metric = _word(gi.get("metric"), "metric")
    if metric.lower() not in METRICS:
        raise ValueError(f"group_info.metric {metric!r} has no benchmark column bisector "
                         f"knows ({', '.join(METRICS)})")
    suite = _word(gi.get("suite"), "suite")
    if suite not in SUITES:
        raise ValueError(f"group_info.suite {suite!r} is none of {', '.join(sorted(SUITES))}")
    if not gi.get("model"):
        raise ValueError("a suite-wide series (no model): bisect one of its models")
    dtype = _word(gi.get("dtype") or "amp", "dtype")
    mode = _word(gi.get("mode") or "inference", "mode")
    if dtype not in DTYPES or mode not in MODES:
        raise ValueError(f"group_info.dtype {dtype!r} or mode {mode!r} is no flag of the "
                         f"benchmark scripts")
    compiler = gi.get("compiler")
    if compiler not in (None, "", "inductor"):
        raise ValueError(f"compiler {_shown(compiler, 40)} is not inductor, the backend the "
                         f"benchmark command runs")
    condition = policy.get("condition")
    way = METRICS[metric.lower()][1]
    if isinstance(condition, str) and way != "pass" and \
            condition.startswith("greater") != (way == "higher-is-better"):
        raise ValueError(f"its policy's condition {_shown(condition, 20)} contradicts "
                         f"{metric}")
    good, bad = _range(result)
    return Series(
        suite=suite, model=_word(gi.get("model"), "model"), metric=metric.lower(),
        device=_word(gi.get("device") or "cuda", "device"), dtype=dtype, mode=mode,
        good=good, bad=bad, threshold=_threshold(policy))


def _name(gi: Any) -> str:
    if not isinstance(gi, dict):
        return "a series"
    return "/".join(_shown(gi.get(k), 40) for k in ("suite", "model", "metric") if gi.get(k))


def _policy_for(result: dict[str, Any], policy: Any) -> dict[str, Any]:
    """The result's own policy, else the report's for its metric, else none ({})."""
    own = result.get("policy")
    if isinstance(own, dict):
        return own
    metrics = policy.get("metrics") if isinstance(policy, dict) else None
    gi = result.get("group_info")
    metric = gi.get("metric") if isinstance(gi, dict) else None
    found = metrics.get(str(metric).lower()) if isinstance(metrics, dict) else None
    return found if isinstance(found, dict) else {}


class _Refused(Exception):
    """A number of the report past :data:`MAX_NUMBER_CHARS`, met while decoding it."""


def _number(text: str) -> str:
    if len(text) > MAX_NUMBER_CHARS:
        raise _Refused(f"--from-report: the JSON holds a number of {len(text)} characters, "
                       f"over {MAX_NUMBER_CHARS}: give the JSON of one HUD regression report "
                       f"as the dashboard saves it")
    return text


def _too_deep(doc: Any) -> bool:
    """Whether containers nest past :data:`MAX_DEPTH` (level by level: no recursion)."""
    level, depth = [doc], 1
    while level:
        if depth > MAX_DEPTH:
            return True
        deeper: list[Any] = []
        for v in level:
            items = v.values() if isinstance(v, dict) else v
            deeper.extend(x for x in items if isinstance(x, dict | list))
        level, depth = deeper, depth + 1
    return False


TOO_DEEP = (f"--from-report: the JSON nests deeper than {MAX_DEPTH} levels (a HUD regression "
            f"report nests 6): give the JSON of one report as the dashboard saves it")


def _decode(text: str) -> Any:
    """The JSON of ``text`` within the limits (numbers while decoding, nesting after)."""
    try:
        doc = json.loads(text, parse_int=lambda t: int(_number(t)),
                         parse_float=lambda t: float(_number(t)))
    except _Refused as e:
        raise UsageError(str(e)) from None
    except RecursionError:  # nested past the interpreter's own limit
        raise UsageError(TOO_DEEP) from None
    if isinstance(doc, dict | list) and _too_deep(doc):
        raise UsageError(TOO_DEEP)
    return doc


def parse(text: str) -> Report:
    """The report's regressed series, grouped by range and metric (see the module)."""
    if len(text) > MAX_BYTES:
        raise UsageError(f"the report is {len(text)} bytes, over {MAX_BYTES}: give the JSON of "
                         f"one report")
    try:
        doc = _decode(text)
    except ValueError:
        page = REPORT_PAGE.search(text)
        if page:
            raise UsageError(f"this is the Markdown of HUD report {page[1]}: it holds counts "
                             f"and a link, no commits; save the report's JSON from {page[0]} "
                             f"and give that to --from-report") from None
        raise UsageError("--from-report: neither a HUD regression report's JSON nor the "
                         "Markdown of its GitHub issue") from None
    if not isinstance(doc, dict):
        raise UsageError("--from-report: the JSON is not a HUD regression report (an object "
                         "with report.results)")
    inner = doc.get("report")
    report: dict[str, Any] = inner if isinstance(inner, dict) else doc
    results = report.get("results")
    if not isinstance(results, list):
        raise UsageError("--from-report: the JSON has no report.results list: give the JSON "
                         "of one HUD regression report")
    if len(results) > MAX_RESULTS:
        raise UsageError(f"--from-report: the report has {len(results)} results, over "
                         f"{MAX_RESULTS}: give one HUD regression report (split a larger one "
                         f"by suite)")
    policy = doc.get("policy")
    found: list[Series] = []
    skipped: list[str] = []
    for r in results:
        if not isinstance(r, dict) or r.get("label") != "regression":
            continue
        try:
            found.append(_series(r, _policy_for(r, policy)))
        except ValueError as e:
            skipped.append(f"{_name(r.get('group_info'))}: {e}")
    groups: dict[tuple[str, ...], list[Series]] = {}
    for s in found:
        groups.setdefault((s.good, s.bad, s.metric, s.suite, s.device, s.dtype, s.mode),
                          []).append(s)
    ranges = tuple(Range(good=ss[0].good, bad=ss[0].bad, metric=ss[0].metric,
                         suite=ss[0].suite, device=ss[0].device, dtype=ss[0].dtype,
                         mode=ss[0].mode, threshold=min(s.threshold for s in ss),
                         series=tuple(ss)) for ss in groups.values())
    for r in ranges:
        if len(r.models) > MAX_MODELS:
            raise UsageError(
                f"--from-report: the range {r.good[:12]}..{r.bad[:12]} of {r.suite} "
                f"{r.metric} has {len(r.models)} models, over {MAX_MODELS} (each probe "
                f"benchmarks every one): keep the results of the models to bisect in the "
                f"report, at most {MAX_MODELS} a range")
    rid = doc.get("report_id") or doc.get("id") or ""
    return Report(_shown(rid, 80), ranges, tuple(skipped))
