"""The GPU overlay proof's procedure, run on CPU with torchlet: a history made from an installed
package's Python tree, bisected with that installed package as the only base (0 builds)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import git

from bisector.app.demo.torchlet import generate
from bisector.artifacts.build import build_wheel
from bisector.project.profiles import TORCHLET
from tests.gpu.overlay_proof import run_proof


def test_installed_base_overlay_proof_on_torchlet(home: Path, tmp_path: Path) -> None:
    hist = generate(tmp_path / "src", release_at=None, side_branch_at=None, broken=())
    # "Installed" torchlet: built from a commit after the planted bug, into its own venv.
    res = build_wheel(git.Repo(hist.path), hist.main[-1], TORCHLET, python=sys.executable)
    assert res.ok and res.wheel
    venv = tmp_path / "installed"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(res.wheel)], check=True)
    result = run_proof("torchlet", tmp_path / "proof", str(venv / "bin" / "python"), harmless=12)
    assert result["ok"], result
    assert result["source_builds"] == 0
    assert set(result["artifact_kinds"]) == {"installed", "overlay"}  # type: ignore[arg-type]
    assert result["probe_facts"]["overlay"]["base_commit"]  # type: ignore[index]
    # The same history with two probes at once (the GPU box pins one per GPU with --gpus).
    two = run_proof("torchlet", tmp_path / "proof", str(venv / "bin" / "python"), harmless=12,
                    extra=("--jobs", "2"), shas=result["shas"],  # type: ignore[arg-type]
                    tag="-jobs2")
    assert two["ok"] and two["culprit"] == result["culprit"], two
    assert two["rounds"] < result["rounds"]  # type: ignore[operator]
