"""The nightly watch end to end: real git history, real wheels on a real index on 127.0.0.1,
real SQLite, `bisect tick` as a user (or a systemd timer) runs it.

The history plants a regression at main[40]; nightlies are cut every 12 commits (main 0, 12,
24, 36, 48), so the nightly of main[36] is good and the one of main[48] is bad. Each test
serves its own index folder and "publishes" a nightly by copying its wheel in, as the real
nightly job does once a day.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import func, select

from bisector.app.demo.index import IndexServer
from bisector.app.demo.torchlet import SyntheticHistory
from bisector.base.events import QuietEvents
from bisector.store import models as m
from bisector.store.db import open_store
from tests.support import BISECT, ROOT, built_world, run_cli, staged_nightlies

NOTIFIER = """\
import json, pathlib, sys
event = json.load(sys.stdin)
body = pathlib.Path(event["issue_file"])
event["_body"] = body.read_text() if body.is_file() else None
with open(sys.argv[1], "a") as f:
    f.write(json.dumps(event) + "\\n")
"""


@dataclass
class World:
    hist: SyntheticHistory
    server: IndexServer
    wheels: list[Path]  # oldest first: the nightlies of main 0, 12, 24, 36, 48


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("watch-world")
    hist = built_world(base, base / "stage", commits=50, culprit=40, broken=(),
                       release_at=None, side_branch_at=None, nightly_every=12)
    wheels = staged_nightlies(hist, base / "stage")
    (base / "index").mkdir()
    with IndexServer(base / "index") as server:
        yield World(hist, server, wheels)


def _index(world: World, name: str, upto: int) -> str:
    """Serve the first ``upto`` nightlies under ``name``; returns the index URL."""
    files = world.server.state.root / name / "files"
    files.mkdir(parents=True, exist_ok=True)
    for w in world.wheels[:upto]:
        if not (files / w.name).exists():
            shutil.copy(w, files / w.name)
    return world.server.index_url(name)


def _config(tmp_path: Path, world: World, index: str, *, notify: bool = True) -> Path:
    notifier = tmp_path / "notifier.py"
    notifier.write_text(NOTIFIER)
    cfg = tmp_path / "bisector.toml"
    notify_table = (f'[notify]\ncommand = "{sys.executable} {notifier} '
                    f'{tmp_path / "events.jsonl"}"\n' if notify else "")
    cfg.write_text(f"""
[watch]
events = "{tmp_path / 'events'}"

{notify_table}
[[suite]]
name = "cpu-nightly"
repo = "{world.hist.path}"
oracles = ["torchlet_norm"]
torch = "nightly"
index = "{index}"
variant = "cpu"
python = "{sys.executable}"
""")
    return cfg


def _db(home: Path) -> str:
    return str(home / "data" / "bisector.db")


def _count(home: Path, model: type[m.Base]) -> int:
    store = open_store(_db(home), create=False)
    with store.session() as s:
        return int(s.scalar(select(func.count()).select_from(model)) or 0)


def _events(tmp_path: Path) -> list[dict[str, object]]:
    path = tmp_path / "events.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _tick(cfg: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    r = run_cli("tick", "--config", str(cfg), *extra)
    assert r.returncode == 0, r.stderr
    return r


def test_a_flip_starts_one_bisection_that_names_the_planted_commit(
        home: Path, world: World, tmp_path: Path) -> None:
    index = _index(world, "flip", 4)  # up to the nightly of main[36]: good
    cfg = _config(tmp_path, world, index)
    first = _tick(cfg)
    assert "1 oracle run(s), 0 bisection(s) started" in first.stdout, first.stderr
    assert _count(home, m.WatchResult) == 1 and _count(home, m.Bisection) == 0

    _index(world, "flip", 5)  # the nightly of main[48] appears: bad
    second = _tick(cfg)
    assert "1 oracle run(s), 1 bisection(s) started, 1 finished" in second.stdout, second.stderr
    store = open_store(_db(home), create=False)
    with store.session() as s:
        b = s.scalars(select(m.Bisection)).one()
        flip = s.scalars(select(m.WatchFlip)).one()
    assert b.culprit_sha == world.hist.culprit
    assert (b.good_sha, b.bad_sha) == (world.hist.main[36], world.hist.main[48])
    assert flip.bisection_id == b.id and flip.kind == "regression"

    events = _events(tmp_path)
    assert [e["event"] for e in events] == ["flip", "culprit"]
    for e in events:
        assert Path(str(e["issue_file"])).is_file() and e["_body"]
        assert e["suite"] == "cpu-nightly" and e["oracle"] == "torchlet_norm"
    assert world.hist.culprit in str(events[1]["_body"])  # the paste-ready issue names it
    assert world.hist.culprit[:12] in str(events[1]["text"])

    # The same tick again: nothing recorded, nothing run, nothing started, nobody told.
    third = _tick(cfg)
    assert "0 oracle run(s), 0 bisection(s) started, 0 finished" in third.stdout
    assert "nothing new" in third.stderr
    assert _count(home, m.WatchResult) == 2 and _count(home, m.Bisection) == 1
    assert len(_events(tmp_path)) == 2

    table = json.loads(run_cli("watch", "--json", check=True).stdout)
    (suite,) = table["suites"]
    assert suite["name"] == "cpu-nightly"
    assert [t["commit"] for t in suite["torches"]] == [world.hist.main[48], world.hist.main[36]]
    (row,) = suite["rows"]
    assert row["oracle"] == "torchlet_norm"
    assert [c["verdict"] for c in row["cells"]] == ["bad", "good"]
    assert row["cells"][0]["bisection"] == b.id and row["cells"][0]["flip"] == "regression"
    (f,) = suite["flips"]
    assert (f["culprit"], f["state"], f["bisection"]) == (world.hist.culprit, "done", b.id)
    plain = run_cli("watch", check=True).stdout
    assert f"bad #{b.id}" in plain and f"culprit {world.hist.culprit}" in plain

    from starlette.testclient import TestClient

    from bisector.web.server import create_app

    client = TestClient(create_app(store))
    page = client.get("/watch")
    assert page.status_code == 200
    assert f'href="/bisections/{b.id}"' in page.text and "regression" in page.text
    assert world.hist.culprit[:12] in page.text
    assert client.get("/api/watch").json() == table


def test_four_ticks_at_once_on_one_flip_start_one_bisection(
        home: Path, world: World, tmp_path: Path) -> None:
    index = _index(world, "race", 4)
    cfg = _config(tmp_path, world, index)
    _tick(cfg, "--no-bisect")
    _index(world, "race", 5)
    procs = [subprocess.Popen([*BISECT, "tick", "--config", str(cfg), "--no-bisect"],
                              cwd=ROOT, env=os.environ.copy(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _o, e in outs]
    summaries = [o for o, _e in outs]
    assert sum("1 oracle run(s)" in o for o in summaries) == 1, summaries  # judged once
    assert sum("1 bisection(s) started" in o for o in summaries) == 1, summaries
    assert _count(home, m.WatchResult) == 2
    assert _count(home, m.WatchFlip) == 1 and _count(home, m.Bisection) == 1
    assert [e["event"] for e in _events(tmp_path)] == ["flip"]  # announced once

    # Left pending by --no-bisect: the next tick runs it to the end.
    last = _tick(cfg)
    assert "0 oracle run(s), 0 bisection(s) started, 1 finished" in last.stdout, last.stderr
    store = open_store(_db(home), create=False)
    with store.session() as s:
        b = s.scalars(select(m.Bisection)).one()
    assert b.culprit_sha == world.hist.culprit
    assert [e["event"] for e in _events(tmp_path)] == ["flip", "culprit"]


def test_a_failing_notifier_never_fails_the_tick(home: Path, world: World,
                                                 tmp_path: Path) -> None:
    index = _index(world, "loud", 2)
    cfg = _config(tmp_path, world, index, notify=False)
    cfg.write_text(cfg.read_text().replace("[[suite]]", f'[notify]\ncommand = '
                                           f'"{sys.executable} -c \'import sys; sys.exit(3)\'"'
                                           f'\n\n[[suite]]'))
    _tick(cfg, "--no-bisect")
    _index(world, "loud", 4)
    store = open_store(_db(home), create=False)
    # A fake older "bad" result makes the next nightly (good) a fix flip: notified, and failing.
    with store.session() as s:
        s.execute(m.WatchResult.__table__.update().values(verdict="bad"))
    r = _tick(cfg, "--no-bisect")
    assert "notify command exited 3" in r.stderr
    assert "1 bisection(s) started" in r.stdout
    with store.session() as s:
        flip = s.scalars(select(m.WatchFlip)).one()
    assert flip.kind == "fix" and flip.flip_notified_at is not None
    assert list((tmp_path / "events").glob("flip-*-flip-*.md"))


def test_a_wheel_file_and_an_installed_torch_are_sources_too(
        home: Path, world: World, tmp_path: Path) -> None:
    good, bad = world.wheels[3], world.wheels[4]
    cfg = tmp_path / "bisector.toml"
    suite = (f'[[suite]]\nname = "local"\nrepo = "{world.hist.path}"\n'
             f'oracles = ["torchlet_norm"]\npython = "{sys.executable}"\ntorch = "wheel"\n')
    cfg.write_text(suite + f'wheel = "{good}"\n')
    _tick(cfg, "--no-bisect")
    cfg.write_text(suite + f'wheel = "{bad.parent}/*.whl"\n')  # a glob: its newest version
    r = _tick(cfg, "--no-bisect")
    assert "1 oracle run(s), 1 bisection(s) started" in r.stdout, r.stderr
    table = json.loads(run_cli("watch", "--json", check=True).stdout)
    (s,) = table["suites"]
    assert [t["commit"] for t in s["torches"]] == [world.hist.main[48], world.hist.main[36]]
    assert s["flips"][0]["state"] == "interrupted"  # stored for `resume` or the next tick

    # The torch an interpreter already has, as on a GPU box.
    venv = tmp_path / "venv"
    uv = str(Path(sys.executable).parent / "uv")
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    subprocess.run([uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
                    str(good)], check=True)
    cfg.write_text(f'[[suite]]\nname = "box"\nrepo = "{world.hist.path}"\n'
                   f'oracles = ["torchlet_norm"]\ntorch = "installed"\n'
                   f'python = "{venv / "bin" / "python"}"\n')
    r = _tick(cfg)
    assert "torchlet_norm: good" in r.stderr and "1 oracle run(s)" in r.stdout
    table = json.loads(run_cli("watch", "--json", check=True).stdout)
    box = next(x for x in table["suites"] if x["name"] == "box")
    assert box["torches"][0]["commit"] == world.hist.main[36]


class _Heard(QuietEvents):
    """What a tick tells its display: each step of no probe's, each download call."""

    def __init__(self) -> None:
        self.said: list[str] = []
        self.downloads: list[tuple[str, int, int | None]] = []

    def status(self, text: str) -> None:
        self.said.append(text)

    def download(self, name: str, done: int, total: int | None) -> None:
        self.downloads.append((name, done, total))


def test_a_tick_says_what_it_waits_for(home: Path, world: World, tmp_path: Path) -> None:
    """Never a silent wait: the index's listing is announced, and the wheel's download tells
    its bytes as they come and its end (issue 21)."""
    from bisector.app.watch import tick as watch_tick
    from bisector.app.watch.config import load

    index = _index(world, "heard", 2)
    cfg = _config(tmp_path, world, index, notify=False)
    heard = _Heard()
    report = watch_tick.tick(open_store(_db(home)), load([cfg]), bisect=False, events=heard)
    assert report.ran == 1, report.errors
    assert heard.said[0] == f"cpu-nightly: listing {index} for the newest nightly torch"
    assert heard.downloads, "the wheel's download was never told"
    name, done, total = heard.downloads[-1]
    assert name.endswith(".whl") and done == total and done > 0  # ended, whole
    assert [d for _, d, _ in heard.downloads] == sorted(d for _, d, _ in heard.downloads)
