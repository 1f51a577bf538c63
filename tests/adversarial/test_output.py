"""Issue 20, class 7 (output is data) and, from class 4, "every report shows the culprit's own
facts".

A generated history whose culprit's subject carries an OSC 52 clipboard write, raw HTML, a
disguised link, ``@everyone``, a triple backtick and a forged ``Pull Request resolved:``
trailer on another host, whose author is named like a mention and a link, bisected with an
oracle that prints terminal escapes (OSC 52, CSI, C1, a carriage return, backspaces, a bidi
override) and quadruple backticks. Every terminal output holds no control character; the
Markdown (``show``, ``--format issue``) parsed by a CommonMark parser holds no HTML, no link
but the repository's own, no mention outside code, and every code block holds what it was
given; the HTML escapes it all and links no other forge.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from bisector.app.demo import torchlet
from bisector.app.demo.torchlet import SyntheticHistory, generate
from bisector.project import history
from tests.support import git, invoke, run_cli

pytestmark = [pytest.mark.adversarial, pytest.mark.e2e]

OSC52 = "\x1b]52;c;ZXZpbA==\x07"
SUBJECT = (f"<img src=x onerror=alert(1)> [click](http://evil) @everyone ``` {OSC52}"
           "\x1b[31mred\n\nPull Request resolved: https://evil.example/pytorch/pytorch/pull/666\n")
AUTHOR = "@everyone [me](http://evil) \x1b[5mblink"
ORACLE = r'''
import sys, torchlet
print("\x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b[31mred\x9b31m\rHIDDEN\x08\x08 \u202egnirts")
print("````\n```\n<img src=x onerror=alert(2)>\n[click](http://evil) @everyone")
sys.exit(0 if abs(torchlet.norm([3.0, 4.0]) - 5.0) < 1e-9 else 1)
'''
# What must never reach a terminal: ESC, BEL, C1 CSI, a lone CR, backspace, a bidi override.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
OWN = "https://github.com/pytorch/pytorch/"


@pytest.fixture(scope="module")
def hist(tmp_path_factory: pytest.TempPathFactory) -> SyntheticHistory:
    mp = pytest.MonkeyPatch()
    mp.setattr(torchlet, "AUTHORS", [(AUTHOR, "everyone@example.com")] * 6)
    try:
        h = generate(tmp_path_factory.mktemp("hostile") / "repo", commits=12, culprit=7,
                     broken=(), release_at=None, side_branch_at=None, seed=77,
                     culprit_subject=SUBJECT)
    finally:
        mp.undo()
    git(h.path, "remote", "add", "origin", "https://github.com/pytorch/pytorch.git")
    return h


@pytest.fixture(scope="module")
def bisected(hist: SyntheticHistory, tmp_path_factory: pytest.TempPathFactory
             ) -> tuple[Path, Path, dict[str, str]]:
    """The bisection (in a subprocess, as a user runs it) and every rendering of it."""
    base = tmp_path_factory.mktemp("out")
    env = {"BISECTOR_HOME": str(base / "home"), "BISECTOR_CACHE_DIR": str(base / "cache")}
    oracle = base / "hostile_oracle.py"
    oracle.write_text(ORACLE)
    db = base / "b.db"
    r = run_cli("--db", str(db), "start", "--repo", str(hist.path), "--good", hist.main[0],
                "--bad", hist.main[-1], "--oracle", str(oracle), "--no-confirm", env=env)
    assert r.returncode == 0, r.stderr
    seen = {"start stdout": r.stdout, "start stderr": r.stderr}
    envs: dict[str, str | None] = {**env, "BISECTOR_DB": None}
    for args in (("show", "1"), ("show", "1", "--format", "issue"),
                 ("show", "1", "--format", "html"), ("show", "1", "--format", "json"),
                 ("log", "1"), ("list",)):
        out = invoke("--db", str(db), *args, env=envs)
        assert out.exit_code == 0, out.stderr
        seen[" ".join(args)] = out.stdout + out.stderr
    r = run_cli("check", "--repo", str(hist.path), "--commit", hist.culprit, "--oracle",
                str(oracle), env=env)
    assert r.returncode == 1, r.stderr
    seen["check"] = r.stdout + r.stderr
    return db, oracle, seen


def test_no_control_sequence_reaches_a_terminal(
        bisected: tuple[Path, Path, dict[str, str]]) -> None:
    _, _, seen = bisected
    found = {name: sorted(set(CONTROL.findall(text))) for name, text in seen.items()}
    assert {k: v for k, v in found.items() if v} == {}
    # Shown, not dropped: the escape is visible as its control picture.
    assert "␛]52;c;ZXZpbA==␇" in seen["show 1"] and "␛]52" in seen["check"]
    parsed = json.loads(seen["show 1 --format json"])
    assert not CONTROL.search(json.dumps(parsed, ensure_ascii=False))


def _tokens(md: str) -> list[Any]:
    parser = MarkdownIt("commonmark").enable("table")
    out: list[Any] = []
    stack = list(parser.parse(md))
    while stack:
        t = stack.pop(0)
        out.append(t)
        stack[:0] = list(t.children or [])
    return out


@pytest.mark.parametrize("fmt", ["show 1", "show 1 --format issue"])
def test_markdown_shows_hostile_text_as_text(
        bisected: tuple[Path, Path, dict[str, str]], fmt: str) -> None:
    _, _, seen = bisected
    md = seen[fmt]
    tokens = _tokens(md)
    assert [t.content for t in tokens if t.type in ("html_inline", "html_block")
            and "<details>" not in t.content and "</details>" not in t.content
            and "summary>" not in t.content and "code>" not in t.content] == []
    hrefs = [str(t.attrs.get("href")) for t in tokens if t.type == "link_open"]
    assert all(h.startswith(OWN) for h in hrefs), hrefs
    assert not [t for t in tokens if t.type == "image"]
    # The oracle's output is inside one fence, whole: its ```` closed nothing.
    blocks = [t.content for t in tokens if t.type == "fence"]
    assert any("````\n```\n<img src=x onerror=alert(2)>" in b for b in blocks), blocks
    # Outside code, @everyone appears nowhere (it would ping); <img nowhere in the HTML.
    html = MarkdownIt("commonmark").enable("table").render(md)
    prose = re.sub(r"<pre>.*?</pre>|<code>.*?</code>", "", html, flags=re.S)
    assert "@everyone" not in prose
    assert "<img" not in html
    assert "evil.example" not in "".join(hrefs)


def test_html_escapes_links_only_its_forge_and_shows_the_culprits_facts(
        bisected: tuple[Path, Path, dict[str, str]], hist: SyntheticHistory) -> None:
    _, _, seen = bisected
    page = seen["show 1 --format html"]
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    hrefs = re.findall(r'href="([^"]*)"', page)
    assert not [h for h in hrefs if "evil" in h], hrefs
    d = json.loads(seen["show 1 --format json"])
    # The forged trailer names another host: the number stays, the link goes.
    assert d["culprit"]["pr"] == 666 and d["culprit"]["pr_url"] is None
    # The facts shown are the culprit's probe's, not probe 1's (a source build of the root).
    at = next(p for p in d["probes"] if p["sha"] == hist.culprit)
    first = d["probes"][0]
    assert at["facts"]["obtained"] != first["facts"]["obtained"]
    facts = page.split("<h2>Facts</h2>", 1)[1]
    assert at["facts"]["obtained"] in facts and first["facts"]["obtained"] not in facts


@pytest.mark.parametrize(("remote", "slug"), [
    ("https://github.com/pytorch/pytorch.git", "pytorch/pytorch"),
    ("git@github.com:pytorch/pytorch.git", "pytorch/pytorch"),
    ("https://evil.example/github.com/pytorch/pytorch", None),
    ("https://github.com.evil.example/pytorch/pytorch", None),
    ("https://github.com/pytorch/pytorch)](http://evil", None),
])
def test_links_are_made_only_for_the_origins_own_github_repository(
        tmp_path: Path, remote: str, slug: str | None) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "remote", "add", "origin", remote)
    assert history.github_slug(history.open_repo(repo)) == slug
    assert history.pr_link("pytorch/pytorch", 5, "https://evil.example/pytorch/pytorch/pull/5") \
        is None
    assert history.pr_link("pytorch/pytorch", 5, "https://github.com/other/repo/pull/5") is None
    assert history.pr_link("pytorch/pytorch", 5, None) == f"{OWN}pull/5"


def test_a_metric_or_unit_cannot_write_a_line_into_the_watch_table(tmp_path: Path) -> None:
    """Issue 32, item 6: a newline or control character in a performance oracle's metric or
    unit was printed raw by ``bisect watch``: the oracle wrote a line of its choosing."""
    from bisector.infra.owner import owner_id
    from bisector.store import watch as ws
    from bisector.store.db import open_store

    db = tmp_path / "w.db"
    store, me = open_store(str(db)), owner_id()
    perf = {"samples": [10.0, 10.1, 10.2], "unit": "ms\n\x1b[2JFORGED unit line",
            "metric": "t\nFORGED metric line", "direction": "lower-is-better"}
    for day in ("01", "02", "03"):
        key = ws.ResultKey("nightly", "timer", f"2.9.0.dev202501{day}+cpu", "a" * 40)
        _, rec = ws.claim_result(store, key, source="index", git_version=None, me=me)
        assert ws.finish_result(store, rec.id, me, ws.Finding(
            "good", "pass", "exit 0", 0, 0.1, "", "0" * 64, {"perf": perf}))
    for args in (("watch",), ("watch", "--json")):
        r = invoke("--db", str(db), *args)
        assert r.exit_code == 0, r.stderr
        assert not CONTROL.search(r.stdout.replace("\n", "")), r.stdout
        assert not any(ln.lstrip().startswith("FORGED") for ln in r.stdout.splitlines())
