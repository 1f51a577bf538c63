"""Issue 48, round 5: the team's bucket stays the truth, or says why not.

A team's wheels live in an S3 bucket (here a real SeaweedFS, ``tests/s3_world.py``) and SQL
rows say which object serves which artifact, with its digest. Each test is one way the
review found to make the bucket stop serving, serve too much, cost too much, or lose what
it was not given: a local rebuild that orphaned the bucket's object (S1), a body larger than
recorded (S2), one download per probe thread (S3), a broken multipart state (S4), a store
that never answers (S5), ``gc --remote`` outside its prefix (S6).
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from bisector.app.demo.torchlet import SyntheticHistory, generate
from bisector.artifacts import remote
from bisector.artifacts.cache import file_sha256
from bisector.artifacts.keepers import Keeper
from bisector.base import defaults
from bisector.base.events import QuietEvents
from bisector.base.kinds import ArtifactKind, ArtifactStatus
from bisector.store import models as m
from bisector.store import remote as remote_rows
from bisector.store.artifacts import ArtifactStore
from bisector.store.db import open_store
from bisector.store.records import NewArtifact
from tests.support import _free_port, run_cli

pytestmark = [pytest.mark.adversarial]


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> SyntheticHistory:
    return generate(tmp_path_factory.mktemp("truth") / "t", commits=8, culprit=5, broken=(),
                    seed=4848, release_at=None, side_branch_at=None, c_churn=(3,))


def _rows(db: Path) -> tuple[list[m.Artifact], list[m.RemoteObject]]:
    with open_store(str(db), create=False).session() as s:
        return list(s.scalars(select(m.Artifact))), list(s.scalars(select(m.RemoteObject)))


def _check(db: Path, bucket: str, hist: SyntheticHistory, sha: str, home: Path,
           env: dict[str, str] | None = None) -> tuple[dict[str, object], str]:
    """``bisect check --commit`` on a box of its own (home and cache), the shared store."""
    r = run_cli("--db", str(db), "--artifacts", bucket, "check", "--repo", str(hist.path),
                "--commit", sha, "--oracle", "torchlet_norm", "--json",
                env={"BISECTOR_HOME": str(home), "BISECTOR_CACHE_DIR": str(home / "cache"),
                     **(env or {})})
    assert r.returncode in (0, 1), r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    return json.loads(r.stdout), r.stderr


# -- S1: a local rebuild never orphans the bucket's object ------------------------------------

def test_a_rebuild_while_the_store_is_down_keeps_the_buckets_wheel(
        s3_bucket: str, history: SyntheticHistory, tmp_path: Path) -> None:
    db, sha = tmp_path / "team.db", history.main[6]
    first, _ = _check(db, s3_bucket, history, sha, tmp_path / "a")
    arts, objs = _rows(db)
    assert len(objs) == 1
    uploaded = objs[0].sha256
    (tmp_path / "a").rename(tmp_path / "a-elsewhere")  # its paths in the store lead nowhere
    # Box b: the store does not answer, so it builds the commit itself.
    dead = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{_free_port()}"}
    second, err_b = _check(db, s3_bucket, history, sha, tmp_path / "b", dead)
    assert "failed" in err_b and second["verdict"] == first["verdict"], err_b
    built_b = next((tmp_path / "b" / "cache" / "wheels").rglob("*.whl"))
    assert file_sha256(built_b) != uploaded  # a build is not reproducible to the byte
    # Box c downloads the bucket's object and builds nothing: the row still names it.
    (tmp_path / "b").rename(tmp_path / "b-elsewhere")
    third, err_c = _check(db, s3_bucket, history, sha, tmp_path / "c")
    assert "from the team's object store" in str(third["environment"]), err_c
    assert "building" not in err_c, err_c
    arts, objs = _rows(db)
    assert [a.sha256 for a in arts if a.kind == "source"] == [uploaded]
    assert [o.sha256 for o in objs] == [uploaded]
    assert "differs from the one the team's object store holds" in err_b, err_b
    # Box b again, the store back: its own wheel, under the row's path, is not the row's
    # bytes; the bucket's replaces it (never "the cached wheel changed", never a build).
    (tmp_path / "b-elsewhere").rename(tmp_path / "b")
    again, err_b2 = _check(db, s3_bucket, history, sha, tmp_path / "b")
    assert again["verdict"] == first["verdict"], err_b2
    assert "from the team's object store" in str(again["environment"]), err_b2
    assert file_sha256(built_b) == uploaded and "building" not in err_b2, err_b2


# -- S5: a store that never answers costs seconds ---------------------------------------------

class Silent:
    """A TCP server on 127.0.0.1 that accepts every connection and never answers: a store
    whose process hangs (or a proxy in front of a dead one)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.held: list[socket.socket] = []
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                self.held.append(self.sock.accept()[0])

    def close(self) -> None:
        for c in [*self.held, self.sock]:
            c.close()


def test_a_store_that_never_answers_costs_seconds(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    silent = Silent()
    try:
        for k, v in {"AWS_ENDPOINT_URL": silent.url, "AWS_ACCESS_KEY_ID": "x",
                     "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"}.items():
            monkeypatch.setenv(k, v)
        monkeypatch.setenv("BISECTOR_CACHE_DIR", str(tmp_path / "cache"))
        bucket = remote.parse("s3://team-wheels/p")
        wheel = tmp_path / "w-1.0-py3-none-any.whl"
        wheel.write_bytes(os.urandom(2**16))
        digest = file_sha256(wheel)
        warned: list[str] = []
        got: dict[str, object] = {}
        reader, writer = remote.Remote(bucket, warned.append), remote.Remote(bucket, warned.append)
        calls = [threading.Thread(target=lambda: got.update(fetch=reader.fetch(
                     bucket.object_key(digest), digest, tmp_path / "down" / wheel.name,
                     wheel.stat().st_size)), daemon=True),
                 threading.Thread(target=lambda: got.update(push=writer.push(
                     wheel, digest, wheel.stat().st_size)), daemon=True)]
        t0 = time.monotonic()
        for t in calls:
            t.start()
        # The defaults' worst case (each attempt's read timeout, and botocore's backoff
        # between them), with room: minutes before the fix.
        bound = defaults.OBJECT_STORE_ATTEMPTS * (defaults.OBJECT_STORE_READ_S + 1) + 5
        for t in calls:
            t.join(timeout=max(0.0, bound - (time.monotonic() - t0)))
        assert not any(t.is_alive() for t in calls), f"still waiting after {bound:.0f}s"
        assert got == {"fetch": False, "push": None}
        assert len(warned) == 2 and all("working locally" in w and "\n" not in w
                                        for w in warned), warned
        assert not list((tmp_path / "down").glob("*"))  # nothing half-written
    finally:
        silent.close()


# -- S2: a download stops at the recorded size ------------------------------------------------

class Flood:
    """An HTTP server that answers every GET with an endless chunked body, no length, any
    range ignored: what a broken or hostile store in front of the bucket could send."""

    def __init__(self) -> None:
        self.sent = 0
        self.ended = threading.Event()  # a GET's flood stopped: its client went, or 1 GiB
        flood = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                chunk = os.urandom(2**20)
                with contextlib.suppress(OSError):
                    while flood.sent < 2**30:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        flood.sent += len(chunk)
                flood.ended.set()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_download_stops_at_the_recorded_size(s3_bucket: str, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3

    bucket = remote.parse(s3_bucket)
    recorded, key = 10 * 2**10, bucket.object_key("a" * 64)
    boto3.client("s3").put_object(Bucket=bucket.name, Key=key, Body=os.urandom(3 * 2**20))
    warned: list[str] = []
    seen: list[int] = []
    dest = tmp_path / "down" / "w-1.0-py3-none-any.whl"
    store = remote.Remote(bucket, warned.append)
    assert not store.fetch(key, "a" * 64, dest, recorded, lambda done, _: seen.append(done))
    assert max(seen, default=0) <= recorded, f"{max(seen)} bytes came for a {recorded} row"
    assert len(warned) == 1 and "larger than the wheel the store recorded" in warned[0], warned
    assert store.usable()  # a bad object, not a store that is down
    assert not list(dest.parent.iterdir())
    # A server that ignores the range and says no length: cut at the first chunk past it.
    flood = Flood()
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", flood.url)
        cut = remote.Remote(bucket, warned.append)
        seen.clear()
        assert not cut.fetch(key, "a" * 64, dest, recorded, lambda done, _: seen.append(done))
        assert max(seen, default=0) <= recorded and "larger than" in warned[-1], warned
        assert flood.ended.wait(120)  # the server saw the client go (or sent its 1 GiB)
        assert flood.sent < 64 * 2**20, f"{flood.sent} bytes sent for a {recorded} row"
        assert not list(dest.parent.iterdir())
    finally:
        flood.close()


# -- S3: one download per object per process --------------------------------------------------

class Notes(QuietEvents):
    def __init__(self) -> None:
        self.notes: list[str] = []

    def note(self, text: str) -> None:
        self.notes.append(text)


def test_probe_threads_share_one_download(s3_bucket: str, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Four probe threads need one built wheel (a round's overlays on one base ask for it
    through ``Keeper.get``): the object comes down once, the others wait for it."""
    monkeypatch.setenv("BISECTOR_CACHE_DIR", str(tmp_path / "cache"))
    wheel = tmp_path / "made" / "torchlet-1.0-py3-none-any.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(os.urandom(24 * 2**20))
    digest, size = file_sha256(wheel), wheel.stat().st_size
    store = open_store(str(tmp_path / "team.db"))
    artifacts = ArtifactStore(store)
    row = artifacts.save(NewArtifact("k" * 64, "c" * 40, ArtifactKind.SOURCE,
                                     ArtifactStatus.OK, {}, path=str(wheel), sha256=digest,
                                     size=size))
    bucket = remote.parse(s3_bucket)
    events = Notes()
    keep = Keeper(artifacts, events, remote.Remote(bucket, events.note))
    keep.put(row)  # box a's upload
    assert remote_rows.find(store, bucket.url, row.key) is not None
    wheel.unlink()  # this is box b: the row's path leads nowhere here
    start = threading.Barrier(4)
    got: list[object] = []

    def probe() -> None:
        start.wait()
        found = keep.get(row.key)
        got.append(found.row.path if found is not None else None)

    threads = [threading.Thread(target=probe) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    downloads = [n for n in events.notes if n.startswith("downloaded ")]
    assert len(downloads) == 1, events.notes
    assert len(got) == 4 and len(set(got)) == 1 and got[0] is not None, got
    assert file_sha256(Path(str(got[0]))) == digest
    assert not list(Path(str(got[0])).parent.glob(".*.part"))


# -- S4: a broken multipart state is discarded ------------------------------------------------

@pytest.mark.parametrize("saved", ["", "{\"upload_id\": \"abc", "[]", "{\"upload_id\": 7}",
                                   "{\"upload_id\": \"\"}", "\xff\xfe not text"],
                         ids=["empty", "cut", "a-list", "a-number", "no-id", "not-utf8"])
def test_a_broken_multipart_state_starts_the_upload_afresh(
        s3_bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, saved: str) -> None:
    """A state file left empty by a full disk or a kill -9 mid-write (or any other junk) is
    dropped, and the upload starts over: the wheel reaches the bucket, with no warning and no
    minute without the store."""
    import boto3

    monkeypatch.setenv("BISECTOR_CACHE_DIR", str(tmp_path / "cache"))
    bucket = remote.parse(s3_bucket)
    wheel = tmp_path / "big-1.0-py3-none-any.whl"
    wheel.write_bytes(os.urandom(11 * 2**20))  # three parts of 5 MiB: a multipart upload
    digest, size = file_sha256(wheel), wheel.stat().st_size
    state = tmp_path / "cache" / "uploads" / f"{digest}.json"
    state.parent.mkdir(parents=True)
    state.write_bytes(saved.encode("latin-1"))
    warned: list[str] = []
    store = remote.Remote(bucket, warned.append, part_bytes=5 * 2**20)
    assert store.push(wheel, digest, size) == bucket.object_key(digest), warned
    assert not warned and store.usable()
    assert not state.exists()  # completed: nothing left to resume
    head = boto3.client("s3").head_object(Bucket=bucket.name, Key=bucket.object_key(digest))
    assert head["ContentLength"] == size


# -- S6: gc --remote deletes only under its prefix --------------------------------------------

def test_gc_remote_deletes_only_under_its_prefix(s3_bucket: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows of the store name the objects gc removes; one that names a key outside the
    configured prefix (another team's, a hand-edited or hostile row, a ``..`` the server
    folds away) leaves that object where it is, and says so."""
    import boto3

    from bisector.app import gc, remote_gc

    monkeypatch.setenv("BISECTOR_CACHE_DIR", str(tmp_path / "cache"))
    bucket = remote.parse(s3_bucket)
    s3 = boto3.client("s3")
    store = open_store(str(tmp_path / "team.db"))
    wheel = tmp_path / "w-1.0-py3-none-any.whl"
    wheel.write_bytes(os.urandom(2**16))
    digest = file_sha256(wheel)
    ours = remote.Remote(bucket, pytest.fail).push(wheel, digest, wheel.stat().st_size)
    assert ours == bucket.object_key(digest)
    kept = ["precious/data.bin", f"{bucket.prefix}/notes.txt",
            f"{bucket.prefix}x/sha256/{digest}"]
    for key in kept:
        s3.put_object(Bucket=bucket.name, Key=key, Body=b"not bisector's")
    # The server refuses to store a key with "..", and may fold one it is asked to delete.
    others = [*kept, f"{bucket.prefix}/../precious/data.bin"]
    then = remote.now().replace(year=2020)
    for i, key in enumerate([ours, *others]):
        remote_rows.record(store, remote_rows.RemoteRecord(bucket.url, f"artifact-{i}", key,
                                                           f"{i}" * 64, 10, "w.whl", then))
    warned: list[str] = []
    got = remote_gc.collect(store, remote.Remote(bucket, warned.append), max_size=0,
                            older_than_s=None, dry_run=False, now=time.time() + 7200)
    assert not got.errors and not warned, (got.errors, warned)
    assert [str(i.path) for i in got.remove] == [ours]
    listed = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket.name).get("Contents", [])}
    assert ours not in listed
    assert set(kept) <= listed, listed
    said = "\n".join(gc.describe(got))
    assert f"kept {len(others)} item(s)" in said and "outside" in said, said
