"""bisector.toml end to end: a repository's file sets `start`'s options, the command line still
wins, `--help` names the value in force and its file, and a bad file stops every command before
the store is touched."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from bisector.app.demo.torchlet import generate
from tests.conftest import BISECT


def bisect(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BISECT, *args], cwd=cwd, capture_output=True, text=True,
                          env=os.environ.copy(), timeout=600)


def test_a_repository_file_gives_start_its_defaults_and_the_flag_still_wins(
        home: Path, tmp_path: Path) -> None:
    hist = generate(tmp_path / "torchlet", commits=16, culprit=9, broken=(), seed=4421,
                    release_at=None, side_branch_at=None)
    (hist.path / "bisector.toml").write_text(
        '[start]\nconfirm = false\noracle = "torchlet_norm"\n[defaults]\njobs = 2\n')
    sub = hist.path / "torchlet"
    sub.mkdir(exist_ok=True)
    r = bisect(sub, "start", "--repo", "..", "--good", hist.main[0], "--bad", hist.main[-1],
               "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["culprit"]["sha"] == hist.culprit
    assert "confirmation" not in d["result"] and "--no-confirm" in d["reproduce"]
    assert d["jobs"] == 2
    r = bisect(sub, "start", "--repo", "..", "--good", hist.main[0], "--bad", hist.main[-1],
               "--confirm", "--jobs", "1", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["result"]["confirmation"]["status"] == "confirmed"
    assert d["jobs"] == 1
    helped = "".join(bisect(sub, "start", "--help").stdout.split())  # wrapping aside
    where = str(hist.path / "bisector.toml")
    assert f"[default:(--no-confirmfrom{where}[start])]" in helped
    assert f"[default:(2from{where}[defaults])]" in helped


def test_a_bad_file_is_one_line_and_no_store_is_made(home: Path, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    (clone / ".git").mkdir(parents=True)
    (clone / "bisector.toml").write_text("[start]\njbos = 2\n")
    r = bisect(clone, "list")
    assert r.returncode == 2
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "did you mean 'jobs'" in lines[0], r.stderr
    assert not (home / "data" / "bisector.db").exists()
