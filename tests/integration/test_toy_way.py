"""A new way to a commit's package is one class and one line (docs/architecture.md, "One chain
of ways"): a toy way, a folder of wheels one per commit, registered in ``provider.WAYS`` with
one line, is used and priced by ``bisect start``, ``bisect plan``, ``bisect check --commit``
and the watch's environment of a nightly (``app/watch/sources.environment``: the chain without
a build), with no other file touched.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import git
import pytest

from bisector.app.demo.small_project import NAME, ORACLE, generate_small
from bisector.app.watch.sources import Place, Torch, environment
from bisector.artifacts import provider
from bisector.artifacts.assemble import assemble, write
from bisector.artifacts.cache import wheel_file_key
from bisector.artifacts.installable import Installable
from bisector.artifacts.obtained import Answer, Obtained
from bisector.artifacts.prebuilt import Prebuilt
from bisector.artifacts.shared import Shared
from bisector.base.kinds import Way
from bisector.project.profiles import GENERIC
from bisector.run.policy import LOCAL
from bisector.store.db import open_store
from tests.support import invoke

pytestmark = pytest.mark.integration


class Folder:
    """The toy way: ``FOLDER/<sha>/*.whl``, a wheel someone made for that commit. Priced as a
    wheel that exists without building; says so in its answer."""

    way = Way.PREBUILT
    where = Path("/nonexistent")  # set by the test
    served: list[str] = []  # noqa: RUF012  (the test's record of what it answered)

    def __init__(self, shared: Shared) -> None:
        self.s = shared

    def _wheel(self, sha: str) -> Path | None:
        return next((self.where / sha).glob("*.whl"), None)

    def would(self, pos: int) -> bool:
        return self._wheel(self.s.ranking.candidates[pos]) is not None

    def obtain(self, pos: int, sha: str) -> Answer | None:
        wheel = self._wheel(sha)
        if wheel is None:
            return None
        self.served.append(sha)
        key, digest = wheel_file_key(wheel)
        return Obtained(Installable(key, f"wheel {wheel.name} from a folder", wheel=wheel,
                                    sha256=digest), None, fresh=True, way=self.way)


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "wheels"
    monkeypatch.setattr(Folder, "where", where)
    monkeypatch.setattr(Folder, "served", [])
    # The one line: the toy way asked before the index (and long before a build).
    monkeypatch.setattr(provider, "WAYS", [*provider.WAYS[:3], Folder, *provider.WAYS[3:]])
    return where


def _fill(where: Path, repo: Path, shas: list[str]) -> None:
    r = git.Repo(repo)
    for sha in shas:
        (where / sha).mkdir(parents=True)
        write(assemble(r, sha), where / sha)


def _json(*args: str) -> dict[str, object]:
    r = invoke(*args)
    assert r.exit_code == 0, r.stderr
    out: dict[str, object] = json.loads(r.stdout)
    return out


def test_a_toy_way_is_used_and_priced_by_start_plan_check_and_the_watch(
        home: Path, tmp_path: Path, folder: Path) -> None:
    hist = generate_small(tmp_path / "proj", commits=12, culprit=7)
    _fill(folder, hist.path, hist.main)
    assert provider.WAYS.count(Folder) == 1  # registered once, by the fixture's one line
    ends = ("--repo", str(hist.path), "--good", hist.main[0], "--bad", hist.main[-1])

    # bisect plan: every commit is the folder's, priced as a prebuilt wheel, never a build.
    plan = _json("plan", *ends, "--no-confirm", "--json", "--", "python", "-c", ORACLE)
    assert plan["kinds"] == {Way.PREBUILT.value: len(hist.main)}, plan["kinds"]
    assert plan["builds_max"] == 0, plan
    costs = plan["costs"]
    assert isinstance(costs, dict)
    per_probe = costs[Way.PREBUILT] + costs["oracle"]  # each probe priced as the way says
    assert plan["seconds_max"] == pytest.approx(plan["probes_max"] * per_probe), plan

    # bisect start: every probe's package came from the folder, and says it was the way.
    done = _json("start", *ends, "--no-confirm", "--json", "--", "python", "-c", ORACLE)
    assert done["culprit"]["sha"] == hist.culprit  # type: ignore[index]
    probes = done["probes"]
    assert isinstance(probes, list) and probes
    assert {p["obtained"] for p in probes} == {Way.PREBUILT.value}, probes
    assert set(Folder.served) >= {p["sha"] for p in probes}

    # bisect check --commit: the chain of one commit asks the folder too (no build).
    Folder.served.clear()
    r = invoke("check", "--repo", str(hist.path), "--commit", hist.culprit,
               "--python", sys.executable, "--json", "--", "python", "-c", ORACLE)
    assert r.exit_code == 1 and json.loads(r.stdout)["verdict"] == "bad", r.stdout + r.stderr
    assert Folder.served == [hist.culprit]

    # The watch: a nightly's environment (app/watch/sources.environment) comes through the
    # chain without a build, so the folder serves it before any index is asked.
    Folder.served.clear()
    store = open_store(str(home / "data" / "bisector.db"), create=False)
    wheel = Prebuilt("nightly", "x.whl", "https://index.invalid/x.whl", "1.0", None,
                     commit=hist.main[-1])
    place = Place("nightly", git.Repo(hist.path), GENERIC, sys.executable, None)
    torch = Torch("nightly", "1.0", hist.main[-1], wheel.url, wheel=wheel)
    inst, _ = environment(store, torch, place, policy=LOCAL)
    assert Folder.served == [hist.main[-1]]
    assert inst.wheel is not None and NAME in inst.wheel.name
