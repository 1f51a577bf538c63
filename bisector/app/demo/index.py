"""A package index on 127.0.0.1 with the layout of download.pytorch.org's nightly folders:
what ``bisect demo --nightlies`` serves its wheels from (no network), and what the tests run the
index client against (a real server, not a mock).

``<root>/<index>/<project>/`` answers PEP 691 JSON or PEP 503 HTML by the Accept header; wheel
links point to ``<root>/<index>/files/<name>`` (nightlies carry no hash fragment, as on the real
index; release links do), PEP 658 ``.metadata`` sidecars exist, and files answer HEAD and byte
ranges, so the client's range reads and resumed downloads run against a real server.

Fault knobs (a real server misbehaving, not a mock of the client): ``garbage`` projects answer
a page that is not an index, ``gone`` files are listed but answer 404 (an expired nightly),
``bad_hash`` files are listed with a wrong sha256, ``unlisted`` files are served but left out
of the project page (a nightly past the index window: only its direct URL finds it; in
``gone`` too, it is pruned altogether). A slow link: ``slow_s`` spreads each whole-file GET
over that many seconds (throttled writes), and ``no_length`` files are sent without a
Content-Length (the body ends when the connection closes), as some servers and proxies do.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import zipfile
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

from packaging.utils import canonicalize_name, parse_wheel_filename


@dataclass
class IndexState:
    root: Path
    garbage: set[str] = field(default_factory=set)
    gone: set[str] = field(default_factory=set)
    bad_hash: set[str] = field(default_factory=set)
    unlisted: set[str] = field(default_factory=set)
    hashes_in_links: set[str] = field(default_factory=set)  # index names whose links carry one
    requests: list[tuple[str, str, str]] = field(default_factory=list)  # method, path, range
    bytes_sent: int = 0
    slow_s: float = 0.0
    no_length: set[str] = field(default_factory=set)


SLOW_PIECES = 40  # a slow file is written in this many pieces, a sleep between them


_DIGESTS: dict[tuple[Path, int, int], str] = {}


def _sha256(p: Path) -> str:
    """A file's digest, computed once per version of it: a listing of GB wheels answers at
    once, as a real index does (it stores them)."""
    st = p.stat()
    key = (p, st.st_mtime_ns, st.st_size)
    if key not in _DIGESTS:
        h = hashlib.sha256()
        with p.open("rb") as f:
            while chunk := f.read(2**20):
                h.update(chunk)
        _DIGESTS[key] = h.hexdigest()
    return _DIGESTS[key]


class Handler(BaseHTTPRequestHandler):
    state: IndexState

    def log_message(self, *args: object) -> None:
        pass

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def do_GET(self) -> None:
        self._serve(head=False)

    def _send(self, code: int, body: bytes, ctype: str, head: bool,
              extra: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(body)
            self.state.bytes_sent += len(body)

    def _serve(self, head: bool) -> None:
        st = self.state
        st.requests.append((self.command, self.path, self.headers.get("Range", "")))
        # Percent-escapes decoded as any web server does (``%2B`` is the ``+`` of a local
        # version label); a literal ``+`` stays a ``+``.
        parts = [unquote(p) for p in self.path.split("?")[0].split("/") if p]
        if len(parts) == 3 and parts[1] == "files":
            return self._file(parts[0], parts[2], head)
        if len(parts) == 2:
            return self._project(parts[0], parts[1], head)
        if len(parts) == 1:
            return self._send(200, b"<html><body></body></html>", "text/html", head)
        self._send(404, b"not found", "text/plain", head)

    def _project(self, index: str, project: str, head: bool) -> None:
        st = self.state
        files_dir = st.root / index / "files"
        if project in st.garbage:
            return self._send(200, b"\x00\x01 definitely not an index", "text/html", head)
        wheels = sorted(
            w for w in files_dir.glob("*.whl")
            if canonicalize_name(parse_wheel_filename(w.name)[0]) == canonicalize_name(project)
            and w.name not in st.unlisted
        ) if files_dir.is_dir() else []
        if not wheels:
            return self._send(404, b"no such project", "text/plain", head)
        entries = []
        for w in wheels:
            digest = _sha256(w)
            if w.name in st.bad_hash:
                digest = "0" * 64
            entries.append((w.name, f"/{index}/files/{w.name}", digest))
        accept = self.headers.get("Accept", "")
        if "application/vnd.pypi.simple.v1+json" in accept:
            doc = {"meta": {"api-version": "1.1"}, "name": project, "files": [
                {"filename": n, "url": u, "hashes": {"sha256": d} if index in
                 st.hashes_in_links else {}, "core-metadata": True}
                for n, u, d in entries]}
            return self._send(200, json.dumps(doc).encode(),
                              "application/vnd.pypi.simple.v1+json", head)
        links = "".join(
            f'<a href="{u}{"#sha256=" + d if index in st.hashes_in_links else ""}" '
            f'data-core-metadata="true">{n}</a><br/>\n'
            for n, u, d in entries
        )
        html = f"<!DOCTYPE html><html><body><h1>Links for {project}</h1>{links}</body></html>"
        self._send(200, html.encode(), "text/html", head)

    def _file(self, index: str, name: str, head: bool) -> None:
        st = self.state
        meta = name.endswith(".metadata")
        path = st.root / index / "files" / (name[: -len(".metadata")] if meta else name)
        if not path.is_file() or path.name in st.gone:
            return self._send(404, b"gone", "text/plain", head)
        if meta:
            with zipfile.ZipFile(path) as zf:
                member = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
                return self._send(200, zf.read(member), "text/plain", head)
        size = path.stat().st_size
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes="):
            # Only the bytes asked for are read: a GB wheel's version.py is a few range reads.
            start_s, _, end_s = rng[6:].partition("-")
            start = int(start_s) if start_s else max(0, size - int(end_s))
            end = min(int(end_s), size - 1) if end_s and start_s else size - 1
            if start >= size:
                return self._send(416, b"", "text/plain", head,
                                  {"Content-Range": f"bytes */{size}"})
            with path.open("rb") as f:
                f.seek(start)
                chunk = f.read(end + 1 - start)
            return self._send(206, chunk, "application/octet-stream", head, {
                "Content-Range": f"bytes {start}-{start + len(chunk) - 1}/{size}",
                "Accept-Ranges": "bytes"})
        if head:  # the size, never the body read
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            if name not in st.no_length:
                self.send_header("Content-Length", str(size))
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()
            return None
        data = path.read_bytes()
        if st.slow_s > 0 or name in st.no_length:
            return self._slow(data, head, sized=name not in st.no_length)
        self._send(200, data, "application/octet-stream", head, {"Accept-Ranges": "bytes"})

    def _slow(self, data: bytes, head: bool, sized: bool) -> None:
        """The whole file over a slow link: in pieces, ``slow_s`` in all; without a size the
        connection closes after it (HTTP/1.0, the server's default here)."""
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if sized:
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if head:
            return
        piece = max(1, -(-len(data) // SLOW_PIECES))
        for i in range(0, len(data), piece):
            self.wfile.write(data[i:i + piece])
            self.wfile.flush()
            self.state.bytes_sent += len(data[i:i + piece])
            time.sleep(self.state.slow_s / SLOW_PIECES)


class IndexServer:
    def __init__(self, root: Path) -> None:
        self.state = IndexState(root)
        handler = type("BoundHandler", (Handler,), {"state": self.state})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def index_url(self, index: str) -> str:
        return f"{self.url}/{index}/"

    def __enter__(self) -> IndexServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
