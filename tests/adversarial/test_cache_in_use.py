"""Issue 20, class 5: the cache removes what is in use.

``bisect gc`` must leave whatever a live process of this machine is using (the environment a
``bisect check`` or ``bisect tick`` judges in, marked in use by its owner) and take it once that
owner is dead; and it must never follow a symbolic link out of its folders, whatever the links
point at. Each test makes the attack for real: a real ``bisect check`` process sleeping in its
environment, real links to folders outside the cache holding a canary file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bisector.app.demo.torchlet import SyntheticHistory
from bisector.store.db import open_store
from tests.support import BISECT, ROOT, invoke, wait_for

pytestmark = [pytest.mark.adversarial]

DAY = 86400


def _age(root: Path, days: float = 60) -> None:
    """Everything under ``root`` last used ``days`` ago (links themselves, never followed),
    so that no grace period keeps it: only an in-use mark can."""
    t = time.time() - days * DAY
    for dirpath, dirs, files in os.walk(root, topdown=False):
        for name in [*files, *dirs]:
            os.utime(os.path.join(dirpath, name), (t, t), follow_symlinks=False)
    os.utime(root, (t, t), follow_symlinks=False)


def _gc(db: Path) -> dict[str, object]:
    r = invoke("--db", str(db), "gc", "--max-size", "0", "--json")
    assert r.exit_code == 0, r.stderr
    out: dict[str, object] = json.loads(r.stdout)
    return out


@pytest.fixture
def cache(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private cache (gc deletes for real) and an empty store of this machine."""
    c = tmp_path / "cache"
    monkeypatch.setenv("BISECTOR_CACHE_DIR", str(c))
    monkeypatch.delenv("BISECTOR_MAX_CACHE", raising=False)
    open_store(str(home / "b.db"), create=True)
    return c


def test_gc_keeps_the_environment_a_live_check_judges_in_and_takes_it_once_it_is_dead(
        home: Path, cache: Path, world: SyntheticHistory, tmp_path: Path) -> None:
    flag = tmp_path / "judging"
    oracle = tmp_path / "slow_judge.py"
    oracle.write_text(f'"""Says where it runs, then judges for a long time."""\n'
                      f"import pathlib, sys, time\nimport torchlet\n"
                      f"pathlib.Path({str(flag)!r}).write_text(sys.prefix)\n"
                      f"time.sleep(300)\n")
    proc = subprocess.Popen([*BISECT, "check", "--oracle", str(oracle), "--commit",
                             world.main[0], "--repo", str(world.path), "--profile", "torchlet"],
                            cwd=ROOT, env=os.environ.copy(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert wait_for(lambda: flag.exists() or proc.poll() is not None, timeout=400)
        assert flag.exists(), proc.communicate()[1]
        env = Path(flag.read_text())
        assert env.parent == cache / "envs" and (env / "bin" / "python").exists()
        _age(cache)  # older than any grace period: nothing but the mark keeps it

        plan = _gc(home / "b.db")
        assert env.is_dir() and (env / "bin" / "python").exists(), plan
        assert str(env) not in {i["path"] for i in plan["removed"]}  # type: ignore[attr-defined]
        kept = [k["reason"] for k in plan["kept"]]  # type: ignore[attr-defined]
        assert any(r.startswith("in use by ") and "probe of" in r for r in kept), kept
        assert proc.poll() is None  # still judging, in its environment
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # kill -9: its mark is left behind, stale
        proc.wait()
    marks = list((cache / "in-use").glob("*.json"))
    assert marks  # the dead owner's mark is still on disk...
    plan = _gc(home / "b.db")
    assert not env.exists(), plan  # ...and counts for nothing
    assert str(env) in {i["path"] for i in plan["removed"]}  # type: ignore[attr-defined]
    assert not list((cache / "in-use").glob("*.json"))  # stale marks are cleared


def _canary(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "canary.txt").write_text("not bisector's\n")
    return folder / "canary.txt"


@pytest.mark.parametrize("link", ["wheels", "envs", "trees", "wheels/ab", "logs"])
def test_gc_never_follows_a_link_out_of_the_cache(home: Path, cache: Path, tmp_path: Path,
                                                  link: str) -> None:
    """A cache folder (or a shard of ``wheels``, or the logs folder) that is a link to someone
    else's folder shaped like bisector's: gc removes nothing in it."""
    outside = tmp_path / "someone-elses"
    key = "ab" + "0" * 62
    if link == "wheels":
        canaries = [_canary(outside / "ab" / key), _canary(outside / "cd" / ("cd" + "1" * 62))]
    elif link == "wheels/ab":
        canaries = [_canary(outside / key)]
    elif link == "logs":
        canaries = [_canary(outside / "runs" / "1-abcdef123456"),
                    _canary(outside / "builds" / key)]
    else:
        canaries = [_canary(outside / ("f" * 32)), _canary(outside / ("e" * 40))]
    root = home / "data" if link == "logs" else cache
    (root / link).parent.mkdir(parents=True, exist_ok=True)
    (root / link).symlink_to(outside, target_is_directory=True)
    # An environment of bisector's own, linked to a folder outside: removed as a link only.
    inner_target = _canary(tmp_path / "elsewhere-env")
    inner = cache / "envs" / ("9" * 32)
    if link != "envs":
        inner.parent.mkdir(parents=True, exist_ok=True)
        inner.symlink_to(inner_target.parent, target_is_directory=True)
    _age(outside)
    _age(tmp_path / "elsewhere-env")
    _age(cache)

    r = invoke("--db", str(home / "b.db"), "gc", "--max-size", "0", "--older-than", "1d")
    assert r.exit_code == 0, r.stderr
    for c in canaries:
        assert c.read_text() == "not bisector's\n", r.stdout
    assert inner_target.read_text() == "not bisector's\n"
    if link in ("wheels", "envs", "trees", "logs"):
        notes = [ln for ln in r.stdout.splitlines() if "symbolic link" in ln]
        assert len(notes) == 1 and str(root / link) in notes[0], r.stdout
        assert (root / link).is_symlink()  # left as it is
    else:
        assert not (root / link).is_symlink()  # a link inside: removed as a link
    if link != "envs":
        assert not inner.is_symlink()


def test_gc_keeps_the_environment_a_person_judges_in(
        home: Path, cache: Path, world: SyntheticHistory) -> None:
    """Issue 32, item 5: ``--manual`` held no in-use mark, so `bisect gc` removed the
    environment a person was judging in, and their answer was recorded as "the environment
    was changed in the shell"."""
    proc = subprocess.Popen([*BISECT, "--db", str(home / "b.db"), "start", "--manual",
                             "--repo", str(world.path), "--good", world.main[0], "--bad",
                             world.main[-1], "--profile", "torchlet", "--no-confirm"],
                            cwd=ROOT, env=os.environ.copy(), stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)

    def asking() -> list[dict[str, object]]:
        return [m for p in (cache / "in-use").glob("*.json")
                for m in [json.loads(p.read_text())] if "judged by hand" in str(m["what"])]

    def ready() -> list[Path]:  # the environment made, the person asked about it
        return [p.parent for p in (cache / "envs").glob("*/.bisector-ready")
                if not p.parent.name.startswith("skeleton-")]  # a template, used by none

    try:
        assert wait_for(lambda: (asking() and ready()) or proc.poll() is not None, timeout=400)
        assert asking() and ready(), proc.communicate()[1]
        envs = ready()
        assert envs
        _age(cache)
        plan = _gc(home / "b.db")
        assert all(e.is_dir() for e in envs), plan
        kept = [k["reason"] for k in plan["kept"]]  # type: ignore[attr-defined]
        assert any("judged by hand" in r for r in kept), kept
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
