"""The Python tag of the interpreter a bisection probes with is read without starting it when it
is the binary bisector itself runs on (issue 50 item 1: one Python start fewer before the first
probe); any other program is asked, as before."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bisector.artifacts import build


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[str]]]:
    """The programs python_tag starts (each one's real run still happens)."""
    calls: list[list[str]] = []
    real = subprocess.run

    def run(cmd: list[str], *a: Any, **k: Any) -> Any:
        calls.append(list(cmd))
        return real(cmd, *a, **k)

    monkeypatch.setattr(subprocess, "run", run)
    build.python_tag.cache_clear()
    yield calls
    build.python_tag.cache_clear()


def _mine() -> str:
    free = "t" if __import__("sysconfig").get_config_var("Py_GIL_DISABLED") else ""
    return f"cp{sys.version_info.major}{sys.version_info.minor}{free}"


def test_our_own_binary_through_a_link_starts_nothing(started: list[list[str]],
                                                      tmp_path: Path) -> None:
    base = getattr(sys, "_base_executable", sys.executable)
    link = tmp_path / "venv" / "bin" / "python3"
    link.parent.mkdir(parents=True)
    link.symlink_to(os.path.realpath(base))  # as a venv's or pyenv's python links to it
    assert build.python_tag(str(link)) == _mine()
    assert build.python_tag(os.path.realpath(base)) == _mine()
    assert started == []  # before: one Python start for each


def test_a_wrapper_is_asked(started: list[list[str]], tmp_path: Path) -> None:
    wrapper = tmp_path / "python"
    wrapper.write_text(f"#!/bin/sh\nexec {os.path.realpath(sys.executable)} \"$@\"\n")
    wrapper.chmod(0o755)
    assert build.python_tag(str(wrapper)) == _mine()
    assert len(started) == 1 and started[0][0] == str(wrapper)
