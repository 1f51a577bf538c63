"""Where probe runs keep their bytecode: one ``PYTHONPYCACHEPREFIX`` in the cache, kept.

Every Python a probe starts writes and reads bytecode under this one folder, never in the
``__pycache__`` folders beside the sources: a ``.pyc`` written into an environment's
site-packages (by an oracle that runs ``compileall``, say) is never read, and the environment's
files stay as their manifest says. The folder mirrors each source's absolute path, and
Python checks every ``.pyc`` against its source's size and modification time, so what is
kept is only ever used for the file it was compiled from:

- the interpreter's standard library and an installed base's packages: the same files for
  every probe, compiled once (a fresh folder per run compiled them on every run: pytest's
  start went from 0.2 s to 0.8 s, the facts hook's ``json`` and ``platform`` cost a tenth of
  a second, on every probe of a small project);
- an environment's packages: its path names one artifact, whose files never change (one that
  changed is discarded, and its bytecode with it, :func:`forget`);
- what exists only for one run (the copy of the commit's tree a command runs in, its
  temporary and run folders) is forgotten when the run ends.

An oracle that deliberately writes wrong bytecode into this folder could mislead a later run,
as it could edit anything else its user owns: the Docker executor is the isolation for that.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from bisector.base.paths import cache_dir


def bytecode_dir() -> Path:
    return cache_dir() / "pycache"


def forget(*paths: Path) -> None:
    """Remove the bytecode of everything under ``paths`` (as spelled and resolved: Python
    names a source by the path it found it under)."""
    root = bytecode_dir()
    for path in paths:
        for spelled in {os.path.abspath(path), os.path.realpath(path)}:
            shutil.rmtree(root / spelled.lstrip(os.sep), ignore_errors=True)
