"""The version-only rule of pure-Python overlays (artifacts/pure.py), on texts."""

from __future__ import annotations

from pathlib import Path

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


def test_a_wheel_is_never_unpacked_over_a_file_the_environment_has(tmp_path: Path) -> None:
    """An oracle dependency of the same name sits in the environment as a hard link of the
    skeleton's (and uv's cache's) file: unpacking over it would write into those. uv installs
    such a wheel instead, replacing the files."""
    import os
    import zipfile

    from bisector.artifacts.pure import unpack

    wheel = tmp_path / "pluggy-9.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("pluggy/__init__.py", "PROBED = True\n")
        z.writestr("pluggy-9.0.dist-info/METADATA", "Name: pluggy\nVersion: 9.0\n")
        z.writestr("pluggy-9.0.dist-info/WHEEL", "Root-Is-Purelib: true\nTag: py3-none-any\n")
    skeleton, site = tmp_path / "skeleton.py", tmp_path / "site"
    skeleton.write_text("SKELETON = True\n")
    (site / "pluggy").mkdir(parents=True)
    os.link(skeleton, site / "pluggy" / "__init__.py")
    assert unpack(wheel, site) is False
    assert skeleton.read_text() == "SKELETON = True\n"
    (site / "pluggy" / "__init__.py").unlink()
    assert unpack(wheel, site) is True  # nothing in the way: unpacked
    assert (site / "pluggy" / "__init__.py").read_text() == "PROBED = True\n"
