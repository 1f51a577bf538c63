"""scripts/test-deps, the first step of `make test`: says in one line what is missing and why
before it installs anything, and installs nothing when told not to."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.unit


def test_a_missing_package_is_named_with_its_reason_in_one_line(tmp_path: Path) -> None:
    bin_ = tmp_path / "bin"  # a PATH with the basics and no browser, no debootstrap
    bin_.mkdir()
    for tool in ("bash", "git", "gcc", "make", "sed", "id"):
        found = shutil.which(tool)
        assert found, tool
        (bin_ / tool).symlink_to(found)
    r = subprocess.run(["bash", str(ROOT / "scripts" / "test-deps")], capture_output=True,
                       text=True, env={"PATH": str(bin_), "BISECTOR_NO_APT": "1"}, check=False)
    assert r.returncode == 1 and r.stdout == ""  # nothing installed
    (line,) = r.stderr.splitlines()
    assert "chromium (the web view's browser test)" in line
    assert "debootstrap (the Docker tests' base image)" in line
    assert line.rsplit("sudo apt-get install ", 1)[1].split()[-2:] == ["debootstrap", "chromium"]
