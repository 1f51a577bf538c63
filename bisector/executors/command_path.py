"""Which program a command oracle starts, checked before it starts.

``-- pytest ...`` finds ``pytest`` on the run's PATH: the probed environment's ``bin`` first,
then the user's PATH. When the environment has no ``pytest`` (no ``--dependency pytest``), the
one found next may be another environment's, whose ``#!`` line names that environment's
Python: every probe would then test that environment's packages, never the probed commit, with
a confident verdict each time (a developer's venv holding the newer release made the good
endpoint "already bad"). And a program found nowhere was an exit 255 of the reaper, a skip whose
cause only ``bisect show`` told. Both are refused here, as a skip (never a verdict on the commit)
whose one-line reason names the fix.

The lookup is the one the run makes: PATH as the run has it, a relative or empty entry taken
from the run's folder (the commit's tree), as ``execvp`` there takes it.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

HEAD_BYTES = 512  # a #! line and a /bin/sh launcher's second line fit
# uv's and pip's launcher for a Python path too long for ``#!``: ``#!/bin/sh`` and then
# ``'''exec' '/path/python' "$0" "$@"`` (uv), ``'''exec' /path/python ...`` or
# ``'''exec' "/path with spaces/python" ...`` (pip).
LAUNCHER = re.compile(rb"""^'''exec' (?:'([^']+)'|"([^"]+)"|(\S+))""")


def foreign_program(argv0: str, path: str, env_root: Path, cwd: Path) -> str:
    """Why ``argv0`` would not run as the probed environment's program (``env_root``: the
    folder holding its ``bin``), or ``""``. A program given by a path is checked where it
    is; one that is not there yet is left to the run (the tree may make it)."""
    path = run_path(path, cwd)
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
    head = _head(found)
    if head.startswith(b"#!") and head.partition(b"\n")[0].endswith(b"\r"):
        return (f"{argv0} ({found}) has a #! line ending in a carriage return (CRLF): the "
                f"system would look for an interpreter whose name ends in \\r; convert the file "
                f"to LF line endings")
    interp = _interpreter(head, path)
    if interp is None or "python" not in os.path.basename(interp) or \
            _inside(interp, env_root):
        return ""
    fix = (f"run it with the probed environment's python (python {argv0})" if os.sep in argv0
           else f"add --dependency with the package that provides it (e.g. --dependency "
                f"{argv0}), or run it through the probed environment's python (python -m ...)")
    return (f"{argv0} is {found}, a script of another Python ({interp}): it would test that "
            f"environment's packages, not the probed commit; {fix}")


def run_path(path: str, cwd: Path) -> str:
    """PATH with each relative or empty entry made absolute from ``cwd``, where the run
    starts: ``execvp`` takes them from there, ``shutil.which`` from this process's folder."""
    return os.pathsep.join(e if os.path.isabs(e) else str(cwd / e) if e else str(cwd)
                           for e in path.split(os.pathsep))


def _head(program: str) -> bytes:
    try:
        with open(program, "rb") as f:
            return f.read(HEAD_BYTES)
    except OSError:
        return b""


def _interpreter(head: bytes, path: str) -> str | None:
    """The interpreter a script's ``#!`` line starts (through ``env`` as PATH finds it, or a
    ``/bin/sh`` launcher's), or None for anything else (a binary, a shell script)."""
    if not head.startswith(b"#!"):
        return None
    first, _, rest = head.partition(b"\n")
    words = first[2:].decode(errors="replace").split()
    if not words:
        return None
    if os.path.basename(words[0]) == "sh" and (m := LAUNCHER.match(rest)):
        return next(g for g in m.groups() if g is not None).decode(errors="replace")
    if os.path.basename(words[0]) == "env":
        named, skip = None, False
        for w in words[1:]:
            if skip:
                skip = False
            elif w in ("-u", "--unset", "-C", "--chdir"):
                skip = True  # the option's argument follows
            elif not w.startswith("-") and "=" not in w:
                named = w
                break
        return shutil.which(named, path=path) if named else None
    return words[0]


def _inside(interp: str, root: Path) -> bool:
    """Whether ``interp`` is the environment's own (its ``bin/python`` is a link to the base
    interpreter, so the path as written counts, not where it leads)."""
    return Path(os.path.abspath(interp)).is_relative_to(root.absolute())
