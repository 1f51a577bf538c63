"""A probe's facts come from its own oracle run (no second import of the package), and every
probe records where its time went (issue 21 item 1): the facts hook in a real virtualenv, and a
whole installed-base bisection on torchlet whose show/JSON/HTML carry the phases."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from bisector.app.demo.torchlet import generate
from bisector.executors.facts import FACTS_FILE, PENDING, install_facts_hook, learn_facts
from bisector.run.pipeline import PHASES
from tests.support import (
    bisect_installed_base,
    cli,
    installed_base_history,
    installed_dir,
    installed_torchlet,
)


def _venv(path: Path) -> tuple[Path, Path]:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    py = path / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], capture_output=True, text=True, check=True)
    return py, Path(site.stdout.strip())


@pytest.mark.integration
def test_the_hook_writes_the_facts_of_what_the_run_imported(tmp_path: Path) -> None:
    py, site = _venv(tmp_path / "venv")
    install_facts_hook(site)
    told = tmp_path / "told"
    told.mkdir()
    env = {"PATH": "/usr/bin:/bin", "BISECTOR_FACTS_DIR": str(told),
           "BISECTOR_FACTS_PACKAGE": "colorsys"}
    # A run that never imports the package writes nothing (and pays nothing).
    subprocess.run([str(py), "-S", "-c", "pass"], env=env, check=True)
    subprocess.run([str(py), "-c", "import sys; sys.exit(0)"], env=env, check=True)
    assert list(told.iterdir()) == []
    # One that does, and exits with the oracle's "bad" status, still reports it.
    r = subprocess.run([str(py), "-c", "import colorsys, sys; sys.exit(1)"], env=env, check=False)
    assert r.returncode == 1
    (written,) = told.glob("facts-*.json")
    facts = json.loads(written.read_text())
    assert facts["package"] == "colorsys"
    assert facts["python"].startswith(sysconfig.get_python_version())
    # Without the variable the hook writes nothing, even when the package is imported.
    written.unlink()
    subprocess.run([str(py), "-c", "import colorsys"], env={"PATH": "/usr/bin:/bin"}, check=True)
    assert list(told.iterdir()) == []


@pytest.mark.integration
def test_facts_are_learned_once_from_the_run_else_asked(tmp_path: Path) -> None:
    py, site = _venv(tmp_path / "venv")
    venv = tmp_path / "venv"
    install_facts_hook(site)
    (venv / FACTS_FILE).write_text(json.dumps({"obtained": "wheel", PENDING: True}))
    told = tmp_path / "told"
    told.mkdir()
    # The run imported the package: its facts are kept, with the environment's own.
    subprocess.run([str(py), "-c", "import colorsys"], check=True,
                   env={"PATH": "/usr/bin:/bin", "BISECTOR_FACTS_DIR": str(told),
                        "BISECTOR_FACTS_PACKAGE": "colorsys"})
    facts = learn_facts(venv, told, "colorsys")
    assert facts["facts_from"] == "run" and facts["package"] == "colorsys"
    assert facts["obtained"] == "wheel"
    stored = json.loads((venv / FACTS_FILE).read_text())
    assert PENDING not in stored and stored["package"] == "colorsys"
    # Stored: a later probe reads them, whatever its run reported.
    assert learn_facts(venv, None, "colorsys") == stored
    # A run that did not import it: the environment's Python is asked (the fallback).
    (venv / FACTS_FILE).write_text(json.dumps({"obtained": "wheel", PENDING: True}))
    empty = tmp_path / "empty"
    empty.mkdir()
    asked = learn_facts(venv, empty, "colorsys")
    assert asked["facts_from"] == "asked" and asked["package"] == "colorsys"


@pytest.mark.e2e
def test_an_overlay_bisection_records_each_probes_phases(home: Path, tmp_path: Path) -> None:
    hist = generate(tmp_path / "src", release_at=None, side_branch_at=None, broken=())
    python = installed_torchlet(hist, tmp_path / "installed")
    repo = tmp_path / "proof" / "repo"
    shas = installed_base_history(installed_dir(python, "torchlet"), repo, harmless=4)
    db = tmp_path / "proof" / "bisector.db"
    out = bisect_installed_base(repo, shas, python, db)
    assert out["culprit"]["sha"] == shas["culprit"]
    data = json.loads(cli(db, "show", "1", "--json"))
    ran = [p for p in data["probes"] if not p["reused"] and p["exit_code"] is not None]
    assert ran
    for p in ran:
        assert set(p["phases"]) == set(PHASES)
        assert p["phases"]["oracle"] == pytest.approx(p["duration_s"], abs=0.01)
        assert all(v >= 0 for v in p["phases"].values())
        # Told by the oracle's own run, not by a second import: and each overlay's torchlet
        # names its own commit (an overlay's facts are never its base's).
        assert p["facts"]["facts_from"] == "run"
        assert p["facts"]["git_version"].startswith(p["sha"][:7]) or \
            p["facts"].get("overlay", {}).get("base_commit") == p["sha"]
    assert "Where each probe's time went" in cli(db, "show", "1")
    html = cli(db, "show", "1", "--format", "html")
    assert 'id="phases"' in html and "overhead" in html


@pytest.mark.integration
def test_a_pyc_planted_in_the_environment_is_never_read(tmp_path: Path, home: Path) -> None:
    """Bytecode is written (the run's own Pythons share it) but only under the run's fresh
    folder: a .pyc an earlier run left in site-packages' __pycache__ is not read."""
    import os
    import py_compile

    from bisector.executors.oracle_run import run_oracle
    from bisector.oracle.script import load_oracle

    py, site = _venv(tmp_path / "venv")
    planted = tmp_path / "planted" / "m.py"
    planted.parent.mkdir()
    planted.write_text("X = 2\n")
    (site / "m.py").write_text("X = 1\n")  # same size as the planted source
    st = (site / "m.py").stat()
    os.utime(planted, ns=(st.st_atime_ns, st.st_mtime_ns))
    tag = subprocess.run([str(py), "-c", "import sys; print(sys.implementation.cache_tag)"],
                         capture_output=True, text=True, check=True).stdout.strip()
    py_compile.compile(str(planted), cfile=str(site / "__pycache__" / f"m.{tag}.pyc"),
                       doraise=True)
    env = {"PATH": "/usr/bin:/bin"}
    plain = subprocess.run([str(py), "-c", "import m; print(m.X)"], env=env,
                           capture_output=True, text=True, check=True)
    assert plain.stdout.strip() == "2"  # the plant works on a plain run
    oracle_file = tmp_path / "oracle.py"
    oracle_file.write_text("import sys, m\nprint(m.X)\nsys.exit(0 if m.X == 1 else 1)\n")
    res = run_oracle(str(py), load_oracle(str(oracle_file)), "0" * 40, tmp_path / "run", {})
    assert res.exit_code == 0, res.output_tail


@pytest.mark.integration
def test_two_probes_learning_one_environment_s_facts_at_once_both_succeed(
        tmp_path: Path) -> None:
    """Two probes of one environment at once (K slots, or two bisections sharing the cache)
    each learn its facts; with one shared temporary name the second rename found nothing and
    failed its probe (FileNotFoundError, seen in the suite)."""
    from concurrent.futures import ThreadPoolExecutor

    venv = tmp_path / "venv"
    venv.mkdir()
    told = tmp_path / "told"
    told.mkdir()
    (told / "facts-1.json").write_text(json.dumps({"package": "colorsys", "python": "3"}))
    pending = json.dumps({"obtained": "wheel", PENDING: True})

    def learn(_: int) -> dict[str, object]:
        return learn_facts(venv, told, "colorsys")

    for _ in range(20):
        (venv / FACTS_FILE).write_text(pending)
        with ThreadPoolExecutor(8) as pool:
            got = list(pool.map(learn, range(8)))
        assert all(g.get("package") == "colorsys" for g in got)
    assert [p.name for p in venv.iterdir()] == [FACTS_FILE]  # no temporary file left
