"""The two oracles bisector runs at a culprit after the answer, in the culprit's environment:
``torch.utils.collect_env`` (the issue's versions block, made by the probed torch) and torch's
compiler bisector over the bisection's oracle (which backend, subsystem and pass is at fault).

Each is an :class:`~bisector.oracle.script.Oracle` like any other, so every executor runs it
where it runs probes, and its run is stored under its own key: the same environment is
described once, and the compiler bisector's answer for a commit and an oracle is found again
by every later bisection. Their scripts are in ``helpers/`` (standard library only: they run
in an environment bisector does not own); what they print is read back by :func:`read_env`
and :func:`read_compiler`, which keep only fields of the expected shapes.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

from bisector.base import defaults
from bisector.oracle.command import document
from bisector.oracle.script import Oracle

# What a helper's own files are called (the name is also its label in the progress lines).
COLLECT_ENV = "collect_env"
COMPILER_BISECT = "compiler_bisector"
_WORD = re.compile(r"[A-Za-z0-9_.]{1,80}")


def _script(name: str) -> str:
    return resources.files("bisector.oracle.helpers").joinpath(f"{name}.py").read_text()


def _pep723(deps: tuple[str, ...], timeout: float) -> str:
    """The metadata block of a helper: the probed oracle's dependencies (the same
    environment, so nothing is made again) and the helper's own timeout."""
    return "\n".join(["# /// script", f"# dependencies = {json.dumps(list(deps))}",
                      "# [tool.bisector]", f"# timeout = {float(timeout)!r}", "# ///", ""])


def _helper_meta(oracle: Oracle, timeout: float) -> Any:
    """The oracle's metadata for a helper in its environment: its dependencies and variables,
    the helper's timeout, nothing that would judge the helper's runs as the oracle's."""
    return replace(oracle.meta, timeout=timeout, threshold=None, match=None, flaky=False,
                   repeats=1, max_runs=None, description="")


def collect_env_oracle(oracle: Oracle) -> Oracle:
    """``collect_env`` in the environment ``oracle``'s probes ran in."""
    text = _pep723(oracle.meta.dependencies, defaults.COLLECT_ENV_TIMEOUT_S) + _script(
        "collect_env")
    return Oracle(COLLECT_ENV, Path(f"bisector_{COLLECT_ENV}.py"), text.encode(),
                  _helper_meta(oracle, defaults.COLLECT_ENV_TIMEOUT_S))


def compiler_bisect_oracle(oracle: Oracle) -> Oracle:
    """torch's compiler bisector over ``oracle``: a command oracle's argv runs in the
    commit's tree as the command would (the helper is then a command too); an oracle file
    travels inside the helper, which writes it out and runs it."""
    timeout = min(oracle.meta.timeout * defaults.COMPILER_BISECT_RUNS,
                  defaults.COMPILER_BISECT_MAX_S)
    argv = oracle.argv
    inner: dict[str, Any] = ({"argv": list(argv)} if argv is not None else
                             {"name": oracle.path.name, "python": oracle.python,
                              "file": base64.b64encode(oracle.content).decode()})
    inner["timeout"] = int(oracle.meta.timeout)  # each of its oracle runs
    body = (_pep723(oracle.meta.dependencies, timeout) + _script("compiler_bisect")
            + f"INNER = json.loads({json.dumps(json.dumps(inner, sort_keys=True))})\n\n"
            + "if __name__ == '__main__':\n    sys.exit(main())\n")
    meta = _helper_meta(oracle, timeout)
    if argv is None:
        return Oracle(COMPILER_BISECT, Path(f"bisector_{COMPILER_BISECT}.py"), body.encode(),
                      meta)
    # A command oracle runs in the commit's tree: the helper goes there as a command too.
    doc = document(("python", "-c", body), timeout=timeout,
                   dependencies=oracle.meta.dependencies)
    return Oracle(COMPILER_BISECT, Path("command"), doc.encode(), meta)


def read_env(result: Any) -> str | None:
    """The collect_env text a helper's run printed (capped), None when it printed none."""
    text = result.get("collect_env") if isinstance(result, dict) else None
    return text[:defaults.COLLECT_ENV_CHARS] if isinstance(text, str) and text.strip() else None


def _word(value: Any) -> str | None:
    return value if isinstance(value, str) and _WORD.fullmatch(value) else None


def _text(value: Any, cap: int) -> str | None:
    return value[:cap] if isinstance(value, str) and value else None


def read_compiler(result: Any) -> dict[str, Any]:
    """The compiler bisector's answer, only in its expected shapes: backend and subsystem as
    identifiers, numbers as numbers, the node's description and the log tail as capped text
    (they are shown escaped). Anything else is left out, and a run that printed no result
    says so."""
    raw = result.get("compiler_bisector") if isinstance(result, dict) else None
    if not isinstance(raw, dict):
        return {"error": "the compiler bisector's run printed no result"}
    out: dict[str, Any] = {"available": raw.get("available") is True}
    for key in ("torch",):
        if (v := _text(raw.get(key), 80)) is not None:
            out[key] = v
    for key in ("runs", "exit"):
        if isinstance(raw.get(key), int) and not isinstance(raw.get(key), bool):
            out[key] = raw[key]
    if isinstance(raw.get("seconds"), int | float):
        out["seconds"] = float(raw["seconds"])
    for key, cap in (("log_tail", 8000), ("error", 300), ("torch_error", 300)):
        if (v := _text(raw.get(key), cap)) is not None:
            out[key] = v
    found = raw.get("found")
    if isinstance(found, dict):
        out["found"] = _found(found)
    return out


def blamed(c: dict[str, Any]) -> str:
    """``inductor / lowerings / aten.argmin.default``: what a read result blames (the node's
    target, else its name, else the compiler bisector's own debug info)."""
    found = c.get("found") or {}
    node = found.get("node") or {}
    parts = [found.get("backend"), found.get("subsystem"),
             node.get("target") or node.get("node") or found.get("debug_info")]
    return " / ".join(str(p) for p in parts if p)


def _found(found: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("backend", "subsystem", "kind"):
        if (v := _word(found.get(key))) is not None:
            out[key] = v
    number = found.get("bisect_number")
    if isinstance(number, int) and not isinstance(number, bool) and number >= 0:
        out["bisect_number"] = number
    if (v := _text(found.get("debug_info"), 500)) is not None:
        out["debug_info"] = v
    if isinstance(found.get("check_exit"), int):
        out["check_exit"] = found["check_exit"]
    node = found.get("node")
    if isinstance(node, dict):
        out["node"] = {k: v for k in ("node", "target", "op")
                       if (v := _text(node.get(k), 500)) is not None}
    return out
