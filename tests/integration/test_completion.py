"""Issue 24 item 4: TAB completion of values (bisection ids, oracle names, git refs, watch
suites), `bisect list` one line per bisection on a 100-column terminal, and `bisect -q`.

Completion is click's own protocol (``_BISECT_COMPLETE=bash_complete``, ``COMP_WORDS``,
``COMP_CWORD``), run in-process through CliRunner against a real store, real git repositories
and real bisector.toml files."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from bisector.app.demo.torchlet import SyntheticHistory
from tests.support import git, invoke, one_line_error, run_cli, snapshot

# A command oracle long enough that no 100-column table can show it whole.
NORM = ("import pathlib, sys, torchlet; assert pathlib.Path('torchlet/ops.py').is_file(); "
        "sys.exit(0 if abs(torchlet.norm([3.0, 4.0]) - 5.0) < 1e-9 else 1)")
COMMAND = ("python", "-P", "-c", NORM)
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def complete(*words: str, shell: str = "bash", cwd: Path | None = None,
             env: dict[str, str | None] | None = None) -> list[tuple[str, str]]:
    """What TAB offers after ``bisect WORDS`` (the last word is the one being completed):
    (type, value) pairs, in order. Completion exits 0 and writes nothing on stderr."""
    line = shlex.join(["bisect", *words])
    r = invoke(cwd=cwd, env={"_BISECT_COMPLETE": f"{shell}_complete", "COMP_WORDS": line,
                             "COMP_CWORD": str(len(words)), **(env or {})})
    assert r.exit_code == 0 and r.stderr == "", (r.exit_code, r.stderr)
    lines = [ln for ln in r.stdout.splitlines() if ln] if shell == "bash" else \
        r.stdout.splitlines()
    if shell == "zsh":  # type, value, help: three lines per item
        return [(lines[i], f"{lines[i + 1]}\t{lines[i + 2]}") for i in range(0, len(lines), 3)]
    return [tuple(ln.split(",", 1)) for ln in lines]  # type: ignore[misc]


def values(*words: str, **kw: object) -> list[str]:
    return [v for _, v in complete(*words, **kw)]  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def stored(world: SyntheticHistory, tmp_path_factory: pytest.TempPathFactory,
           shared_cache: Path) -> tuple[Path, dict[str, str]]:
    """A store with two finished bisections of the world, the newest by a long command."""
    base = tmp_path_factory.mktemp("completion")
    env = {"BISECTOR_HOME": str(base / "home"), "BISECTOR_CACHE_DIR": str(shared_cache)}
    db = base / "b.db"
    for oracle in (("--oracle", "torchlet_norm"), ("--", *COMMAND)):
        r = run_cli("--db", str(db), "start", "--repo", str(world.path), "--good",
                    world.main[0], "--bad", world.main[-1], "--no-confirm", "--json", *oracle,
                    env=env)
        assert r.returncode == 0, r.stderr
    return db, env


# -- bisection ids ---------------------------------------------------------------------------

def test_ids_come_from_the_store_newest_first_after_last(
        stored: tuple[Path, dict[str, str]], world: SyntheticHistory) -> None:
    db, env = stored
    before = snapshot(db)
    for cmd in ("show", "log", "resume"):
        assert values("--db", str(db), cmd, "", env=env) == ["last", "2", "1"]
    assert values("--db", str(db), "cancel", "", env=env) == ["2", "1"]  # no `last` there
    assert values("--db", str(db), "show", "1", env=env) == ["1"]
    assert values("--db", str(db), "show", "la", env=env) == ["last"]
    # zsh and fish show what each id is.
    items = complete("--db", str(db), "show", "", shell="zsh", env=env)
    assert items[1] == ("plain", f"2\tdone {world.main[0]}..{world.main[-1]}")
    assert snapshot(db) == before  # read only: nothing migrated, nothing written


def test_ids_of_a_store_that_is_not_there_or_not_a_store(tmp_path: Path) -> None:
    env: dict[str, str | None] = {"BISECTOR_HOME": str(tmp_path / "home")}
    assert values("show", "", env=env) == ["last"]  # the default store: none yet
    assert not (tmp_path / "home").exists()  # ... and none made
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite at all\n" * 10)
    assert values("--db", str(junk), "show", "", env=env) == ["last"]
    assert values("--db", "postgresql+psycopg://nobody@127.0.0.1:1/none", "show", "",
                  env=env) == ["last"]


# -- oracle names ----------------------------------------------------------------------------

def test_oracle_names_bundled_and_the_teams(tmp_path: Path) -> None:
    team = tmp_path / "team"
    team.mkdir()
    (team / "tensor_check.py").write_text("print('ok')\n")
    (team / "_helper.py").write_text("")
    env: dict[str, str | None] = {"BISECTOR_HOME": str(tmp_path / "home"),
                                  "BISECTOR_ORACLES_DIR": str(team)}
    got = values("start", "--oracle", "t", env=env)
    assert "torchlet_norm" in got and "tensor_check" in got and "_helper" not in got
    assert values("check", "--oracle", "tensor", env=env) == ["tensor_check"]
    # A path is the shell's to complete, and so is a name no oracle has.
    assert complete("start", "--oracle", "./my", env=env) == [("file", "./my")]
    assert complete("start", "--oracle", "zzz", env=env) == [("file", "zzz")]


# -- refs ------------------------------------------------------------------------------------

@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "clone"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    git(r, "commit", "-q", "--allow-empty", "-m", "one")
    git(r, "tag", "v2.5.0")
    git(r, "tag", "v2.6.0-rc1")
    git(r, "branch", "release/2.5")
    return r


def test_refs_of_repo_as_typed_or_of_this_clone(repo: Path, tmp_path: Path) -> None:
    env: dict[str, str | None] = {"BISECTOR_HOME": str(tmp_path / "home")}
    assert values("start", "--repo", str(repo), "--good", "", env=env) == [
        "main", "release/2.5", "v2.5.0", "v2.6.0-rc1"]
    assert values("start", "--repo", str(repo), "--bad", "v2.6", env=env) == ["v2.6.0-rc1"]
    assert values("plan", "--good", "rel", cwd=repo, env=env) == ["release/2.5"]
    assert values("oracle", "new", "x", "--repo", str(repo), "--at", "v2", env=env) == [
        "v2.5.0", "v2.6.0-rc1"]
    # No clone there, or no git at all: nothing offered, nothing printed.
    assert values("start", "--repo", str(tmp_path / "nowhere"), "--good", "", env=env) == []
    assert values("start", "--good", "", cwd=tmp_path, env=env) == []
    assert values("start", "--good", "", cwd=repo, env={**env, "PATH": str(tmp_path)}) == []


# -- watch suites ----------------------------------------------------------------------------

def test_suites_from_the_users_file_or_config(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "bisector.toml").write_text(
        '[[suite]]\nname = "cu128-py312"\n[[suite]]\nname = "cpu-py311"\n')
    env: dict[str, str | None] = {"BISECTOR_HOME": str(home)}
    assert values("tick", "--suite", "", cwd=tmp_path, env=env) == ["cu128-py312",
                                                                     "cpu-py311"]
    assert values("tick", "--suite", "cpu", cwd=tmp_path, env=env) == ["cpu-py311"]
    other = tmp_path / "other.toml"
    other.write_text('[[suite]]\nname = "rocm"\n')
    assert values("tick", "--config", str(other), "--suite", "", cwd=tmp_path,
                  env=env) == ["rocm"]
    other.write_text("[[suite]\nname = broken")  # unreadable: no suggestion, no error
    assert values("tick", "--config", str(other), "--suite", "", cwd=tmp_path, env=env) == []


# -- list on a 100-column terminal -----------------------------------------------------------

def test_list_keeps_each_bisection_on_one_line_of_100_columns(
        stored: tuple[Path, dict[str, str]]) -> None:
    db, env = stored
    r = invoke("--db", str(db), "list", env={**env, "COLUMNS": "100", "TTY_COMPATIBLE": "1"})
    assert r.exit_code == 0, r.stderr
    lines = ANSI.sub("", r.stdout).splitlines()
    assert all(len(ln) <= 100 for ln in lines), lines
    rows = [ln for ln in lines if ln.startswith("│")]
    assert [ln.split("│")[1].strip() for ln in rows] == ["2", "1"]  # one line each
    command = rows[0].split("│")[4].strip()
    assert command.endswith("…") and shlex.join(COMMAND).startswith(command[:-1])
    assert rows[1].split("│")[4].strip() == "torchlet_norm"
    # --wide has it whole, on one line too.
    wide = invoke("--db", str(db), "list", "--wide", env={**env, "COLUMNS": "100"})
    assert len(wide.stdout.splitlines()) == 3 and shlex.join(COMMAND)[:90] in wide.stdout


def test_list_of_a_store_not_made_yet(tmp_path: Path) -> None:
    env: dict[str, str | None] = {"BISECTOR_HOME": str(tmp_path / "home"), "BISECTOR_DB": None}
    r = invoke("list", env=env)
    assert r.exit_code == 0 and r.stdout == "" and "no bisections" in r.stderr
    assert json.loads(invoke("list", "--json", env=env).stdout) == []
    assert not (tmp_path / "home").exists()
    # A --db that names no file is more likely a typo: refused, still nothing made.
    one_line_error(invoke("--db", str(tmp_path / "typo.db"), "list", env=env),
                   "no bisector database", code=5)
    assert not (tmp_path / "typo.db").exists()


# -- --quiet ---------------------------------------------------------------------------------

def test_quiet_leaves_the_result_and_the_errors(stored: tuple[Path, dict[str, str]],
                                                 world: SyntheticHistory) -> None:
    db, env = stored
    args = ("--db", str(db), "start", "--repo", str(world.path), "--good", world.main[0],
            "--bad", world.main[-1], "--no-confirm", "--oracle", "torchlet_norm")
    loud = invoke(*args, env=dict(env))
    assert loud.exit_code == 0 and loud.stderr.startswith("bisection ")  # progress, notes
    quiet = invoke("-q", *args, env=dict(env))
    assert quiet.exit_code == 0 and quiet.stderr == ""
    assert world.culprit in quiet.stdout and world.culprit in loud.stdout  # the result stays
    one_line_error(invoke("--quiet", "--db", str(db), "show", "999", env=dict(env)),
                   "no bisection with id 999", code=6)
    # Quiet is per command: the next one talks again (tests run many in one process).
    assert invoke(*args, env=dict(env)).stderr.startswith("bisection ")
