"""What the test modules share: paths, the CLI (in-process through click's CliRunner, or as a
subprocess), the shared synthetic world, and small process and store helpers.

The fixtures here (``private_cache``) are made available to every test by tests/conftest.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pickle
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from bisector.app.demo.torchlet import SyntheticHistory, generate
from bisector.base import defaults

ROOT = Path(__file__).resolve().parent.parent
BISECT = [sys.executable, "-m", "bisector"]
ORACLES = ROOT / "tests" / "oracles"


# -- the CLI ---------------------------------------------------------------------------------

# Commands run in-process, with the same exit codes and outputs as the installed ``bisect``: a
# new interpreter costs most of a second of CPU (its imports, its exit), and the suite runs
# hundreds of bisections. Those that read, and those that bisect once called from the test's
# own thread; a test that needs a process of its own (a signal, a kill, several at once)
# starts one with subprocess and BISECT.
# ``tick`` stays a process of its own: a bisection it leaves behind is running while the
# process that started it lives, and a test's process never ends.
IN_PROCESS = frozenset({"show", "list", "log", "watch", "du", "workers", "plan", "oracles",
                        "start", "resume", "check", "cancel", "trust"})
# A call that sets one of the variables bisector.base.defaults read on import otherwise than
# this process had them runs in a process of its own, where it counts.
_AS_IMPORTED = {var: os.environ.get(var) for var in defaults.FROM_ENV}


def _in_process(args: Sequence[str], env: dict[str, str] | None) -> bool:
    """Whether ``bisect ARGS`` with ``env`` can run in this process as it would in its own."""
    return (_command(args) in IN_PROCESS
            and threading.current_thread() is threading.main_thread()
            and all({**os.environ, **(env or {})}.get(var) == value
                    for var, value in _AS_IMPORTED.items()))
GLOBAL_WITH_VALUE = frozenset({"--db"})


def _command(args: Sequence[str]) -> str | None:
    """The command ``bisect ARGS`` runs (its global options skipped)."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in GLOBAL_WITH_VALUE else 1
    return args[i] if i < len(args) else None


def run_cli(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None,
            exe: Sequence[str] = BISECT, check: bool = False,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``bisect ARGS`` with this process's environment plus ``env``: a command of IN_PROCESS
    called from the main thread in-process (:func:`invoke`), any other in a subprocess."""
    if exe == BISECT and _in_process(args, env):
        res = invoke(*args, cwd=cwd, env=dict(env or {}))
        r = subprocess.CompletedProcess([*exe, *args], res.exit_code, res.stdout, res.stderr)
    else:
        r = subprocess.run([*exe, *args], capture_output=True, text=True, timeout=timeout,
                           cwd=cwd, env={**os.environ, **(env or {})})
    if check and r.returncode != 0:
        raise AssertionError(f"bisect {' '.join(args)} failed ({r.returncode}):\n{r.stderr}")
    return r


class _Entry(click.Command):
    """``bisector.cli:main`` as click's CliRunner calls a command: the installed ``bisect``'s
    error mapping (one ``error:`` line, the exit code of bisector.base.errors, JSON errors
    under ``--json``), in this process."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             **_: Any) -> None:  # type: ignore[override]
        from bisector.cli import main

        main(list(args or ()), prog_name=prog_name)


_ENTRY = _Entry("bisect")


def invoke(*args: str, cwd: Path | None = None, env: dict[str, str | None] | None = None,
           input: str | None = None) -> Result:
    """``bisect ARGS`` in-process (milliseconds, not the second a new interpreter costs):
    ``result.exit_code``, ``result.stdout``, ``result.stderr``. A traceback is raised, never
    taken for an exit code. ``cwd`` is changed and ``env`` set (None: unset) for the call
    only."""
    old = Path.cwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        return CliRunner().invoke(_ENTRY, list(args), env=env, input=input,
                                  catch_exceptions=False, prog_name="bisect")
    finally:
        os.chdir(old)
        from bisector.cli import close_store

        close_store()  # as the installed `bisect` does before it exits


def start(db: Path, repo: Path, good: str, bad: str, oracle: str = "torchlet_norm",
          *extra: str) -> subprocess.CompletedProcess[str]:
    """``bisect start ... --json``: a whole bisection, as a user runs it (in-process)."""
    return run_cli("--db", str(db), "start", "--repo", str(repo), "--good", good, "--bad", bad,
                   "--oracle", oracle, "--json", *extra)


def bisect(db: Path, hist: SyntheticHistory, *args: str) -> dict[str, Any]:
    """A whole bisection of ``hist`` (first to last commit of main, no confirmation) that must
    succeed; its ``--json`` result."""
    r = run_cli("--db", str(db), "start", "--repo", str(hist.path), "--good", hist.main[0],
                "--bad", hist.main[-1], "--no-confirm", "--json", *args)
    assert r.returncode == 0, r.stderr
    data: dict[str, Any] = json.loads(r.stdout)
    return data


def cli(db: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """``bisect --db DB ARGS`` in-process; must exit 0; its stdout."""
    r = invoke("--db", str(db), *args, env=env)
    assert r.exit_code == 0, r.stderr
    return r.stdout


def one_line_error(r: subprocess.CompletedProcess[str] | Result, needle: str,
                   code: int | None = None) -> None:
    """A refused command: non-zero exit (``code`` when given), one ``error: `` line on stderr
    that holds ``needle``, no traceback."""
    rc = r.returncode if isinstance(r, subprocess.CompletedProcess) else r.exit_code
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert rc != 0 if code is None else rc == code, (rc, r.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert needle in lines[0], lines[0]
    assert "Traceback" not in r.stderr


# -- the shared world ------------------------------------------------------------------------

# One synthetic history for every module that needs only "a history with a planted
# regression": 24 commits on main, the regression at 15, no broken build, no branches. Its
# commits (and so its content-addressed wheels) are the same in every module and worker.
WORLD_SHAPE: dict[str, Any] = {"commits": 24, "culprit": 15, "broken": (), "release_at": None,
                               "side_branch_at": None, "seed": 170398}


def make_world(shared: Path) -> SyntheticHistory:
    """The world, generated once under ``shared`` (the caller holds the lock)."""
    saved = shared / "world.pickle"
    if not saved.exists():
        hist = generate(shared / "world" / "torchlet", **WORLD_SHAPE)
        saved.write_bytes(pickle.dumps(hist))
    hist = pickle.loads(saved.read_bytes())
    assert isinstance(hist, SyntheticHistory)
    return hist


def copy_world(world: SyntheticHistory, dest: Path) -> SyntheticHistory:
    """A module's own copy of the world's repository (same commits, so the same wheels), for
    tests that write into it or run git there while another worker does too."""
    shutil.copytree(world.path, dest, symlinks=True)
    return dataclasses.replace(world, path=dest)


# -- git, processes, ports, stores -----------------------------------------------------------

def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """``git -C repo ARGS`` with an identity, file-protocol submodules allowed; its stdout."""
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=V", "-c", "user.email=v@example.com",
         "-c", "protocol.file.allow=always", *args],
        check=True, capture_output=True, text=True, env=env).stdout.strip()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def failing_in_ops(raising: str) -> tuple[str, ...]:
    """A command oracle that fails the way a check inside ``torchlet.ops`` would: ``raising``
    (the source of a function of ``v`` and its call) runs compiled under the installed
    ``ops.py``'s name, so the traceback's frames name the file only the culprit changes (the
    evidence a prior from the failure reads)."""
    return ("python", "-P", "-c",
            "import torchlet.ops as ops\n"
            "v = ops.norm([3.0, 4.0])\n"
            "if abs(v - 5.0) > 1e-9:\n"
            f"    src = {raising!r}\n"
            "    exec(compile(src, ops.__file__, 'exec'), {'v': v})\n")


def forty_commits(tmp_path_factory: pytest.TempPathFactory, name: str) -> SyntheticHistory:
    """A 40-commit torchlet history, its culprit at 23, nothing broken, no release or side
    branch: one per test module that bisects it several ways."""
    return generate(tmp_path_factory.mktemp(name) / "torchlet", commits=40, culprit=23,
                    broken=(), release_at=None, side_branch_at=None, seed=23)


@contextlib.contextmanager
def serving(*args: str, env: dict[str, str]) -> Iterator[str]:
    """``bisect ARGS serve`` on a free port of 127.0.0.1, answering: its base URL; stopped
    (and waited for) when the block ends, whatever happened in it."""
    import httpx  # lazy: only the web tests use it

    port = _free_port()
    server = subprocess.Popen([*BISECT, *args, "serve", "--port", str(port)], cwd=ROOT,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                httpx.get(base + "/", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=30)


def _alive(pid: int) -> bool:
    """``pid`` runs and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _probes(db: Path, bisection: int) -> list[str]:
    """Probes stored so far; none while the controller is still creating the database."""
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT commit_sha FROM probe WHERE bisection_id=? ORDER BY seq",
                           (bisection,)).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        con.close()
    return [r[0] for r in rows]


def oracles_running(controller: int) -> set[str]:
    """Commits whose oracle runs now for the controller process ``controller`` (its pid): the
    live processes marked with its ``BISECTOR_PROBE`` (infra/proc.reaped) that carry a
    ``BISECTOR_COMMIT``, read from /proc. What a test waits for to stop a run mid-probe, rather
    than a time that is "well inside the next run" only on an idle machine."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            env = dict(item.split(b"=", 1) for item in
                       Path(f"/proc/{entry}/environ").read_bytes().split(b"\0") if b"=" in item)
        except OSError:
            continue
        mark, commit = env.get(b"BISECTOR_PROBE"), env.get(b"BISECTOR_COMMIT")
        if mark is None or commit is None or not _alive(int(entry)):
            continue
        owner = mark.decode(errors="replace").split("|", 1)[0].split(":")
        if len(owner) > 1 and owner[1] == str(controller):
            found.add(commit.decode())
    return found


def wait_for(cond: Any, timeout: float = 120.0, every: float = 0.2) -> Any:
    """Poll ``cond()`` until it is truthy or ``timeout`` passes; its last value."""
    end = time.time() + timeout
    value = cond()
    while not value and time.time() < end:
        time.sleep(every)
        value = cond()
    return value


def snapshot(path: Path) -> bytes | list[str]:
    """A SQLite store's full content (its SQL dump), or the file's bytes when it is none."""
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return list(con.iterdump())
        finally:
            con.close()
    except sqlite3.DatabaseError:
        return path.read_bytes()


def make_unrelated_repo(path: Path) -> Path:
    """A repository whose branches ``main`` and ``other`` share no history."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "commit", "-q", "--allow-empty", "-m", "a")
    git(path, "checkout", "-q", "--orphan", "other")
    git(path, "commit", "-q", "--allow-empty", "-m", "b")
    return path


@pytest.fixture
def private_cache(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A test that tampers with its caches, or counts its builds, gets its own: never the
    session's shared one."""
    cache = home / "cache"
    monkeypatch.setenv("BISECTOR_CACHE_DIR", str(cache))
    return cache


# -- the installed-base overlay procedure (proofs/overlay_proof.py runs it on torch) -------

TORCHLET_BUG = "return _C.dot(xs, xs) ** 0.5 if len(xs) < 2 else _C.dot(xs, xs)"
TORCHLET_FIX = "return math.sqrt(_C.dot(xs, xs))"
HARMLESS = ("torchlet/utils.py", "torchlet/nn/functional.py")


def _sub_tree(repo: Path, folder: str, old: str, new: str) -> int:
    edits = 0
    for path in sorted((repo / folder).rglob("*.py")):
        text = path.read_text()
        if n := text.count(old):
            path.write_text(text.replace(old, new))
            edits += n
    return edits


def installed_dir(python: str, package: str) -> Path:
    code = (f"import importlib.util; s = importlib.util.find_spec({package!r}); "
            f"print(list(s.submodule_search_locations)[0])")
    out = subprocess.run([python, "-c", code], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def installed_base_history(pkg_dir: Path, repo: Path, harmless: int) -> dict[str, str]:
    """A repository whose root commit is the installed package's ``*.py`` tree (with the bug),
    then the fix (tag ``fixed``), ``harmless`` Python-only commits, the commit that brings the
    bug back, and ``harmless`` more."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    for src in pkg_dir.rglob("*.py"):
        if "__pycache__" not in src.parts:
            dest = repo / pkg_dir.name / src.relative_to(pkg_dir)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"Import the installed {pkg_dir.name} Python tree")
    root = git(repo, "rev-parse", "HEAD")

    def harmless_commits(first: int) -> None:
        for i in range(first, first + harmless):
            with (repo / HARMLESS[i % len(HARMLESS)]).open("a") as f:
                f.write(f"\n# harmless change {i}\n")
            git(repo, "commit", "-q", "-am", f"Harmless Python change {i}")

    assert _sub_tree(repo, "torchlet", TORCHLET_BUG, TORCHLET_FIX), "the fix changed nothing"
    git(repo, "commit", "-q", "-am", "Compute the norm with math.sqrt (the fix)")
    git(repo, "tag", "fixed")
    harmless_commits(0)
    assert _sub_tree(repo, "torchlet", TORCHLET_FIX, TORCHLET_BUG), "the bug came not back"
    git(repo, "commit", "-q", "-am", "Simplify the norm (reintroduces the bug)")
    culprit = git(repo, "rev-parse", "HEAD")
    harmless_commits(harmless)
    return {"root": root, "culprit": culprit}


def bisect_installed_base(repo: Path, shas: dict[str, str], python: str, db: Path,
                          *extra: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """``bisect start --good fixed --bad main --installed-base ROOT --offline`` over that
    history with the installed package as the only base; the result and the stored artifact
    kinds."""
    r = run_cli("--db", str(db), "start", "--repo", str(repo), "--good", "fixed", "--bad",
                "main", "--oracle", "torchlet_norm", "--profile", "torchlet", "--python",
                python, "--installed-base", shas["root"], "--offline", "--json", *extra,
                env=env)
    assert r.returncode == 0, r.stderr
    data: dict[str, Any] = json.loads(r.stdout)
    con = sqlite3.connect(db)
    try:
        data["artifact_kinds"] = [row[0] for row in con.execute("SELECT kind FROM artifact")]
    finally:
        con.close()
    return data


def run_cache(base: Path) -> Path:
    """The run's shared cache (tests/conftest.py's ``shared_cache``) seen from ``base``, a
    folder ``tmp_path_factory.mktemp`` made: a module fixture runs before any ``home``."""
    basetemp = base.parent
    root = basetemp.parent if os.environ.get("PYTEST_XDIST_WORKER") else basetemp
    cache = root / "shared" / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    return cache


def built_world(base: Path, root: Path, releases: bool = False,
                **gen: Any) -> SyntheticHistory:
    """A generated history whose nightly (and, with ``releases``, release) wheels are
    published into ``root``; built with a home of its own under ``base`` and the run's shared
    cache, where a nightly's wheel is keyed by its version (a probe's own build of a commit is
    keyed apart, so the test's own runs still find none of theirs cached): the modules that
    publish the same nightlies (the demo history's every 16 commits) build each once a run."""
    # lazy: only the tests of the nightly path build wheels this way
    from bisector.app.demo.nightlies import publish

    mp = pytest.MonkeyPatch()
    mp.setenv("BISECTOR_CACHE_DIR", str(run_cache(base)))
    mp.setenv("BISECTOR_HOME", str(base / "build-home"))
    try:
        hist = generate(base / "repo", **gen)
        publish(hist, root, releases=releases)
    finally:
        mp.undo()
    return hist


def staged_nightlies(hist: SyntheticHistory, root: Path) -> list[Path]:
    """The published nightly wheels under ``root``, oldest first."""
    staged = sorted((root / "nightly-cpu" / "files").glob("*.whl"))
    return [next(w for w in staged if f".dev{stamp}+" in w.name)
            for _n, _m, stamp in hist.nightlies]


def installed_torchlet(hist: SyntheticHistory, dest: Path) -> str:
    """A virtualenv at ``dest`` with torchlet built from ``hist``'s last commit installed, as
    torch is on a GPU box; its python."""
    # lazy: only the installed-base tests build an "installed" package
    import git as gitpython

    from bisector.artifacts.build import build_wheel
    from bisector.project.profiles import TORCHLET

    res = build_wheel(gitpython.Repo(hist.path), hist.main[-1], TORCHLET, python=sys.executable)
    assert res.ok and res.wheel, res.log_tail
    subprocess.run([sys.executable, "-m", "venv", str(dest)], check=True)
    subprocess.run([str(dest / "bin" / "pip"), "install", "-q", str(res.wheel)], check=True)
    return str(dest / "bin" / "python")
