"""``bisect serve`` stays true to the store, in a real headless Chromium: every link of every
page reachable from ``/`` resolves, no label of the timeline is cut off or drawn over another at
1400 and 800 px, nightly lines carry their dates, and a running bisection's page says so and
refreshes itself until the bisection ends, then stops asking.

The store is real: bisections run by ``bisect start`` (one done, whose culprit is the range's
last commit, one failed, one stopped by Ctrl-C, one running, held inside its first oracle run by
a gate file the test opens) and nightly-watch results written by the store's own functions.
Screenshots are kept under the test's tmp folder and, when ``BISECTOR_SCREENSHOTS`` names a
folder, copied there."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlencode, urljoin, urlsplit

import httpx
import pytest

from bisector.app.demo.torchlet import SyntheticHistory
from bisector.app.report import html as html_report
from bisector.app.report import views
from bisector.infra.owner import owner_id
from bisector.store import watch as ws
from bisector.store.db import open_store
from tests.chromium import BINARY, LABEL_PROBLEMS, Chromium, Page
from tests.support import BISECT, ROOT, _free_port, copy_world, wait_for

pytestmark = pytest.mark.skipif(BINARY is None,
                                reason="no chromium here: apt-get install chromium")

WIDTHS = (1400, 800)
GATED = '''"""torchlet_norm that first waits for the test to open its gate."""
import os
import sys
import time

import torchlet

while not os.path.exists({gate!r}):
    time.sleep(0.05)
sys.exit(0 if abs(torchlet.norm([3.0, 4.0]) - 5.0) < 1e-9 else 1)
'''


@dataclasses.dataclass
class Site:
    root: Path
    db: Path
    hist: SyntheticHistory
    env: dict[str, str]
    base: str
    ids: dict[str, int]
    procs: list[subprocess.Popen[bytes]]


def _ids(db: Path) -> list[int]:
    con = sqlite3.connect(db)
    try:
        return [r[0] for r in con.execute("SELECT id FROM bisection ORDER BY id")]
    except sqlite3.OperationalError:
        return []
    finally:
        con.close()


def _start(site: Site, good: str, bad: str, oracle: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([*BISECT, "--db", str(site.db), "start", "--repo",
                             str(site.hist.path), "--good", good, "--bad", bad, "--oracle",
                             oracle, "--no-confirm", "--no-prebuilt"],
                            cwd=ROOT, env=site.env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def gated(site: Site, name: str) -> tuple[subprocess.Popen[bytes], Path, int]:
    """A bisection of the whole history held running inside its first oracle run until
    ``gate`` exists: its controller, the gate and its id."""
    gate, oracle = site.root / f"{name}.gate", site.root / f"{name}_norm.py"
    oracle.write_text(GATED.format(gate=str(gate)))
    before = set(_ids(site.db))
    proc = _start(site, site.hist.main[0], site.hist.main[-1], str(oracle))
    site.procs.append(proc)
    new = wait_for(lambda: set(_ids(site.db)) - before)
    assert new, "the gated bisection was never stored"
    (bid,) = new
    state = wait_for(lambda: httpx.get(f"{site.base}/api/bisections/{bid}").json()
                     ["state"] == "running")
    assert state, "the gated bisection does not read as running"
    return proc, gate, bid


def _watch(site: Site, done: int) -> None:
    """Three nightlies judged good, good, bad (the flip started bisection ``done``), the newest
    still being judged."""
    store, me, main = open_store(str(site.db), create=False), owner_id(), site.hist.main
    for day, sha, verdict in (("01", main[0], "good"), ("02", main[8], "good"),
                              ("03", main[20], "bad"), ("04", main[22], None)):
        key = ws.ResultKey("nightly", "torchlet_norm", f"2.9.0.dev202501{day}+cpu", sha)
        _, rec = ws.claim_result(store, key, source="index", git_version=sha, me=me)
        if verdict is not None:
            assert ws.finish_result(store, rec.id, me, ws.Finding(
                verdict, "pass" if verdict == "good" else "fail", verdict, 0, 0.1, "",
                "0" * 64, {}))
    newer, older = ws.last_decided(store, "nightly", "torchlet_norm")
    flip = ws.claim_flip(store, suite="nightly", oracle="torchlet_norm", kind="regression",
                         older=older, newer=newer, me=me)
    assert flip is not None
    ws.started(store, flip.id, bisection_id=done, message=None)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, world: SyntheticHistory,
         shared_cache: Path) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("web-truth")
    hist = copy_world(world, root / "torchlet")
    env = {**os.environ, "BISECTOR_HOME": str(root / "home"),
           "BISECTOR_CACHE_DIR": str(shared_cache)}
    env.pop("BISECTOR_DB", None)
    port = _free_port()
    s = Site(root, root / "web.db", hist, env, f"http://127.0.0.1:{port}", {}, [])
    culprit = hist.main.index(hist.culprit)
    try:
        # Done, its culprit the last commit of the range: the label at the timeline's edge.
        assert _start(s, hist.main[0], hist.culprit, "torchlet_norm").wait(600) == 0
        # Failed: the good endpoint is already bad.
        assert _start(s, hist.main[culprit + 1], hist.main[-1], "torchlet_norm").wait(600) == 7
        s.ids["done"], s.ids["failed"] = _ids(s.db)
        server = subprocess.Popen([*BISECT, "--db", str(s.db), "serve", "--port", str(port)],
                                  cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        s.procs.append(server)
        assert wait_for(lambda: _up(s.base)), "bisect serve never answered"
        stopped, _, s.ids["stopped"] = gated(s, "stopped")
        stopped.send_signal(signal.SIGINT)
        assert stopped.wait(60) == 130
        _, _, s.ids["running"] = gated(s, "running")
        _watch(s, s.ids["done"])
        yield s
    finally:
        for p in reversed(s.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
                try:
                    p.wait(60)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def _up(base: str) -> bool:
    try:
        return httpx.get(base + "/", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


class _Links(HTMLParser):
    """Every URL a page points at (href, src, a form's action, the URL a script polls) and the
    query of each choice of its GET forms' selects."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self._select: str | None = None
        self._option: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.urls += [v for k, v in attrs if v and k in ("href", "src", "action", "data-poll")]
        if tag == "select":
            self._select = a.get("name")
        elif tag == "option" and self._select:
            self._option = a

    def handle_data(self, data: str) -> None:
        if self._option is not None and self._select:
            value = self._option.get("value")
            self.urls.append("/?" + urlencode({self._select: data if value is None else value}))
            self._option = None

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None


def test_every_link_resolves(site: Site) -> None:
    host = urlsplit(site.base).netloc
    seen: dict[str, int] = {}
    broken: list[str] = []
    todo = [("/", "start"), ("/watch", "start")]
    with httpx.Client(base_url=site.base, timeout=60) as c:
        while todo:
            path, where = todo.pop()
            if path in seen:
                continue
            r = c.get(path)
            seen[path] = r.status_code
            if r.status_code != 200:
                broken.append(f"{path} ({r.status_code}), linked from {where}")
                continue
            if not r.headers["content-type"].startswith("text/html"):
                continue
            links = _Links()
            links.feed(r.text)
            for url in links.urls:
                full = urlsplit(urljoin(site.base + path, url))
                if full.scheme not in ("http", "https"):
                    broken.append(f"{url!r}: not a web link, on {path}")
                elif full.netloc == host:
                    todo.append((full.path + (f"?{full.query}" if full.query else ""), path))
    assert broken == []
    for bid in site.ids.values():
        assert f"/bisections/{bid}" in seen and f"/api/bisections/{bid}" in seen
        assert f"/bisections/{bid}/report.md" in seen
    assert f"/api/bisections/{site.ids['running']}/state" in seen
    assert {"/watch", "/api/watch", "/api/bisections", "/?state=running"} <= set(seen)
    assert any(re.fullmatch(r"/bisections/\d+/probes/\d+/stdout", p) for p in seen)
    watch = httpx.get(site.base + "/watch").text
    assert watch.count("<td class=\"v-good\"") == 2  # good cells, and no link from them
    assert f'<a href="/bisections/{site.ids["done"]}">#' in watch


def _shots(tmp_path: Path) -> list[Path]:
    """Where screenshots go: the test's tmp folder, and $BISECTOR_SCREENSHOTS when set."""
    extra = os.environ.get("BISECTOR_SCREENSHOTS")
    return [tmp_path / "screenshots", *([Path(extra)] if extra else [])]


def _shoot(page: Page, name: str, tmp_path: Path) -> None:
    first, *more = _shots(tmp_path)
    shot = page.screenshot(first / name)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for folder in more:
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, folder / name)


def test_no_label_is_cut_off(site: Site, tmp_path: Path) -> None:
    pages = {"list": "/", "watch": "/watch",
             **{f"bisection-{k}": f"/bisections/{v}" for k, v in site.ids.items()}}
    problems: list[str] = []
    with Chromium(tmp_path / "profile") as browser:
        for width in WIDTHS:
            for name, path in pages.items():
                page = browser.open(site.base + path, width)
                problems += [f"{path} at {width}px: {p}" for p in page.js(LABEL_PROBLEMS)]
                _shoot(page, f"{name}-{width}.png", tmp_path)
            done = browser.open(f"{site.base}/bisections/{site.ids['done']}", width)
            label = done.js("document.querySelector('text.culprit-label').textContent")
            assert label == f"culprit {site.hist.culprit[:12]}"
    assert problems == []


def _with_nightlies(site: Site, candidates: int, every: int) -> str:
    """The done bisection's report as if its range had ``candidates`` commits with a nightly
    each ``every`` of them and the culprit at the last: the timeline's crowded case."""
    d = views.show(open_store(str(site.db), create=False), site.ids["done"])
    d["candidates"] = candidates
    d["result"] = {**d["result"], "position": candidates - 1}
    d["prebuilts"] = [{"position": pos, "sha": "0" * 40, "kind": "nightly",
                       "version": f"2.9.0.dev{20250101 + pos // every % 28:08d}+cpu"}
                      for pos in range(0, candidates, every)]
    return html_report.render_report(d, issue="")


@pytest.mark.parametrize(("candidates", "every"), [(400, 40), (400, 2)],
                         ids=["sparse", "dense"])
def test_nightly_lines_are_labelled_with_their_dates(site: Site, tmp_path: Path,
                                                     candidates: int, every: int) -> None:
    report = tmp_path / "report.html"
    report.write_text(_with_nightlies(site, candidates, every))
    nightlies = len(range(0, candidates, every))
    with Chromium(tmp_path / "profile") as browser:
        for width in WIDTHS:
            page = browser.open(report.as_uri(), width)
            assert page.js(LABEL_PROBLEMS) == []
            labels = page.js("[...document.querySelectorAll('text.nightly-label')]"
                             ".map(t => t.firstChild.textContent)")
            assert labels and all(re.fullmatch(r"2025-01-\d\d", x) for x in labels)
            if every == 40:
                assert len(labels) == nightlies  # room for every one
            else:
                assert len(labels) < nightlies  # thinned, not piled up
                assert f"{len(labels)} of {nightlies} labelled" in page.js(
                    "document.body.textContent")
            assert page.js("document.querySelectorAll('line.nightly').length") == nightlies
            _shoot(page, f"nightlies-{candidates}-{every}-{width}.png", tmp_path)


def test_a_running_bisections_page_refreshes_itself_until_it_ends(site: Site,
                                                                  tmp_path: Path) -> None:
    proc, gate, bid = gated(site, "watched")
    text = "document.body.innerText"
    with Chromium(tmp_path / "profile") as browser:
        page = browser.open(f"{site.base}/bisections/{bid}", 1400)
        assert page.js("document.getElementById('state').textContent") == "running"
        assert "Running: 0 probes so far" in page.js(text)
        assert page.js("document.body.getAttribute('data-polling')") == "1"
        assert page.js("document.getElementById('issue') === null")
        assert "no culprit was named" not in page.js(text)
        issue = httpx.get(f"{site.base}/bisections/{bid}/report.md").text
        assert "still running" in issue and "no culprit was named" not in issue
        _shoot(page, "running.png", tmp_path)
        gate.touch()  # the bisection goes on and ends; the page is never reloaded from here
        assert proc.wait(600) == 0
        assert page.wait("document.getElementById('state').textContent === 'done'", 120)
        assert site.hist.culprit in page.js("document.getElementById('culprit').textContent")
        assert page.js("document.getElementById('progress') === null")
        assert page.js("document.body.getAttribute('data-polling')") is None
        assert page.js("document.querySelector('[data-poll]') === null")
        assert "Copy" in page.js("document.getElementById('copy-issue').textContent")
        _shoot(page, "ended.png", tmp_path)
