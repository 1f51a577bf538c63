"""Issue 20, class 9: the wrong interpreter, silently.

Choosing an interpreter is a heuristic; judging must not be. bisector's own virtualenv is
skipped only when it lacks the probed package, a candidate's import is asked from an empty
folder (a same-named folder of the current directory does not count), and an oracle run that
cannot import the probed package is a skip saying so, never bad, in ``check`` and in a
bisection's probes alike, unless the oracle's own signature says that failure is the bug.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from bisector.app.demo.torchlet import SyntheticHistory
from tests.support import copy_world, git, invoke, one_line_error, run_cli

pytestmark = [pytest.mark.adversarial]

BASE = os.path.realpath(sys.executable)  # the interpreter behind .venv: no torchlet in it
REPRO = "import torchlet\nprint('torchlet from', torchlet.__file__)\n"


def _oracle(tmp_path: Path, body: str = REPRO) -> Path:
    path = tmp_path / "oracles" / "repro.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    return path


def _venv_with_package(tmp_path: Path) -> Path:
    """A virtualenv with a tiny generated ``torchlet`` and bisector importable (through a .pth
    that adds the development virtualenv's site-packages): bisector run from torch's own
    environment, as on the GPU box."""
    venv = tmp_path / "torch-venv"
    subprocess.run([BASE, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; "
                                "print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "torchlet").mkdir()
    (site / "torchlet" / "__init__.py").write_text("REAL = True\n")
    dev = sysconfig.get_paths()["purelib"]
    (site / "bisector_dev.pth").write_text(f"import site; site.addsitedir({dev!r})\n")
    return py


def _fake_system_python(tmp_path: Path) -> Path:
    """A ``python3`` first on PATH without torchlet (the system's)."""
    bin_dir = tmp_path / "usr-bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(BASE)
    return bin_dir


def test_check_env_system_picks_the_interpreter_that_imports_the_package(
        home: Path, tmp_path: Path) -> None:
    py = _venv_with_package(tmp_path)
    fake = _fake_system_python(tmp_path)
    project = tmp_path / "project"  # a folder the system python3 could import torchlet from
    (project / "torchlet").mkdir(parents=True)
    (project / "torchlet" / "__init__.py").write_text("REAL = False\n")
    oracle = _oracle(tmp_path)
    path = os.pathsep.join([str(fake), *[p for p in os.environ["PATH"].split(os.pathsep)
                                         if Path(p).resolve() != Path(sys.prefix) / "bin"]])
    r = run_cli("check", "--env", "system", "--profile", "torchlet", "--oracle", str(oracle),
                "--json", cwd=project, exe=[str(py), "-m", "bisector"],
                env={"PATH": path})
    assert r.returncode in (0, 1), r.stderr
    data = json.loads(r.stdout)
    assert data["python"] == str(py), (data["python"], r.stderr)
    assert data["verdict"] == "good", data
    note = [ln for ln in r.stderr.splitlines() if "Python:" in ln]
    assert note and str(py) in note[0] and "imports torchlet" in note[0], r.stderr


def test_check_in_an_environment_without_the_package_is_a_skip_saying_so(
        home: Path, tmp_path: Path) -> None:
    oracle = _oracle(tmp_path)
    r = invoke("check", "--env", "system", "--profile", "torchlet", "--python", BASE,
               "--oracle", str(oracle), "--json", cwd=tmp_path)
    data = json.loads(r.stdout)
    assert data["verdict"] == "skip", data
    assert data["reason"].startswith("the environment cannot import torchlet: "), data
    assert "No module named 'torchlet'" in data["reason"]


def test_an_oracle_whose_signature_is_the_import_failure_still_judges_it_bad(
        home: Path, tmp_path: Path) -> None:
    oracle = _oracle(tmp_path)
    r = invoke("check", "--env", "system", "--profile", "torchlet", "--python", BASE,
               "--oracle", str(oracle), "--match", "No module named 'torchlet'", "--json",
               cwd=tmp_path)
    assert json.loads(r.stdout)["verdict"] == "bad", r.stdout


def _commit(repo: Path, message: str, edit: dict[str, str]) -> str:
    for rel, text in edit.items():
        (repo / rel).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.mark.e2e
def test_a_probe_whose_environment_lacks_the_package_is_never_bad(
        home: Path, tmp_path: Path, world: SyntheticHistory) -> None:
    """Commits whose wheel has no torchlet (packaging broken for a while) inside a range:
    each probe there is a skip naming the missing package, so the culprit is never the commit
    that broke packaging."""
    hist = copy_world(world, tmp_path / "repo")
    repo = hist.path
    pyproject = (repo / "pyproject.toml").read_text()
    setup = (repo / "setup.py").read_text()
    good = hist.main[-1]
    broke = _commit(repo, "Break packaging", {
        "pyproject.toml": pyproject.replace('packages = ["torchlet", "torchlet.nn"]',
                                            "packages = []"),
        "setup.py": setup.replace('ext_modules=[Extension("torchlet._C", ["csrc/_C.c"])]',
                                  "ext_modules=[]")})
    for i in range(3):
        _commit(repo, f"Still broken {i}", {"README.md": f"note {i}\n"})
    init = (repo / "torchlet" / "__init__.py").read_text()
    bad = _commit(repo, "Restore packaging and plant BUG", {
        "pyproject.toml": pyproject, "setup.py": setup,
        "torchlet/__init__.py": init + "\nBUG = True\n"})
    oracle = _oracle(tmp_path, "import sys\nimport torchlet\n"
                               "sys.exit(1 if getattr(torchlet, 'BUG', False) else 0)\n")
    db = tmp_path / "b.db"
    r = run_cli("--db", str(db), "start", "--repo", str(repo), "--good", good, "--bad", bad,
                "--oracle", str(oracle), "--no-confirm", "--no-prebuilt", "--json")
    shown = json.loads(run_cli("--db", str(db), "show", "1", "--json", check=True).stdout)
    probes = shown["probes"]
    missing = [p for p in probes if "No module named 'torchlet'" in (p.get("reason") or "")
               or "No module named 'torchlet'" in (p.get("output_tail") or "")]
    assert missing, (r.stderr, probes)
    for p in missing:
        assert p["verdict"] == "skip", p
        assert p["reason"].startswith("the environment cannot import torchlet: "), p
    assert (shown.get("culprit") or {}).get("sha") != broke, shown.get("culprit")


@pytest.mark.parametrize("python", ["/bin/false", "/bin/ls"])
def test_a_python_that_is_no_python_is_one_line(home: Path, tmp_path: Path,
                                                python: str) -> None:
    """Issue 32, item 9: ``--python`` naming a non-Python binary (or a broken shim) gave a
    44-line traceback."""
    r = invoke("check", "--env", "system", "--python", python, "--", "true", cwd=tmp_path)
    one_line_error(r, "not a Python 3 interpreter")


def test_a_python_the_project_does_not_support_is_one_line(home: Path, tmp_path: Path) -> None:
    """Issue 32, item 9: a Python older than the project's ``Requires-Python`` was accepted
    silently (and every build failed as a skip)."""
    repo = tmp_path / "proj"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "1"\n'
                                         'requires-python = ">=3.99"\n')
    for i in range(3):
        (repo / "p.py").write_text(f"X = {i}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"c{i}")
    r = invoke("--db", str(home / "b.db"), "start", "--repo", str(repo), "--good", "main~2",
               "--bad", "main", "--", "true")
    one_line_error(r, "requires-python '>=3.99'")
    assert not (home / "b.db").exists()
