"""Issue 20, class 6: the watch misreads order.

Builds are ordered by what they are (the main commit's place on the main line, then the PEP 440
version), never by when a tick claimed them nor by their version string as text. Each test
plays the attack on a real history, real wheels, a real index on 127.0.0.1 and real ticks: a
nightly withdrawn from the index after it was judged, and self-built ``+git<sha>`` wheels whose
hashes sort the wrong way round.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import git
import pytest
from packaging.version import Version
from sqlalchemy import func, select

from bisector.app.demo.index import IndexServer
from bisector.app.demo.torchlet import SyntheticHistory
from bisector.artifacts.build import build_wheel
from bisector.project.profiles import TORCHLET
from bisector.store import models as m
from bisector.store.db import open_store
from tests.support import built_world, run_cli, staged_nightlies

pytestmark = [pytest.mark.adversarial]

CULPRIT = 20  # main[20] breaks torchlet_norm; nightlies are cut at main 0, 6, 12, 18, 24


@dataclass
class World:
    hist: SyntheticHistory
    server: IndexServer
    nightlies: list[Path]  # oldest first
    builds: Path  # where self-built wheels go


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("watch-order")
    hist = built_world(base, base / "stage", commits=30, culprit=CULPRIT, broken=(),
                       release_at=None, side_branch_at=None, nightly_every=6)
    nightlies = staged_nightlies(hist, base / "stage")
    (base / "index").mkdir()
    with IndexServer(base / "index") as server:
        yield World(hist, server, nightlies, base)


def _tick(cfg: Path) -> str:
    r = run_cli("tick", "--config", str(cfg), "--no-bisect")
    assert r.returncode == 0, r.stderr
    return r.stdout + r.stderr


def _count(home: Path, model: type[m.Base]) -> int:
    store = open_store(str(home / "data" / "bisector.db"), create=False)
    with store.session() as s:
        return int(s.scalar(select(func.count()).select_from(model)) or 0)


def _judged(home: Path) -> list[str]:
    store = open_store(str(home / "data" / "bisector.db"), create=False)
    with store.session() as s:
        return [r.commit_sha for r in s.scalars(select(m.WatchResult).order_by(m.WatchResult.id))]


def test_a_withdrawn_nightly_makes_no_flip_no_bisection_and_no_announcement(
        home: Path, world: World, tmp_path: Path) -> None:
    files = world.server.state.root / "withdrawn" / "files"
    files.mkdir(parents=True)

    def serve(*which: int) -> None:
        for i in which:
            shutil.copy(world.nightlies[i], files / world.nightlies[i].name)

    events = tmp_path / "events"
    cfg = tmp_path / "bisector.toml"
    cfg.write_text(f'[watch]\nevents = "{events}"\n\n[[suite]]\nname = "cpu-nightly"\n'
                   f'repo = "{world.hist.path}"\noracles = ["torchlet_norm"]\n'
                   f'torch = "nightly"\nindex = "{world.server.index_url("withdrawn")}"\n'
                   f'variant = "cpu"\npython = "{sys.executable}"\n')
    main = world.hist.main
    serve(0, 1, 2)
    _tick(cfg)  # the nightly of main[12]: good
    serve(3, 4)  # two nights at once: main[18] (good) and main[24] (bad)
    out = _tick(cfg)
    assert "regression" in out, out
    assert _judged(home) == [main[12], main[24]]
    assert _count(home, m.WatchFlip) == 1 and _count(home, m.Bisection) == 1
    announced = sorted(p.name for p in events.iterdir())

    (files / world.nightlies[4].name).unlink()  # main[24]'s nightly is withdrawn
    out = _tick(cfg)
    assert "older than" in out and "nothing new" in out, out
    assert _judged(home) == [main[12], main[24]]  # the older main[18] is not new
    assert _count(home, m.WatchFlip) == 1 and _count(home, m.Bisection) == 1  # no false fix
    assert sorted(p.name for p in events.iterdir()) == announced
    assert "fix" not in out


def _git_wheels(world: World) -> tuple[tuple[str, Path], tuple[str, Path]]:
    """Wheels of two good main commits, older then newer, whose ``+git<sha>`` local versions
    sort the other way round (the newer one's hash is lower as text)."""
    main = world.hist.main
    pair = next((i, j) for i in range(1, CULPRIT) for j in range(i + 1, CULPRIT)
                if Version(f"0.1.0a0+git{main[j][:7]}") < Version(f"0.1.0a0+git{main[i][:7]}"))
    repo = git.Repo(world.hist.path)
    mp = pytest.MonkeyPatch()
    mp.setenv("BISECTOR_CACHE_DIR", str(world.builds / "cache"))
    mp.setenv("BISECTOR_HOME", str(world.builds / "build-home"))
    out = []
    folder = world.builds / "self-built"
    folder.mkdir(exist_ok=True)
    try:
        for k in pair:
            res = build_wheel(repo, main[k], TORCHLET, python=sys.executable,
                              version=f"0.1.0a0+git{main[k][:7]}")
            assert res.ok and res.wheel is not None, res.log_tail
            out.append((main[k], Path(shutil.copy(res.wheel, folder / res.wheel.name))))
    finally:
        mp.undo()
    return out[0], out[1]


def test_a_newer_self_built_wheel_is_new_whatever_its_hash_says_as_text(
        home: Path, world: World, tmp_path: Path) -> None:
    (older, older_wheel), (newer, newer_wheel) = _git_wheels(world)
    assert newer_wheel.name < older_wheel.name  # the attack: text order says "older"
    cfg = tmp_path / "bisector.toml"
    suite = (f'[[suite]]\nname = "self-built"\nrepo = "{world.hist.path}"\n'
             f'oracles = ["torchlet_norm"]\npython = "{sys.executable}"\ntorch = "wheel"\n')
    cfg.write_text(suite + f'wheel = "{older_wheel}"\n')
    _tick(cfg)
    assert _judged(home) == [older]
    cfg.write_text(suite + f'wheel = "{older_wheel.parent}/*.whl"\n')  # both: the newest counts
    out = _tick(cfg)
    assert "1 oracle run(s)" in out, out
    assert _judged(home) == [older, newer]
