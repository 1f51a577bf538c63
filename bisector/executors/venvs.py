"""New virtualenvs as copies of one uv made: a probe of a small project pays milliseconds for
its environment, not uv's start (a tenth of a second or more, on every overlay probe).

An empty virtualenv is the same for every environment of one interpreter: ``pyvenv.cfg``
(the interpreter's home and version), ``bin/python`` links to it, the activation scripts and
an empty ``site-packages``. So uv makes one per interpreter (and per ``--system-site-packages``),
kept under the cache's ``envs`` folder as a *skeleton*, and each new environment is a copy of
it with its own path written into the activation scripts and the ``#!`` lines of its scripts,
the places a virtualenv names itself. The skeleton is keyed by the interpreter's real path,
size and modification time (a Python upgraded in place gets a new skeleton, never a stale
``pyvenv.cfg``) and by the oracle's dependencies, installed into it once: a ``pytest`` oracle's
probes each used to pay a ``uv pip install pytest``. ``bisect gc`` may remove a skeleton like
any environment; the next probe makes it again.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from bisector.artifacts.cache import scratch_dir
from bisector.base.paths import cache_dir
from bisector.executors.bytecode import forget
from bisector.executors.facts import collect_facts
from bisector.infra import flock

READY = ".bisector-ready"  # the same marker as a finished environment's (executors/local.py)
INTERPRETER = "bisector-interpreter.json"  # the skeleton's facts
MADE_AT = "bisector-made-at"  # the folder uv made the skeleton in, named by its scripts
# Activation scripts for Windows shells, nushell and xonsh: each copy keeps bash's, fish's and
# csh's (a person may `source .../bin/activate` to look into a probe's environment).
WINDOWS_AND_RARE = ("activate.bat", "deactivate.bat", "pydoc.bat", "activate.ps1",
                    "activate.nu", "activate.xsh", "activate_this.py")


def skeleton_dir(python: str, system_site: bool, deps: tuple[str, ...] = ()) -> Path:
    found = python if os.sep in python else shutil.which(python)  # a name: as PATH has it
    if found is None:
        raise FileNotFoundError(f"no {python} on PATH")
    real = os.path.realpath(found)
    st = os.stat(real)
    ident = f"{real}|{st.st_size}|{st.st_mtime_ns}|{int(system_site)}|{sorted(deps)}"
    return cache_dir() / "envs" / f"skeleton-{hashlib.sha256(ident.encode()).hexdigest()[:16]}"


def new_venv(python: str, dest: Path, system_site: bool,
             make: Callable[[Path], None], deps: tuple[str, ...] = ()) -> dict[str, Any]:
    """A virtualenv of ``python`` at ``dest`` (which must not exist) holding the oracle's
    dependencies ``deps``: a copy of the skeleton, which ``make(path)`` (uv: the virtualenv,
    then ``deps`` installed into it) makes first when there is none. Returns the interpreter's
    facts (Python, platform), asked once when the skeleton was made: the facts of an
    environment that holds neither the probed package nor torch."""
    skel = skeleton_dir(python, system_site, deps)
    with _locked(skel, fcntl.LOCK_EX):  # one maker; nobody copies a half-made one
        if not (skel / READY).exists():
            _make(skel, make)
        else:
            os.utime(skel / READY)  # used: ``bisect gc`` removes least recently used first
    with _locked(skel, fcntl.LOCK_SH):  # copies at once; never while it is removed
        _copy(skel, dest)
    for name in (READY, MADE_AT):
        (dest / name).unlink()
    known: dict[str, Any] = json.loads((dest / INTERPRETER).read_text())
    (dest / INTERPRETER).unlink()
    return known


def _locked(skel: Path, how: int) -> AbstractContextManager[None]:
    """A lock on one skeleton, between the threads and processes of this cache: it is made
    by one, copied by many, removed by one (:func:`forget_skeletons`)."""
    return flock.held(cache_dir() / "in-use" / "skeletons" / f"{skel.name}.lock", how)


def _make(skel: Path, make: Callable[[Path], None]) -> None:
    tmp = scratch_dir("skeleton-")
    try:
        make(tmp / "venv")
        for name in WINDOWS_AND_RARE:  # never used on this host: not copied a hundred times
            (tmp / "venv" / "bin" / name).unlink(missing_ok=True)
        facts = collect_facts(str(tmp / "venv" / "bin" / "python"), None, "")
        for k in ("env", "obtained"):  # the run's and the environment's, not these
            facts.pop(k, None)
        (tmp / "venv" / INTERPRETER).write_text(json.dumps(facts, sort_keys=True))
        (tmp / "venv" / MADE_AT).write_text(str(tmp / "venv"))  # what its scripts name
        (tmp / "venv" / READY).write_text("ok\n")
        skel.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(skel, ignore_errors=True)  # half made by a killed process
        (tmp / "venv").rename(skel)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _copy(skel: Path, dest: Path) -> None:
    """``skel`` at ``dest``: the installed packages (``lib/``) as hard links, as uv links them
    from its cache (an environment whose files an oracle changed is discarded, skeletons with
    it: :func:`forget_skeletons`); everything else copied, and every file of ``bin/`` that names
    the skeleton (activation scripts, the ``#!`` line of ``pytest`` and other scripts) made to
    name ``dest``: a script left pointing at the skeleton's python would run without the probed
    package."""
    old = (skel / MADE_AT).read_bytes()

    def place(src: str, dst: str) -> None:
        if Path(src).relative_to(skel).parts[0] == "lib":
            try:
                os.link(src, dst)
                return
            except OSError:  # another file system, or links refused: a copy
                pass
        shutil.copy2(src, dst)

    shutil.copytree(skel, dest, symlinks=True, copy_function=place)
    retarget(dest, old.decode(), dest)


def retarget(venv: Path, made_at: str, final: Path) -> None:
    """Every file of ``venv/bin`` that names the folder the virtualenv was made in
    (``made_at``: activation scripts, the ``#!`` lines uv wrote into ``pytest`` and other
    scripts) made to name ``final``, where it will be used: an environment is made in a
    scratch folder and renamed into place, and a script left naming the scratch folder's
    python cannot start (``-- pytest ...`` skipped every probe that way). Files are
    rewritten, never edited in place: a hard-linked one stays intact wherever else it is."""
    old, new = made_at.encode(), str(final).encode()
    if old == new:
        return
    for script in (venv / "bin").iterdir():
        if script.is_file() and not script.is_symlink():
            text = script.read_bytes()
            if old in text:
                tmp = script.with_name(script.name + ".bisector-new")
                tmp.write_bytes(_short_shebang(text.replace(old, new)))
                shutil.copymode(script, tmp)
                tmp.replace(script)


SHEBANG_MAX = 127  # what older kernels read of a #! line (Linux before 5.1)
TRAMPOLINE = b"#!/bin/sh\n'''exec' '%s' \"$0\" \"$@\"\n' '''"


def _short_shebang(text: bytes) -> bytes:
    """A ``#!/path/python`` line too long for the kernel made uv's and pip's ``/bin/sh``
    trampoline (the final folder's path can be longer than the one uv wrote it for): sh
    runs line two, which Python reads as a string."""
    first, nl, rest = text.partition(b"\n")
    interp = first[2:].strip()
    if not first.startswith(b"#!") or len(first) <= SHEBANG_MAX or not interp or \
            any(c in interp for c in b" '\t"):
        return text
    return TRAMPOLINE % interp + nl + rest


def forget_skeletons() -> None:
    """Remove every skeleton: an environment that shared files with one was changed."""
    for skel in (cache_dir() / "envs").glob("skeleton-*"):
        with _locked(skel, fcntl.LOCK_EX):
            shutil.rmtree(skel, ignore_errors=True)
            forget(skel)
