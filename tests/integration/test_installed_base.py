"""The GPU overlay proof's procedure (proofs/overlay_proof.py on torch), run on CPU with
torchlet: a history made from an installed package's Python tree, bisected with that installed
package as the only base (0 builds). The procedure lives in tests/support.py: no test imports a
GPU proof script."""

from __future__ import annotations

from pathlib import Path

import pytest

from bisector.app.demo.torchlet import generate
from tests.support import (
    bisect_installed_base,
    installed_base_history,
    installed_dir,
    installed_torchlet,
)


@pytest.mark.e2e
def test_installed_base_overlay_proof_on_torchlet(home: Path, tmp_path: Path) -> None:
    hist = generate(tmp_path / "src", release_at=None, side_branch_at=None, broken=())
    # "Installed" torchlet: built from a commit after the planted bug, into its own venv.
    python = installed_torchlet(hist, tmp_path / "installed")
    repo = tmp_path / "proof" / "repo"
    shas = installed_base_history(installed_dir(python, "torchlet"), repo, harmless=12)
    one = bisect_installed_base(repo, shas, python, tmp_path / "proof" / "bisector.db")
    assert one["culprit"]["sha"] == shas["culprit"]
    assert "source" not in one["artifact_kinds"]  # no source build
    assert set(one["artifact_kinds"]) == {"installed", "overlay"}
    assert one["probes"][-1]["facts"]["overlay"]["base_commit"]
    # The same history with two probes at once (the GPU box pins one per GPU with --gpus), in
    # its own store and cold caches, so the two runs compare cold against cold.
    two = bisect_installed_base(repo, shas, python, tmp_path / "proof" / "bisector-jobs2.db",
                                "--jobs", "2",
                                env={"BISECTOR_HOME": str(tmp_path / "proof" / "home-jobs2"),
                                     "BISECTOR_CACHE_DIR": str(tmp_path / "proof" / "cache2")})
    assert two["culprit"] == one["culprit"]
    assert "source" not in two["artifact_kinds"]
    assert two["rounds"] < one["rounds"]
