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


def mirror(path: Path | str) -> Path:
    """Where the bytecode of the sources under ``path`` (as spelled) is kept."""
    return bytecode_dir() / os.path.abspath(path).lstrip(os.sep)


def forget(*paths: Path) -> None:
    """Remove the bytecode of everything under ``paths`` (as spelled and resolved: Python
    names a source by the path it found it under)."""
    for path in paths:
        for spelled in {os.path.abspath(path), os.path.realpath(path)}:
            shutil.rmtree(mirror(spelled), ignore_errors=True)


def share(skel_lib: Path, here: Path, lives_at: Path) -> None:
    """The kept bytecode of the skeleton's files serves the environment at ``here`` (to be
    renamed to ``lives_at``) for each file that is still the skeleton's own (the same inode:
    not replaced by the probed wheel): a ``.pyc`` records its source's size and modification
    time, which a hard link shares, and Python names the code after the file it loads it for.
    So an oracle's dependencies, compiled once for the skeleton every environment is copied
    from, are not compiled again in each environment (pytest: half a second a probe)."""
    _link_same(mirror(skel_lib), skel_lib, here, mirror(lives_at))


def harvest(env_lib: Path, skel_lib: Path) -> None:
    """Keep for the skeleton the bytecode a run compiled in an environment for files the two
    share (the same inode: a dependency linked from the skeleton), so that the next copy finds
    it (:func:`share`). Only what the oracle imported is ever compiled, and only once."""
    _link_same(mirror(env_lib), env_lib, skel_lib, mirror(skel_lib))


def _link_same(src: Path, src_lib: Path, other_lib: Path, dst: Path) -> None:
    """Each ``.pyc`` under ``src`` (the bytecode of ``src_lib``) linked under ``dst`` (that of
    ``other_lib``) where its source is the same file in both, and ``dst`` lacks it. Never an
    error: links refused (another file system, a hardened fs.protected_hardlinks) only lose
    a speed-up, the run compiles what it imports, as it would anyway."""
    for folder, _dirs, files in os.walk(src):
        rel = os.path.relpath(folder, src)
        for name in files:
            if not name.endswith(".pyc") or (dst / rel / name).exists():
                continue
            module = name.split(".", 1)[0] + ".py"  # mod.cpython-311.pyc -> mod.py
            try:
                if os.stat(src_lib / rel / module).st_ino != \
                        os.stat(other_lib / rel / module).st_ino:
                    continue
                (dst / rel).mkdir(parents=True, exist_ok=True)
                os.link(os.path.join(folder, name), dst / rel / name)
            except OSError:  # not the same file, or made meanwhile: nothing to link
                continue
