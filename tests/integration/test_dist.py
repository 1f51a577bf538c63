"""`make dist`'s wheel installs into a clean virtualenv and runs the demo from there: the
bundled oracles and the store's migrations travel inside it (issue 24, installable). The
install is the core only (issue 36): no numpy, scipy, ruptures, starlette or uvicorn, and a
command that needs one of them says which extra in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

pytestmark = [pytest.mark.e2e]


def test_the_wheel_installs_and_runs_the_demo(tmp_path: Path) -> None:
    uv = Path(sys.executable).parent / "uv"
    dist = tmp_path / "dist"
    subprocess.run([str(uv), "build", "--wheel", "--out-dir", str(dist), str(ROOT)], check=True,
                   capture_output=True, timeout=300)
    (wheel,) = dist.glob("bisector-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([str(uv), "venv", "-q", "--python", sys.executable, str(venv)], check=True,
                   capture_output=True, timeout=120)
    subprocess.run([str(uv), "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
                    str(wheel)], check=True, capture_output=True, timeout=600)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BISECTOR_", "PYTHONPATH"))}
    env["BISECTOR_HOME"] = str(tmp_path / "home")
    r = subprocess.run([str(venv / "bin" / "bisect"), "demo", "--json"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "found the planted regression" in r.stderr
    installed = subprocess.run([str(venv / "bin" / "python"), "-c",
                                "import bisector; print(bisector.__file__)"], env=env, cwd=tmp_path,
                               capture_output=True, text=True, check=True).stdout
    assert str(venv) in installed and str(ROOT) not in installed  # the wheel, not the clone
    for module in ("numpy", "scipy", "ruptures", "starlette", "uvicorn"):
        gone = subprocess.run([str(venv / "bin" / "python"), "-c", f"import {module}"],
                              env=env, cwd=tmp_path, capture_output=True, text=True)
        assert gone.returncode != 0, f"{module} came with the core install"
    serve = subprocess.run([str(venv / "bin" / "bisect"), "serve", "--port", "0"], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=120)
    assert serve.returncode == 2, serve.stderr[-2000:]
    assert serve.stderr.strip().splitlines() == [
        "error: this needs bisector's [web] extra, for bisect serve (starlette is not "
        "installed here): pip install 'bisector[web]' (or uv tool install 'bisector[web]')"
    ], serve.stderr
