"""A team's wheels in an object store: any S3 API, objects named by their sha256.

A source build of PyTorch takes an hour or more; a team whose boxes share no disk would build
each commit once per box. With ``--artifacts s3://BUCKET/PREFIX`` (or ``$BISECTOR_ARTIFACTS``,
or ``[artifacts] url`` in the user's ``bisector.toml``, never a repository's file: resolved once
a command, ``run/policy.py``), a wheel built or downloaded on one box is uploaded under
``PREFIX/sha256/DIGEST`` and the shared SQL store records which artifact that object serves
(``store/remote.py``). Another box whose cache lacks the wheel reads the object, checks its
bytes against the digest in SQL (never one the bucket says), and only then installs it: a
writable bucket cannot change a verdict.

The client is boto3, the AWS SDK: it is the one every S3-compatible server is tested against,
it reads the endpoint from the standard ``AWS_ENDPOINT_URL`` and credentials from the standard
chain (environment, ``~/.aws``, instance roles), and its low-level multipart calls let an
upload of a multi-GB wheel resume where it stopped. Objects appear whole or not at all: a
small one in one PUT, a large one only when its multipart upload completes.

A store that does not answer costs one warning and local work (the next way in the chain:
index, overlay, build), never a verdict; it is tried again after :data:`RETRY_S`, by every
client of the bucket in this process (the memory is the process's, not one provider's). One
that takes connections and never answers costs seconds too: every request has the connect and
read timeouts and the one retry policy of ``defaults.OBJECT_STORE_*``.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bisector.artifacts.cache import file_sha256
from bisector.base import defaults
from bisector.base.errors import UsageError
from bisector.base.paths import cache_dir
from bisector.infra import cancel

# Parts of a multipart upload (S3 allows 10,000 of at least 5 MiB; 64 MiB keeps a 20 GB
# wheel within that) and the size from which an upload is multipart, so it can resume.
PART_BYTES = 64 * 2**20
# (bytes done, bytes in all): a download's or an upload's progress, as the index's downloads
# report theirs.
Progress = Callable[[int, int | None], None]
# After a failure the store is left alone this long (one warning), then tried again.
RETRY_S = defaults.OBJECT_STORE_DOWN_S
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_WHEEL = re.compile(r"^[\w.+-]+\.whl$")
_OBJECT = re.compile(r"(?:[^/]+/)*sha256/[0-9a-f]{64}")


_FLIGHTS: dict[tuple[str, str], threading.Lock] = {}
_FLIGHTS_LOCK = threading.Lock()


def in_flight(bucket: str, object_key: str) -> threading.Lock:
    """The lock of one object's download in this process: the probe threads that need one
    wheel (an overlay base shared by a round's probes, say) wait on the one download in
    flight and then find its file, instead of fetching the object once each."""
    with _FLIGHTS_LOCK:
        return _FLIGHTS.setdefault((bucket, object_key), threading.Lock())


class Unavailable(Exception):
    """The object store did not answer, or refused: local work goes on."""


class _TooLarge(Exception):
    """The object's body goes past the size the store recorded: refused at the first byte
    beyond it, never downloaded whole."""


@dataclass(frozen=True)
class Address:
    """Where a team's artifacts live: ``s3://BUCKET/PREFIX`` (the object store itself, as the
    keepers use it, is ``keepers.Bucket``)."""

    name: str
    prefix: str

    @property
    def url(self) -> str:
        return f"s3://{self.name}/{self.prefix}" if self.prefix else f"s3://{self.name}"

    def object_key(self, digest: str) -> str:
        return f"{self.prefix}/sha256/{digest}" if self.prefix else f"sha256/{digest}"

    def owns(self, object_key: str) -> bool:
        """``object_key`` is one bisector uploads under this prefix (``PREFIX/sha256/HEX``):
        the only keys ``gc --remote`` may delete, whatever a row of the store names (another
        team's prefix, a hand-edited row, a ``..`` a server folds away)."""
        return _OBJECT.fullmatch(object_key) is not None and \
            object_key == self.object_key(object_key.rsplit("/", 1)[-1])


def parse(url: str, where: str = "--artifacts") -> Address:
    """``s3://BUCKET[/PREFIX]``, or a one-line error naming the fix."""
    m = re.fullmatch(r"s3://([^/]+)/?(.*)", url.strip())
    if m is None or not _BUCKET.match(m.group(1)):
        raise UsageError(f"{where} {url!r} is not an object store URL: give "
                         f"s3://BUCKET/PREFIX (the endpoint comes from AWS_ENDPOINT_URL)")
    prefix = m.group(2).strip("/")
    if any(part in ("", ".", "..") for part in prefix.split("/")) and prefix:
        raise UsageError(f"{where} {url!r} has an empty or relative part in its prefix: give "
                         f"s3://BUCKET/PREFIX with plain folder names")
    return Address(m.group(1), prefix)


def _client() -> Any:
    # lazy: boto3 takes a second to import; only a run with an object store needs it
    import boto3  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]

    return boto3.client("s3", config=Config(
        connect_timeout=defaults.OBJECT_STORE_CONNECT_S,
        read_timeout=defaults.OBJECT_STORE_READ_S,
        retries={"total_max_attempts": defaults.OBJECT_STORE_ATTEMPTS, "mode": "standard"}))


class _Health:
    """Until when one bucket is left alone after a failure, as this process knows it."""

    def __init__(self) -> None:
        self.down_until = 0.0


_HEALTH: dict[Address, _Health] = {}


def _health(bucket: Address) -> _Health:
    """The process's one memory of ``bucket``'s health: every :class:`Remote` of it made here
    (each provider of a command, each task of a worker) shares it, so one failure leaves the
    store alone :data:`RETRY_S` for all of them, not for the provider that saw it."""
    with _FLIGHTS_LOCK:
        return _HEALTH.setdefault(bucket, _Health())


class Remote:
    """One bucket, as one run uses it: fetch by digest, push a file, a warning when down."""

    def __init__(self, bucket: Address, warn: Callable[[str], None],
                 part_bytes: int = PART_BYTES) -> None:
        self.bucket, self._warn, self.part_bytes = bucket, warn, part_bytes
        self._c: Any = None
        self._lock = threading.Lock()
        self._health = _health(bucket)
        self._warned = False

    # -- health ---------------------------------------------------------------------------

    def usable(self) -> bool:
        return time.monotonic() >= self._health.down_until

    def _failed(self, what: str, e: BaseException) -> None:
        with self._lock:
            self._health.down_until = time.monotonic() + RETRY_S
            first, self._warned = not self._warned, True
        if first:
            self._warn(f"the object store {self.bucket.url} failed ({what}: "
                       f"{type(e).__name__}: {str(e)[:160]}): working locally; it is tried "
                       f"again in {RETRY_S:.0f}s")

    def _client(self) -> Any:
        with self._lock:
            if self._c is None:
                self._c = _client()
            return self._c

    # -- reading --------------------------------------------------------------------------

    def fetch(self, object_key: str, digest: str, dest: Path, size: int | None = None,
              progress: Progress | None = None) -> bool:
        """The object into ``dest`` when its bytes hash to ``digest``; False (and no file)
        when the store is down, the object is missing, or its bytes are not those (more than
        the recorded ``size`` of them: refused as soon as they arrive)."""
        if not self.usable():
            return False
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.{threading.get_ident()}.part")
        try:
            self._download(object_key, tmp, size, progress)
            got = file_sha256(tmp)
            if got != digest:
                self._warn(f"the object {object_key} in {self.bucket.url} is not the wheel "
                           f"the store recorded (sha256 {got[:12]}, not {digest[:12]}): not "
                           f"used; this commit is made locally")
                return False
            os.replace(tmp, dest)
            return True
        except _TooLarge:
            self._warn(f"the object {object_key} in {self.bucket.url} is larger than the "
                       f"wheel the store recorded (more than {size} bytes): not used, and "
                       f"not downloaded further; this commit is made locally")
            return False
        except cancel.Stopped:
            raise
        except Exception as e:  # any client failure means "not from here"
            if not _missing(e):
                self._failed("download", e)
            return False
        finally:
            tmp.unlink(missing_ok=True)

    def _download(self, object_key: str, tmp: Path, size: int | None,
                  progress: Progress | None) -> None:
        """The object's body into ``tmp``, one stream, never past ``size`` bytes: the request
        asks for one byte more than recorded, so a larger object says so in its length before
        any body is read, and a server that ignores the range (or sends no length) is cut at
        the first chunk past it. boto3's transfer manager would fetch the whole object (its
        size from the bucket, never from SQL) and retry on its own."""
        ranged = {"Range": f"bytes=0-{size}"} if size else {}
        got = self._client().get_object(Bucket=self.bucket.name, Key=object_key, **ranged)
        body = got["Body"]
        try:
            length = got.get("ContentLength")
            if size is not None and length is not None and int(length) > size:
                raise _TooLarge
            done = 0
            with tmp.open("wb") as f:
                for chunk in body.iter_chunks(2**20):
                    done += len(chunk)
                    if size is not None and done > size:
                        raise _TooLarge
                    f.write(chunk)
                    if progress is not None:
                        progress(done, size)
        finally:
            body.close()

    # -- writing --------------------------------------------------------------------------

    def push(self, path: Path, digest: str, size: int,
             progress: Progress | None = None) -> str | None:
        """Upload ``path`` (whose sha256 is ``digest``) unless the object is there; its key,
        or None when the store is down."""
        if not self.usable():
            return None
        key = self.bucket.object_key(digest)
        try:
            c = self._client()
            if self._has(c, key, size):
                return key
            if size < self.part_bytes:
                with path.open("rb") as f:
                    c.put_object(Bucket=self.bucket.name, Key=key, Body=f,
                                 Metadata={"sha256": digest})
                if progress is not None:
                    progress(size, size)
            else:
                self._multipart(c, path, key, digest, size, progress)
            return key
        except Exception as e:  # the wheel stays local; nothing is lost
            self._failed("upload", e)
            return None

    def _has(self, c: Any, key: str, size: int) -> bool:
        try:
            head = c.head_object(Bucket=self.bucket.name, Key=key)
        except Exception as e:
            if _missing(e):
                return False
            raise
        return int(head.get("ContentLength", -1)) == size

    def _multipart(self, c: Any, path: Path, key: str, digest: str, size: int,
                   progress: Progress | None) -> None:
        """A multipart upload that resumes: its id is kept in the cache until it completes,
        and the parts the store already holds are not sent again."""
        state = cache_dir() / "uploads" / f"{digest}.json"
        state.parent.mkdir(parents=True, exist_ok=True)
        done: dict[int, str] = {}
        upload_id = _saved_upload(state, key)
        if upload_id is not None:
            try:
                listed = c.list_parts(Bucket=self.bucket.name, Key=key, UploadId=upload_id)
                done = {int(p["PartNumber"]): str(p["ETag"]) for p in listed.get("Parts", [])
                        if int(p["Size"]) == self._part_size(int(p["PartNumber"]), size)}
            except Exception:  # expired or unknown: start again
                upload_id = None
        if upload_id is None:
            upload_id = c.create_multipart_upload(Bucket=self.bucket.name, Key=key,
                                                  Metadata={"sha256": digest})["UploadId"]
            part = state.with_name(f".{state.name}.{os.getpid()}.{threading.get_ident()}")
            part.write_text(json.dumps({"upload_id": upload_id, "key": key}))
            os.replace(part, state)  # whole or absent, whatever stops this process
        parts = -(-size // self.part_bytes)
        with path.open("rb") as f:
            for n in range(1, parts + 1):
                if n not in done:
                    f.seek((n - 1) * self.part_bytes)
                    got = c.upload_part(Bucket=self.bucket.name, Key=key,
                                        UploadId=upload_id, PartNumber=n,
                                        Body=f.read(self.part_bytes))
                    done[n] = str(got["ETag"])
                if progress is not None:
                    progress(min(size, n * self.part_bytes), size)
        c.complete_multipart_upload(
            Bucket=self.bucket.name, Key=key, UploadId=upload_id,
            MultipartUpload={"Parts": [{"PartNumber": n, "ETag": done[n]}
                                       for n in range(1, parts + 1)]})
        state.unlink(missing_ok=True)

    def _part_size(self, n: int, size: int) -> int:
        return min(self.part_bytes, size - (n - 1) * self.part_bytes)

    def remove(self, object_keys: list[str]) -> None:
        """Delete objects (``bisect gc --remote``); a failure leaves them, with the warning.
        A key outside this prefix is refused before anything is deleted."""
        if foreign := [k for k in object_keys if not self.bucket.owns(k)]:
            raise UsageError(f"{len(foreign)} key(s) outside {self.bucket.url}/ not deleted "
                             f"({foreign[0]!r}...): gc --remote deletes only what it uploads")
        c = self._client()
        for i in range(0, len(object_keys), 1000):
            c.delete_objects(Bucket=self.bucket.name, Delete={
                "Objects": [{"Key": k} for k in object_keys[i:i + 1000]], "Quiet": True})


def _saved_upload(state: Path, key: str) -> str | None:
    """The upload id a state file keeps for ``key``; None when there is none to resume. A
    file that is empty (a full disk, a kill -9 mid-write), cut, not JSON, or not this key's
    is removed: the upload starts afresh rather than failing on it for good."""
    try:
        saved = json.loads(state.read_bytes())
        upload_id = saved["upload_id"]
        if not isinstance(upload_id, str) or not upload_id or saved.get("key", key) != key:
            raise ValueError("not a resumable upload of this object")
        return upload_id
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):  # JSON and Unicode errors included
        state.unlink(missing_ok=True)
        return None


def _missing(e: BaseException) -> bool:
    """A 404 from the store: the object is not there, and the store is fine."""
    resp = getattr(e, "response", None)
    code = str((resp or {}).get("Error", {}).get("Code", "")) if isinstance(resp, dict) else ""
    return code in ("404", "NoSuchKey", "NotFound")


def wheel_name(path: str | None) -> str | None:
    """The file name a downloaded wheel gets (installers read the name), when it is one."""
    name = Path(path).name if path else ""
    return name if _WHEEL.match(name) else None


def now() -> datetime:
    return datetime.now(UTC)
