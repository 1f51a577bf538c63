"""The oracle environment end to end: a variable exported in the shell (TORCH_LOGS) or given
with --env reaches the oracle, is in the probes' facts and the reproduce line, and keys the
verdicts; a secret never shows; a bad --env is one line."""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
from pathlib import Path

import pytest

from bisector.app.demo.torchlet import SyntheticHistory
from bisector.cli import start
from bisector.run.config import request_from
from tests.support import copy_world, invoke, one_line_error, run_cli

# Fails when the oracle does not see the variable the bisection recorded: the run and the
# record cannot disagree.
PROBE = ("import os, sys, torchlet; "
         "want = os.environ['WANT']; got = os.environ.get('TORCH_LOGS', ''); "
         "print('TORCH_LOGS=' + got); assert got == want, (got, want); "
         "sys.exit(0 if abs(torchlet.norm([3.0, 4.0]) - 5.0) < 1e-9 else 1)")
e2e = pytest.mark.e2e


@pytest.fixture(scope="module")
def hist(world: SyntheticHistory, tmp_path_factory: pytest.TempPathFactory) -> SyntheticHistory:
    return copy_world(world, tmp_path_factory.mktemp("oenv") / "torchlet")


@pytest.fixture(autouse=True)
def no_inherited(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in list(os.environ):
        if k.startswith(("TORCH", "TRITON_", "PYTORCH_")):
            monkeypatch.delenv(k)


def _start(db: Path, hist: SyntheticHistory, shell: dict[str, str], *extra: str
           ) -> dict[str, object]:
    r = run_cli("--db", str(db), "start", "--repo", str(hist.path), "--good", hist.main[0],
                "--bad", hist.main[-1], "--no-confirm", "--json", *extra,
                "--", "python", "-P", "-c", PROBE, env=shell)
    assert r.returncode == 0, r.stderr
    data: dict[str, object] = json.loads(r.stdout)
    return data


@e2e
def test_an_exported_torch_logs_is_recorded_keyed_and_reproduced(
        home: Path, hist: SyntheticHistory) -> None:
    db = home / "b.db"
    d = _start(db, hist, {"TORCH_LOGS": "recompiles", "WANT": "recompiles"})
    assert d["culprit"]["sha"] == hist.culprit  # type: ignore[index]
    assert d["oracle_runs"] > 0  # type: ignore[operator]
    probes = [p for p in d["probes"] if not p["reused"]]  # type: ignore[attr-defined]
    assert probes and all(p["facts"]["env"] == {"TORCH_LOGS": "recompiles"} for p in probes)
    # Inherited, not typed: the runs' environment, said beside the line, never a flag in it
    # (issue 50 item 8: an image's variable was in every suggested command).
    assert "--env TORCH_LOGS" not in str(d["reproduce"])
    assert d["inherited_env"] == {"TORCH_LOGS": "recompiles"}
    env_row = d["environment"]["executor"]["oracle_env"]  # type: ignore[index]
    assert env_row == {"TORCH_LOGS": "recompiles"}
    # Without the variable: a different key, nothing reused (the oracle sees none).
    bare = _start(db, hist, {"WANT": ""})
    assert bare["oracle_runs"] > 0 and "--env" not in str(bare["reproduce"])  # type: ignore
    assert bare["env_fingerprint"] != d["env_fingerprint"]
    # --env instead of the shell: the same key as the exported variable, every verdict reused.
    given = _start(db, hist, {"WANT": "recompiles"}, "--env", "TORCH_LOGS=recompiles")
    assert given["env_fingerprint"] == d["env_fingerprint"] and given["oracle_runs"] == 0
    # Given with --env, it is in the line; the line is one the CLI takes, and gives it back.
    line = str(given["reproduce"])
    assert "--env TORCH_LOGS=recompiles" in line and not given["inherited_env"]
    args = shlex.split(line)
    assert request_from(dict(start.make_context("start", args[2:]).params)).env == (
        "TORCH_LOGS=recompiles",)
    # resume/show render the line from the store, whatever this shell has.
    r = invoke("--db", str(db), "show", str(given["id"]), env={"TORCH_LOGS": None})
    assert r.exit_code == 0 and "--env TORCH_LOGS=recompiles" in r.stdout
    first = invoke("--db", str(db), "show", "1", env={"TORCH_LOGS": None})
    assert "The runs also had `TORCH_LOGS=recompiles`" in first.stdout
    # What the box's image says of itself is recorded and keyed, never put in the line as if
    # the user had chosen it (an H200 box printed --env CUDA_VERSION=13.0.2).
    imaged = _start(db, hist, {"WANT": "", "CUDA_VERSION": "13.0.2"})
    assert imaged["environment"]["executor"]["oracle_env"] == {  # type: ignore[index]
        "CUDA_VERSION": "13.0.2"}
    assert "CUDA_VERSION" not in str(imaged["reproduce"])


@e2e
def test_a_secret_variable_keys_by_hash_and_never_shows(home: Path,
                                                        hist: SyntheticHistory) -> None:
    db = home / "s.db"
    token = "hf_" + "a1b2c3d4" * 4
    d = _start(db, hist, {"WANT": ""}, "--env", f"HF_TOKEN={token}")
    for fmt in ("markdown", "issue", "html"):
        r = invoke("--db", str(db), "show", "1", "--format", fmt)
        assert r.exit_code == 0 and token not in r.stdout, fmt
    assert "HF_TOKEN=***" in str(d["reproduce"]).replace("'", "")
    with sqlite3.connect(db) as c:
        (environment,) = c.execute("select environment from bisection").fetchone()
    assert token not in environment and "sha256:" in environment


def test_check_takes_env_words_beside_system(home: Path, tmp_path: Path) -> None:
    oracle = tmp_path / "sees.py"
    oracle.write_text("import os, sys\nsys.exit(0 if os.environ.get('TORCH_LOGS') == "
                      "'+dynamo' else 1)\n")
    r = invoke("check", "--oracle", str(oracle), "--env", "system", "--env",
               "TORCH_LOGS=+dynamo", "--profile", "generic", "--json")
    assert r.exit_code == 0, r.stderr + r.stdout
    assert json.loads(r.stdout)["facts"]["env"] == {"TORCH_LOGS": "+dynamo"}
    # The shell's variable without --env: recorded too, and the oracle sees it.
    r = invoke("check", "--oracle", str(oracle), "--profile", "generic", "--json",
               env={"TORCH_LOGS": "+dynamo"})
    assert r.exit_code == 0 and json.loads(r.stdout)["facts"]["env"] == {"TORCH_LOGS": "+dynamo"}


@pytest.mark.parametrize("word", ["TORCH_LOGS", "1BAD=x", "BISECTOR_COMMIT=x"])
def test_a_bad_env_word_is_one_line(home: Path, hist: SyntheticHistory, word: str) -> None:
    one_line_error(invoke("check", "--env", word, "--oracle", "x"), "--env")
    r = invoke("--db", str(home / "n.db"), "start", "--repo", str(hist.path), "--good",
               hist.main[0], "--bad", hist.main[-1], "--oracle", "torchlet_norm",
               "--env", word)
    one_line_error(r, "--env")
    assert not (home / "n.db").exists()
