"""The oracle kit on CPU: `bisect oracle new --from-repro` and `bisect check`, on real builds.

`oracle new` and `check` run in-process (click's CliRunner; their probes are real processes
all the same); the bisections with the oracles made run as the user runs them."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import Result

from bisector.app.demo.torchlet import SyntheticHistory
from bisector.oracle.script import load_oracle
from tests.support import copy_world, invoke, run_cli

CRASH_REPRO = '''\
"""norm([3, 4]) must be 5 (reported in issue #1)."""
import torchlet

assert abs(torchlet.norm([3.0, 4.0]) - 5.0) < 1e-9, "norm is wrong"
'''

PRINT_REPRO = '''\
import torchlet

if abs(torchlet.norm([3.0, 4.0]) - 5.0) > 1e-9:
    print("BUG REPRODUCED: norm is wrong")
else:
    print("all fine")
'''


@pytest.fixture(scope="module")
def hist(world: SyntheticHistory, tmp_path_factory: pytest.TempPathFactory) -> SyntheticHistory:
    return copy_world(world, tmp_path_factory.mktemp("kit") / "repo")


def ok(r: Result) -> Result:
    assert r.exit_code == 0, r.stderr
    return r


@pytest.mark.parametrize(
    ("repro", "extra", "rule"),
    [(CRASH_REPRO, [], "exits non-zero"),
     (PRINT_REPRO, ["--match", "BUG REPRODUCED"],
      "exits non-zero or prints output matching 'BUG REPRODUCED'")],
    ids=["crash-style", "print-style"],
)
def test_repro_becomes_an_oracle_that_bisects(home: Path, tmp_path: Path, hist: SyntheticHistory,
                                              repro: str, extra: list[str], rule: str) -> None:
    (tmp_path / "repro.py").write_text(repro)
    r = ok(invoke("oracle", "new", "norm_issue", "--from-repro", str(tmp_path / "repro.py"),
                "--dir", str(tmp_path / "oracles"), *extra))
    assert f"bad when the repro {rule}" in r.stdout
    made = tmp_path / "oracles" / "norm_issue.py"
    o = load_oracle(str(made))
    assert o.meta.needs_gpu is False and o.meta.description
    r = run_cli("--db", str(home / "b.db"), "start", "--repo", str(hist.path), "--good",
                hist.main[0], "--bad", hist.main[-1], "--oracle", str(made), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["culprit"]["sha"] == hist.culprit


def test_docstring_becomes_the_description(tmp_path: Path) -> None:
    (tmp_path / "repro.py").write_text(CRASH_REPRO)
    ok(invoke("oracle", "new", "d", "--from-repro", str(tmp_path / "repro.py"), "--dir",
            str(tmp_path)))
    assert load_oracle(str(tmp_path / "d.py")).meta.description == (
        "norm([3, 4]) must be 5 (reported in issue #1)."
    )


def test_without_match_a_print_style_repro_never_says_bad(home: Path, tmp_path: Path,
                                                          hist: SyntheticHistory) -> None:
    (tmp_path / "repro.py").write_text(PRINT_REPRO)
    ok(invoke("oracle", "new", "printed", "--from-repro", str(tmp_path / "repro.py"), "--dir",
            str(tmp_path)))
    r = invoke("check", "--oracle", str(tmp_path / "printed.py"), "--commit", hist.main[-1],
                "--repo", str(hist.path), "--profile", "torchlet", "--json")
    assert json.loads(r.stdout)["verdict"] == "good"


WRONG_REPRO = '''\
import os, torchlet

if os.environ["BISECTOR_COMMIT"] in OLDER:
    raise ImportError("cannot import name 'new_api' from 'torchlet'")
value = torchlet.norm([3.0, 4.0])
if abs(value - 5.0) > 1e-9:
    raise ValueError(f"norm is wrong: {value} at {hex(id(value))}")
'''

TRACEBACK = """\
Traceback (most recent call last):
  File "/home/reporter/repro.py", line 7, in <module>
    raise ValueError(f"norm is wrong: {value} at {hex(id(value))}")
ValueError: norm is wrong: 7.0 at 0x7f1c2a3b4c50
"""


def test_a_pasted_traceback_becomes_the_signature(home: Path, tmp_path: Path,
                                                  hist: SyntheticHistory) -> None:
    """The repro fails with an ImportError at commits 9-13 (an older API): with the signature
    from the report's traceback those are skips and the planted culprit is found."""
    older = [hist.main[i] for i in range(9, 14)]
    (tmp_path / "repro.py").write_text(WRONG_REPRO.replace("OLDER", repr(older)))
    (tmp_path / "tb.txt").write_text(TRACEBACK)
    r = ok(invoke("oracle", "new", "sig", "--from-repro", str(tmp_path / "repro.py"), "--dir",
                str(tmp_path), "--traceback", str(tmp_path / "tb.txt")))
    sig = r"ValueError: norm is wrong: \d+\.\d+ at 0x[0-9a-fA-F]+"
    assert load_oracle(str(tmp_path / "sig.py")).meta.match == sig
    assert f"signature: {sig} (from the traceback in" in r.stdout
    r = run_cli("--db", str(home / "b.db"), "start", "--repo", str(hist.path), "--good",
                hist.main[0], "--bad", hist.main[-1], "--oracle", str(tmp_path / "sig.py"),
                "--no-confirm", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["culprit"]["sha"] == hist.culprit
    skips = [p for p in d["probes"] if p["verdict"] == "skip"]
    assert skips and all(p["sha"] in older for p in skips)
    assert skips[0]["reason"] == ("a different failure: ImportError: cannot import name "
                                  "'new_api' from 'torchlet'")


def test_the_signature_comes_from_one_run_at_the_bad_ref(home: Path, tmp_path: Path,
                                                         hist: SyntheticHistory) -> None:
    """--at REF: the repro runs once at that commit, built and installed, and the failure it
    gives there is the signature (BISECTOR_COMMIT is set by the run, as in a bisection)."""
    older = [hist.main[i] for i in range(9, 14)]
    (tmp_path / "repro.py").write_text(WRONG_REPRO.replace("OLDER", repr(older)))
    r = ok(invoke("oracle", "new", "at_bad", "--from-repro", str(tmp_path / "repro.py"), "--dir",
                str(tmp_path), "--at", hist.main[-1], "--repo", str(hist.path)))
    sig = r"ValueError: norm is wrong: \d+\.\d+ at 0x[0-9a-fA-F]+"
    assert load_oracle(str(tmp_path / "at_bad.py")).meta.match == sig, r.stdout
    assert f"ran once at {hist.main[-1]}" in " ".join(r.stdout.split())
    # At a commit without the bug there is nothing to take.
    r = ok(invoke("oracle", "new", "at_good", "--from-repro", str(tmp_path / "repro.py"),
                  "--dir", str(tmp_path), "--at", hist.main[0], "--repo", str(hist.path)))
    assert "no signature" in r.stdout and "exited 0" in " ".join(r.stdout.split())


def test_without_a_signature_the_repro_runs_once_here(tmp_path: Path) -> None:
    (tmp_path / "repro.py").write_text("class Boom(Exception):\n    pass\n\n"
                                       "raise Boom(f'bad value {41 + 1} at {hex(id(tmp))}')\n"
                                       .replace("tmp", "object()"))
    r = ok(invoke("oracle", "new", "here", "--from-repro", str(tmp_path / "repro.py"), "--dir",
                  str(tmp_path)))
    meta = load_oracle(str(tmp_path / "here.py")).meta
    assert meta.match == r"Boom: bad value \d+ at 0x[0-9a-fA-F]+", r.stdout
    assert "ran once here with" in r.stdout
    # A repro whose imports this machine lacks is not run: no signature, said so.
    (tmp_path / "uses.py").write_text("import torchlet\nassert torchlet.norm([3.0]) == 3.0\n")
    r = ok(invoke("oracle", "new", "needs", "--from-repro", str(tmp_path / "uses.py"), "--dir",
                  str(tmp_path)))
    assert load_oracle(str(tmp_path / "needs.py")).meta.match is None
    assert "no signature (not run here:" in r.stdout and "cannot import torchlet" in r.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["../evil"], "must be a plain name"),
        (["ok", "--match", "("], "not a valid regular expression"),
    ],
)
def test_oracle_new_refuses_bad_input(tmp_path: Path, args: list[str], needle: str) -> None:
    (tmp_path / "repro.py").write_text(CRASH_REPRO)
    r = invoke("oracle", "new", args[0], "--from-repro", str(tmp_path / "repro.py"),
               "--dir", str(tmp_path / "o"), *args[1:])
    assert r.exit_code == 2 and needle in r.stderr and not (tmp_path / "o").exists()


def test_oracle_new_refuses_missing_repro_and_overwrite(tmp_path: Path) -> None:
    r = invoke("oracle", "new", "x", "--from-repro", str(tmp_path / "nope.py"), "--dir",
               str(tmp_path))
    assert r.exit_code == 2 and "does not exist" in r.stderr
    (tmp_path / "repro.py").write_text(CRASH_REPRO)
    (tmp_path / "x.py").write_text("keep me\n")
    r = invoke("oracle", "new", "x", "--from-repro", str(tmp_path / "repro.py"), "--dir",
               str(tmp_path))
    assert r.exit_code == 2 and "already exists" in r.stderr
    assert (tmp_path / "x.py").read_text() == "keep me\n"


def test_gpu_need_is_detected(tmp_path: Path) -> None:
    (tmp_path / "repro.py").write_text("import torch\nx = torch.ones(2, device='cuda')\n")
    ok(invoke("oracle", "new", "g", "--from-repro", str(tmp_path / "repro.py"), "--dir",
              str(tmp_path)))
    assert load_oracle(str(tmp_path / "g.py")).meta.needs_gpu is True


def test_check_commit_good_and_bad_with_facts(home: Path, hist: SyntheticHistory) -> None:
    def check(sha: str) -> dict[str, object]:
        r = invoke("check", "--oracle", "torchlet_norm", "--commit", sha, "--repo",
                   str(hist.path), "--profile", "torchlet", "--json")
        assert r.exit_code in (0, 1), r.stderr
        data: dict[str, object] = json.loads(r.stdout)
        return data

    good, bad = check(hist.main[14]), check(hist.main[15])
    assert (good["verdict"], bad["verdict"]) == ("good", "bad")
    facts = good["facts"]
    assert isinstance(facts, dict) and facts["git_version"] == hist.main[14]
    assert facts["obtained"].startswith("source build") and facts["python"]


def test_check_wheel_and_system(home: Path, hist: SyntheticHistory, shared_cache: Path) -> None:
    # The wheel of a good commit of this module's history (the check builds it, or finds it
    # cached): the shared cache's first wheel was whatever other tests had built by then,
    # once one the oracle skipped.
    good = hist.main[14]
    ok(invoke("check", "--oracle", "torchlet_norm", "--commit", good, "--repo", str(hist.path),
              "--profile", "torchlet"))
    pattern = f"wheels/*/*/torchlet-*+git{good[:7]}-*.whl"
    wheel = next(shared_cache.glob(pattern), None)
    assert wheel, f"no {pattern} in the shared cache after the check"
    r = invoke("check", "--oracle", "torchlet_norm", "--wheel", str(wheel), "--profile",
               "torchlet", "--json")
    assert (r.exit_code, json.loads(r.stdout)["verdict"]) == (0, "good"), r.stderr
    # The controller's own Python has no torchlet: the oracle cannot answer, so it skips.
    r = invoke("check", "--oracle", "torchlet_norm", "--env", "system", "--json")
    assert r.exit_code == 125 and json.loads(r.stdout)["verdict"] == "skip"
    r = invoke("check", "--oracle", "torchlet_norm", "--wheel", "/nope.whl")
    assert r.exit_code == 2 and "does not exist" in r.stderr


def _helper_wheel(where: Path) -> Path:
    """A real wheel of a tiny package, built here, to serve as an oracle dependency."""
    src = where / "helper_src"
    (src / "norm_helper").mkdir(parents=True)
    (src / "norm_helper" / "__init__.py").write_text("EXPECTED = 5.0\n")
    (src / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "norm-helper"\nversion = "1.0"\n'
    )
    from bisector.artifacts.build import uv_binary

    subprocess.run([uv_binary(), "build", "--wheel", "-q", "-o", str(where / "dist"), str(src)],
                   check=True)
    return next((where / "dist").glob("*.whl"))


def test_oracle_dependencies_are_installed_into_the_probe_env(home: Path, tmp_path: Path,
                                                               hist: SyntheticHistory) -> None:
    wheel = _helper_wheel(tmp_path)
    oracle = tmp_path / "with_dep.py"
    oracle.write_text(
        f'# /// script\n# dependencies = ["norm-helper @ {wheel.as_uri()}"]\n# ///\n'
        "import sys\nimport norm_helper\nimport torchlet\n"
        "sys.exit(0 if torchlet.norm([3.0, 4.0]) == norm_helper.EXPECTED else 1)\n"
    )
    r = run_cli("--db", str(home / "b.db"), "start", "--repo", str(hist.path), "--good",
                hist.main[0], "--bad", hist.main[-1], "--oracle", str(oracle), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["culprit"]["sha"] == hist.culprit


def test_dependency_that_cannot_install_is_a_skip(home: Path, tmp_path: Path,
                                                  hist: SyntheticHistory) -> None:
    oracle = tmp_path / "broken_dep.py"
    missing = (tmp_path / "absent-1.0-py3-none-any.whl").as_uri()
    oracle.write_text(f'# /// script\n# dependencies = ["absent @ {missing}"]\n# ///\n'
                      "raise SystemExit(1)\n")
    r = invoke("check", "--oracle", str(oracle), "--commit", hist.main[3], "--repo",
                str(hist.path), "--profile", "torchlet", "--json")
    data = json.loads(r.stdout)
    assert r.exit_code == 125 and data["verdict"] == "skip"
    assert data["reason"].startswith("environment install failed")


def test_an_oracles_temporary_files_live_in_bisectors_cache_and_go_with_the_run(
        home: Path, tmp_path: Path) -> None:
    oracle = tmp_path / "tmpdir_oracle.py"
    oracle.write_text(
        "import os, tempfile\n"
        "d = tempfile.gettempdir()\n"
        "open(os.path.join(d, 'big.bin'), 'wb').write(b'x' * 1000)\n"
        "print('TMP', d)\n"
        "print('TRITON', os.environ['TRITON_CACHE_DIR'])\n")
    r = invoke("check", "--oracle", str(oracle), "--env", "system", "--json")
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)["output_tail"]
    tmp = Path(next(x for x in out.splitlines() if x.startswith("TMP ")).split(" ", 1)[1])
    triton = next(x for x in out.splitlines() if x.startswith("TRITON ")).split(" ", 1)[1]
    assert tmp.is_relative_to(Path(os.environ["BISECTOR_CACHE_DIR"]))
    assert triton.startswith(str(tmp)) and not tmp.exists()
