"""What a new user tripped over: the interpreter `check` and `start` run, where `oracle new`
writes, errors under --json, `list` in a pipe, shell completion, and `make test`'s system
dependencies. The CLI in-process (click's CliRunner) where only its messages and files are
checked; real processes for what needs one: a bisection, the console script's completion, fake
interpreters, the script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bisector.app.demo.torchlet import SyntheticHistory
from bisector.project.interpreter import choose_python
from tests.support import ROOT, copy_world, invoke, run_cli

REPRO = "assert 1 + 1 == 3, 'the bug'\n"


def fake_python(folder: Path, name: str, has_torch: bool) -> Path:
    """A shell script posing as an interpreter: `[-E] -c "...; import torch"` succeeds only
    if has_torch (bisector checks with -E, so PYTHONPATH cannot fake a torch)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text('#!/bin/sh\n[ "$1" = -E ] && shift\n[ "$1" = -c ] && case "$2" in '
                    f'*"import torch") exit {0 if has_torch else 1};; esac\nexit 1\n')
    path.chmod(0o755)
    return path


# -- 1. the default interpreter -------------------------------------------------------------

def test_the_first_python3_on_path_that_imports_torch_is_chosen(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    without = fake_python(tmp_path / "a", "python3", has_torch=False)
    with_torch = fake_python(tmp_path / "b", "python3", has_torch=True)
    monkeypatch.setenv("PATH", os.pathsep.join([str(without.parent), str(with_torch.parent)]))
    chosen = choose_python(None, "torch")
    assert chosen.path == str(with_torch)
    assert str(with_torch) in chosen.note and "imports torch" in chosen.note


def test_python_is_tried_after_every_python3(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    without = fake_python(tmp_path / "a", "python3", has_torch=False)
    plain = fake_python(tmp_path / "b", "python", has_torch=True)
    monkeypatch.setenv("PATH", os.pathsep.join([str(plain.parent), str(without.parent)]))
    assert choose_python(None, "torch").path == str(plain)


def test_none_imports_it_so_the_first_python3_and_a_note_saying_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = fake_python(tmp_path / "a", "python3", has_torch=True)  # has torch, not this one
    fake_python(tmp_path / "b", "python3", has_torch=True)
    monkeypatch.setenv("PATH", os.pathsep.join([str(tmp_path / "a"), str(tmp_path / "b")]))
    chosen = choose_python(None, "bisector_test_absent_package")
    assert chosen.path == str(first)
    assert ("neither bisector's own Python nor any python3 or python on PATH imports "
            "bisector_test_absent_package") in chosen.note


def test_a_pyenv_shim_is_resolved_to_the_python_it_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A package only this interpreter has: bisector's own Python (tried first) lacks it.
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    target = str(venv / "bin" / "python")
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = subprocess.run([target, "-c", where], check=True, capture_output=True,
                          text=True).stdout.strip()
    (Path(site) / "only_in_v").mkdir()
    (Path(site) / "only_in_v" / "__init__.py").write_text("")
    shim = tmp_path / "shims" / "python3"
    shim.parent.mkdir()
    starts = tmp_path / "starts"
    shim.write_text(f'#!/bin/sh\necho . >> {starts}\nexec {target} "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", str(shim.parent))
    chosen = choose_python(None, "only_in_v")
    # What ran, not the launcher that picks per folder; and the shim started once for both
    # questions (a pyenv shim is some 50 processes a start).
    assert Path(chosen.path).parent == venv / "bin", chosen
    assert starts.read_text().count(".") == 1
    starts.unlink()
    none = choose_python(None, "in_no_python_here")
    assert Path(none.path).parent == venv / "bin" and "neither" in none.note, none
    assert starts.read_text().count(".") == 1
    # A shim picks by the folder it is started in (pyenv's .python-version): asked where the
    # user is, not in some other folder. That folder's own packages still do not count (the
    # oracle runs elsewhere).
    shim.write_text(f'#!/bin/sh\n[ -f .python-version ] && exec {target} "$@"\n'
                    f'exec {sys.executable} "$@"\n')
    project = tmp_path / "project"
    (project / "checkout_only").mkdir(parents=True)
    (project / "checkout_only" / "__init__.py").write_text("")
    (project / ".python-version").write_text("v\n")
    monkeypatch.chdir(project)
    assert Path(choose_python(None, None).path).parent == venv / "bin"
    assert Path(choose_python(None, "only_in_v").path).parent == venv / "bin"
    assert "neither" in choose_python(None, "checkout_only").note
    # A wrapper elsewhere is kept as it is: it may set up what it execs into.
    wrapper = tmp_path / "bin" / "python3"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec {target} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", str(wrapper.parent))
    assert choose_python(None, "only_in_v").path == str(wrapper)


def test_check_runs_the_users_python_and_says_which(tmp_path: Path) -> None:
    """The CLI runs from bisector's venv; the python3 on PATH (a wrapper here) runs the oracle."""
    wrapper = tmp_path / "bin" / "python3"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    oracle = tmp_path / "fine.py"
    oracle.write_text("print('fine')\n")
    r = invoke("check", "--oracle", str(oracle), "--env", "system", "--profile", "generic",
               "--json", env={"PATH": f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}"})
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["python"] == str(wrapper)
    assert f"note: Python: {wrapper}" in r.stderr


# -- 2. where `oracle new` writes, and where names are found ----------------------------------

def test_oracle_new_writes_into_the_current_directory(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "repro.py").write_text(REPRO)
    r = invoke("oracle", "new", "mine", "--from-repro", "repro.py", cwd=work,
               env={"BISECTOR_ORACLES_DIR": None})
    assert r.exit_code == 0, r.stderr
    made = work / "mine.py"
    assert made.is_file()
    assert not (ROOT / "oracles" / "mine.py").exists()
    assert f"wrote {made}" in r.stdout
    assert f"bisect start --oracle {made} " in r.stdout


def test_oracle_new_writes_into_the_team_directory_and_names_resolve_there(
        tmp_path: Path) -> None:
    team = tmp_path / "team"
    (tmp_path / "repro.py").write_text(REPRO)
    env: dict[str, str | None] = {"BISECTOR_ORACLES_DIR": str(team)}
    r = invoke("oracle", "new", "ours", "--from-repro", str(tmp_path / "repro.py"), env=env,
               cwd=tmp_path)
    assert r.exit_code == 0, r.stderr
    assert (team / "ours.py").is_file() and not (tmp_path / "ours.py").exists()
    listed = json.loads(invoke("oracles", "--json", env=env).stdout)
    assert listed[0]["name"] == "ours" and listed[0]["path"] == str((team / "ours.py").resolve())
    assert "torchlet_norm" in [o["name"] for o in listed]
    # By name, through the same lookup `start` uses: the oracle runs (exit 1: "bad").
    r = invoke("check", "--oracle", "ours", "--env", "system", "--profile", "generic", "--json",
               env=env)
    assert json.loads(r.stdout)["oracle"]["name"] == "ours", r.stderr


def test_dir_wins_and_an_existing_oracle_needs_force(tmp_path: Path) -> None:
    (tmp_path / "repro.py").write_text(REPRO)
    env: dict[str, str | None] = {"BISECTOR_ORACLES_DIR": str(tmp_path / "team")}
    args = ["oracle", "new", "x", "--from-repro", str(tmp_path / "repro.py"), "--dir",
            str(tmp_path / "mine")]
    assert invoke(*args, env=env).exit_code == 0
    assert (tmp_path / "mine" / "x.py").is_file() and not (tmp_path / "team").exists()
    (tmp_path / "mine" / "x.py").write_text("keep me\n")
    r = invoke(*args, env=env)
    assert r.exit_code == 2 and "already exists" in r.stderr and "--force" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert (tmp_path / "mine" / "x.py").read_text() == "keep me\n"
    assert invoke(*args, "--force", env=env).exit_code == 0
    assert (tmp_path / "mine" / "x.py").read_text() != "keep me\n"


# -- 3 and 4. errors under --json; `list` outside a terminal --------------------------------

@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory, world: SyntheticHistory,
             shared_cache: Path) -> tuple[Path, dict[str, str | None], SyntheticHistory]:
    """A store holding one finished bisection of the shared world (a real `bisect start`)."""
    base = tmp_path_factory.mktemp("first-use")
    hist = copy_world(world, base / "repo")
    env: dict[str, str | None] = {"BISECTOR_HOME": str(base / "home"),
                                  "BISECTOR_CACHE_DIR": str(shared_cache)}
    db = base / "b.db"
    r = run_cli("--db", str(db), "start", "--repo", str(hist.path), "--good", hist.main[0],
                "--bad", hist.main[-1], "--oracle", "torchlet_norm",
                env={k: v for k, v in env.items() if v is not None})
    assert r.returncode == 0, r.stderr
    assert "note: Python: " in r.stderr  # `start` names the interpreter it chose, too
    return db, env, hist


def test_an_error_under_json_is_a_json_object_on_stdout(
        finished: tuple[Path, dict[str, str | None], SyntheticHistory]) -> None:
    db, env, _ = finished
    r = invoke("--db", str(db), "show", "999", "--json", env=env)
    assert r.exit_code == 6
    err = json.loads(r.stdout)["error"]
    assert err["kind"] == "NotFoundError" and err["exit_code"] == 6
    assert "no bisection with id 999" in err["message"]
    assert "no bisection with id 999" in r.stderr  # the plain line stays
    plain = invoke("--db", str(db), "show", "999", env=env)
    assert plain.exit_code == 6 and plain.stdout == ""


def test_a_usage_error_under_json_too(tmp_path: Path) -> None:
    r = invoke("--db", str(tmp_path / "b.db"), "list", "--json", "--limit", "many")
    assert r.exit_code == 2
    err = json.loads(r.stdout)["error"]
    assert err["kind"] == "BadParameter" and err["exit_code"] == 2 and "many" in err["message"]


def test_list_in_a_pipe_prints_full_values(
        finished: tuple[Path, dict[str, str | None], SyntheticHistory]) -> None:
    db, env, hist = finished
    r = invoke("--db", str(db), "list", env=env)  # stdout is no terminal here
    assert r.exit_code == 0, r.stderr
    header, row = r.stdout.splitlines()
    assert header.split() == ["id", "repo", "range", "oracle", "state", "culprit", "when"]
    assert hist.culprit in row.split()  # all 40 characters
    assert str(hist.path.resolve()) in row and f"{hist.main[0]}..{hist.main[-1]}" in row
    wide = invoke("--db", str(db), "list", "--wide", env=env)
    assert wide.stdout == r.stdout


# -- 5. shell completion ---------------------------------------------------------------------

SCRIPT = [str(Path(sys.executable).parent / "bisect")]  # the console script's own name


@pytest.mark.parametrize(("shell", "needle"), [
    ("bash", "complete -o nosort -F _bisect_completion bisect"),
    ("zsh", "#compdef bisect"),
    ("fish", "complete --no-files --command bisect"),
])
def test_completion_scripts(shell: str, needle: str) -> None:
    r = run_cli(env={"_BISECT_COMPLETE": f"{shell}_source"}, exe=SCRIPT)
    assert r.returncode == 0 and needle in r.stdout, r.stderr


def test_completion_completes_a_command() -> None:
    r = run_cli(env={"_BISECT_COMPLETE": "bash_complete", "COMP_WORDS": "bisect li",
                     "COMP_CWORD": "1"}, exe=SCRIPT)
    assert r.returncode == 0 and "plain,list" in r.stdout.splitlines()


# -- 6. make test's system dependencies ------------------------------------------------------

TEST_DEPS = ROOT / "scripts" / "test-deps"


def tools_dir(tmp_path: Path, *names: str) -> Path:
    """A PATH holding only `id` and fakes of ``names`` (no apt-get: nothing can be installed)."""
    d = tmp_path / "bin"
    d.mkdir(parents=True)
    (d / "id").symlink_to(shutil.which("id") or "/usr/bin/id")
    for name in names:
        (d / name).write_text("#!/bin/sh\nexit 0\n")
        (d / name).chmod(0o755)
    return d


def test_deps_all_present_does_nothing(tmp_path: Path) -> None:
    assert os.access(TEST_DEPS, os.X_OK), "make and .ci/run call it directly"
    for bootstrap in ("mmdebstrap", "debootstrap"):  # either makes the Docker base image
        path = tools_dir(tmp_path / bootstrap, "git", "gcc", "make", "initdb", bootstrap,
                         "chromium")
        r = subprocess.run(["/bin/bash", str(TEST_DEPS)], capture_output=True, text=True,
                           env={"PATH": str(path)}, check=False)
        assert (r.returncode, r.stdout, r.stderr) == (0, "", ""), bootstrap


def test_deps_missing_and_no_apt_names_them_in_one_line(tmp_path: Path) -> None:
    path = tools_dir(tmp_path, "git", "make", "initdb")
    r = subprocess.run(["/bin/bash", str(TEST_DEPS)], capture_output=True, text=True,
                       env={"PATH": str(path)}, check=False)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == ("make test needs: gcc (the synthetic project's extension), mmdebstrap "
                        "(the Docker tests' base image), chromium (the web view's browser "
                        "test): install them with: sudo apt-get install gcc mmdebstrap "
                        "chromium\n")


def test_deps_told_not_to_install_installs_nothing(tmp_path: Path) -> None:
    """BISECTOR_NO_APT=1: as root with apt-get at hand, the one line and no install."""
    path = tools_dir(tmp_path, "git", "make", "initdb", "gcc", "debootstrap")
    called = tmp_path / "apt-called"
    (path / "apt-get").write_text(f"#!/bin/sh\ntouch {called}\n")
    (path / "apt-get").chmod(0o755)
    r = subprocess.run(["/bin/bash", str(TEST_DEPS)], capture_output=True, text=True,
                       env={"PATH": str(path), "BISECTOR_NO_APT": "1"}, check=False)
    assert (r.returncode, r.stdout) == (1, "") and not called.exists()
    assert r.stderr == ("make test needs: chromium (the web view's browser test): install "
                        "them with: sudo apt-get install chromium\n")


@pytest.mark.parametrize("works", [True, False])
def test_deps_installing_says_one_line_and_keeps_apts_output_for_a_failure(
        tmp_path: Path, works: bool) -> None:
    """As root with apt-get: the one line of what and why, not dpkg's hundreds; a failed
    install shows apt's last lines, where its whole output is, and exits 1."""
    path = tools_dir(tmp_path, "git", "make", "initdb", "gcc", "debootstrap")
    (path / "id").unlink()
    (path / "id").write_text("#!/bin/sh\necho 0\n")  # root, as in CI
    (path / "id").chmod(0o755)
    for tool in ("mktemp", "tail", "rm"):
        (path / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
    (path / "apt-get").write_text("#!/bin/sh\nfor i in 1 2 3 4 5; do echo Unpacking $i; done\n"
                                  f"{'exit 0' if works else 'echo E: no chromium; exit 100'}\n")
    (path / "apt-get").chmod(0o755)
    temp = tmp_path / "tmp"
    temp.mkdir()
    r = subprocess.run(["/bin/bash", str(TEST_DEPS)], capture_output=True, text=True,
                       env={"PATH": str(path), "TMPDIR": str(temp)}, check=False)
    assert r.stdout == ("make test: installing with apt-get (root; BISECTOR_NO_APT=1 to be "
                        "told instead): chromium (the web view's browser test)\n")
    logs = list(temp.glob("bisector-test-deps.*.log"))
    if works:
        assert (r.returncode, r.stderr, logs) == (0, "", [])
    else:
        assert r.returncode == 1 and "E: no chromium" in r.stderr and len(logs) == 1
        assert r.stderr.splitlines()[-1] == (f"make test: apt-get failed (its whole output: "
                                             f"{logs[0]}); install chromium and run make "
                                             f"test again")
        assert "Unpacking 5" in logs[0].read_text()
