"""Which program a command oracle starts, checked before it starts.

``-- pytest ...`` finds ``pytest`` on the run's PATH: the probed environment's ``bin`` first,
then the user's PATH. When the environment has no ``pytest`` (no ``--dependency pytest``), the
one found next may be another environment's, whose ``#!`` line names that environment's
Python: every probe would then test that environment's packages, never the probed commit, with
a confident verdict each time (a developer's venv holding the newer release made the good
endpoint "already bad"). And a program found nowhere was an exit 255 of the reaper, a skip whose
cause only ``bisect show`` told. Both are refused here, as a skip (never a verdict on the commit)
whose one-line reason names the fix.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

HEAD_BYTES = 512  # a #! line and uv's /bin/sh trampoline fit
# uv and pip write ``#!/bin/sh`` and this second line for a Python path too long for ``#!``.
TRAMPOLINE = re.compile(rb"^'''exec' '([^']+)'")


def foreign_program(argv0: str, path: str, env_root: Path, cwd: Path) -> str:
    """Why ``argv0`` would not run as the probed environment's program (``env_root``: the
    folder holding its ``bin``), or ``""``. A program given by a path is checked where it
    is; one that is not there yet is left to the run (the tree may make it)."""
    if os.sep in argv0:
        found = argv0 if os.path.isabs(argv0) else str(cwd / argv0)
        if not os.path.isfile(found):
            return ""
    else:
        looked = shutil.which(argv0, path=path)
        if looked is None:
            return (f"cannot run {argv0}: no such program in the probed environment or on PATH "
                    f"(if a Python package provides it, add --dependency with that package, "
                    f"e.g. --dependency {argv0})")
        found = looked
    interp = _interpreter(found, path)
    if interp is None or "python" not in os.path.basename(interp) or \
            _inside(interp, env_root):
        return ""
    return (f"{argv0} is {found}, a script of another Python ({interp}): it would test that "
            f"environment's packages, not the probed commit; add --dependency with the "
            f"package that provides it (e.g. --dependency {os.path.basename(argv0)}), or run "
            f"it through the probed environment's python (python -m ...)")


def _interpreter(program: str, path: str) -> str | None:
    """The interpreter a script's ``#!`` line starts (through ``env`` as PATH finds it, or
    uv's ``/bin/sh`` trampoline), or None for anything else (a binary, a shell script)."""
    try:
        with open(program, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    first, _, rest = head.partition(b"\n")
    words = first[2:].decode(errors="replace").split()
    if not words:
        return None
    if os.path.basename(words[0]) == "sh" and (m := TRAMPOLINE.match(rest)):
        return m.group(1).decode(errors="replace")
    if os.path.basename(words[0]) == "env":
        named = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        return shutil.which(named[0], path=path) if named else None
    return words[0]


def _inside(interp: str, root: Path) -> bool:
    """Whether ``interp`` is the environment's own (its ``bin/python`` is a link to the base
    interpreter, so the path as written counts, not where it leads)."""
    return os.path.abspath(interp).startswith(str(root.absolute()) + os.sep)
