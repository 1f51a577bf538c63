"""Issue 20, class 4: a probe reports the wrong commit.

An overlay (the probed commit's Python files over a base's build) kept the base's generated
version file, so the probed package said it was the base: ``torchlet.version.git_version``
(``torch.version.git_version`` on PyTorch) printed by an oracle, the recorded facts and the
issue's Versions block all named the base commit. The attack here is a real bisection whose
probes are overlays (on a source-built base, and on an installed base as on the GPU box) with
an oracle that prints its package's own ``git_version``: every probe must print the commit it
probed, and the facts must name the overlay's base apart from it. The version-file rewrite is
also checked on PyTorch's own ``version.py`` layouts (a source build's ``+git<sha>``, a
nightly's ``.devYYYYMMDD+cu128``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from bisector.app.demo.torchlet import SyntheticHistory, generate
from bisector.artifacts.overlay import truthful_version, version_member
from bisector.project.profiles import GENERIC, PYTORCH, TORCHLET
from tests.support import installed_base_history, installed_dir, installed_torchlet, run_cli

pytestmark = [pytest.mark.adversarial]

# Prints the probed package's own idea of its commit, then judges as torchlet_norm does.
ORACLE = '''\
# /// script
# dependencies = []
# [tool.bisector]
# description = "prints torchlet.version.git_version; bad when norm([3, 4]) is not 5"
# timeout = 60
# ///
import sys

import torchlet
import torchlet.version

print(f"git_version={torchlet.version.git_version} version={torchlet.__version__}")
sys.exit(0 if abs(torchlet.norm([3.0, 4.0]) - 5.0) < 1e-9 else 1)
'''

SAID = re.compile(r"git_version=(\S+) version=(\S+)")


def _oracle(tmp_path: Path) -> Path:
    path = tmp_path / "says_its_commit.py"
    path.write_text(ORACLE)
    return path


def _check_every_probe(d: dict[str, Any], base: str | None = None) -> int:
    """Every fresh probe printed its own commit, in full and in the version's local part,
    and an overlay's facts name its base apart; returns how many probes were overlays."""
    overlays = 0
    for p in d["probes"]:
        if p.get("reused"):
            continue
        m = SAID.search(p["output_tail"])
        assert m, p["output_tail"]
        assert m[1] == p["sha"], (p["sha"][:12], p["artifact"], m[0])
        if "+git" in m[2]:
            assert m[2].endswith(f"+git{p['sha'][:7]}"), (p["sha"][:12], m[0])
        if p["artifact"] != "overlay":
            continue
        overlays += 1
        facts = p["facts"]
        assert facts["git_version"] == p["sha"]
        assert facts["overlay_base"] != p["sha"] and len(facts["overlay_base"]) == 40
        if base is not None:
            assert facts["overlay_base"] == base
        assert facts["artifact"] == (f"overlay of {p['sha'][:12]} on base "
                                     f"{facts['overlay_base'][:12]}")
        assert facts["overlay"]["version_file"].endswith(p["sha"][:12])
    return overlays


@pytest.mark.e2e
def test_overlays_on_a_built_base_print_the_commit_they_probe(home: Path,
                                                                tmp_path: Path) -> None:
    # The demo's shape: source builds at the ends, overlays between them.
    hist = generate(tmp_path / "t", commits=40, culprit=26, broken=(), seed=20204,
                    release_at=None, side_branch_at=None)
    r = run_cli("start", "--repo", str(hist.path), "--good", hist.main[0], "--bad",
                hist.main[-1], "--oracle", str(_oracle(tmp_path)), "--offline", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    d = json.loads(r.stdout)
    assert d["culprit"]["sha"] == hist.culprit
    assert _check_every_probe(d) >= 2, [p["artifact"] for p in d["probes"]]
    # The issue report's Versions block names the culprit itself, not the base.
    (md,) = (home / "data" / "reports").glob("bisection-1-*.md")
    text = md.read_text()
    assert f"torchlet git version: {hist.culprit}" in text, text[-2000:]


@pytest.mark.e2e
def test_overlays_on_an_installed_base_print_the_commit_they_probe(home: Path,
                                                                     tmp_path: Path) -> None:
    """The GPU box's way: the installed package is the only base, every probe an overlay."""
    hist: SyntheticHistory = generate(tmp_path / "src", commits=24, culprit=15, broken=(),
                                      seed=20205, release_at=None, side_branch_at=None)
    python = installed_torchlet(hist, tmp_path / "installed")
    repo = tmp_path / "proof" / "repo"
    shas = installed_base_history(installed_dir(python, "torchlet"), repo, harmless=6)
    r = run_cli("--db", str(tmp_path / "proof" / "bisector.db"), "start", "--repo", str(repo),
                "--good", "fixed", "--bad", "main", "--oracle", str(_oracle(tmp_path)),
                "--profile", "torchlet", "--python", python, "--installed-base", shas["root"],
                "--offline", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    d = json.loads(r.stdout)
    assert d["culprit"]["sha"] == shas["culprit"]
    assert _check_every_probe(d, base=shas["root"]) >= 2
    # The installed package itself was never written to.
    installed = installed_dir(python, "torchlet") / "version.py"
    assert hist.main[-1] in installed.read_text()


# -- the generated version file itself ---------------------------------------------------------

BASE = "773b034ffc0e592e125387c0c862abc0982f0319"
TARGET = "45d9ea5a77f38e672f1091559e1dba87ff8e8aa6"

TORCH_SOURCE = f"""\
from typing import Optional

__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'xpu']
__version__ = '2.9.0a0+git{BASE[:7]}'
debug = False
cuda: Optional[str] = '12.8'
git_version = '{BASE}'
hip: Optional[str] = None
xpu: Optional[str] = None
"""

TORCH_NIGHTLY = TORCH_SOURCE.replace(f"2.9.0a0+git{BASE[:7]}", "2.9.0.dev20250815+cu128")


def _load(text: str) -> dict[str, Any]:
    ns: dict[str, Any] = {}
    exec(compile(text, "version.py", "exec"), ns)  # the file as Python reads it
    return ns


def test_pytorch_source_build_version_file_names_the_probed_commit() -> None:
    assert version_member(PYTORCH) == "torch/version.py"
    ns = _load(truthful_version(TORCH_SOURCE, TARGET, PYTORCH) or "")
    assert ns["git_version"] == TARGET
    assert ns["__version__"] == f"2.9.0a0+git{TARGET[:7]}"
    assert ns["cuda"] == "12.8" and ns["debug"] is False  # the base's build, which runs


def test_pytorch_nightly_version_keeps_its_public_part_and_names_the_commit() -> None:
    ns = _load(truthful_version(TORCH_NIGHTLY, TARGET, PYTORCH) or "")
    assert ns["git_version"] == TARGET
    assert ns["__version__"] == "2.9.0.dev20250815+cu128"  # no +git part to rewrite


def test_without_a_base_file_the_profile_template_or_nothing() -> None:
    ns = _load(truthful_version(None, TARGET, TORCHLET) or "")
    assert ns["git_version"] == TARGET and ns["__version__"].endswith(f"+git{TARGET[:7]}")
    assert truthful_version(None, TARGET, PYTORCH) is None  # kept, and the manifest says so
    assert version_member(GENERIC) is None  # never overlays: no Python-only paths declared
