"""Oracles: scripts that answer "is this commit good?" by their exit code.

An oracle's identity is the sha256 of its bytes, so editing an oracle can never reuse verdicts
of the old version. Metadata rides along as PEP 723 inline script metadata: ``dependencies``
for its environment plus a ``[tool.bisector]`` table for what bisector needs to know.

Names given with ``--oracle NAME`` resolve only inside the oracles directory (a name can never
climb out of it); anything that looks like a path (``./x.py``, ``/abs/x.py``) is taken as is.
"""

from __future__ import annotations

import ast
import enum
import hashlib
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bisector.errors import OracleError
from bisector.search import Verdict

NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
PEP723_RE = re.compile(
    r"(?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$"
)


class Polarity(enum.Enum):
    """Which exit status marks the *new* behaviour being searched for.

    ``failure``: the usual regression hunt, the first commit where the oracle fails.
    ``success``: the first commit where the oracle succeeds; this is a find-fix search, or a
    seed-style repro script that exits 0 when the bug reproduces (``--regress success``).
    """

    FAILURE = "failure"
    SUCCESS = "success"


class Outcome(enum.Enum):
    """What the oracle process did, before polarity gives it a meaning."""

    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"


def to_verdict(outcome: Outcome, polarity: Polarity) -> Verdict:
    if outcome is Outcome.SKIP:
        return Verdict.SKIP
    regressed = (outcome is Outcome.FAIL) == (polarity is Polarity.FAILURE)
    return Verdict.BAD if regressed else Verdict.GOOD


@dataclass(frozen=True)
class OracleMeta:
    description: str = ""
    dependencies: tuple[str, ...] = ()
    requires_python: str | None = None
    timeout: float = 600.0
    on_timeout: Outcome = Outcome.SKIP
    polarity: Polarity = Polarity.FAILURE
    needs_gpu: bool = False
    network: bool = False
    repeats: int = 1
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Oracle:
    name: str
    path: Path
    content: bytes
    meta: OracleMeta

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.content).hexdigest()

    @property
    def ident(self) -> str:
        return f"{self.name}@{self.sha256[:12]}"


def default_oracles_dir() -> Path:
    """The repository's ``oracles/`` in a checkout, or the copy packaged into the wheel."""
    env = os.environ.get("BISECTOR_ORACLES_DIR")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent
    for cand in (here.parent / "oracles", here / "_oracles"):
        if cand.is_dir():
            return cand
    return here.parent / "oracles"


def resolve_oracle(spec: str, oracles_dir: Path | None = None) -> Path:
    base = (oracles_dir or default_oracles_dir()).resolve()
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
    for cand in (base / f"{spec}.py", base / spec):
        resolved = cand.resolve()
        if resolved.is_file() and resolved.parent == base:
            return resolved
    raise OracleError(
        f"no oracle named {spec!r} in {base}: run `bisect oracles` to list them, "
        f"or pass a path like ./my_oracle.py"
    )


def load_oracle(spec: str, oracles_dir: Path | None = None) -> Oracle:
    path = resolve_oracle(spec, oracles_dir)
    content = path.read_bytes()
    meta = parse_metadata(content.decode("utf-8", errors="replace"), str(path))
    return Oracle(name=path.stem, path=path, content=content, meta=meta)


def _pep723_block(script: str, where: str) -> dict[str, Any]:
    blocks = [m for m in PEP723_RE.finditer(script) if m.group("type") == "script"]
    if not blocks:
        return {}
    if len(re.findall(r"(?m)^# /// script$", script)) > 1:
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
}


def parse_metadata(script: str, where: str = "oracle") -> OracleMeta:
    """Validate the inline metadata; every mistake gets a message naming the key and the fix."""
    data = _pep723_block(script, where)
    deps = data.get("dependencies", [])
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise OracleError(f"{where}: `dependencies` must be a list of requirement strings")
    rp = data.get("requires-python")
    if rp is not None and not isinstance(rp, str):
        raise OracleError(f"{where}: `requires-python` must be a string like \">=3.10\"")
    tool = data.get("tool", {}).get("bisector", {})
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

    timeout = float(typed("timeout", (int, float), 600))
    if timeout <= 0:
        raise OracleError(f"{where}: [tool.bisector] timeout must be positive seconds")
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
    # on-timeout speaks in verdict terms; store it as the outcome that gives that verdict.
    timeout_outcome = {
        "skip": Outcome.SKIP,
        "bad": Outcome.FAIL if polarity is Polarity.FAILURE else Outcome.PASS,
        "good": Outcome.PASS if polarity is Polarity.FAILURE else Outcome.FAIL,
    }[on_timeout]
    return OracleMeta(
        description=typed("description", str, "") or _docstring_line(script),
        dependencies=tuple(deps),
        requires_python=rp,
        timeout=timeout,
        on_timeout=timeout_outcome,
        polarity=polarity,
        needs_gpu=typed("needs-gpu", bool, False),
        network=typed("network", bool, False),
        repeats=repeats,
        env=dict(env),
    )


def list_oracles(oracles_dir: Path | None = None) -> list[Oracle]:
    base = oracles_dir or default_oracles_dir()
    out = []
    for p in sorted(base.glob("*.py")):
        if p.name.startswith("_"):
            continue
        out.append(load_oracle(str(p.resolve()), base))
    return out
