"""Which Python runs the user's code when ``--python`` is not given.

The interpreter that matters is the one whose probed package (torch, or the profile's) is
installed here. bisector usually lives in its own virtualenv without torch, so that one is
skipped then, and ``python3`` on PATH, among several the one that has the package, is used; but
bisector installed into torch's own virtualenv is exactly the user's environment, so
``sys.executable`` comes first whenever it imports the package. Skipping it there ran a system
``python3`` without torch, and every probe said "bad: No module named 'torch'".

Whether a candidate imports the package is asked with ``-E`` (no ``PYTHONPATH``) and the
current folder taken off ``sys.path``: ``python -c`` puts it there, so inside a source checkout
the system ``python3`` "imports torch" from the checkout and then cannot in the scratch folder
the oracle runs in. It is asked in the current folder all the same, since a pyenv or asdf shim
picks its Python by that folder. ``check``, ``start``, ``plan`` and the watch all call
:func:`choose_python`, so they can never disagree, and the choice is always reported with its
reason: a verdict from the wrong interpreter answers the wrong question.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from bisector.base.errors import UsageError

NAMES = ("python3", "python")  # what a user types, in the order a user would try them
PROBE_TIMEOUT_S = 120.0  # importing torch cold from a network file system can take a while


@dataclass(frozen=True)
class Interpreter:
    """The chosen interpreter and one line saying which it is and why (printed as a note)."""

    path: str
    note: str


def choose_python(given: str | None, package: str | None) -> Interpreter:
    """``given`` (``--python``) as is; else bisector's own interpreter when it imports
    ``package``; else the first python3, then python, on PATH that imports it (bisector's own
    virtualenv left out: it lacks the package); else the first of them at all, said so.

    Each candidate is started once, and that one run says both whether it imports the
    package and which interpreter it is (a pyenv shim is about 50 bash processes a start;
    asking the two apart started the first shim twice at every ``start``)."""
    if given:
        path = _given(given)
        return Interpreter(path, f"Python: {path} (from --python)")
    if package is not None and imports(sys.executable, package):
        return Interpreter(sys.executable, f"Python: {sys.executable} (bisector's own, and it "
                           f"imports {package}; pass --python to choose another)")
    found = on_path()
    if not found:
        return Interpreter(sys.executable, f"Python: {sys.executable} (bisector's own: there is "
                           f"no python3 or python on PATH; pass --python to choose one)")
    if package is None:
        first = resolve(found[0])
        return Interpreter(first, f"Python: {first} (the first python3 on PATH; pass "
                           f"--python to choose another)")
    first = ""  # the first candidate as its run named it (a shim resolved)
    for cand in found:
        said = ask(cand, package)
        if said.imports:
            return Interpreter(said.path, f"Python: {said.path} (the first on PATH that "
                               f"imports {package}; bisector's own does not; pass --python "
                               f"to choose another)")
        first = first or said.path
    return Interpreter(first, f"Python: {first} (neither bisector's own Python nor any python3 "
                       f"or python on PATH imports {package}; pass --python of the environment "
                       f"that has it)")


def _given(python: str) -> str:
    """``--python`` as an absolute path: a bare name looked up on PATH now, a relative path
    taken from the folder it was typed in (probes run elsewhere: ``.venv/bin/python`` or
    ``python3`` there named nothing, and every probe was skipped)."""
    found = python if os.sep in python else shutil.which(python)
    if found is None or not os.path.exists(found):
        raise UsageError(f"--python {python}: no such interpreter"
                         f"{'' if os.sep in python else ' on PATH'}: give the path of a "
                         f"Python (e.g. --python /usr/bin/python3)")
    return _runs_python(python, resolve(os.path.abspath(found)))


def _runs_python(given: str, path: str) -> str:
    """``path`` once it is seen to run Python code (a shim resolved, a wrapper script run
    through): a non-Python binary or a broken shim is one line here, not a traceback from
    the first environment made with it."""
    try:
        r = subprocess.run([path, "-c", "import sys; print(sys.version_info[0])"],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL,
                           timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UsageError(f"--python {given}: cannot run it ({getattr(e, 'strerror', None) or e}"
                         f"): give the path of a Python 3 interpreter") from None
    if r.returncode != 0 or r.stdout.strip() != "3":
        said = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1][:160]
        raise UsageError(f"--python {given}: not a Python 3 interpreter ({said}): give the "
                         f"path of one, e.g. --python /usr/bin/python3")
    return path


def resolve(python: str) -> str:
    """The interpreter behind a pyenv or asdf shim (a shim picks its Python per folder at every
    call; the store must record the one that ran). Anything else stays itself: a user's wrapper
    script may set up the environment it execs into, and a venv's python is the venv."""
    return ask(python, None).path if _shim(python) else python


def on_path() -> list[str]:
    """Every python3, then every python, on PATH, in PATH order; bisector's own virtualenv's
    interpreter left out, and the same file reached through two spellings listed once."""
    own = _own_bin()
    seen: set[tuple[Path, str]] = set()
    found = []
    for name in NAMES:
        for entry in os.environ.get("PATH", "").split(os.pathsep):
            cand = Path(entry or ".") / name
            if not (cand.is_file() and os.access(cand, os.X_OK)):
                continue
            # The folder decides the environment (a venv's python3 links to the system's);
            # the file decides the interpreter (python and python3 are often one file).
            folder = cand.parent.resolve()
            key = (folder, os.path.realpath(cand))
            if folder == own or key in seen:
                continue
            seen.add(key)
            found.append(str(cand.absolute()))
    return found


@dataclass(frozen=True)
class Asked:
    """What one run of a candidate said: the interpreter to record (a shim resolved, anything
    else itself) and whether it imports the package asked about (False when none was)."""

    path: str
    imports: bool


def ask(python: str, package: str | None) -> Asked:
    """Run ``python -E`` once: it prints ``sys.executable``, then imports ``package``. It runs
    in the current folder, as the user's ``python3`` would (a pyenv or asdf shim picks its
    Python by the folder's ``.python-version``), with that folder taken off ``sys.path``:
    neither it (a source checkout's ``torch/``) nor ``PYTHONPATH`` counts, since the oracle
    runs elsewhere with them scrubbed. A broken or hung interpreter imports nothing; a shim
    stays as named unless its run said what it started."""
    code = ("import sys; sys.path[0] == '' and sys.path.pop(0); "
            "print(sys.executable, flush=True)")
    code += f"; import {package}" if package is not None else ""
    try:
        r = subprocess.run([python, "-E", "-c", code], capture_output=True,
                           stdin=subprocess.DEVNULL, timeout=PROBE_TIMEOUT_S, check=False)
        out, imported = r.stdout, package is not None and r.returncode == 0
    except subprocess.TimeoutExpired as e:  # torch cold from a slow disk: what it printed
        out, imported = e.stdout or b"", False
    except OSError:
        out, imported = b"", False
    said = (out.decode(errors="replace").splitlines() or [""])[0].strip()
    path = said if _shim(python) and said and Path(said).is_file() else python
    return Asked(path, imported)


def _shim(python: str) -> bool:
    return Path(python).parent.name == "shims"


def imports(python: str, package: str) -> bool:
    """Whether ``python`` imports ``package``, the current folder not counting (see
    :func:`ask`)."""
    return ask(python, package).imports


def _own_bin() -> Path | None:
    """The scripts folder of the virtualenv bisector runs from; None outside a virtualenv."""
    if sys.prefix == sys.base_prefix:
        return None
    return (Path(sys.prefix) / "bin").resolve()
