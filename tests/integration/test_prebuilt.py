"""Prebuilt wheels, nightlies mapped to commits, overlays and cost-aware probing, end to end.

Everything is real: a package index served on 127.0.0.1 (bisector/app/demo/index.py) with wheels of
the synthetic project built at every 16th commit and published like PyTorch's nightlies (a
``nightly`` branch, ``.devYYYYMMDD+cpu`` versions, ``git_version`` in ``version.py``).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import git
import pytest
from sqlalchemy import select

from bisector.app.demo.index import IndexServer
from bisector.app.demo.torchlet import SyntheticHistory
from bisector.artifacts.index import IndexClient, IndexFile, IndexProblem, parse_simple_page
from bisector.artifacts.obtained import Obtained, Recipe, Sources
from bisector.artifacts.prebuilt import Discoverer
from bisector.artifacts.provider import Provider
from bisector.base.kinds import ArtifactKind, Way
from bisector.executors.facts import learn_facts
from bisector.executors.local import LocalExecutor
from bisector.project.profiles import TORCHLET
from bisector.store import models as m
from bisector.store.artifacts import ArtifactStore
from bisector.store.db import open_store
from tests.support import built_world, run_cli

EVERY = 16


World = tuple[SyntheticHistory, IndexServer]


def _world(base: Path, releases: bool = False, **gen: Any) -> Iterator[World]:
    """A synthetic history with nightlies every 16 commits, its wheels served on 127.0.0.1."""
    hist = built_world(base, base / "index", releases=releases, nightly_every=EVERY, **gen)
    with IndexServer(base / "index") as server:
        yield hist, server


@pytest.fixture(scope="module")
def py_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A Python-file regression (commit 157), a module deleted at 171, a Triton bump at 201."""
    yield from _world(tmp_path_factory.mktemp("py-world"), releases=True, delete_at=171,
                      triton_bump_at=201)


@pytest.fixture(scope="module")
def c_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A regression in the C extension (commit 157) with C churn between the nightlies."""
    yield from _world(tmp_path_factory.mktemp("c-world"), regression_in="c",
                      c_churn=(149, 153, 155, 158))


def _db(home: Path) -> str:
    return str(home / "data" / "bisector.db")


def _start(hist: SyntheticHistory, server: IndexServer, *extra: str) -> dict[str, object]:
    r = run_cli("start", "--repo", str(hist.path), "--good", "v0.1.0", "--bad", "v0.2.0",
                "--oracle", "torchlet_norm", "--nightly-index", server.index_url("nightly-cpu"),
                "--json", *extra)
    assert r.returncode == 0, r.stderr
    data: dict[str, object] = json.loads(r.stdout)
    data["_stderr"] = r.stderr
    return data


def _artifacts(home: Path) -> list[m.Artifact]:
    store = open_store(_db(home), create=False)
    with store.session() as s:
        rows = list(s.scalars(select(m.Artifact)))
        for r in rows:
            s.expunge(r)
    return rows


def _probes(home: Path) -> list[m.Probe]:
    store = open_store(_db(home), create=False)
    with store.session() as s:
        rows = list(s.scalars(select(m.Probe).where(m.Probe.reused.is_(False))))
        for r in rows:
            s.expunge(r)
    return rows


def test_python_regression_is_found_with_no_source_build(home: Path, py_world: tuple) -> None:
    hist, server = py_world
    data = _start(hist, server, "--release-index", server.index_url("release"))
    assert data["culprit"]["sha"] == hist.culprit  # type: ignore[index]
    arts = _artifacts(home)
    kinds = [a.kind for a in arts]
    assert "source" not in kinds, kinds
    assert {"overlay", "prebuilt"} <= set(kinds)
    # The bad endpoint is the v0.2.0 release wheel, mapped by its tag.
    bad = next(a for a in arts if a.commit_sha == hist.tags["v0.2.0"])
    assert bad.kind == "prebuilt" and bad.settings["kind"] == "release"
    n = int(data["candidates"])  # type: ignore[call-overload]
    assert len(_probes(home)) <= math.ceil(math.log2(n)) + 2
    # The issue report names the nightlies on each side of the culprit: the one to pin.
    issue = run_cli("show", str(data["id"]), "--format", "issue", check=True).stdout
    pos = data["result"]["position"]  # type: ignore[index]
    placed = {pb["version"]: pb["position"] for pb in data["prebuilts"]  # type: ignore[attr-defined]
              if pb["kind"] == "nightly"}
    line = next(x for x in issue.splitlines() if x.startswith("It regressed between nightly"))
    lo, hi = (w for w in line.split() if w in placed)
    assert placed[lo] < pos <= placed[hi]
    assert not [v for v, p in placed.items() if placed[lo] < p < placed[hi]]
    assert str(hist.path) not in issue


def test_c_regression_needs_few_source_builds(home: Path, c_world: tuple) -> None:
    hist, server = c_world
    data = _start(hist, server)
    assert data["culprit"]["sha"] == hist.culprit  # type: ignore[index]
    builds = [a for a in _artifacts(home) if a.kind == "source"]
    w = EVERY  # commits between adjacent nightlies
    assert 1 <= len(builds) <= math.ceil(math.log2(w)) + 1, [a.commit_sha for a in builds]
    n = int(data["candidates"])  # type: ignore[call-overload]
    assert len(_probes(home)) <= math.ceil(math.log2(n)) + 2


def test_overlay_env_has_wheel_C_and_commit_python(home: Path, py_world: tuple) -> None:
    """Overlay of main[175] on the nightly of main[160]: _C from the wheel, every .py from 175,
    the module deleted at 171 gone, version.py naming the probed commit."""
    hist, server = py_world
    repo = git.Repo(hist.path)
    cands = hist.main[150:180]
    found = Discoverer(repo, TORCHLET, f"cp{sys.version_info[0]}{sys.version_info[1]}",
                       "cpu").discover(cands, nightly_index=server.index_url("nightly-cpu"),
                                       release_index=None)
    base_pos = cands.index(hist.main[160])
    assert set(found.by_position) == {base_pos, cands.index(hist.main[176])}
    assert found.by_position[base_pos].git_version == hist.nightlies[10][0]  # nightly branch
    store = open_store(_db(home))
    prov = Provider(ArtifactStore(store), lambda: repo, cands, Recipe(TORCHLET, sys.executable),
                    Sources({base_pos: found.by_position[base_pos]}))
    target = cands.index(hist.main[175])
    assert prov.kind(target) is Way.OVERLAY
    got = prov.obtain(target)
    assert isinstance(got, Obtained) and got.artifact is not None
    assert got.artifact.kind is ArtifactKind.OVERLAY and got.fresh
    inst = got.installable
    assert inst.overlay is not None
    venv = LocalExecutor(sys.executable, "torchlet").ensure_env(inst, ())
    site = next(venv.glob("lib/python*/site-packages"))
    pkg = site / "torchlet"
    assert list(pkg.glob("_C*.so")), "the compiled extension comes from the wheel"
    assert not (pkg / "_fixes.py").exists(), "deleted at commit 171, gone from the overlay"
    tree = repo.commit(hist.main[175]).tree
    for blob in tree["torchlet"].traverse():
        if blob.type == "blob" and blob.path.endswith(".py") and blob.path != "torchlet/version.py":
            assert (site / blob.path).read_bytes() == blob.data_stream.read(), blob.path
    version = (pkg / "version.py").read_text()
    # The probed commit's version file (issue 20): its sha, the nightly's public version kept.
    assert hist.nightlies[10][0] not in version and f'git_version = "{hist.main[175]}"' in version
    assert '__version__ = "0.1.0.dev' in version and '+cpu"' in version
    # Made without asking its Python (the first run tells the facts); asked here, as a run
    # that never imported torchlet would.
    facts = learn_facts(venv, None, "torchlet")
    assert facts["facts_from"] == "asked"
    assert facts["overlay"]["commit"] == hist.main[175] == facts["git_version"]
    assert facts["overlay_base"] == hist.main[160]
    assert facts["overlay"]["deleted"] == ["torchlet/_fixes.py"]


def test_triton_pin_change_is_not_overlay_eligible(home: Path, py_world: tuple) -> None:
    hist, _server = py_world
    from bisector.artifacts import overlay

    repo = git.Repo(hist.path)
    before = overlay.check(repo, hist.main[192], hist.main[200], TORCHLET)
    across = overlay.check(repo, hist.main[192], hist.main[205], TORCHLET)
    assert before.ok
    assert not across.ok and "Triton pin" in across.reason


def test_plan_explains_the_range_before_searching(home: Path, py_world: tuple) -> None:
    hist, server = py_world
    gone = sorted((server.state.root / "nightly-cpu" / "files").glob("*.whl"))[5].name
    server.state.gone = {gone}
    try:
        r = run_cli("plan", "--repo", str(hist.path), "--good", "v0.1.0", "--bad", "v0.2.0",
                    "--oracle", "torchlet_norm", "--nightly-index",
                    server.index_url("nightly-cpu"), "--cost", "build=600", "--json")
    finally:
        server.state.gone = set()
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["candidates"] == 212
    assert rep["missing"] == [gone]
    assert len(rep["prebuilt"]) == 12  # 13 nightlies inside the range, one expired
    assert rep["kinds"]["overlay"] > 150
    # The search's runs, plus confirmation's three (culprit, parent, revert).
    assert rep["builds_max"] <= 2 and rep["probes_max"] <= math.ceil(math.log2(212)) + 2 + 3
    assert any("confirmation included" in note for note in rep["notes"])
    assert rep["costs"]["build"] == 600
    text = run_cli("plan", "--repo", str(hist.path), "--good", "v0.1.0", "--bad", "v0.2.0",
                   "--oracle", "torchlet_norm", "--nightly-index",
                   server.index_url("nightly-cpu"))
    assert "projected wall time" in text.stdout and "overlay-eligible commits" in text.stdout
    assert not (home / "data" / "bisector.db").exists() or not run_cli(
        "list", "--json").stdout.strip().strip("[]").strip(), "plan records no bisection"


def test_expired_nightly_is_reported_and_never_used(home: Path, py_world: tuple) -> None:
    hist, server = py_world
    files = sorted((server.state.root / "nightly-cpu" / "files").glob("*.whl"))
    server.state.gone = {f.name for f in files[2:12]}  # most of the range's nightlies expired
    server.state.requests.clear()
    try:
        data = _start(hist, server)
    finally:
        server.state.gone = set()
    assert data["culprit"]["sha"] == hist.culprit  # type: ignore[index]
    assert "gone from the index" in str(data["_stderr"])
    fetched = {p for meth, p, _ in server.state.requests if meth == "GET"}
    assert not any(name in p for p in fetched for name in (f.name for f in files[2:12]))


def test_hash_mismatch_falls_back_and_gives_the_right_verdict(home: Path,
                                                             py_world: tuple) -> None:
    hist, server = py_world
    files = sorted((server.state.root / "nightly-cpu" / "files").glob("*.whl"))
    server.state.hashes_in_links = {"nightly-cpu"}
    server.state.bad_hash = {f.name for f in files}
    try:
        data = _start(hist, server)
    finally:
        server.state.hashes_in_links, server.state.bad_hash = set(), set()
    assert data["culprit"]["sha"] == hist.culprit  # type: ignore[index]
    assert "hash mismatch" in str(data["_stderr"])
    arts = _artifacts(home)
    # No untrusted wheel was used: every probe is a source build or an overlay on one.
    assert {a.kind for a in arts} <= {"source", "overlay"}, [a.kind for a in arts]
    sources = {a.key for a in arts if a.kind == "source"}
    assert all(a.settings["base_key"] in sources for a in arts if a.kind == "overlay")


def test_garbage_index_is_a_one_line_error_and_records_nothing(home: Path,
                                                               py_world: tuple) -> None:
    hist, server = py_world
    server.state.garbage = {"torchlet"}
    try:
        r = run_cli("start", "--repo", str(hist.path), "--good", "v0.1.0", "--bad", "v0.2.0",
                    "--oracle", "torchlet_norm", "--nightly-index",
                    server.index_url("nightly-cpu"))
    finally:
        server.state.garbage = set()
    assert r.returncode == 14  # an index problem (10: a bisection taken over)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "not a PEP 503 index page" in lines[0], r.stderr
    db = home / "data" / "bisector.db"
    assert not db.exists() or json.loads(run_cli("list", "--json").stdout) == []


def test_index_client_reads_version_py_by_ranges_and_resumes(tmp_path: Path,
                                                             py_world: tuple) -> None:
    _hist, server = py_world
    client = IndexClient(server.index_url("nightly-cpu"))
    files = client.files("torchlet")
    json_files = parse_simple_page(
        client.http.get(client.project_url("torchlet"),
                        headers={"Accept": "text/html"}).content, "text/html",
        client.project_url("torchlet"))
    assert [f.filename for f in files] == [f.filename for f in json_files]  # 691 == 503
    f = files[0]
    size = (server.state.root / "nightly-cpu" / "files" / f.filename).stat().st_size
    server.state.bytes_sent = 0
    text = client.read_member(f.url, lambda n: n == "torchlet/version.py").decode()
    assert "git_version" in text
    assert server.state.bytes_sent < size  # not the whole wheel
    # Resume: half a download is on disk; the rest comes with a Range request.
    whole = (server.state.root / "nightly-cpu" / "files" / f.filename).read_bytes()
    dest = tmp_path / f.filename
    dest.with_name(dest.name + ".part").write_bytes(whole[: len(whole) // 2])
    server.state.requests.clear()
    digest = client.download(f, dest)
    assert dest.read_bytes() == whole
    assert any(rng == f"bytes={len(whole) // 2}-" for _m, _p, rng in server.state.requests)
    import hashlib

    assert digest == hashlib.sha256(whole).hexdigest()
    bad = IndexFile(f.filename, f.url, {"sha256": "0" * 64})
    with pytest.raises(IndexProblem, match="hash mismatch"):
        client.download(bad, tmp_path / "again" / f.filename)
    assert not (tmp_path / "again" / f.filename).exists()


def _past_the_window(hist: SyntheticHistory, server: IndexServer) -> tuple[set[str], str]:
    """Leave only the oldest nightly in the listing (an index keeping its newest few would
    list none of the range after a while); of the range's unlisted nightlies one is pruned
    altogether (404). Returns the range's nightlies that are unlisted but there, and the
    pruned one."""
    from bisector.project.history import resolve_range

    files = sorted((server.state.root / "nightly-cpu" / "files").glob("*.whl"))
    cands = set(resolve_range(git.Repo(hist.path), "v0.1.0", "v0.2.0").candidates)
    in_range = {name for name, (_n, main, _s) in zip(
        [f.name for f in files], hist.nightlies, strict=True) if main in cands}
    unlisted = {f.name for f in files[1:]}
    pruned = sorted(in_range & unlisted)[3]
    server.state.unlisted, server.state.gone = unlisted, {pruned}
    return (in_range & unlisted) - {pruned}, pruned


def test_plan_counts_wheels_found_past_the_listing(home: Path, py_world: tuple) -> None:
    """The listing names one nightly; the range's others are found by HEAD at their derived
    URL (one pruned: a 404), and plan says how many came which way."""
    hist, server = py_world
    server.state.requests.clear()
    try:
        unlisted, pruned = _past_the_window(hist, server)
        r = run_cli("plan", "--repo", str(hist.path), "--good", "v0.1.0", "--bad", "v0.2.0",
                    "--oracle", "torchlet_norm", "--nightly-index",
                    server.index_url("nightly-cpu"), "--json")
        text = run_cli("plan", "--repo", str(hist.path), "--good", "v0.1.0", "--bad",
                       "v0.2.0", "--oracle", "torchlet_norm", "--nightly-index",
                       server.index_url("nightly-cpu"))
    finally:
        server.state.unlisted, server.state.gone = set(), set()
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    direct = {pb["filename"] for pb in rep["prebuilt"] if pb["source"] == "direct URL"}
    assert direct == unlisted and len(direct) >= 10
    assert rep["prebuilt_sources"] == {"listed": len(rep["prebuilt"]) - len(direct),
                                       "direct URL": len(direct)}
    assert all(pb["sha256_from"] == "download" for pb in rep["prebuilt"])  # none in links
    heads = [unquote(p) for meth, p, _ in server.state.requests if meth == "HEAD"]
    assert any(pruned in p for p in heads), "the pruned nightly was asked for"
    assert pruned not in {pb["filename"] for pb in rep["prebuilt"]}
    assert any("past the index listing" in n and "not there" in n for n in rep["notes"])
    assert rep["kinds"].get("build", 0) <= rep["candidates"] // 4, "found wheels serve"
    assert text.returncode == 0, text.stderr
    assert f"from the index listing, {len(direct)} by direct URL" in text.stdout
    # Offline, or with no nightly index, nothing is asked for.
    server.state.requests.clear()
    for extra in (("--offline", "--nightly-index", server.index_url("nightly-cpu")),
                  ("--nightly-index", "")):
        run_cli("plan", "--repo", str(hist.path), "--good", "v0.1.0", "--bad", "v0.2.0",
                "--oracle", "torchlet_norm", *extra, check=True)
    assert server.state.requests == []


def test_bisection_uses_wheels_found_past_the_listing(home: Path, py_world: tuple) -> None:
    """With every nightly of the range gone from the listing, the Python regression is still
    found with no source build: the probes install wheels fetched by their direct URL."""
    hist, server = py_world
    server.state.requests.clear()
    try:
        unlisted, _pruned = _past_the_window(hist, server)
        data = _start(hist, server)
    finally:
        server.state.unlisted, server.state.gone = set(), set()
    assert data["culprit"]["sha"] == hist.culprit  # type: ignore[index]
    arts = _artifacts(home)
    assert "source" not in [a.kind for a in arts], [(a.kind, a.commit_sha) for a in arts]
    fetched = {a.settings["filename"] for a in arts if a.kind == "prebuilt"}
    assert fetched & unlisted, fetched
    gets = [unquote(p) for meth, p, rng in server.state.requests if meth == "GET" and not rng]
    assert all(any(name in p for p in gets) for name in fetched & unlisted)
