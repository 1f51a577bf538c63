"""The test world's PATH: the interpreter a version manager's shims resolve to comes ahead of
the shims, so the suite's hundreds of ``python3`` calls skip pyenv's shell scripts."""

from __future__ import annotations

from tests.conftest import _before_shims


def test_the_interpreter_comes_just_ahead_of_the_first_shims_folder() -> None:
    path = "/a:/root/.pyenv/plugins/pyenv-virtualenv/shims:/root/.pyenv/shims/:/usr/bin"
    assert _before_shims(path, "/py/bin") == (
        "/a:/py/bin:/root/.pyenv/plugins/pyenv-virtualenv/shims:/root/.pyenv/shims/:/usr/bin")


def test_a_path_without_shims_or_already_ahead_is_left_as_it_is() -> None:
    assert _before_shims("/a:/usr/bin", "/py/bin") == "/a:/usr/bin"
    assert _before_shims("/py/bin:/x/shims", "/py/bin") == "/py/bin:/x/shims"
    assert _before_shims("/x/shimsy:/usr/bin", "/py/bin") == "/x/shimsy:/usr/bin"
