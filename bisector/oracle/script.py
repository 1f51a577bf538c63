"""Oracles: scripts that answer "is this commit good?" by their exit code.

An oracle's identity is the sha256 of its bytes, so editing an oracle can never reuse verdicts
of the old version. Metadata rides along as PEP 723 inline script metadata: ``dependencies``
for its environment plus a ``[tool.bisector]`` table for what bisector needs to know.

An oracle file runs with the probed environment's ``python``, unless its first line is a ``#!``
naming another interpreter (``#!/bin/bash``): then it runs as that line says, the environment's
``bin`` first on PATH. A command oracle (``bisect start ... -- CMD``) is stored as a small
document (:mod:`bisector.oracle.command`) and hashed like a file. A signature (``match``: the
failure that is the bug, :mod:`bisector.core.signature`) joins the identity with the polarity
it judges under (:attr:`Oracle.judging`).

Names given with ``--oracle NAME`` resolve only inside the oracles directories (a name can never
climb out of one): ``$BISECTOR_ORACLES_DIR`` first, where a team keeps its own, then the bundled
ones. Anything that looks like a path (``./x.py``, ``/abs/x.py``) is taken as is.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from bisector.base import defaults
from bisector.base.errors import OracleError
from bisector.core.perf import parse_threshold
from bisector.core.signature import compile_match
from bisector.core.verdict import Polarity, TimeoutRule
from bisector.oracle.names import bundled_oracles_dir as bundled_oracles_dir
from bisector.oracle.names import oracle_dirs as oracle_dirs
from bisector.oracle.names import team_oracles_dir as team_oracles_dir

NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
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


@dataclass(frozen=True)
class Oracle:
    name: str
    path: Path
    content: bytes
    meta: OracleMeta
    # What judges its runs besides its bytes: ("match", regex) and ("bug", polarity) when a
    # signature is in force (from its metadata or --match). Empty for a plain oracle.
    judging: tuple[tuple[str, str], ...] = ()

    @property
    def content_sha256(self) -> str:
        return hashlib.sha256(self.content).hexdigest()

    @property
    def sha256(self) -> str:
        """The identity verdicts are keyed by: the bytes' hash, or for an oracle judged by a
        signature, a hash of the bytes' hash, the signature and its polarity, so verdicts
        judged without it (or under the other polarity) are never reused as if with it."""
        if not self.judging:
            return self.content_sha256
        blob = json.dumps([self.content_sha256, [list(j) for j in self.judging]])
        return hashlib.sha256(b"bisector-judging\0" + blob.encode()).hexdigest()

    @property
    def match(self) -> str | None:
        """The signature in force (``--match`` or the metadata's), once bound to a polarity."""
        return dict(self.judging).get("match")

    @property
    def python(self) -> bool:
        """Run by the environment's python (no ``#!``, or one naming Python)."""
        return foreign_interpreter(self.content) is None

    @property
    def ident(self) -> str:
        return f"{self.name}@{self.sha256[:12]}"


def foreign_interpreter(content: bytes) -> str | None:
    """The ``#!`` line of a script that is not Python (``#!/bin/bash``), else None.

    A Python shebang (``#!/usr/bin/env python3``, ``#!/usr/bin/python``) still runs with the
    probed environment's python: that is the interpreter an oracle is meant to test, whatever
    the path on its first line says."""
    if not content.startswith(b"#!"):
        return None
    line = content.split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    words = [w for w in line[2:].split() if not w.startswith("-")]
    if words and os.path.basename(words[0]) == "env":
        words = words[1:]
    name = os.path.basename(words[0]) if words else ""
    return None if re.fullmatch(r"python[0-9.]*", name) else line


def resolve_oracle(spec: str, oracles_dir: Path | None = None) -> Path:
    # A path is explicit (./x.py, ../x.py, /abs/x.py, ~/x.py, or any *.py); anything else is a
    # name, and a name never leaves the oracles directory.
    if spec.startswith(("./", "../", "/", "~")) or spec.endswith(".py"):
        p = Path(spec).expanduser()
        if not p.is_file():
            raise OracleError(f"oracle file {spec} does not exist: check the path")
        return p.resolve()
    if not NAME_RE.match(spec) or ".." in spec:
        raise OracleError(
            f"oracle name {spec!r} is not a plain name: use a name from `bisect oracles` "
            f"or a path like ./my_oracle.py"
        )
    bases = [d.resolve() for d in oracle_dirs(oracles_dir)]
    for base in bases:
        for cand in (base / f"{spec}.py", base / spec):
            resolved = cand.resolve()
            if resolved.is_file() and resolved.parent == base:
                return resolved
    raise OracleError(
        f"no oracle named {spec!r} in {' or '.join(map(str, bases))}: run `bisect oracles` to "
        f"list them, or pass a path like ./my_oracle.py"
    )


def load_oracle(spec: str, oracles_dir: Path | None = None) -> Oracle:
    path = resolve_oracle(spec, oracles_dir)
    content = path.read_bytes()
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as e:
        # Stored as text, a lossy decode would run other bytes than the ones hashed.
        raise OracleError(f"{path} is not UTF-8 text (byte {e.start}): save it as UTF-8"
                          ) from None
    try:
        if foreign_interpreter(content) is None:  # a bash oracle is not Python
            compile(content, str(path), "exec", dont_inherit=True)
    except SyntaxError as e:
        raise OracleError(f"{path}:{e.lineno}: the oracle does not compile ({e.msg}): fix it "
                          f"and try `bisect check --oracle {path}`") from None
    meta = parse_metadata(text, str(path))
    return Oracle(name=path.stem, path=path, content=content, meta=meta)


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
    deps = data.get("dependencies", [])
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise OracleError(f"{where}: `dependencies` must be a list of requirement strings")
    for dep in deps:  # each goes to uv as an argument: only a requirement, never an option
        try:
            Requirement(dep)
        except InvalidRequirement:
            raise OracleError(f"{where}: dependency {dep!r} is not a requirement like "
                              f"\"numpy>=1.26\"") from None
    rp = data.get("requires-python")
    if rp is not None and not isinstance(rp, str):
        raise OracleError(f"{where}: `requires-python` must be a string like \">=3.10\"")
    tools = data.get("tool", {})
    if not isinstance(tools, dict):
        raise OracleError(f"{where}: `tool` must be a table (`[tool.bisector]`), not {tools!r}")
    tool = tools.get("bisector", {})
    if not isinstance(tool, dict):
        raise OracleError(f"{where}: `[tool.bisector]` must be a table")
    unknown = sorted(set(tool) - _KNOWN)
    if unknown:
        raise OracleError(
            f"{where}: unknown key(s) {', '.join(unknown)} in [tool.bisector]; "
            f"known: {', '.join(sorted(_KNOWN))}"
        )

    def typed(key: str, kind: type | tuple[type, ...], default: Any) -> Any:
        v = tool.get(key, default)
        if isinstance(v, bool) and kind in (int, float, (int, float)):
            raise OracleError(f"{where}: [tool.bisector] {key} must be a number, not {v!r}")
        if not isinstance(v, kind):
            raise OracleError(f"{where}: [tool.bisector] {key} has the wrong type ({v!r})")
        return v

    timeout = float(typed("timeout", (int, float), defaults.ORACLE_TIMEOUT_S))
    if not math.isfinite(timeout) or timeout <= 0:
        raise OracleError(f"{where}: [tool.bisector] timeout must be a positive, finite number "
                          f"of seconds")
    on_timeout = typed("on-timeout", str, "skip")
    if on_timeout not in ("skip", "bad", "good"):
        raise OracleError(
            f"{where}: [tool.bisector] on-timeout must be \"skip\", \"bad\" or \"good\""
        )
    pol = typed("polarity", str, "failure")
    if pol not in ("failure", "success"):
        raise OracleError(
            f"{where}: [tool.bisector] polarity must be \"failure\" (exit non-zero = regressed) "
            f"or \"success\" (exit 0 = regressed)"
        )
    repeats = typed("repeats", int, 1)
    if repeats < 1:
        raise OracleError(f"{where}: [tool.bisector] repeats must be at least 1")
    env = typed("env", dict, {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise OracleError(f"{where}: [tool.bisector] env values must be strings")
    polarity = Polarity(pol)
    rates = {}
    for key in ("false-positive", "false-negative"):
        if key in tool:
            rate = float(typed(key, (int, float), 0.0))
            if not 0 <= rate < 0.5:
                raise OracleError(f"{where}: [tool.bisector] {key} must be a rate in [0, 0.5) "
                                  f"(a wrong answer in 0.1 of runs is 0.1); an oracle wrong "
                                  f"half the time or more says nothing")
            rates[key] = rate
    confidence = float(typed("confidence", (int, float), defaults.NOISY_CONFIDENCE))
    if not 0.5 < confidence < 1:
        raise OracleError(f"{where}: [tool.bisector] confidence must be between 0.5 and 1 "
                          f"(exclusive), like 0.99")
    max_runs = tool.get("max-runs")
    if max_runs is not None and (not isinstance(max_runs, int) or isinstance(max_runs, bool)
                                 or max_runs < 2):
        raise OracleError(f"{where}: [tool.bisector] max-runs must be a whole number of oracle "
                          f"runs, at least 2")
    match = tool.get("match")
    if match is not None:

        if not isinstance(match, str):
            raise OracleError(f"{where}: [tool.bisector] match must be a regular expression "
                              f"string like \"NameError: .*_Runner__\"")
        try:
            compile_match(match)
        except ValueError as e:
            raise OracleError(f"{where}: [tool.bisector] match {match!r} is not a valid "
                              f"regular expression ({e})") from None
    threshold = None
    if "threshold" in tool:

        raw = tool["threshold"]
        if isinstance(raw, bool) or not isinstance(raw, str | int | float):
            raise OracleError(f"{where}: [tool.bisector] threshold must be like \"5%\"")
        try:
            threshold = parse_threshold(raw)
        except ValueError as e:
            raise OracleError(f"{where}: [tool.bisector] {e}") from None
        # Each of these would make the oracle a flaky one too (or tune a search it does not
        # get): a performance oracle is judged by its samples, where error rates, a vote of
        # repeats and a posterior's confidence do not apply.
        clash = [k for k in _NOT_FOR_PERF if k in tool and (k != "flaky" or tool[k])
                 and (k != "repeats" or tool[k] != 1)]
        if match is not None:
            raise OracleError(f"{where}: [tool.bisector] threshold and match do not go "
                              f"together: a performance oracle is judged by its samples, not "
                              f"by the failure it prints; drop match")
        if clash:
            raise OracleError(f"{where}: [tool.bisector] threshold and {clash[0]} do not go "
                              f"together: a performance oracle is judged by its samples, not "
                              f"by error rates or repeats; drop {clash[0]}")
    return OracleMeta(
        description=typed("description", str, "") or _docstring_line(script),
        dependencies=tuple(deps),
        requires_python=rp,
        timeout=timeout,
        on_timeout=TimeoutRule(on_timeout),
        polarity=polarity,
        needs_gpu=typed("needs-gpu", bool, False),
        network=typed("network", bool, False),
        repeats=repeats,
        env=dict(env),
        flaky=typed("flaky", bool, False) or bool(rates),
        false_positive=rates.get("false-positive"),
        false_negative=rates.get("false-negative"),
        confidence=confidence,
        max_runs=max_runs,
        threshold=threshold,
        match=match,
    )


def list_oracles(oracles_dir: Path | None = None) -> list[Oracle]:
    """Every oracle a name can reach, in lookup order; one that a team's oracle of the same
    name shadows is left out (``--oracle NAME`` would never run it)."""
    out: list[Oracle] = []
    for base in oracle_dirs(oracles_dir):
        names = {o.name for o in out}
        for p in sorted(base.glob("*.py")):
            if p.name.startswith("_") or not p.is_file() or p.stem in names:
                continue
            out.append(load_oracle(str(p.resolve()), base))
    return out
