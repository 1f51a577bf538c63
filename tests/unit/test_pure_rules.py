"""The version-only rule of pure-Python overlays (artifacts/pure.py), on texts."""

from __future__ import annotations

import pytest

from bisector.artifacts.pure import same_but_version, static_version

pytestmark = pytest.mark.unit

BASE = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "p"
version = "1.0"
dependencies = ["attrs"]

[project.scripts]
p = "p.cli:main"
"""


@pytest.mark.parametrize(("after", "same"), [
    (BASE.replace('"1.0"', '"1.1"'), True),
    (BASE.replace('"1.0"', "'1.1'  # bumped"), True),  # spelling and comments do not count
    (BASE.replace('["attrs"]', '["attrs", "rich"]').replace('"1.0"', '"1.1"'), False),
    (BASE.replace("p.cli:main", "p.cli:run"), False),  # an entry point
    (BASE.replace("setuptools>=61", "setuptools>=70"), False),  # build requirements
    (BASE.replace('version = "1.0"', 'dynamic = ["version"]'), False),  # now from a build
])
def test_pyproject_may_differ_in_its_version_alone(after: str, same: bool) -> None:
    assert same_but_version("pyproject.toml", BASE, after) is same


def test_setup_cfg_may_differ_in_its_version_alone() -> None:
    cfg = "[metadata]\nname = p\nversion = 1.0\n[options]\ninstall_requires =\n    attrs\n"
    assert same_but_version("setup.cfg", cfg, cfg.replace("1.0", "1.1"))
    assert not same_but_version("setup.cfg", cfg, cfg.replace("attrs", "rich"))
    assert not same_but_version("setup.cfg", cfg, None)  # deleted


def test_a_version_is_static_only_when_written_out() -> None:
    assert static_version(BASE) == "1.0"
    assert static_version(BASE.replace('version = "1.0"', 'dynamic = ["version"]')) is None
    assert static_version("not = [toml") is None
    assert static_version(None) is None
