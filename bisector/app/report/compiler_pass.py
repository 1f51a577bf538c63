"""What ran at the culprit after the answer (``run/at_culprit.py``), in the reports' words:
torch's compiler bisector (backend, subsystem, the pass or lowering at fault, and how to replay
it without bisector) and the culprit environment's own ``collect_env`` block.

The commands are made here from fields checked when they were read (identifiers and numbers,
``oracle/at_culprit.read_compiler``) and from the oracle as the report names it; the node's
description and the compiler bisector's log are the probed torch's words, shown escaped in
fenced blocks, never copied into a command.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from itertools import pairwise
from typing import Any

from bisector.app.report import paste
from bisector.base import oracle_env, redact
from bisector.base.errors import UsageError
from bisector.base.escape import code, fence, md
from bisector.oracle.at_culprit import blamed
from bisector.oracle.script import argv_of, foreign_interpreter

MODULE = "torch._inductor.compiler_bisector"


def found_of(d: dict[str, Any]) -> dict[str, Any] | None:
    """The compiler bisector's entry of a bisection's result, None when it did not run."""
    c = (d.get("result") or {}).get("compiler_bisector")
    return c if isinstance(c, dict) else None


def oracle_words(d: dict[str, Any], saved_as: str, scrub: paste.Scrub | None = None) -> str:
    """How the oracle runs by hand in the culprit's environment: its command, or its file
    saved as ``saved_as`` (run by python unless its ``#!`` names another interpreter). With
    ``scrub`` (a text for another machine), the command's words are pasteable: a path inside
    the clone relative to its root, where a command runs (app/report/paste.py)."""
    source = str((d.get("oracle") or {}).get("source") or "")
    argv = argv_of(source)
    if argv is not None:
        return shlex.join(argv) if scrub is None else paste.join(argv, scrub)
    return (f"python {shlex.quote(saved_as)}" if foreign_interpreter(source.encode()) is None
            else shlex.quote(saved_as))


def env_of(d: dict[str, Any]) -> dict[str, str]:
    """The oracle environment a bisection chose: its reproduce line's ``--env`` words (the
    variables a box's image describes itself with left out; a secret's value ``***``)."""
    try:
        words = shlex.split(str(d.get("reproduce") or ""))
        stop = words.index("--") if "--" in words else len(words)
        return oracle_env.parse(w for flag, w in pairwise(words[:stop]) if flag == "--env")
    except (ValueError, UsageError):  # no line of ours: no variables to repeat
        return {}


def replay(c: dict[str, Any], run: str, env: str = "") -> list[str]:
    """The commands that replay the compiler bisector's finding in the culprit's environment:
    its whole search, then the application at fault on (fails) and off (passes); ``env``: the
    oracle environment's assignments (:func:`bisector.app.report.paste.env`), before each."""
    lines = [f"{env}python -m {MODULE} run {run}"]
    found = c.get("found") or {}
    number = found.get("bisect_number")
    if (found.get("kind") == "bisect" and isinstance(number, int) and number >= 0
            and found.get("backend") and found.get("subsystem")):
        at = (f"TORCH_BISECT_BACKEND={found.get('backend')} "
              f"TORCH_BISECT_SUBSYSTEM={found.get('subsystem')}")
        lines += [f"{env}{at} TORCH_BISECT_MAX={number} {run}  # fails: application "
                  f"{number} on",
                  f"{env}{at} TORCH_BISECT_MAX={number - 1} {run}  # passes: it is off"]
    return lines


def summary(c: dict[str, Any]) -> str:
    """One sentence of what the compiler bisector found, or why nothing."""
    if c.get("error"):
        return f"it could not finish: {md(str(c['error']))}"
    if not c.get("available"):
        return (f"torch {md(str(c.get('torch', '?')))} at the culprit has no "
                f"`{MODULE}`; it was not run")
    found = c.get("found")
    if not found:
        return ("no backend or subsystem alone reproduces the failure (it printed "
                "\"no issue found\")")
    said = code(blamed(c))
    number = found.get("bisect_number")
    if found.get("kind") == "bisect" and number is not None:
        said += f", application {number} of the {md(str(found.get('subsystem')))}"
    elif found.get("kind") == "switch":
        said += " (a config switch: turning it fixes the failure)"
    node = (found.get("node") or {}).get("node")
    if node:
        said += f" (graph node {code(node)})"
    return said


def oracle_file(d: dict[str, Any], saved: str = "") -> str:
    """What the commands call the oracle file: as the issue says to save it (``./FILE``),
    else ``./NAME.py``."""
    return saved if saved.startswith("./") else \
        f"./{(d.get('oracle') or {}).get('name', 'oracle')}.py"


def markdown(d: dict[str, Any], scrub: Any = None, saved: str = "",
             env: Mapping[str, str] | None = None) -> list[str]:
    """The compiler pass section (empty when the compiler bisector did not run); the oracle
    file as :func:`oracle_file` calls it, the oracle environment ``env`` (else the one the
    bisection's reproduce line names) before each command. With ``scrub`` (the issue: text
    for another machine) every word is pasteable (app/report/paste.py)."""
    c = found_of(d)
    if c is None:
        return []
    words = scrub
    scrub = scrub or (lambda s: s)
    saved_as = oracle_file(d, saved)
    env_words = paste.env(env_of(d) if env is None else env, scrub)
    cost = ", ".join(x for x in (f"{c['runs']} oracle runs" if c.get("runs") else "",
                                 f"{c['seconds']:.1f} s" if c.get("seconds") else "",
                                 "stored from an earlier bisection" if c.get("reused") else "")
                     if x)
    lines = ["", f"The compiler pass at the culprit (`python -m {MODULE}` with the same "
                 f"oracle{'; ' + cost if cost else ''}): {summary(c)}."]
    if c.get("available") and not c.get("error"):
        lines += ["", "Replay it in the culprit's environment:", "",
                  *fence(scrub("\n".join(replay(c, oracle_words(d, saved_as, words),
                                                env_words))), "sh")]
    return lines


def environment_block(d: dict[str, Any], scrub: Any) -> str | None:
    """The culprit environment's own collect_env text, scrubbed, with how its torch was
    obtained (an overlay's nightly and commit) on the last line; None without one."""
    env = (d.get("result") or {}).get("environment_report")
    if not isinstance(env, dict) or not isinstance(env.get("text"), str):
        return None
    text = str(scrub(redact.text(env["text"].rstrip())))
    if env.get("obtained"):
        text += f"\n\nHow the culprit's torch was installed: {scrub(str(env['obtained']))}"
    return text
