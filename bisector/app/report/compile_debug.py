"""How to look inside a torch.compile failure at the culprit: logs, a minified repro, a trace.

A bisection that ends on a compile failure names the commit, but the next question is *what*
dynamo or inductor did there. PyTorch answers it through variables (``TORCH_LOGS``, the
minifier's ``TORCHDYNAMO_REPRO_AFTER``/``TORCHDYNAMO_REPRO_LEVEL``, ``TORCH_TRACE`` for
``tlparse``), and ``bisect check --commit SHA --env NAME=VALUE`` runs the same oracle once in
the culprit's environment with them set. :func:`hints` decides whether a bisection was such a
failure (the PyTorch profile, and the failing output names dynamo, inductor or Triton, or the
oracle calls ``torch.compile``) and writes the exact lines; the Markdown, issue and HTML
reports and ``show --json`` (under ``compile_debug``) print them.

Only the request's own fields and the culprit's sha go into the lines: nothing the oracle
printed does (it is read to decide, never copied).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from typing import Any

from bisector.base import oracle_env, redact
from bisector.base.escape import fence
from bisector.core import compile_failure
from bisector.run.config import Request, flag

LOGS = "+dynamo,recompiles,graph_breaks,output_code"
# The options of `bisect check` a bisection's request shares (cli/options.py CHECK_OPTIONS).
_SHARED = ("profile", "python", "regress", "match", "timeout")


def _failing_text(d: dict[str, Any]) -> str:
    """The output tails of the culprit's runs and of the other bad probes."""
    sha = (d.get("culprit") or {}).get("sha")
    bad = [p for p in d.get("probes") or [] if p.get("verdict") == "bad"]
    bad.sort(key=lambda p: p.get("sha") != sha)
    return "\n".join(str(p.get("output_tail") or "") for p in bad)


def is_compile_failure(d: dict[str, Any]) -> bool:
    """A PyTorch bisection with a culprit whose failing output names dynamo, inductor or
    Triton, or whose oracle calls torch.compile."""
    if (d.get("project") or {}).get("package", "torch") != "torch" or not d.get("culprit"):
        return False
    return compile_failure.is_compile_failure(
        _failing_text(d), str((d.get("oracle") or {}).get("source") or ""))


def check_line(req: Request, commit: str, env: dict[str, str],
               word: Callable[[str], str] | None = None) -> str:
    """``bisect check --commit COMMIT`` with the bisection's oracle, how it judges, its
    oracle environment and ``env`` on top. Values holding ``$PWD`` are left for the shell
    to expand (in double quotes); every other word is quoted, by ``word`` when given (the
    issue's: this machine's paths made pasteable, app/report/paste.py). Secrets show as ``***``."""
    parts = ["bisect", "check", "--commit", commit, "--repo", str(req.repo)]
    if req.oracle:
        parts += ["--oracle", req.oracle]
    for name in _SHARED:
        value = getattr(req, name)
        if value is not None:
            parts += [flag(name), str(value.value if hasattr(value, "value") else value)]
    for dep in req.dependency:
        parts += ["--dependency", dep]
    words = ([redact.text(shlex.join(parts))] if word is None
             else [" ".join(word(redact.text(p)) for p in parts)])
    quote = word or shlex.quote
    given = {**oracle_env.parse(req.typed_env), **env}
    for name, value in sorted(given.items()):
        pair = oracle_env.word(f"{name}={value}")
        words.append("--env " + (f'{name}="{value}"' if value.startswith("$PWD/")
                                 and re.fullmatch(r"\$PWD/[\w.-]+", value)
                                 else quote(redact.text(pair))))
    if req.command:
        words.append("-- " + (redact.text(shlex.join(req.command)) if word is None else
                              " ".join(word(redact.text(w)) for w in req.command)))
    return " ".join(words)


def hints(d: dict[str, Any], req: Request,
          word: Callable[[str], str] | None = None) -> dict[str, Any] | None:
    """The commands that show what the compiler did at the culprit, or None when this was
    not a compile failure; ``word`` quotes their words (:func:`check_line`)."""
    if not is_compile_failure(d):
        return None
    sha = str(d["culprit"]["sha"])
    short = sha[:12]
    after = "aot" if compile_failure.after_aot(_failing_text(d)) else "dynamo"
    debug, trace = f"$PWD/compile-debug-{short}", f"$PWD/trace-{short}"
    return {
        "after": after,
        "steps": [
            {"what": f"Compiler logs (TORCH_LOGS={LOGS}: dynamo's debug log, recompiles, "
                     f"graph breaks, the generated code)",
             "command": check_line(req, sha, {"TORCH_LOGS": LOGS}, word)},
            {"what": f"A minified repro (the minifier after {after}; it writes "
                     f"minifier_launcher.py under compile-debug-{short}/, run it with python "
                     f"to shrink the graph, then repro.py reproduces alone)",
             "command": check_line(req, sha, {"TORCHDYNAMO_REPRO_AFTER": after,
                                              "TORCHDYNAMO_REPRO_LEVEL": "4",
                                              "TORCH_COMPILE_DEBUG_DIR": debug}, word)},
            {"what": "A structured trace for tlparse (pip install tlparse; it writes an HTML "
                     "report of every graph, guard and recompile)",
             "command": check_line(req, sha, {"TORCH_TRACE": trace}, word),
             "then": f'tlparse "{trace}"'},
        ],
    }


def markdown(h: dict[str, Any] | None, scrub: Any = None) -> list[str]:
    """The hints as Markdown lines (empty without hints); ``scrub`` rewrites local paths."""
    if not h:
        return []
    lines = ["", "Debugging the compile failure at the culprit (each command runs the oracle "
             "once there with `bisect check`):"]
    for step in h["steps"]:
        text = "\n".join(x for x in (step["command"], step.get("then")) if x)
        text = scrub(text) if scrub else text
        lines += ["", f"- {step['what']}:", *fence(text, "sh")]
    return lines
