"""Never a silent wait, against a slow package index on 127.0.0.1 (bisector/app/demo/index.py
with throttled writes): a wheel's download tells its bytes, speed and time left, or its bytes
and speed when the server sends no Content-Length; listing the index is announced before the
first request goes out."""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import git
import pytest
from rich.console import Console

from bisector.app.demo.index import IndexServer
from bisector.artifacts.prebuilt import Discoverer
from bisector.artifacts.shared import Shared
from bisector.artifacts.sources import Index
from bisector.cli.progress import RichEvents
from bisector.project.profiles import TORCHLET

NAME = "torchlet-0.1.0.dev20250101+cpu-py3-none-any.whl"
MIB = 8


class Heard(RichEvents):
    """The real renderer (as lines: the console is no terminal), and every download call."""

    def __init__(self, console: Console) -> None:
        super().__init__(console)
        self.downloads: list[tuple[int, int | None]] = []

    def download(self, name: str, done: int, total: int | None) -> None:
        self.downloads.append((done, total))
        super().download(name, done, total)


@pytest.fixture
def index(tmp_path: Path) -> Iterator[tuple[IndexServer, bytes]]:
    files = tmp_path / "index" / "nightly-cpu" / "files"
    files.mkdir(parents=True)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("torchlet/version.py", 'git_version = "Unknown"\n')
        z.writestr("torchlet/_C.so", os.urandom(MIB << 20))  # incompressible, stored
    (files / NAME).write_bytes(buf.getvalue())
    with IndexServer(tmp_path / "index") as server:
        server.state.slow_s = 4.0  # eight MiB in four seconds: 2 MiB/s
        yield server, buf.getvalue()


@pytest.mark.parametrize("sized", [True, False], ids=["content-length", "no-content-length"])
def test_a_slow_download_tells_bytes_speed_and_time_left(
        tmp_path: Path, index: tuple[IndexServer, bytes], sized: bool) -> None:
    server, data = index
    if not sized:
        server.state.no_length.add(NAME)
    console = Console(file=io.StringIO(), width=400, color_system=None, force_terminal=False)
    heard = Heard(console)
    # Only the events and the client are used by a download; nothing is stored.
    shared = Shared(cast(Any, None), cast(Any, None), cast(Any, None), heard, cast(Any, None))
    dest = tmp_path / "wheels" / NAME
    try:
        assert Index(shared)._download(
            0, f"{server.url}/nightly-cpu/files/{NAME}", NAME,
            hashlib.sha256(data).hexdigest(), dest)
    finally:
        heard.close()
    assert dest.read_bytes() == data
    size = len(data)
    # Events: growing byte counts, the size only where the server said it, then the end.
    *during, end = heard.downloads
    assert during and {t for _, t in during} == ({size} if sized else {None})
    assert [d for d, _ in during] == sorted(d for d, _ in during)
    assert end == (size, size)
    # Lines, since stderr is no terminal here: bytes and speed, and the time left when the
    # size is known; then what it took.
    text = console.file.getvalue()  # type: ignore[attr-defined]
    lines = [ln for ln in text.splitlines() if ln.startswith(f"downloading {NAME}: ")]
    assert lines, text
    assert all("MiB/s" in ln for ln in lines), lines
    if sized:
        assert all(f"of {size / 2**20:,.1f} MiB (" in ln and " left" in ln for ln in lines)
    else:
        assert all("MiB so far (the server did not say the size)" in ln for ln in lines)
        assert not any(" left" in ln for ln in lines)
    assert f"downloaded {NAME}: {size / 2**20:,.1f} MiB in " in text


def test_listing_an_index_is_announced_before_it_is_asked(
        tmp_path: Path, index: tuple[IndexServer, bytes]) -> None:
    server, _ = index
    said: list[tuple[str, int]] = []
    found = Discoverer(
        git.Repo.init(tmp_path / "clone"), TORCHLET, "cp312", "cpu",
        say=lambda text: said.append((text, len(server.state.requests)))
    ).discover([], nightly_index=server.index_url("nightly-cpu"), release_index=None)
    assert found.by_position == {} and [pb.filename for pb in found.unmapped] == [NAME]
    listing = f"listing torchlet on the nightly index {server.index_url('nightly-cpu')}torchlet/"
    assert said[0] == (listing, 0)  # said before the first request went out
    assert server.state.requests[0][1] == "/nightly-cpu/torchlet/"
    # Then, before its range requests, reading the commit of the one wheel not seen before.
    assert said[1] == ("reading the commit of 1 nightly wheel(s) not seen before (a few range "
                       "requests each)", 1)
