"""An oracle's inline metadata: a PEP 723 ``# /// script`` block with ``dependencies`` and a
``[tool.bisector]`` table (timeout, polarity, a flaky oracle's rates, a performance
threshold, the failure that is the bug...), read into :class:`OracleMeta`. Every mistake is
one line naming the key and the fix: an oracle is checked before anything is built for it.
"""

from __future__ import annotations

import ast
import math
import re
import tomllib
from dataclasses import dataclass, field
from typing import Any, NoReturn

from packaging.requirements import InvalidRequirement, Requirement

from bisector.base import defaults
from bisector.base.errors import OracleError
from bisector.core.perf import parse_threshold
from bisector.core.signature import compile_match
from bisector.core.verdict import Polarity, TimeoutRule

PEP723_RE = re.compile(
    r"(?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$"
)


@dataclass(frozen=True)
class OracleMeta:
    description: str = ""
    dependencies: tuple[str, ...] = ()
    requires_python: str | None = None
    timeout: float = defaults.ORACLE_TIMEOUT_S
    on_timeout: TimeoutRule = TimeoutRule.SKIP
    polarity: Polarity = Polarity.FAILURE
    needs_gpu: bool = False
    network: bool = False
    repeats: int = 1
    env: dict[str, str] = field(default_factory=dict)
    # A flaky oracle is searched with a posterior over the culprit instead of plain bisection.
    flaky: bool = False
    false_positive: float | None = None  # P(reports regressed | it is not); None: estimated
    false_negative: float | None = None  # P(reports fine | it is regressed); None: estimated
    confidence: float = defaults.NOISY_CONFIDENCE
    # Flaky: runs of the whole search (None: its own cap for the range); performance: runs
    # per commit (None: 8).
    max_runs: int | None = None
    # A performance oracle: samples in a BISECTOR_RESULT line, bad when worse than the good
    # endpoint's by more than this fraction (``threshold = "5%"``).
    threshold: float | None = None
    # The failure that is the bug: a run showing the bug whose output does not match is a
    # skip ("a different failure"), never a verdict (bisector.core.signature).
    match: str | None = None

    @property
    def performance(self) -> bool:
        return self.threshold is not None

    @property
    def sampled(self) -> bool:
        """Runs are samples (every probe runs, each run kept), not one reusable verdict."""
        return self.noisy or self.performance

    @property
    def noisy(self) -> bool:
        """Searched as noisy: marked flaky, or asked to repeat runs (the same thing said the
        old way)."""
        return self.flaky or self.repeats > 1


def _pep723_block(script: str, where: str) -> dict[str, Any]:
    # CRLF or CR line endings: Python runs the file all the same, so the metadata must be read
    # all the same (a block silently ignored would lose polarity and timeout).
    script = script.replace("\r\n", "\n").replace("\r", "\n")
    blocks = [m for m in PEP723_RE.finditer(script) if m.group("type") == "script"]
    opened = re.findall(r"(?m)^# /// script[ \t]*$", script)
    if not blocks:
        if opened:
            raise OracleError(f"{where}: the `# /// script` block is not closed (a line "
                              f"`# ///` must end it, every line between starting with `#`)")
        return {}
    if len(opened) > 1:
        raise OracleError(f"{where}: more than one `# /// script` block; keep exactly one")
    content = "".join(
        line[2:] if line.startswith("# ") else line[1:]
        for line in blocks[0].group("content").splitlines(keepends=True)
    )
    try:
        return tomllib.loads(content)
    except tomllib.TOMLDecodeError as e:
        raise OracleError(f"{where}: the `# /// script` block is not valid TOML ({e})") from None


def _docstring_line(script: str) -> str:
    try:
        doc = ast.get_docstring(ast.parse(script))
    except SyntaxError:
        return ""
    return doc.strip().splitlines()[0] if doc else ""


_KNOWN = {
    "description", "timeout", "on-timeout", "polarity", "needs-gpu", "network", "repeats", "env",
    "flaky", "false-positive", "false-negative", "confidence", "max-runs", "threshold", "match",
}

# Keys of the flaky search, refused next to ``threshold`` (see parse_metadata).
_NOT_FOR_PERF = ("flaky", "repeats", "false-positive", "false-negative", "confidence")


def parse_metadata(script: str, where: str = "oracle") -> OracleMeta:
    """Validate the inline metadata; every mistake gets a message naming the key and the fix."""
    data = _pep723_block(script, where)
    deps, rp = _project(data, where)
    t = _Tool(_tool_table(data, where), where)
    timeout = float(t.typed("timeout", (int, float), defaults.ORACLE_TIMEOUT_S))
    if not math.isfinite(timeout) or timeout <= 0:
        t.fail("timeout must be a positive, finite number of seconds")
    on_timeout = t.choice("on-timeout", "skip", ("skip", "bad", "good"),
                          'on-timeout must be "skip", "bad" or "good"')
    polarity = t.choice("polarity", "failure", ("failure", "success"),
                        'polarity must be "failure" (exit non-zero = regressed) or "success" '
                        '(exit 0 = regressed)')
    repeats = t.typed("repeats", int, 1)
    if repeats < 1:
        t.fail("repeats must be at least 1")
    env = t.typed("env", dict, {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        t.fail("env values must be strings")
    rates, confidence, max_runs = _noise(t)
    match = _match(t)
    threshold = _threshold(t, match)
    return OracleMeta(
        description=t.typed("description", str, "") or _docstring_line(script),
        dependencies=deps,
        requires_python=rp,
        timeout=timeout,
        on_timeout=TimeoutRule(on_timeout),
        polarity=Polarity(polarity),
        needs_gpu=t.typed("needs-gpu", bool, False),
        network=t.typed("network", bool, False),
        repeats=repeats,
        env=dict(env),
        flaky=t.typed("flaky", bool, False) or bool(rates),
        false_positive=rates.get("false-positive"),
        false_negative=rates.get("false-negative"),
        confidence=confidence,
        max_runs=max_runs,
        threshold=threshold,
        match=match,
    )


def _project(data: dict[str, Any], where: str) -> tuple[tuple[str, ...], str | None]:
    """PEP 723's own keys: ``dependencies`` (each one goes to uv as an argument: only a
    requirement, never an option) and ``requires-python``."""
    deps = data.get("dependencies", [])
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise OracleError(f"{where}: `dependencies` must be a list of requirement strings")
    for dep in deps:
        try:
            Requirement(dep)
        except InvalidRequirement:
            raise OracleError(f"{where}: dependency {dep!r} is not a requirement like "
                              f"\"numpy>=1.26\"") from None
    rp = data.get("requires-python")
    if rp is not None and not isinstance(rp, str):
        raise OracleError(f"{where}: `requires-python` must be a string like \">=3.10\"")
    return tuple(deps), rp


def _tool_table(data: dict[str, Any], where: str) -> dict[str, Any]:
    """``[tool.bisector]``, its keys all known."""
    tools = data.get("tool", {})
    if not isinstance(tools, dict):
        raise OracleError(f"{where}: `tool` must be a table (`[tool.bisector]`), not {tools!r}")
    tool = tools.get("bisector", {})
    if not isinstance(tool, dict):
        raise OracleError(f"{where}: `[tool.bisector]` must be a table")
    unknown = sorted(set(tool) - _KNOWN)
    if unknown:
        raise OracleError(f"{where}: unknown key(s) {', '.join(unknown)} in [tool.bisector]; "
                          f"known: {', '.join(sorted(_KNOWN))}")
    return tool


class _Tool:
    """``[tool.bisector]`` read key by key, each mistake one line naming the key."""

    def __init__(self, table: dict[str, Any], where: str) -> None:
        self.table, self.where = table, where

    def __contains__(self, key: str) -> bool:
        return key in self.table

    def fail(self, text: str) -> NoReturn:
        raise OracleError(f"{self.where}: [tool.bisector] {text}")

    def typed(self, key: str, kind: type | tuple[type, ...], default: Any) -> Any:
        v = self.table.get(key, default)
        if isinstance(v, bool) and kind in (int, float, (int, float)):
            self.fail(f"{key} must be a number, not {v!r}")
        if not isinstance(v, kind):
            self.fail(f"{key} has the wrong type ({v!r})")
        return v

    def choice(self, key: str, default: str, allowed: tuple[str, ...], wrong: str) -> str:
        v = self.typed(key, str, default)
        if v not in allowed:
            self.fail(wrong)
        return str(v)


def _noise(t: _Tool) -> tuple[dict[str, float], float, int | None]:
    """A flaky oracle's error rates, the posterior's confidence and the runs' cap."""
    rates = {}
    for key in ("false-positive", "false-negative"):
        if key in t:
            rate = float(t.typed(key, (int, float), 0.0))
            if not 0 <= rate < 0.5:
                t.fail(f"{key} must be a rate in [0, 0.5) (a wrong answer in 0.1 of runs is "
                       f"0.1); an oracle wrong half the time or more says nothing")
            rates[key] = rate
    confidence = float(t.typed("confidence", (int, float), defaults.NOISY_CONFIDENCE))
    if not 0.5 < confidence < 1:
        t.fail("confidence must be between 0.5 and 1 (exclusive), like 0.99")
    max_runs = t.table.get("max-runs")
    if max_runs is not None and (not isinstance(max_runs, int) or isinstance(max_runs, bool)
                                 or max_runs < 2):
        t.fail("max-runs must be a whole number of oracle runs, at least 2")
    return rates, confidence, max_runs


def _match(t: _Tool) -> str | None:
    """The failure that is the bug: a regular expression that compiles."""
    match = t.table.get("match")
    if match is None:
        return None
    if not isinstance(match, str):
        t.fail('match must be a regular expression string like "NameError: .*_Runner__"')
    try:
        compile_match(match)
    except ValueError as e:
        t.fail(f"match {match!r} is not a valid regular expression ({e})")
    return match


def _threshold(t: _Tool, match: str | None) -> float | None:
    """A performance oracle's threshold (``"5%"``), alone: error rates, a vote of repeats,
    a posterior's confidence and a signature do not apply to one judged by its samples."""
    if "threshold" not in t:
        return None
    raw = t.table["threshold"]
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        t.fail('threshold must be like "5%"')
    try:
        threshold = parse_threshold(raw)
    except ValueError as e:
        t.fail(str(e))
    # Each of these would make the oracle a flaky one too (or tune a search it does not get).
    clash = [k for k in _NOT_FOR_PERF if k in t and (k != "flaky" or t.table[k])
             and (k != "repeats" or t.table[k] != 1)]
    if match is not None:
        t.fail("threshold and match do not go together: a performance oracle is judged by "
               "its samples, not by the failure it prints; drop match")
    if clash:
        t.fail(f"threshold and {clash[0]} do not go together: a performance oracle is judged "
               f"by its samples, not by error rates or repeats; drop {clash[0]}")
    return threshold
