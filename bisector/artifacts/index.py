"""A client for Python package indexes: PEP 503 (HTML) and PEP 691 (JSON) simple pages.

Prebuilt PyTorch wheels are 1-3 GB, so everything here avoids moving bytes that are not needed:
a wheel's ``version.py`` or ``METADATA`` is read through HTTP range requests on the zip's central
directory (or the PEP 658 ``.metadata`` sidecar), and downloads resume from a ``.part`` file.
Every wheel is checked against the index's hash before it is trusted, and every failure becomes a
one-line :class:`IndexProblem` that names the URL and what to do, never a silent wrong wheel.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urldefrag, urljoin

from packaging.utils import canonicalize_name

from bisector.base.errors import BisectorError

if TYPE_CHECKING:
    import httpx

ACCEPT = (
    "application/vnd.pypi.simple.v1+json, "
    "application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
)
CHUNK = 1 << 20


class IndexProblem(BisectorError):
    """The index or a file on it is not usable (unreachable, garbage, missing, wrong hash).
    Its own exit code: 10 means another process took a bisection over."""

    exit_code = 14


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    hashes: dict[str, str] = field(default_factory=dict)
    core_metadata: bool = False
    yanked: bool = False


class _AnchorParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.anchors: list[tuple[dict[str, str | None], str]] = []
        self.tags = 0
        self._open: dict[str, str | None] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags += 1
        if tag == "a":
            self._open, self._text = dict(attrs), []

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._open is not None:
            self.anchors.append((self._open, "".join(self._text).strip()))
            self._open = None


def _hash_from_fragment(url: str) -> tuple[str, dict[str, str]]:
    bare, frag = urldefrag(url)
    if "=" in frag:
        algo, _, value = frag.partition("=")
        return bare, {algo.lower(): value.lower()}
    return bare, {}


def parse_simple_page(body: bytes, content_type: str, page_url: str) -> list[IndexFile]:
    """The files a project page lists; raises IndexProblem when the page is not an index page."""
    ctype = content_type.split(";")[0].strip().lower()
    if ctype == "application/vnd.pypi.simple.v1+json" or ctype == "application/json":
        try:
            doc = json.loads(body)
            raw = doc["files"]
            files = []
            for f in raw:
                url, frag_hashes = _hash_from_fragment(urljoin(page_url, f["url"]))
                meta = f.get("core-metadata", f.get("dist-info-metadata", False))
                files.append(IndexFile(
                    filename=f["filename"], url=url,
                    hashes={**frag_hashes, **{k.lower(): v.lower()
                                               for k, v in (f.get("hashes") or {}).items()}},
                    core_metadata=bool(meta), yanked=bool(f.get("yanked", False)),
                ))
            return files
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise IndexProblem(
                f"{page_url} is not a PEP 691 index page ({type(e).__name__}: {e}): "
                f"check the index URL"
            ) from None
    text = body.decode("utf-8", errors="replace")
    parser = _AnchorParser()
    try:
        parser.feed(text)
        parser.close()
    except Exception as e:  # html.parser is lenient; anything it rejects is garbage
        raise IndexProblem(f"{page_url} is not an HTML index page ({e}): check the index URL") \
            from None
    if not parser.anchors and "<html" not in text.lower():
        raise IndexProblem(
            f"{page_url} is not a PEP 503 index page (no links, no HTML): check the index URL"
        )
    out = []
    for attrs, label in parser.anchors:
        href = attrs.get("href")
        if not href:
            continue
        url, hashes = _hash_from_fragment(urljoin(page_url, href))
        name = label or url.rsplit("/", 1)[-1]
        meta = attrs.get("data-core-metadata", attrs.get("data-dist-info-metadata"))
        out.append(IndexFile(
            filename=name, url=url, hashes=hashes,
            core_metadata=meta is not None and meta != "false",
            yanked="data-yanked" in attrs,
        ))
    return out


class IndexClient:
    """One simple index (``.../simple`` or PyTorch's ``.../whl/nightly/cu128``)."""

    def __init__(self, base_url: str, client: httpx.Client | None = None) -> None:
        import httpx  # lazy: only once an index is asked (a tenth of a second to import)

        self.base_url = base_url.rstrip("/") + "/"
        self.http = client or httpx.Client(follow_redirects=True, timeout=60.0)

    def project_url(self, project: str) -> str:
        return urljoin(self.base_url, canonicalize_name(project) + "/")

    def files(self, project: str) -> list[IndexFile]:
        import httpx  # lazy: only once an index is asked (a tenth of a second to import)

        url = self.project_url(project)
        try:
            r = self.http.get(url, headers={"Accept": ACCEPT})
        except httpx.HTTPError as e:
            raise IndexProblem(f"cannot reach {url}: {e}; check the network or --nightly-index") \
                from None
        if r.status_code == 404:
            raise IndexProblem(f"{url} does not exist (404): {project} is not on that index")
        if r.status_code >= 400:
            raise IndexProblem(f"{url} answered HTTP {r.status_code}: try again later")
        return parse_simple_page(r.content, r.headers.get("content-type", "text/html"), str(r.url))

    def exists(self, url: str) -> tuple[bool, str]:
        """HEAD a file: nightlies leave the index window and are pruned, so check before use."""
        import httpx  # lazy: only once an index is asked (a tenth of a second to import)

        try:
            r = self.http.head(url)
        except httpx.HTTPError as e:
            return False, f"unreachable: {e}"
        if r.status_code == 200:
            return True, ""
        return False, f"HTTP {r.status_code}"

    def metadata(self, f: IndexFile) -> str:
        """The wheel's METADATA: from the PEP 658 sidecar when offered, else by range reads."""
        if f.core_metadata:
            r = self.http.get(f.url + ".metadata")
            if r.status_code == 200:
                return r.text
        data = self.read_member(f.url, lambda n: n.endswith(".dist-info/METADATA")
                                and n.count("/") == 1)
        return data.decode("utf-8", errors="replace")

    def read_member(self, url: str, match: Callable[[str], bool]) -> bytes:
        """One file out of a remote zip, fetched by range requests (whole file if unsupported)."""
        import httpx  # lazy: only once an index is asked (a tenth of a second to import)

        try:
            with _open_remote(self.http, url) as raw, zipfile.ZipFile(raw) as zf:
                for name in zf.namelist():
                    if match(name):
                        return zf.read(name)
        except httpx.HTTPError as e:
            raise IndexProblem(f"cannot read {url}: {e}") from None
        except zipfile.BadZipFile as e:
            raise IndexProblem(f"{url} is not a wheel (zip): {e}") from None
        raise IndexProblem(f"{url} has no such member")

    def download(
        self,
        f: IndexFile,
        dest: Path,
        progress: Callable[[int, int | None], None] | None = None,
    ) -> str:
        """Download to ``dest`` (resuming ``dest.part``), check the hash, return its sha256.

        ``progress(done, total)`` after each chunk: bytes of the whole file on disk so far, and
        its size (None when the server does not say)."""
        import httpx  # lazy: only once an index is asked (a tenth of a second to import)

        part = dest.with_name(dest.name + ".part")
        dest.parent.mkdir(parents=True, exist_ok=True)
        have = part.stat().st_size if part.exists() else 0
        headers = {"Range": f"bytes={have}-"} if have else {}
        try:
            with self.http.stream("GET", f.url, headers=headers) as r:
                if r.status_code == 404:
                    raise IndexProblem(
                        f"{f.filename} is gone from the index (404): it expired; "
                        f"bisector falls back to another artifact"
                    )
                # 416: the part file is already whole; 206: append; 200: start over.
                if r.status_code not in (200, 206, 416):
                    raise IndexProblem(f"downloading {f.url} gave HTTP {r.status_code}")
                if r.status_code != 416:
                    if r.status_code == 200:
                        have = 0
                    total = whole_size(r, have)
                    with part.open("ab" if have else "wb") as out:
                        for chunk in r.iter_bytes(CHUNK):
                            out.write(chunk)
                            have += len(chunk)
                            if progress is not None:
                                progress(have, total)
        except httpx.HTTPError as e:
            raise IndexProblem(
                f"download of {f.filename} broke off ({e}): run again to resume it"
            ) from None
        digest = _sha256(part)
        want = f.hashes.get("sha256")
        if want and want != digest:
            part.unlink()
            raise IndexProblem(
                f"hash mismatch for {f.filename}: the index says sha256 {want[:16]}..., the file "
                f"has {digest[:16]}...; the file was not used"
            )
        part.rename(dest)
        return digest


def whole_size(r: httpx.Response, have: int) -> int | None:
    """The size of the whole file a download response delivers (``have`` bytes already on
    disk), or None when the server does not say.

    A 206 names it after the slash of Content-Range (``bytes 100-199/200``); otherwise
    Content-Length counts the bytes still to come, unless the body is compressed in transit
    (then it counts compressed bytes, not the file's). Never a guess: a wrong size would show
    a download stuck past 100%.
    """
    if r.status_code == 206:
        size = r.headers.get("content-range", "").rpartition("/")[2].strip()
        if size.isdigit():
            return int(size)
    length = r.headers.get("content-length", "").strip()
    if length.isdigit() and r.headers.get("content-encoding", "identity") == "identity":
        return have + int(length)
    return None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


class _RangeFile(io.RawIOBase):
    """A read-only, seekable view of a remote file; each read is one HTTP range request."""

    def __init__(self, http: httpx.Client, url: str, size: int) -> None:
        self.http, self.url, self.size, self.pos = http, url, size, 0
        self.requests = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        if self.pos >= self.size or len(b) == 0:
            return 0
        end = min(self.size, self.pos + len(b)) - 1
        r = self.http.get(self.url, headers={"Range": f"bytes={self.pos}-{end}"})
        self.requests += 1
        if r.status_code != 206:
            import httpx  # lazy: only once an index is asked

            raise httpx.HTTPError(f"range request answered HTTP {r.status_code}")
        data = r.content
        n = len(data)
        b[:n] = data
        self.pos += n
        return n


def _open_remote(http: httpx.Client, url: str) -> io.BufferedReader | io.BytesIO:
    import httpx  # lazy: only once an index is asked (a tenth of a second to import)

    head = http.head(url)
    if head.status_code != 200:
        raise httpx.HTTPError(f"HTTP {head.status_code}")
    size = int(head.headers.get("content-length", "0") or 0)
    if head.headers.get("accept-ranges", "").lower() == "bytes" and size:
        return io.BufferedReader(_RangeFile(http, url, size), buffer_size=64 * 1024)
    r = http.get(url)
    r.raise_for_status()
    return io.BytesIO(r.content)
