"""The default interpreter, the parts that start no process: which files on PATH count."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from bisector.base.errors import UsageError
from bisector.project.interpreter import choose_python, on_path


def _exe(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\necho 3\n")  # a Python 3, as far as the checks ask
    path.chmod(0o755)
    return path


def test_bisectors_own_venv_is_skipped_and_duplicates_listed_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv, user = tmp_path / "venv", tmp_path / "user" / "bin"
    _exe(venv / "bin" / "python3")
    _exe(user / "python3")
    (user / "python").symlink_to("python3")  # one file, two names
    (tmp_path / "alias").symlink_to(user)  # one folder, two spellings
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setattr(sys, "base_prefix", str(tmp_path / "base"))
    monkeypatch.setenv("PATH", os.pathsep.join([str(venv / "bin"), str(user),
                                                str(tmp_path / "alias")]))
    assert on_path() == [str(user / "python3")]


def test_without_a_package_the_first_python3_on_path(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = _exe(tmp_path / "a" / "python3"), _exe(tmp_path / "b" / "python3")
    monkeypatch.setenv("PATH", os.pathsep.join([str(first.parent), str(second.parent)]))
    chosen = choose_python(None, None)
    assert chosen.path == str(first) and str(first) in chosen.note


def test_a_given_python_is_used_as_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    given = _exe(tmp_path / "opt" / "py" / "bin" / "python3")
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing there: nothing is searched either
    chosen = choose_python(str(given), "torch")
    assert chosen.path == str(given) and "--python" in chosen.note


def test_a_given_name_or_relative_path_is_made_absolute_where_it_was_typed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Probes run in other folders: ``python3`` or ``.venv/bin/python`` must name there what
    it named here (once every probe was skipped: "No interpreter found at path")."""
    on_path_py = _exe(tmp_path / "bin" / "python3.99")
    local = _exe(tmp_path / "proj" / ".venv" / "bin" / "python")
    monkeypatch.setenv("PATH", str(on_path_py.parent))
    monkeypatch.chdir(tmp_path / "proj")
    assert choose_python("python3.99", "torch").path == str(on_path_py)
    assert choose_python(".venv/bin/python", None).path == str(local)


@pytest.mark.parametrize(("given", "said"), [
    ("python3.98", "--python python3.98: no such interpreter on PATH: give the path"),
    ("./nope/python", "--python ./nope/python: no such interpreter: give the path"),
])
def test_a_given_python_that_is_not_there_is_a_one_line_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str, said: str) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as e:
        choose_python(given, None)
    assert str(e.value).startswith(said) and "\n" not in str(e.value)


def test_no_python_on_path_falls_back_to_bisectors_own(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    chosen = choose_python(None, None)
    assert chosen.path == sys.executable and "no python3 or python on PATH" in chosen.note
