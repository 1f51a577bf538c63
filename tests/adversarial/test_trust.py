"""Issue 20, class 1: a repository's ``bisector.toml`` is untrusted input.

It is read only at the root of the clone (never from a parent folder, never outside a git
repository); until the user trusts its exact content with ``bisect trust`` only inert keys
apply, and every key that runs a program, names a host, a path, an image or a database, or
weakens isolation or the cache is ignored with one line naming it. Each test writes the attack
a clone could carry and checks that nothing it asked for happened.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.support import invoke, one_line_error

pytestmark = [pytest.mark.adversarial]


def _clone(tmp_path: Path, toml: str) -> Path:
    clone = tmp_path / "clone"
    (clone / ".git").mkdir(parents=True)
    (clone / "bisector.toml").write_text(toml)
    return clone


def _help(cmd: str, cwd: Path) -> str:
    r = invoke(*cmd.split(), "--help", cwd=cwd)
    assert r.exit_code == 0, r.stderr
    return "".join(r.stdout.split())  # wrapping aside


def _ignored_note(stderr: str, *keys: str) -> str:
    notes = [ln for ln in stderr.splitlines() if "is not trusted" in ln]
    assert len(notes) == 1, stderr
    for key in keys:
        assert key in notes[0], notes[0]
    assert "bisect trust" in notes[0]
    return notes[0]


def test_a_clone_cannot_pick_the_interpreter_or_run_a_program(home: Path, tmp_path: Path) -> None:
    canary = tmp_path / "ran"
    evil = tmp_path / "clone-evilpy"
    evil.write_text(f"#!/bin/sh\ntouch {canary}\nexec python3 \"$@\"\n")
    evil.chmod(evil.stat().st_mode | stat.S_IEXEC)
    clone = _clone(tmp_path, f'[start]\npython = "{evil}"\nexecutor = "local"\n'
                             f'build-in = "host"\nnightly-index = "http://evil.example/whl"\n'
                             f'build-env = ["LD_PRELOAD=/tmp/x.so"]\njobs = 3\n')
    helped = _help("start", clone)
    assert str(evil) not in helped and "evil.example" not in helped and "LD_PRELOAD" not in helped
    assert "(3from" in helped  # an inert key still applies
    r = invoke("start", "--help", cwd=clone)
    _ignored_note(r.stderr, "[start] python", "[start] executor", "[start] build-in",
                  "[start] nightly-index", "[start] build-env")
    assert not canary.exists()


def test_only_the_clone_root_is_read(home: Path, tmp_path: Path) -> None:
    (tmp_path / "bisector.toml").write_text("[defaults]\njobs = 7\n")  # above the clone
    clone = tmp_path / "clone"
    (clone / ".git").mkdir(parents=True)
    (clone / "sub").mkdir()
    (clone / "sub" / "bisector.toml").write_text("[defaults]\njobs = 5\n")  # not the root
    outside = tmp_path / "plain"  # no git repository at all
    outside.mkdir()
    (outside / "bisector.toml").write_text("[defaults]\njobs = 6\n")
    for cwd in (clone, clone / "sub", outside):
        helped = _help("start", cwd)
        assert not any(f"({n}from" in helped for n in (5, 6, 7)), cwd


def test_the_watch_and_its_notifier_are_ignored(home: Path, tmp_path: Path) -> None:
    canary = tmp_path / "notified"
    clone = _clone(tmp_path, f'[notify]\ncommand = "touch {canary}"\n'
                             '[[suite]]\nname = "evil"\nsource = "installed"\n'
                             'oracles = ["torchlet_norm"]\n')
    r = invoke("tick", cwd=clone)
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert r.exit_code != 0 and len(errors) == 1 and "no [[suite]] to watch" in errors[0]
    _ignored_note(r.stderr, "[notify]", "[suite]")
    assert not canary.exists()


def test_gc_serve_and_oracle_new_keys_wait_for_trust(home: Path, tmp_path: Path) -> None:
    outside = tmp_path / "victim.py"
    outside.write_text("keep me\n")
    clone = _clone(tmp_path, '[gc]\nmax-size = "0"\n[serve]\nhost = "0.0.0.0"\n'
                             f'[oracle.new]\ndir = "{tmp_path}"\nforce = true\n')
    cache = Path(os.environ["BISECTOR_CACHE_DIR"])
    before = sorted(p.name for p in cache.iterdir())
    r = invoke("gc", cwd=clone)  # max-size from the clone never applied
    assert r.exit_code != 0 and "error: say what to remove" in r.stderr
    _ignored_note(r.stderr, "[gc] max-size", "[serve] host", "[oracle.new] dir",
                  "[oracle.new] force")
    assert sorted(p.name for p in cache.iterdir()) == before
    assert "0.0.0.0" not in _help("serve", clone)
    helped = _help("oracle new", clone)
    assert str(tmp_path) not in helped
    assert outside.read_text() == "keep me\n"


def test_trust_applies_the_exact_content_and_a_change_voids_it(home: Path,
                                                              tmp_path: Path) -> None:
    clone = _clone(tmp_path, '[serve]\nport = 8123\nhost = "127.0.0.2"\n')
    assert "127.0.0.2" not in _help("serve", clone)
    r = invoke("trust", cwd=clone)
    assert r.exit_code == 0 and "trusted" in r.stdout, r.stderr
    assert "127.0.0.2" in _help("serve", clone)
    assert "is not trusted" not in invoke("serve", "--help", cwd=clone).stderr
    listed = json.loads(invoke("trust", "--list", "--json").stdout)
    assert [(Path(t["path"]), t["state"]) for t in listed] == [
        ((clone / "bisector.toml").resolve(), "trusted")]

    (clone / "bisector.toml").write_text('[serve]\nport = 8123\nhost = "0.0.0.0"\n')
    assert "0.0.0.0" not in _help("serve", clone)  # changed: void until trusted again
    _ignored_note(invoke("serve", "--help", cwd=clone).stderr, "[serve] host")
    listed = json.loads(invoke("trust", "--list", "--json").stdout)
    assert listed[0]["state"] == "changed"

    assert invoke("trust", cwd=clone).exit_code == 0
    assert "0.0.0.0" in _help("serve", clone)
    r = invoke("trust", "--revoke", cwd=clone)
    assert r.exit_code == 0, r.stderr
    assert "0.0.0.0" not in _help("serve", clone)
    one_line_error(invoke("trust", "--revoke", cwd=clone), "is not trusted")


def test_trust_outside_a_clone_is_one_line(home: Path, tmp_path: Path) -> None:
    one_line_error(invoke("trust", cwd=tmp_path), "no bisector.toml at the root")
    one_line_error(invoke("trust", str(tmp_path / "nope.toml")), "no such file")


def test_the_users_own_file_is_trusted(home: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    mine = tmp_path / "mine.toml"
    mine.write_text('[serve]\nhost = "127.0.0.3"\n')
    monkeypatch.setenv("BISECTOR_CONFIG", str(mine))
    r = invoke("serve", "--help", cwd=tmp_path)
    assert "127.0.0.3" in "".join(r.stdout.split()) and "is not trusted" not in r.stderr


def _tool(folder: Path, canary: Path) -> None:
    tool = folder / "tools" / "py"
    tool.parent.mkdir(parents=True)
    tool.write_text(f"#!/bin/sh\ntouch {canary}\nexec python3 \"$@\"\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)


def test_trust_does_not_travel_through_a_symlink(home: Path, tmp_path: Path) -> None:
    """Issue 32, item 2: a hostile clone whose bisector.toml links to a file the user trusted
    elsewhere gets no trust, and a trusted file's relative values are its own folder's."""
    mine = _clone(tmp_path / "a", '[defaults]\npython = "./tools/py"\n[start]\njobs = 3\n')
    hostile = _clone(tmp_path / "b", "")
    (hostile / "bisector.toml").unlink()
    (hostile / "bisector.toml").symlink_to(mine / "bisector.toml")
    _tool(mine, tmp_path / "mine-ran")
    _tool(hostile, tmp_path / "hostile-ran")
    assert invoke("trust", cwd=mine).exit_code == 0

    helped = _help("start", mine)
    assert str((mine / "tools" / "py").resolve()) in helped  # its own folder's tool, absolute
    r = invoke("start", "--help", cwd=hostile)
    helped = "".join(r.stdout.split())
    assert "tools/py" not in helped and "(3from" in helped  # inert keys only
    notes = [ln for ln in r.stderr.splitlines() if "symbolic link" in ln]
    assert len(notes) == 1 and "[defaults] python" in notes[0], r.stderr
    one_line_error(invoke("trust", cwd=hostile), "symbolic link")

    # Run a command that starts the interpreter: the trusted clone's tool runs, the hostile's
    # never does.
    for clone in (mine, hostile):
        invoke("check", "--env", "system", "--", "true", cwd=clone)
    assert (tmp_path / "mine-ran").exists()
    assert not (tmp_path / "hostile-ran").exists()


def test_the_bytes_trusted_are_the_bytes_parsed(home: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 32, item 3: the file swapped between the trust check and the parse still
    applies what was checked (it was hashed on one read and parsed on another)."""
    from bisector.cli import cli, config_file

    clone = _clone(tmp_path, '[serve]\nhost = "127.0.0.2"\n')
    assert invoke("trust", cwd=clone).exit_code == 0
    monkeypatch.chdir(clone)
    found = config_file.files()
    assert [f.trusted for f in found] == [True]
    (clone / "bisector.toml").write_text('[serve]\nhost = "0.0.0.0"\n')  # the swap
    loaded = config_file.load(cli, found)
    assert loaded.default_map["serve"]["host"] == "127.0.0.2"
