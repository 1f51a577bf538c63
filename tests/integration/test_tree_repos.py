"""Repositories with nothing for uv to build, bisected as ``git bisect run`` does (issue 50).

A shell or C project (no ``pyproject.toml``, ``setup.py`` or ``setup.cfg``) used to be a
"build failed: ... does not appear to be a Python project" at every probe, and the bisection
stopped at its good endpoint (exit 7, "pick another --good"). Now each probe builds nothing and
runs the oracle in the commit's exported tree, cwd at its root; verdicts are stored, reused and
reported as for any bisection. A repository that becomes a package midway is probed in its
tree before that commit and built from it on.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support import (
    BISECT,
    ROOT,
    _probes,
    git,
    invoke,
    one_line_error,
    oracles_running,
    run_cli,
    wait_for,
)

pytestmark = pytest.mark.integration

CHECK = "test \"$(cat value)\" = 1\n"  # good while the file says 1

ADD_C = """\
#include <stdio.h>
int add(int a, int b) {{ return {body}; }}
int main(void) {{ printf("%d\\n", add(2, 2)); return add(2, 2) == 4 ? 0 : 1; }}
"""


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def _shell_repo(path: Path, commits: int = 16, culprit: int = 9) -> list[str]:
    """A shell project: ``value`` is 1 until commit ``culprit``, 2 from it on; every commit
    also changes ``NEWS`` (so no two trees are alike)."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    return [_commit(path, {"check.sh": CHECK, "value": "2\n" if i >= culprit else "1\n",
                           "NEWS": f"release {i}\n"}, f"change {i}") for i in range(commits)]


def _start(repo: Path, good: str, bad: str, *args: str) -> dict[str, Any]:
    r = run_cli("start", "--repo", str(repo), "--good", good, "--bad", bad, "--json", *args)
    assert r.returncode == 0, r.stderr
    assert "does not appear to be a Python project" not in r.stderr
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def test_a_shell_repository_bisects_in_its_trees_and_reuses_its_verdicts(
        home: Path, tmp_path: Path) -> None:
    shas = _shell_repo(tmp_path / "sh")
    first = _start(tmp_path / "sh", shas[0], shas[-1], "--no-confirm", "--", "sh", "check.sh")
    assert first["culprit"]["sha"] == shas[9]
    probes = first["probes"]
    assert probes and not any(p["reused"] for p in probes), probes
    assert {p["verdict"] for p in probes} == {"good", "bad"}, probes  # no skip: none built
    assert all(p["artifact"] is None for p in probes), probes  # nothing obtained
    assert first["project"]["profile"] == "tree", first["project"]
    # A second bisection of the same range and oracle runs nothing: every verdict is reused.
    again = _start(tmp_path / "sh", shas[0], shas[-1], "--no-confirm", "--", "sh", "check.sh")
    assert again["culprit"]["sha"] == shas[9]
    assert again["probes"] and all(p["reused"] for p in again["probes"]), again["probes"]
    # A narrower one reuses what lies inside it too.
    inner = _start(tmp_path / "sh", shas[2], shas[12], "--no-confirm", "--", "sh", "check.sh")
    assert inner["culprit"]["sha"] == shas[9]
    assert any(p["reused"] for p in inner["probes"]), inner["probes"]
    # bisect check --commit runs the oracle in that commit's tree as a probe does.
    for sha, said, code in ((shas[8], "good (exit 0", 0), (shas[9], "bad (exit 1", 1)):
        r = run_cli("check", "--repo", str(tmp_path / "sh"), "--commit", sha, "--", "sh",
                    "check.sh")
        assert r.returncode == code, r.stderr
        assert said in r.stdout and f"the tree of {sha[:12]} (nothing to build)" in r.stdout, \
            r.stdout


def test_a_killed_tree_bisection_resumes_to_the_same_answer(home: Path,
                                                            tmp_path: Path) -> None:
    """kill -9 in the middle, then ``bisect resume``: the stored configuration (the tree
    profile) probes the rest in their trees, and nothing judged is run again."""
    shas = _shell_repo(tmp_path / "sh", commits=24, culprit=15)
    db = home / "b.db"
    proc = subprocess.Popen([*BISECT, "--db", str(db), "start", "--repo", str(tmp_path / "sh"),
                             "--good", shas[0], "--bad", shas[-1], "--no-confirm", "--", "sh",
                             "-c", "sleep 1; sh check.sh"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # Three probes stored, then killed while the oracle of a probe not stored yet runs.
    assert wait_for(lambda: db.exists() and len(_probes(db, 1)) >= 3)
    assert wait_for(lambda: oracles_running(proc.pid) - set(_probes(db, 1)))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = _probes(db, 1)
    assert len(before) >= 3
    r = run_cli("--db", str(db), "resume", "1", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["culprit"]["sha"] == shas[15]
    assert [p["sha"] for p in d["probes"]][:len(before)] == before
    con = sqlite3.connect(db)
    runs = con.execute("SELECT COUNT(*) FROM run").fetchone()[0]
    con.close()
    assert runs == len(d["probes"])  # each commit judged once, across the kill


def test_a_c_repository_whose_oracle_compiles_and_runs_is_confirmed_by_its_revert(
        home: Path, tmp_path: Path) -> None:
    repo = tmp_path / "c"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    # Commit 5 changes add.c alone (its revert applies cleanly onto the bad endpoint); every
    # other commit bumps VERSION.
    shas = [_commit(repo, {"add.c": ADD_C.format(body="a - b" if i >= 5 else "a + b"),
                           **({} if i == 5 else {"VERSION": f"{i}\n"})}, f"c {i}")
            for i in range(10)]
    d = _start(repo, shas[0], shas[-1], "--", "sh", "-c", "cc -o add add.c && ./add")
    assert d["culprit"]["sha"] == shas[5]
    confirmation = d["result"]["confirmation"]
    # The culprit's revert onto the bad endpoint (a commit outside the range) is a tree
    # probe too, and it compiles good again.
    assert confirmation["revert"]["applied"] and confirmation["revert"]["verdict"] == "good", \
        confirmation


def test_an_oracle_file_runs_in_the_commits_tree(home: Path, tmp_path: Path) -> None:
    """Nothing is installed for a tree probe, so an oracle file runs where a command does:
    cwd at the root of the commit's tree, which is all it could look at."""
    shas = _shell_repo(tmp_path / "sh", commits=10, culprit=6)
    oracle = tmp_path / "value_is_one.py"
    oracle.write_text("import sys\nsys.exit(0 if open('value').read().strip() == '1' else 1)\n")
    d = _start(tmp_path / "sh", shas[0], shas[-1], "--no-confirm", "--oracle", str(oracle))
    assert d["culprit"]["sha"] == shas[6]


def test_a_repository_that_becomes_a_package_midway(home: Path, tmp_path: Path) -> None:
    """The generic profile's rule is per commit: before ``pyproject.toml`` exists a probe runs
    in the tree, from then on the package is built (assembled: a pure-Python project)."""
    repo = tmp_path / "mixed"
    shas = _shell_repo(repo, commits=6, culprit=99)
    pyproject = ("[build-system]\nrequires = [\"setuptools>=61\"]\n"
                 "build-backend = \"setuptools.build_meta\"\n\n"
                 "[project]\nname = \"mixedpkg\"\nversion = \"0.1.0\"\n")
    shas.append(_commit(repo, {"pyproject.toml": pyproject,
                               "mixedpkg/__init__.py": "VALUE = 1\n"}, "packaged"))
    for i in range(7, 14):
        shas.append(_commit(repo, {"value": "2\n" if i >= 11 else "1\n", "NEWS": f"r{i}\n"},
                            f"change {i}"))
    d = _start(repo, shas[0], shas[-1], "--no-confirm", "--", "sh", "check.sh")
    assert d["culprit"]["sha"] == shas[11]
    assert d["project"]["profile"] == "generic", d["project"]
    by_sha = {p["sha"]: p["artifact"] for p in d["probes"]}
    assert by_sha[shas[0]] is None  # no packaging: its tree, nothing built
    assert by_sha[shas[-1]] == "source"  # a package: built (assembled) and installed


def test_no_python_project_advice_for_a_repository_without_packaging(
        home: Path, tmp_path: Path) -> None:
    """In-process, the whole output read: the old advice ("does not appear to be a Python
    project ... pick another --good") never appears, and the bisection answers."""
    shas = _shell_repo(tmp_path / "sh", commits=8, culprit=5)
    r = invoke("start", "--repo", str(tmp_path / "sh"), "--good", shas[0], "--bad", shas[-1],
               "--no-confirm", "--", "sh", "check.sh")
    said = r.stdout + r.stderr
    assert r.exit_code == 0, said
    assert "does not appear to be a Python project" not in said
    assert "pick another --good" not in said
    assert shas[5] in said
    # A container runs no oracle in a commit's tree (an oracle file neither): refused before
    # anything is stored.
    oracle = tmp_path / "value_is_one.py"
    oracle.write_text("import sys\nsys.exit(open('value').read().strip() != '1')\n")
    r = invoke("start", "--repo", str(tmp_path / "sh"), "--good", shas[0], "--bad", shas[-1],
               "--executor", "docker", "--oracle", str(oracle))
    one_line_error(r, "--executor local")
    assert "no Python packaging" in r.stderr
