"""bisector.toml: the user's and the repository's defaults merged into click's default_map,
every key and value checked against the real commands, a command's table beating [defaults]."""

from __future__ import annotations

from pathlib import Path

import pytest

from bisector.base.errors import UsageError
from bisector.cli import cli
from bisector.cli.config_file import ConfigFile, files, load, repo_file


def _found(cwd: Path) -> list[tuple[Path, bool]]:
    return [(f.path, f.trusted) for f in files(cwd)]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_tables_merge_user_then_repository_and_a_commands_table_beats_defaults(
        tmp_path: Path) -> None:
    user = write(tmp_path / "user.toml", '[defaults]\njobs = 2\nbuild-jobs = 5\n'
                 '[list]\nlimit = 7\n')
    repo = write(tmp_path / "repo" / "bisector.toml",
                 '[start]\njobs = 4\nconfirm = false\nrepo = "."\n[defaults]\njobs = 3\n'
                 '[oracle.new]\ndir = "oracles"\n')
    got = load(cli, [ConfigFile(user, True), ConfigFile(repo, True)])
    assert got.default_map["start"]["jobs"] == 4  # its own table, though [defaults] came after
    assert got.default_map["plan"]["jobs"] == 3  # the repository's [defaults] beats the user's
    assert got.default_map["start"]["build_jobs"] == 5  # the user's, nothing overrode it
    assert got.default_map["start"]["confirm"] is False
    assert got.default_map["list"]["limit"] == 7
    # Relative paths are the file's, not the current folder's.
    assert got.default_map["start"]["repo"] == str(tmp_path / "repo" / ".")
    assert got.default_map["oracle"]["new"]["directory"] == str(tmp_path / "repo" / "oracles")
    assert got.sources[("start", "jobs")] == f"{repo} [start]"
    assert got.sources[("start", "build_jobs")] == f"{user} [defaults]"
    assert "jobs" not in got.default_map.get("list", {})  # [defaults] reaches only its owners


@pytest.mark.parametrize(("text", "message"), [
    ("[start]\njbos = 2\n", r"unknown option of `bisect start` 'jbos'; did you mean 'jobs'\?"),
    ("[strat]\njobs = 2\n", r"unknown table 'strat'; did you mean 'start'\?"),
    ("[defaults]\nnope = 1\n", r"\[defaults\]: unknown option 'nope'"),
    ("[start]\njobs = \"many\"\n", r"\[start\] jobs = 'many': 'many' is not a valid integer"),
    ("[start]\nexecutor = \"k8s\"\n", r"executor = 'k8s': 'k8s' is not one of"),
    ("[start]\nbuild-env = \"A=1\"\n", r"must be a list"),
    ("[start\n", r"not a readable TOML file"),
    ("start = 3\n", r"\[start\] must be a table"),
    # issue 32, item 8: "unknown option 'new'; known: " with an empty list
    ("[oracle]\nnew = 3\n", r"`bisect oracle` takes no options, its commands do: put them "
                            r"in one of \[oracle.new\]"),
])
def test_a_bad_key_or_value_is_one_line_naming_the_file_key_and_fix(
        tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path / "bisector.toml", text)
    with pytest.raises(UsageError, match=message) as e:
        load(cli, [ConfigFile(path, True)])
    assert str(path) in e.value.message and "\n" not in e.value.message


def test_the_watch_tables_are_left_to_the_watch(tmp_path: Path) -> None:
    path = write(tmp_path / "bisector.toml", '[watch]\nevery = "daily"\n[[suite]]\nname = "x"\n')
    assert load(cli, [ConfigFile(path, True)]).default_map == {}


def test_the_repository_file_is_searched_up_to_the_git_root_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "bisector.toml", "[start]\njobs = 9\n")  # above the clone: not its file
    clone = tmp_path / "clone"
    (clone / ".git").mkdir(parents=True)
    (clone / "src" / "deep").mkdir(parents=True)
    assert repo_file(clone / "src" / "deep") is None
    mine = write(clone / "bisector.toml", "[start]\njobs = 2\n")
    assert repo_file(clone / "src" / "deep") == mine
    monkeypatch.setenv("BISECTOR_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("BISECTOR_CONFIG", raising=False)
    assert _found(clone / "src") == [(mine, False)]  # untrusted until `bisect trust`
    user = write(tmp_path / "home" / "config" / "bisector.toml", "[list]\nlimit = 3\n")
    assert _found(clone / "src") == [(user, True), (mine, False)]
    monkeypatch.setenv("BISECTOR_CONFIG", str(tmp_path / "elsewhere.toml"))
    # The named file does not exist: only the repository's.
    assert _found(clone / "src") == [(mine, False)]


def test_any_failure_is_an_inert_key_of_start_and_plan(tmp_path: Path) -> None:
    """Which failure counts as the bug is a choice about the search, like ``match``: a
    repository's file may say it before it is trusted (run/hunt.py)."""
    repo = write(tmp_path / "bisector.toml", "[defaults]\nany-failure = true\n")
    got = load(cli, [ConfigFile(repo, False)])
    assert got.default_map["start"] == got.default_map["plan"] == {"any_failure": True}
    assert not got.ignored.get(repo)


def test_an_untrusted_file_sets_only_inert_keys_and_names_the_rest(tmp_path: Path) -> None:
    repo = write(tmp_path / "bisector.toml",
                 '[defaults]\njobs = 3\npython = "/x/py"\n[start]\nconfirm = false\n'
                 'executor = "local"\n[notify]\ncommand = "x"\n')
    got = load(cli, [ConfigFile(repo, False)])
    assert got.default_map["start"] == {"jobs": 3, "confirm": False}
    assert "python" not in got.default_map.get("check", {})
    assert sorted(got.ignored[repo]) == ["[defaults] python", "[notify]", "[start] executor"]
    (note,) = got.notes()
    assert str(repo) in note and "bisect trust" in note
    with pytest.raises(UsageError, match="unknown option"):  # still checked, typos included
        load(cli, [ConfigFile(write(tmp_path / "t.toml", "[start]\npyhton = 1\n"), False)])


def test_into_merge_is_an_inert_key_an_untrusted_file_may_set(tmp_path: Path) -> None:
    """Stopping at a merge runs nothing and names nothing: a repository's file may say so."""
    repo = write(tmp_path / "bisector.toml", "[start]\ninto-merge = false\n")
    got = load(cli, [ConfigFile(repo, False)])
    assert got.default_map["start"] == {"into_merge": False} and not got.ignored.get(repo)
    with pytest.raises(UsageError, match="into-merge"):  # a value the flag would refuse
        load(cli, [ConfigFile(write(tmp_path / "t.toml", '[start]\ninto-merge = "maybe"\n'),
                              False)])


def test_a_workers_pythons_are_the_files_own_paths(tmp_path: Path) -> None:
    """``bisect worker``'s --python is repeatable: a list in the file, and a single path from
    [defaults], are both read from the file's folder, never the one the worker stands in."""
    user = write(tmp_path / "cfg" / "bisector.toml",
                 '[worker]\npython = ["./tools/py3.12", "/opt/py/bin/python3.11", "python3"]\n')
    got = load(cli, [ConfigFile(user, True)])
    assert got.default_map["worker"]["python"] == [
        str(tmp_path / "cfg" / "tools" / "py3.12"), "/opt/py/bin/python3.11", "python3"]
    user.write_text('[defaults]\npython = "./tools/py3.12"\n')
    got = load(cli, [ConfigFile(user, True)])
    assert got.default_map["worker"]["python"] == [str(tmp_path / "cfg" / "tools" / "py3.12")]
    assert got.default_map["start"]["python"] == str(tmp_path / "cfg" / "tools" / "py3.12")
