"""The command oracle's program, looked up as the run looks it up (executors/command_path.py):
real files in a temporary folder, no process started."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from bisector.executors.command_path import foreign_program

pytestmark = pytest.mark.unit


def _script(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    path.chmod(0o755)
    return path


@pytest.fixture
def env(tmp_path: Path) -> Path:
    """A probed environment: its bin/python3 (a link, as a virtualenv's is)."""
    root = tmp_path / "env"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python3").symlink_to(sys.executable)
    return root


def test_a_program_on_a_relative_path_entry_is_looked_up_in_the_tree(
        tmp_path: Path, env: Path) -> None:
    tree = tmp_path / "tree"
    _script(tree / "mytool", "#!/bin/sh\nexit 0\n")
    for path in (f".{os.pathsep}{env / 'bin'}", f"{env / 'bin'}{os.pathsep}"):
        assert foreign_program("mytool", path, env, tree) == "", path
    assert foreign_program("mytool", str(env / "bin"), env, tree).startswith(
        "cannot run mytool: no such program")


@pytest.mark.parametrize("second", [
    "'''exec' '{py}' \"$0\" \"$@\"\n",  # uv
    "'''exec' {py} \"$0\" \"$@\"\n",  # pip
    "'''exec' \"{py}\" \"$0\" \"$@\"\n",  # pip, a path with spaces
])
def test_a_long_path_launcher_of_another_python_is_refused(
        tmp_path: Path, env: Path, second: str) -> None:
    spaced = '"{py}"' in second
    other = tmp_path / ("dev venv" if spaced else "devvenv") / "bin" / "python"
    tool = _script(tmp_path / "dev" / "pytest",
                   "#!/bin/sh\n" + second.format(py=other) + "' '''\nimport pytest\n")
    why = foreign_program(str(tool), str(env / "bin"), env, tmp_path)
    assert why.startswith(f"{tool} is {tool}, a script of another Python ({other})"), why
    assert why.endswith(f"run it with the probed environment's python (python {tool})")


def test_its_own_python_and_env_lookups_pass_and_a_crlf_line_is_named(
        tmp_path: Path, env: Path) -> None:
    bin_ = str(env / "bin")
    own = _script(env / "bin" / "own", f"#!{env / 'bin' / 'python3'}\n")
    assert foreign_program("own", bin_, env, tmp_path) == ""
    # An environment at the root holds everything under it (--python /bin/python3).
    assert foreign_program(str(own), bin_, Path("/"), tmp_path) == ""
    through_env = _script(tmp_path / "t" / "tool", "#!/usr/bin/env -u LANG python3\n")
    assert foreign_program(str(through_env), bin_, env, tmp_path) == ""
    crlf = _script(tmp_path / "t" / "win", b"#!/usr/bin/env python3\r\nprint(1)\r\n")
    assert "a #! line ending in a carriage return (CRLF)" in \
        foreign_program(str(crlf), bin_, env, tmp_path)
