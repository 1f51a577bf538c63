"""The empty virtualenv new environments are copied from: one per interpreter, found by the
name PATH gives it as well as by its path."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from bisector.executors.venvs import skeleton_dir


def test_a_bare_name_names_the_interpreter_path_has(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """``--python python3`` once made every probe fail: the name was taken as a file of the
    current folder."""
    real = tmp_path / "bin" / "python3.97"
    real.parent.mkdir()
    real.write_text("#!/bin/sh\n")
    real.chmod(0o755)
    monkeypatch.setenv("PATH", str(real.parent))
    monkeypatch.setenv("BISECTOR_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert skeleton_dir("python3.97", False) == skeleton_dir(str(real), False)
    assert skeleton_dir(str(real), False) != skeleton_dir(str(real), True)
    other = tmp_path / "bin" / "python3.96"
    other.write_text("#!/bin/sh\n# another interpreter\n")
    assert skeleton_dir(str(other), False) != skeleton_dir(str(real), False)
    with pytest.raises(FileNotFoundError):
        skeleton_dir("python3.95", False)
    before = skeleton_dir("python3.97", False)
    os.utime(real, ns=(1, 1))  # upgraded in place: a new skeleton, never a stale pyvenv.cfg
    assert skeleton_dir("python3.97", False) != before


def test_bytecode_of_shared_files_is_kept_once_and_shared(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dependency's file linked from the skeleton: its bytecode, compiled in one
    environment, is kept for the skeleton and given to the next copy; a file of the
    environment alone (the probed project) is never kept for the skeleton."""
    from bisector.executors.bytecode import harvest, mirror, share

    monkeypatch.setenv("BISECTOR_HOME", str(tmp_path / "home"))
    skel, env, nxt = (tmp_path / n / "lib" for n in ("skel", "env", "next"))
    (skel / "dep").mkdir(parents=True)
    (skel / "dep" / "__init__.py").write_text("X = 1\n")
    (env / "dep").mkdir(parents=True)
    os.link(skel / "dep" / "__init__.py", env / "dep" / "__init__.py")
    (env / "proj").mkdir()
    (env / "proj" / "__init__.py").write_text("Y = 2\n")
    for rel in ("dep/__init__.cpython-311.pyc", "proj/__init__.cpython-311.pyc"):
        (mirror(env) / rel).parent.mkdir(parents=True, exist_ok=True)
        (mirror(env) / rel).write_bytes(b"pyc of " + rel.encode())
    harvest(env, skel)
    kept = mirror(skel) / "dep" / "__init__.cpython-311.pyc"
    assert kept.read_bytes() == b"pyc of dep/__init__.cpython-311.pyc"
    assert not (mirror(skel) / "proj").exists()
    # The next copy: its dep file still the skeleton's gets the kept bytecode; a file the
    # probed wheel replaced (another inode, maybe the same size and second) never does.
    (nxt / "dep").mkdir(parents=True)
    os.link(skel / "dep" / "__init__.py", nxt / "dep" / "__init__.py")
    (skel / "dep" / "core.py").write_text("Z = 1\n")
    (nxt / "dep" / "core.py").write_text("Z = 2\n")
    (mirror(skel) / "dep" / "core.cpython-311.pyc").write_bytes(b"pyc of the skeleton's core")
    share(skel, nxt, tmp_path / "final" / "lib")
    given = mirror(tmp_path / "final" / "lib") / "dep"
    assert (given / "__init__.cpython-311.pyc").stat().st_ino == kept.stat().st_ino
    assert not (given / "core.cpython-311.pyc").exists()


def test_a_script_whose_new_path_is_too_long_for_a_shebang_gets_the_sh_trampoline(
        tmp_path: Path) -> None:
    from bisector.executors.venvs import retarget

    made, final = "/m", tmp_path / ("x" * 130)
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    short = tmp_path / "venv" / "bin" / "short"
    short.write_text("#!/m/bin/python\nprint('hi')\n")
    (final / "bin").mkdir(parents=True)
    os.symlink(os.path.realpath(sys.executable), final / "bin" / "python")
    retarget(tmp_path / "venv", made, final)
    text = short.read_text()
    assert text.startswith("#!/bin/sh\n'''exec' '" + str(final) + "/bin/python' ")
    import shutil
    import subprocess

    shutil.copy(short, final / "bin" / "short")
    (final / "bin" / "short").chmod(0o755)
    ran = subprocess.run([str(final / "bin" / "short")], capture_output=True, text=True)
    assert ran.stdout == "hi\n", ran.stderr
