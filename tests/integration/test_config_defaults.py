"""bisector.toml end to end: a repository's file sets `start`'s options, the command line still
wins, `--help` names the value in force and its file, and a bad file stops every command before
the store is touched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bisector.app.demo.torchlet import SyntheticHistory
from tests.support import copy_world, invoke, one_line_error, run_cli


@pytest.mark.e2e
def test_a_repository_file_gives_start_its_defaults_and_the_flag_still_wins(
        home: Path, tmp_path: Path, world: SyntheticHistory) -> None:
    hist = copy_world(world, tmp_path / "torchlet")
    (hist.path / "bisector.toml").write_text(
        '[start]\nconfirm = false\noracle = "torchlet_norm"\n[defaults]\njobs = 2\n')
    sub = hist.path / "torchlet"
    sub.mkdir(exist_ok=True)
    assert invoke("trust", cwd=sub).exit_code == 0  # `oracle` runs a program: trusted only
    r = run_cli("start", "--repo", "..", "--good", hist.main[0], "--bad", hist.main[-1],
                "--json", cwd=sub)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["culprit"]["sha"] == hist.culprit
    assert "confirmation" not in d["result"] and "--no-confirm" in d["reproduce"]
    assert d["jobs"] == 2
    r = run_cli("start", "--repo", "..", "--good", hist.main[0], "--bad", hist.main[-1],
                "--confirm", "--jobs", "1", "--json", cwd=sub)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["result"]["confirmation"]["status"] == "confirmed"
    assert d["jobs"] == 1
    helped = "".join(invoke("start", "--help", cwd=sub).stdout.split())  # wrapping aside
    where = str(hist.path / "bisector.toml")
    assert f"[default:(--no-confirmfrom{where}[start])]" in helped
    assert f"[default:(2from{where}[defaults])]" in helped


def test_a_bad_file_is_one_line_and_no_store_is_made(home: Path, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    (clone / ".git").mkdir(parents=True)
    (clone / "bisector.toml").write_text("[start]\njbos = 2\n")
    r = invoke("list", cwd=clone)
    one_line_error(r, "did you mean 'jobs'", code=2)
    assert not (home / "data" / "bisector.db").exists()
