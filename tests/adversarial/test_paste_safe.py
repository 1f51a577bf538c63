"""Issue 48, round 5, "commands safe to paste and that reproduce": every command of the issue
(by hand, the compiler pass's replay, the compile-debugging lines, the bisector line) is
pasted into a real ``sh`` and does what it says.

A project made with ``git init`` here whose oracle is a script inside the clone
(``sh CLONE/orc.sh``) that fails only with ``--env TORCHINDUCTOR_X=1`` and the culprit's
change; one real bisection (``bisect start``), its issue read with ``show --format issue``
(click's CliRunner), and the same bisection rendered as a PyTorch compile failure with the
compiler bisector's finding (the replay and the ``bisect check`` lines, as
tests/integration/test_report_sections.py does). The by-hand block runs whole in a scratch
clone, ``pip`` a stub (the oracle reads the checkout); ``bisect`` and ``python`` are stubs that
write down the words and the variable they were given.

Before: the commands said ``sh <repo>/orc.sh`` (pasted, the shell reads ``<repo`` as an input
redirection), the by-hand block and the replay dropped ``--env`` (the block passed at the
culprit), and the title and the oracle's summary named the clone's path on this machine.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from bisector.app.report import compile_debug, portable
from bisector.app.report.issue import issue_markdown
from bisector.cli import start
from bisector.project.profiles import report_names
from bisector.run.config import request_from
from tests.issue_rules import check
from tests.support import git, invoke, run_cli

pytestmark = [pytest.mark.adversarial, pytest.mark.e2e]

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "demo"
version = "1.0"

[tool.setuptools]
packages = ["demo"]
"""
# Bad only with the variable the bisection ran with and the culprit's change (run in the tree).
ORC = """\
#!/bin/sh
[ "$TORCHINDUCTOR_X" = 1 ] || exit 0
grep -q 'VALUE = 1' demo/__init__.py && exit 0
echo "torch._inductor.exc.InductorError: VALUE is not 1" >&2
exit 1
"""
CULPRIT = 4
# Pasted, a command may only be run by these stubs: each writes its words, one a line, after
# the variable the oracle needs (or "unset"), to $STUB_LOG.
STUB = ('#!/bin/sh\n{ printf "%s\\n" "${TORCHINDUCTOR_X-unset}"; printf "%s\\n" "$@"; } '
        '> "$STUB_LOG"\n')
PLACEHOLDER = re.compile(r"<[A-Za-z][\w-]*>")


@dataclass(frozen=True)
class Bisected:
    base: Path  # everything of this machine: the clone, the store, bisector's home
    repo: Path
    culprit: str
    parent: str
    db: Path
    issue: str  # bisect show --format issue
    torch_issue: str  # the same as a PyTorch compile failure with the compiler pass


def _project(root: Path) -> tuple[Path, list[str]]:
    repo = root / "src" / "demo"
    (repo / "demo").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main", str(repo))
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / "orc.sh").write_text(ORC)
    (repo / "demo" / "__init__.py").write_text("VALUE = 1\n")
    shas = []
    for i in range(7):
        if i == CULPRIT:
            (repo / "demo" / "__init__.py").write_text("VALUE = 2\n")
        elif i:
            (repo / "demo" / f"m{i}.py").write_text(f"X = {i}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"commit {i}")
        shas.append(git(repo, "rev-parse", "HEAD"))
    return repo, shas


def _as_torch(shown: dict[str, Any]) -> str:
    """The bisection as a PyTorch compile failure whose compiler pass named a lowering: the
    issue with the replay and the ``bisect check`` lines."""
    req = request_from(dict(start.make_context(
        "start", shlex.split(shown["reproduce"])[2:]).params))
    d = {**shown, "project": report_names("pytorch", shown["repo"])}
    d["result"] = {**d["result"], "compiler_bisector": {
        "available": True, "runs": 7, "sha": d["culprit"]["sha"],
        "found": {"kind": "bisect", "bisect_number": 2, "backend": "inductor",
                  "subsystem": "lowerings"}}}
    d["compile_debug"] = compile_debug.hints(d, req)
    assert d["compile_debug"], "the oracle's failure names inductor"
    return issue_markdown(d, req)


@pytest.fixture(scope="module")
def bisected(tmp_path_factory: pytest.TempPathFactory,
             shared_cache: Path) -> Iterator[Bisected]:
    base = tmp_path_factory.mktemp("paste")
    repo, shas = _project(base)
    db = base / "b.db"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BISECTOR_HOME", str(base / "home"))
        mp.setenv("BISECTOR_CACHE_DIR", str(shared_cache))
        mp.delenv("BISECTOR_DB", raising=False)
        mp.delenv("TORCHINDUCTOR_X", raising=False)
        r = run_cli("--db", str(db), "start", "--repo", str(repo), "--good", shas[0], "--bad",
                    "main", "--no-confirm", "--json", "--env", "TORCHINDUCTOR_X=1", "--", "sh",
                    str(repo / "orc.sh"))
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["culprit"]["sha"] == shas[CULPRIT]
        text = invoke("--db", str(db), "show", "1", "--format", "issue")
        assert text.exit_code == 0, text.stderr
        shown = invoke("--db", str(db), "show", "1", "--json")
        assert shown.exit_code == 0, shown.stderr
        yield Bisected(base, repo, shas[CULPRIT], shas[CULPRIT - 1], db, text.stdout,
                       _as_torch(json.loads(shown.stdout)))


def _fences(text: str) -> dict[str, str]:
    """The issue's shell commands by what they are: by hand, replay, check, bisector."""
    out: dict[str, str] = {}
    for t in MarkdownIt("commonmark").parse(text):
        if t.type != "fence":
            continue
        for key, needle in (("by_hand", "git checkout"), ("replay", "compiler_bisector run"),
                            ("check", "bisect check"), ("bisector", "bisect start")):
            if needle in t.content:
                out.setdefault(key, "")
                out[key] += t.content
    return out


def _both(b: Bisected) -> dict[str, str]:
    """The CLI's issue's commands, with the replay and check lines of its PyTorch rendering."""
    return {**_fences(b.torch_issue), **_fences(b.issue)}


def _scratch(b: Bisected, tmp: Path) -> tuple[Path, dict[str, str]]:
    """A reader's machine: a folder holding a clone named as the issue names it, the stubs
    first on PATH, no TORCHINDUCTOR_X in the environment."""
    where = tmp / "reader"
    where.mkdir()
    subprocess.run(["git", "clone", "-q", str(b.repo), str(where / "demo")], check=True)
    stubs = tmp / "stubs"
    stubs.mkdir()
    for name in ("bisect", "python", "pip"):
        (stubs / name).write_text(STUB)
        (stubs / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_X"}
    env |= {"PATH": f"{stubs}:{env['PATH']}", "STUB_LOG": str(tmp / "stub.log")}
    return where, env


def _sh(line: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``line`` pasted into ``sh`` at ``cwd``; the folder's names stay as they were (no
    redirection made a file)."""
    Path(env["STUB_LOG"]).unlink(missing_ok=True)
    before = sorted(p.name for p in cwd.iterdir())
    r = subprocess.run(["sh", "-c", line], cwd=cwd, env=env, capture_output=True, text=True,
                       check=False)
    assert sorted(p.name for p in cwd.iterdir()) == before, line
    return r


def _pasted(line: str, cwd: Path, env: dict[str, str]) -> list[str]:
    """``line`` pasted into ``sh`` at ``cwd`` runs a stub: the words it got, after the
    variable."""
    r = _sh(line, cwd, env)
    log = Path(env["STUB_LOG"])
    assert r.returncode == 0 and log.exists(), (line, r.stderr)
    return log.read_text().splitlines()


def _oracle_ran(line: str, cwd: Path, env: dict[str, str]) -> None:
    """``line`` pasted into ``sh`` at the clone (at a bad commit) ran the clone's script with
    the variable set: it failed with the script's own message."""
    r = _sh(line, cwd, env)
    assert r.returncode == 1 and "InductorError: VALUE is not 1" in r.stderr, (line, r.stderr)


def test_a_path_inside_the_clone_is_pasteable_in_every_command(bisected: Bisected,
                                                               tmp_path: Path) -> None:
    """P1: ``sh <repo>/orc.sh`` nowhere: in the by-hand block and the replay (run at the
    checkout's root) the script is ``./orc.sh``; in the bisector and ``bisect check`` lines
    (typed beside the clone; the oracle runs in each probed commit's tree) it is
    ``"$PWD"/demo/orc.sh``, which the shell makes the clone's file."""
    for issue_text in (bisected.issue, bisected.torch_issue):
        for key, text in _fences(issue_text).items():
            commands = "\n".join(ln.split("  #")[0] for ln in text.splitlines())
            assert not PLACEHOLDER.search(commands), (key, text)
    fences = _both(bisected)
    assert set(fences) == {"by_hand", "replay", "check", "bisector"}
    assert "sh ./orc.sh  # in the checkout" in fences["by_hand"]
    where, env = _scratch(bisected, tmp_path)
    clone_script = str(where / "demo" / "orc.sh")
    bisector_line = fences["bisector"].splitlines()[-1]
    assert bisector_line.endswith(' -- sh "$PWD"/demo/orc.sh'), bisector_line
    got = _pasted(bisector_line, where, env)
    assert got[1:4] == ["start", "--repo", "demo"] and got[-2:] == ["sh", clone_script]
    for line in fences["check"].splitlines():
        if line.startswith("bisect check"):
            got = _pasted(line, where, env)
            assert got[-2:] == ["sh", clone_script], line
    first, *on_off = fences["replay"].splitlines()
    got = _pasted(first, where / "demo", env)
    assert got[-2:] == ["sh", "./orc.sh"] and (where / "demo" / got[-1]).is_file(), first
    assert len(on_off) == 2
    for line in on_off:  # the oracle itself, with the application at fault on, then off;
        # the variable given here, so only the script's path is under test
        _oracle_ran(line, where / "demo", {**env, "TORCHINDUCTOR_X": "1"})


def test_every_way_to_reproduce_sets_the_oracle_environment(bisected: Bisected,
                                                            tmp_path: Path) -> None:
    """H1: the by-hand block, pasted whole into ``sh`` at a clone, fails at the culprit
    (exit 1) and passes at its parent: the block sets TORCHINDUCTOR_X=1 for the oracle as the
    bisection did; the replay gives it to the compiler bisector, the ``bisect check`` lines
    and the bisector line say ``--env TORCHINDUCTOR_X=1``."""
    fences = _both(bisected)
    where, env = _scratch(bisected, tmp_path)
    block = fences["by_hand"]
    assert block.splitlines()[-1].startswith("TORCHINDUCTOR_X=1 sh ./orc.sh"), block
    for sha, code in ((bisected.parent, 0), (bisected.culprit, 1)):
        r = subprocess.run(["sh", "-c", block.replace(bisected.culprit, sha)], cwd=where,
                           env=env, capture_output=True, text=True, check=False)
        assert r.returncode == code, (sha, block, r.stdout, r.stderr)
    assert "InductorError: VALUE is not 1" in r.stderr  # the oracle's own failure
    assert Path(env["STUB_LOG"]).read_text().splitlines()[1:] == ["install", "."]  # pip
    first, *on_off = fences["replay"].splitlines()  # at the culprit, where the block left it
    assert _pasted(first, where / "demo", env)[0] == "1", first
    for line in on_off:
        _oracle_ran(line, where / "demo", env)
    for text in (fences["check"], fences["bisector"]):
        assert text.count("--env TORCHINDUCTOR_X=1") == text.count("bisect "), text


def test_the_title_and_the_oracle_summary_name_no_path_of_this_machine(
        bisected: Bisected, monkeypatch: pytest.MonkeyPatch) -> None:
    """I1: the title and the ``<summary>`` named the oracle ``sh /tmp/.../src/demo/orc.sh``;
    now relative to the clone, and no path of this machine (the clone, the store, bisector's
    home) anywhere in the issue."""
    for text in (bisected.issue, bisected.torch_issue):
        check(text, [bisected.base, bisected.repo])
        assert text.startswith(f"### `sh ./orc.sh` fails since {bisected.culprit[:12]}")
        assert "<summary>Command oracle <code>sh ./orc.sh</code>" in text
    # bisector's home (BISECTOR_HOME) is a folder of this machine, as its data and cache are
    home = bisected.base / "home"
    monkeypatch.setenv("BISECTOR_HOME", str(home))
    assert portable.scrubber("/r")(f"sh {home}/orc.sh") == "sh <bisector-home>/orc.sh"
