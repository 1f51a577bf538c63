"""The command line that repeats a bisection, derived from its :class:`Request` field by field:
an option cannot be forgotten here without a test noticing.
"""

from __future__ import annotations

import shlex
from dataclasses import fields

from bisector.base import oracle_env, redact
from bisector.run.request import Request

# Options that change how fast a run goes, never what it finds: left out of the reproduce line.
SPEED_ONLY = frozenset({"jobs", "build_jobs", "max_jobs", "reconfirm", "prefetch",
                        "compiler_bisect"})
# NAME=VALUE options: a secret-named variable's value is shown as *** in the reproduce line.
ENV_FIELDS = frozenset({"env", "build_env"})
# Fields filled from what was found (``prepare``; the watch's series), never an option: not on
# the reproduce line.
RECORDED = frozenset({"inherited", "bad_shown"})


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def reproduce_command(req: Request) -> str:
    """A command line that repeats this bisection: every option that can change the result.

    Walks the request's fields, so a new option appears here without anyone remembering to
    add it. ``prepare`` stores the request with the absolute repository and the oracle's
    name (bundled) or absolute path, so the line works from any directory. The line is for
    reading and pasting, never run by bisector: every word is redacted (an index URL's
    ``user:token@`` and ``?token=``, ``--build-env HF_TOKEN=...``), the store keeps the raw
    request.
    """
    parts = ["bisect", "start", "--repo", str(req.repo), "--good", req.good, "--bad", req.bad]
    # Manual bisections were stored naming their oracle "manual": never a flag to repeat.
    if req.oracle and not (req.manual and req.oracle == "manual"):
        parts += ["--oracle", req.oracle]
    for f in fields(Request):
        if f.name in {"good", "bad", "oracle", "repo", "command"} | SPEED_ONLY | RECORDED:
            continue
        value, default = getattr(req, f.name), f.default
        if f.name == "env":  # what --env gave; the inherited rest is no flag to type
            value = req.typed_env
        if value == default:
            continue
        if isinstance(value, bool):
            parts.append(flag(f.name) if value else f"--no-{f.name.replace('_', '-')}")
        elif isinstance(value, tuple):
            for item in value:  # a secret variable's value never shows (--env HF_TOKEN=***)
                parts += [flag(f.name), oracle_env.word(item) if f.name in ENV_FIELDS
                          else str(item)]
        else:
            parts += [flag(f.name), str(value)]
    if req.command:  # last, after --: its words are never read as bisect's options
        parts += ["--", *req.command]
    return shlex.join(redact.text(p) for p in parts)
