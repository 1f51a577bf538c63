"""New virtualenvs as copies of one uv made: a probe of a small project pays milliseconds for
its environment, not uv's start (a tenth of a second or more, on every overlay probe).

An empty virtualenv is the same for every environment of one interpreter: ``pyvenv.cfg``
(the interpreter's home and version), ``bin/python`` links to it, the activation scripts and
an empty ``site-packages``. So uv makes one per interpreter (and per ``--system-site-packages``),
kept under the cache's ``envs`` folder as a *skeleton*, and each new environment is a copy of
it with its own path written into the activation scripts, the one place a virtualenv names
itself. The skeleton is keyed by the interpreter's real path, size and modification time: a
Python upgraded in place gets a new skeleton, never a stale ``pyvenv.cfg``. ``bisect gc`` may
remove a skeleton like any environment; the next probe makes it again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bisector.artifacts.cache import scratch_dir
from bisector.base.paths import cache_dir
from bisector.executors.facts import collect_facts

READY = ".bisector-ready"  # the same marker as a finished environment's (executors/local.py)
INTERPRETER = "bisector-interpreter.json"  # the skeleton's facts


def skeleton_dir(python: str, system_site: bool) -> Path:
    found = python if os.sep in python else shutil.which(python)  # a name: as PATH has it
    if found is None:
        raise FileNotFoundError(f"no {python} on PATH")
    real = os.path.realpath(found)
    st = os.stat(real)
    ident = f"{real}|{st.st_size}|{st.st_mtime_ns}|{int(system_site)}"
    return cache_dir() / "envs" / f"skeleton-{hashlib.sha256(ident.encode()).hexdigest()[:16]}"


def new_venv(python: str, dest: Path, system_site: bool,
             make: Callable[[Path], None]) -> dict[str, Any]:
    """An empty virtualenv of ``python`` at ``dest`` (which must not exist): a copy of the
    skeleton, which ``make(path)`` (uv) makes first when there is none. Returns the
    interpreter's facts (Python, platform), asked once when the skeleton was made: the facts
    of an environment that holds neither the probed package nor torch."""
    skel = skeleton_dir(python, system_site)
    if not (skel / READY).exists():
        tmp = scratch_dir("skeleton-")
        try:
            make(tmp / "venv")
            facts = collect_facts(str(tmp / "venv" / "bin" / "python"), None, "")
            for k in ("env", "obtained"):  # the run's and the environment's, not these
                facts.pop(k, None)
            (tmp / "venv" / INTERPRETER).write_text(json.dumps(facts, sort_keys=True))
            (tmp / "venv" / READY).write_text("ok\n")
            skel.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(skel, ignore_errors=True)  # half made by a killed process
            try:
                (tmp / "venv").rename(skel)
            except OSError:  # another process made it first
                if not (skel / READY).exists():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    else:
        os.utime(skel / READY)  # used: ``bisect gc`` removes least recently used first
    shutil.copytree(skel, dest, symlinks=True)
    (dest / READY).unlink()
    known: dict[str, Any] = json.loads((dest / INTERPRETER).read_text())
    (dest / INTERPRETER).unlink()
    old, new = str(skel).encode(), str(dest).encode()
    for script in (dest / "bin").iterdir():
        if script.name.startswith(("activate", "deactivate")) and not script.is_symlink():
            text = script.read_bytes()
            if old in text:
                script.write_bytes(text.replace(old, new))
    return known
