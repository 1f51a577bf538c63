"""A real headless Chromium driven over the DevTools protocol, with no dependency: the browser
reads commands on fd 3 and answers on fd 4 (``--remote-debugging-pipe``, as Puppeteer does),
each message one JSON document ended by a NUL byte.

``--dump-dom`` and ``--screenshot`` see a page once; the web view's tests need more: run
JavaScript in a loaded page (measure what the browser laid out), change the window's width,
and watch a page that reloads itself."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

BINARY = shutil.which("chromium") or shutil.which("chromium-browser")


class BrowserError(Exception):
    """The browser answered a command with an error, or a script in the page threw."""


class Chromium:
    """One headless browser; ``open`` gives a page (a tab) of a given window width."""

    def __init__(self, profile: Path, binary: str | None = BINARY) -> None:
        assert binary is not None, "no chromium here: apt-get install chromium"
        to_child, from_us = os.pipe()
        to_us, from_child = os.pipe()
        # High numbers first, so moving them onto 3 and 4 in the child never clobbers one.
        ends = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_child, from_child)]
        for fd in (to_child, from_child):
            os.close(fd)

        def onto_3_and_4() -> None:
            os.dup2(ends[0], 3)
            os.dup2(ends[1], 4)

        self.proc = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--no-first-run", "--no-default-browser-check", "--remote-debugging-pipe",
             f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(3, 4), preexec_fn=onto_3_and_4)
        for fd in ends:
            os.close(fd)
        self._out, self._in = from_us, to_us
        self._buf = b""
        self._next = 0

    def send(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None, timeout: float = 60.0) -> dict[str, Any]:
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._out, json.dumps(msg).encode() + b"\0")
        end = time.monotonic() + timeout
        while True:
            reply = self._read(end)
            if reply.get("id") == self._next:  # events in between are not needed here
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result

    def _read(self, end: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = end - time.monotonic()
            ready, _, _ = select.select([self._in], [], [], max(left, 0))
            if not ready:
                raise BrowserError("the browser did not answer in time")
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise BrowserError("the browser closed its pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        msg: dict[str, Any] = json.loads(raw)
        return msg

    def open(self, url: str, width: int, height: int = 1000) -> Page:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget",
                            {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        page.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        page.go(url)
        return page

    def close(self) -> None:
        with contextlib.suppress(BrowserError, OSError):
            self.send("Browser.close", timeout=10)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._out, self._in):
            os.close(fd)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Page:
    def __init__(self, browser: Chromium, session: str) -> None:
        self.browser, self.session = browser, session

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.browser.send(method, params, self.session)

    def go(self, url: str, timeout: float = 60.0) -> None:
        self.call("Page.navigate", {"url": url})
        self.wait("document.readyState === 'complete' && location.href === "
                  + json.dumps(url), timeout)

    def js(self, expression: str) -> Any:
        """The value of ``expression`` in the page (a promise is awaited)."""
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                           "awaitPromise": True})
        if "exceptionDetails" in r:
            raise BrowserError(f"{expression[:60]}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait(self, expression: str, timeout: float = 60.0) -> Any:
        """Poll ``expression`` until it is truthy; a page that is reloading meanwhile (its
        context gone) is asked again."""
        end = time.monotonic() + timeout
        while True:
            try:
                value = self.js(expression)
            except BrowserError:
                value = None
            if value or time.monotonic() > end:
                return value
            time.sleep(0.1)

    def screenshot(self, path: Path) -> Path:
        """The whole page as a PNG, however long."""
        size = self.call("Page.getLayoutMetrics")["cssContentSize"]
        shot = self.call("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"],
                     "scale": 1}})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path


# What "no label is cut off" means, measured on the laid-out page: every text of every SVG lies
# inside that SVG's box (an SVG clips what leaves its viewport) and overlaps no other text of it;
# no element that hides its overflow holds more than it shows; the page is no wider than the
# window. One line per problem found.
LABEL_PROBLEMS = r"""(() => {
  const bad = [], e = 0.5, own = t => (t.firstChild ? t.firstChild.textContent : "").trim();
  const at = r => `[${Math.round(r.left)}..${Math.round(r.right)}]x` +
                  `[${Math.round(r.top)}..${Math.round(r.bottom)}]`;
  for (const svg of document.querySelectorAll("svg")) {
    const box = svg.getBoundingClientRect();
    const texts = [...svg.querySelectorAll("text")].filter(t => own(t));
    const rects = texts.map(t => t.getBoundingClientRect());
    rects.forEach((r, i) => {
      if (r.left < box.left - e || r.right > box.right + e || r.top < box.top - e ||
          r.bottom > box.bottom + e)
        bad.push(`cut off: "${own(texts[i])}" at ${at(r)} in the picture at ${at(box)}`);
      for (let j = i + 1; j < rects.length; j++) {
        const o = rects[j];
        if (r.left < o.right - e && o.left < r.right - e && r.top < o.bottom - e &&
            o.top < r.bottom - e)
          bad.push(`overlap: "${own(texts[i])}" at ${at(r)} and "${own(texts[j])}" at ${at(o)}`);
      }
    });
  }
  for (const el of document.querySelectorAll("body *")) {
    if (el.closest("svg")) continue;
    const cs = getComputedStyle(el);
    if ((["hidden", "clip"].includes(cs.overflowX) || cs.textOverflow === "ellipsis") &&
        el.scrollWidth > el.clientWidth + 1)
      bad.push(`cut off: <${el.tagName.toLowerCase()}> "${el.textContent.slice(0, 40)}"`);
  }
  const doc = document.documentElement;
  if (doc.scrollWidth > doc.clientWidth + 1)
    bad.push(`the page is ${doc.scrollWidth}px wide in a ${doc.clientWidth}px window`);
  return bad;
})()"""
