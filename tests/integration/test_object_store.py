"""A team's object store (``--artifacts``) on a real S3 server (SeaweedFS on 127.0.0.1):
boxes that share the SQL store but no disk build each commit once, fetch the others' wheels
checked against the digest in SQL, refuse a tampered object, and work locally, with one
warning, when the store does not answer."""

from __future__ import annotations

import json
import os
from pathlib import Path

import boto3
import pytest
from sqlalchemy import select

from bisector.app.demo.torchlet import SyntheticHistory, generate
from bisector.store import models as m
from bisector.store.db import open_store
from tests import s3_world
from tests.support import one_line_error, run_cli

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> SyntheticHistory:
    # C changes at 6 and 14: three stretches, each built once and overlaid otherwise.
    return generate(tmp_path_factory.mktemp("s3hist") / "t", commits=20, culprit=11,
                    broken=(), seed=4242, release_at=None, side_branch_at=None,
                    c_churn=(6, 14))


def box(name: str, tmp: Path, hist: SyntheticHistory, db: Path,
        env: dict[str, str] | None = None) -> tuple[dict[str, object], str]:
    """One bisection of the whole range on box ``name``: its own home and cache, the shared
    store; ``--env BOX=name`` keys its verdicts apart, so it probes (and obtains) again."""
    r = run_cli("--db", str(db), "start", "--repo", str(hist.path), "--good", hist.main[0],
                "--bad", hist.main[-1], "--oracle", "torchlet_norm", "--no-confirm",
                "--env", f"BOX={name}", "--json",
                env={"BISECTOR_HOME": str(tmp / name), "BISECTOR_CACHE_DIR":
                     str(tmp / name / "cache"), **(env or {})})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), r.stderr


def rows(db: Path) -> tuple[list[m.Artifact], list[m.RemoteObject]]:
    with open_store(str(db), create=False).session() as s:
        return list(s.scalars(select(m.Artifact))), list(s.scalars(select(m.RemoteObject)))


def test_boxes_without_a_shared_disk_build_each_commit_once(
        s3_bucket: str, history: SyntheticHistory, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BISECTOR_ARTIFACTS", s3_bucket)
    db = tmp_path / "team.db"
    first, err_a = box("a", tmp_path, history, db)
    assert first["culprit"]["sha"] == history.culprit  # type: ignore[index]
    arts, objs = rows(db)
    built = [a for a in arts if a.kind == "source" and a.status == "ok"]
    assert built, err_a
    # Every wheel box a made is in the bucket, recorded with its digest.
    assert {o.artifact_key for o in objs} == {a.key for a in built}
    assert all(o.sha256 == a.sha256 for o in objs for a in built if a.key == o.artifact_key)

    # Box b: a cache of its own and no way to box a's (its paths in the store lead nowhere).
    (tmp_path / "a").rename(tmp_path / "a-elsewhere")
    second, err_b = box("b", tmp_path, history, db)
    assert second["culprit"]["sha"] == history.culprit  # type: ignore[index]
    assert "downloaded " in err_b and "sha256 checked" in err_b, err_b
    assert "building " not in err_b, err_b
    how = [p["obtained"] for p in second["probes"]]  # type: ignore[attr-defined]
    assert "build" not in how and how.count("bucket") == len(built), how
    shown = run_cli("--db", str(db), "show", "--format", "markdown",
                    env={"BISECTOR_HOME": str(tmp_path / "b")})
    assert f"From the team's object store: {len(built)} of {len(how)}" in shown.stdout, \
        shown.stdout
    assert list((tmp_path / "b" / "cache" / "wheels").rglob("*.whl"))
    after, _ = rows(db)
    assert len([a for a in after if a.kind == "source"]) == len(built)

    # A tampered object (same name, other bytes) is refused; box c builds that commit itself.
    url = s3_bucket.removeprefix("s3://")
    name, prefix = url.split("/", 1)
    s3 = boto3.client("s3")
    victim = objs[0]
    s3.put_object(Bucket=name, Key=victim.object_key, Body=b"PK not the wheel")
    (tmp_path / "b").rename(tmp_path / "b-elsewhere")
    third, err_c = box("c", tmp_path, history, db)
    assert third["culprit"]["sha"] == history.culprit  # type: ignore[index]
    assert "is not the wheel the store recorded" in err_c
    assert err_c.count("built ") <= 1 and victim.object_key.startswith(prefix)


def test_a_store_that_does_not_answer_costs_a_warning_not_a_verdict(
        s3_bucket: str, history: SyntheticHistory, tmp_path: Path) -> None:
    from tests.support import _free_port

    dead = f"http://127.0.0.1:{_free_port()}"
    got, err = box("down", tmp_path, history, tmp_path / "team.db",
                   env={"BISECTOR_ARTIFACTS": s3_bucket, "AWS_ENDPOINT_URL": dead})
    assert got["culprit"]["sha"] == history.culprit  # type: ignore[index]
    assert err.count(f"the object store {s3_bucket} failed") == 1, err
    arts, objs = rows(tmp_path / "team.db")
    assert not objs and any(a.kind == "source" and a.status == "ok" for a in arts)


def test_a_bad_object_store_url_is_one_line(history: SyntheticHistory, tmp_path: Path) -> None:
    r = run_cli("--artifacts", "https://bucket/x", "list",
                env={"BISECTOR_HOME": str(tmp_path)})
    one_line_error(r, "s3://BUCKET/PREFIX", 2)
    # In the user's bisector.toml: refused before anything is stored.
    cfg = tmp_path / "config" / "bisector.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text('[artifacts]\nurl = "s3://x"\n')
    db = tmp_path / "team.db"
    r = run_cli("--db", str(db), "start", "--repo", str(history.path), "--good",
                history.main[0], "--bad", history.main[-1], "--oracle", "torchlet_norm",
                env={"BISECTOR_HOME": str(tmp_path), "BISECTOR_ARTIFACTS": ""})
    one_line_error(r, "[artifacts] url", 2)
    assert not db.exists()
    # A repository's [artifacts] table is never read: where wheels go is not its choice.
    cfg.unlink()
    (history.path / "bisector.toml").write_text('[artifacts]\nurl = "s3://x"\n')
    env = {"BISECTOR_HOME": str(tmp_path), "BISECTOR_ARTIFACTS": ""}
    try:
        r = run_cli("list", cwd=history.path, env=env)
        assert r.returncode == 0 and "[artifacts] from it is ignored" in r.stderr, r.stderr
        trusted = run_cli("trust", str(history.path / "bisector.toml"), cwd=history.path,
                          env=env)
        assert trusted.returncode == 0, trusted.stderr
        r = run_cli("list", cwd=history.path, env=env)  # trusted, and still not read
        assert r.returncode == 0 and "artifacts" not in r.stderr, r.stderr
    finally:
        (history.path / "bisector.toml").unlink()


def test_the_store_killed_mid_upload_and_mid_download(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A server of its own, killed for real while a 12 MiB wheel goes up (after its first
    part) and while it comes down: nothing half is ever served, the upload resumes with the
    missing parts only once the server is back, and a cut download leaves no file."""
    import hashlib

    from bisector.artifacts import remote

    own = s3_world.start()
    try:
        for k, v in own.env().items():
            monkeypatch.setenv(k, v)
        monkeypatch.setenv("BISECTOR_CACHE_DIR", str(tmp_path / "cache"))
        # Each Remote below stands for a later process of the box (the one that dies, the
        # next run): a failure is remembered for the process (artifacts/remote._health), so
        # here it is remembered for no time at all.
        monkeypatch.setattr(remote, "RETRY_S", 0.0)
        bucket = remote.parse(s3_world.bucket(own, "killed"))
        wheel = tmp_path / "big-1.0-py3-none-any.whl"
        wheel.write_bytes(os.urandom(12 * 2**20))  # three parts of 5 MiB, S3's smallest
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        size, key = wheel.stat().st_size, bucket.object_key(digest)
        warnings: list[str] = []

        def kill_after_first_part(done: int, total: int | None) -> None:
            s3_world.stop(own, remove=False)

        cut = remote.Remote(bucket, warnings.append, part_bytes=5 * 2**20)
        assert cut.push(wheel, digest, size, kill_after_first_part) is None
        assert len(warnings) == 1 and "working locally" in warnings[0], warnings
        back = s3_world.start(Path(own.data), own.ports)
        own = back
        client = boto3.client("s3")
        with pytest.raises(client.exceptions.ClientError):  # nothing half is served
            client.head_object(Bucket=bucket.name, Key=key)
        state = json.loads(next((tmp_path / "cache" / "uploads").glob("*.json")).read_text())
        kept = client.list_parts(Bucket=bucket.name, Key=key, UploadId=state["upload_id"])
        assert [p["PartNumber"] for p in kept["Parts"]] == [1]  # the cut run's first part
        sent: list[int] = []
        again = remote.Remote(bucket, warnings.append, part_bytes=5 * 2**20)
        assert again.push(wheel, digest, size, lambda done, _: sent.append(done)) == key
        parts = client.list_objects_v2(Bucket=bucket.name)["Contents"]
        assert [p["Size"] for p in parts] == [size]
        assert not list((tmp_path / "cache" / "uploads").glob("*.json"))  # completed
        assert sent == [5 * 2**20, 10 * 2**20, size]  # part 1 (kept) counted with the rest

        out = tmp_path / "down" / "back.whl"

        def kill_mid_download(done: int, total: int | None) -> None:
            if done < size:
                s3_world.stop(own, remove=False)

        reader = remote.Remote(bucket, warnings.append)
        assert not reader.fetch(key, digest, out, size, kill_mid_download)
        assert not out.exists() and not list(out.parent.iterdir())
        assert "failed (download" in warnings[-1]
        own = s3_world.start(Path(own.data), own.ports)
        fresh = remote.Remote(bucket, warnings.append)
        assert fresh.fetch(key, digest, out, size)
        assert out.read_bytes() == wheel.read_bytes()
    finally:
        s3_world.stop(own)


def test_du_and_gc_know_the_bucket(s3_bucket: str, history: SyntheticHistory,
                                   tmp_path: Path) -> None:
    import time

    from bisector.app import remote_gc
    from bisector.artifacts import remote

    db = tmp_path / "team.db"
    env = {"BISECTOR_ARTIFACTS": s3_bucket}
    box("a", tmp_path, history, db, env)
    _, objs = rows(db)
    home = {"BISECTOR_HOME": str(tmp_path / "a"), **env}
    du = run_cli("--db", str(db), "du", env=home)
    assert f"the team's object store {s3_bucket}: {len(objs)} wheel(s)" in du.stdout, du.stdout
    # Just used: the grace period keeps every object, as gc keeps a local wheel.
    kept = run_cli("--db", str(db), "gc", "--remote", "--max-size", "0", env=home)
    assert kept.returncode == 0 and "removed 0 item(s)" in kept.stdout, kept.stdout
    # Two hours on, nothing unfinished needs them: a size budget of 0 takes every object.
    warnings: list[str] = []
    got = remote_gc.collect(open_store(str(db), create=False),
                            remote.Remote(remote.parse(s3_bucket), warnings.append),
                            max_size=0, older_than_s=None, dry_run=False,
                            now=time.time() + 7200)
    assert len(got.remove) == len(objs) and not got.errors and not warnings
    assert rows(db)[1] == []
    name, prefix = s3_bucket.removeprefix("s3://").split("/", 1)
    assert boto3.client("s3").list_objects_v2(Bucket=name, Prefix=prefix).get("KeyCount") == 0
    none = run_cli("--db", str(db), "gc", "--remote", "--max-size", "0",
                   env={"BISECTOR_HOME": str(tmp_path / "a"), "BISECTOR_ARTIFACTS": ""})
    one_line_error(none, "--artifacts", 2)


def test_two_boxes_at_once_build_each_commit_once(s3_bucket: str, history: SyntheticHistory,
                                                  tmp_path: Path) -> None:
    """Both boxes start the same range together (their own caches and homes, one store, one
    bucket): a build is claimed in the store, so the second box waits for the first's wheel
    and fetches it instead of building it again."""
    import subprocess
    import sys

    db = tmp_path / "team.db"
    procs = []
    for name in ("a", "b"):
        env = {**os.environ, "BISECTOR_HOME": str(tmp_path / name), "BISECTOR_ARTIFACTS":
               s3_bucket, "BISECTOR_CACHE_DIR": str(tmp_path / name / "cache")}
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "bisector", "--db", str(db), "start", "--repo",
             str(history.path), "--good", history.main[0], "--bad", history.main[-1],
             "--oracle", "torchlet_norm", "--no-confirm", "--env", f"BOX={name}", "--json"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert json.loads(out)["culprit"]["sha"] == history.culprit
    logs = [f.name for name in ("a", "b")
            for f in (tmp_path / name / "data" / "logs" / "builds").glob("*.log")]
    arts, objs = rows(db)
    built = {a.key for a in arts if a.kind == "source"}
    assert sorted(logs) == sorted(f"{k}.log" for k in built), (logs, built)  # once each
    assert {o.artifact_key for o in objs} == built


def test_check_of_a_commit_goes_through_the_chain(s3_bucket: str, history: SyntheticHistory,
                                                  tmp_path: Path) -> None:
    """``bisect check --commit`` obtains as a probe does: box a builds, records and uploads the
    wheel; box b, with a cache of its own, downloads it and builds nothing."""
    db, sha = tmp_path / "team.db", history.main[15]

    def check(name: str) -> tuple[dict[str, object], str]:
        r = run_cli("--db", str(db), "--artifacts", s3_bucket, "check", "--repo",
                    str(history.path), "--commit", sha, "--oracle", "torchlet_norm", "--json",
                    env={"BISECTOR_HOME": str(tmp_path / name),
                         "BISECTOR_CACHE_DIR": str(tmp_path / name / "cache")})
        assert r.returncode in (0, 1), r.stderr
        return json.loads(r.stdout), r.stderr

    first, err_a = check("a")
    assert first["environment"] == f"source build of {sha[:12]}", err_a
    arts, objs = rows(db)
    assert [a.commit_sha for a in arts if a.kind == "source"] == [sha]
    assert len(objs) == 1
    (tmp_path / "a").rename(tmp_path / "a-elsewhere")  # its paths in the store lead nowhere
    second, err_b = check("b")
    assert second["environment"] == f"source build of {sha[:12]} (from the team's object " \
                                    f"store)", err_b
    assert second["verdict"] == first["verdict"]
    assert "sha256 checked" in err_b and "building" not in err_b, err_b
