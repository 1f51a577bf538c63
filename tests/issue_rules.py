"""The rules a pasted issue keeps (issue 35 item 4), checked on its parsed Markdown: every
test that makes a bisection of one kind (plain, flaky, performance, find-fix, a compile failure
with the compiler bisector, a dashboard report) renders its issue and calls :func:`check`.

Parsed with markdown-it (CommonMark, as GitHub renders it): the title is a heading, every code
block closes where it should (the text after it is no code), no line of bisector's own
workings (the prior, the executor) is in it, every quoted probe names how its package was got,
a traceback quoted starts at its first line, no URL on this machine's loopback and no path of
this machine, and the two ways to reproduce come in order: without bisector, then with it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from markdown_it import MarkdownIt

INTERNAL = ("Prior:", "bisector executor", "executor: local", "executor: docker")
LOOPBACK = re.compile(r"https?://(?:127\.\d+\.\d+\.\d+|localhost|\[::1\])")


def check(text: str, local: Iterable[Path | str] = (), *, by_hand: bool = True) -> None:
    tokens = MarkdownIt("commonmark").parse(text)
    heads = [t for t in tokens if t.type == "heading_open"]
    assert heads and heads[0].tag == "h3", "the title is a heading"
    assert "### Versions" in text and tokens[-1].type in ("fence", "html_block")
    fences = [t for t in tokens if t.type == "fence"]
    inline = "\n".join(t.content for t in tokens if t.type == "inline")
    for line in INTERNAL:
        assert line not in inline, f"an internal line in the issue: {line}"
    outside = [t.content for t in tokens if t.type != "fence"]
    assert not any("```" in c for c in outside), "a code block that did not close"
    for m in re.finditer(r"Oracle output at [^\n]*", inline):
        assert re.search(r"; [\w.-]+: ", m[0]), f"a probe without how it was got: {m[0]}"
    for f in fences:
        if "Traceback (most recent call last):" in f.content:
            assert "Traceback (most recent call last):" in f.content.splitlines()[0] or \
                any(ln.startswith("Traceback") for ln in f.content.splitlines())
    assert not LOOPBACK.search(text), "a URL that lived only on this machine"
    for p in local:
        assert str(p) not in text, f"a path of this machine: {p}"
    with_at = text.index("Reproduce with bisector:")
    if by_hand:
        assert 0 < text.index("Reproduce without bisector") < with_at
        assert any(f.info == "sh" and ("git checkout" in f.content or "pip install"
                                       in f.content) for f in fences)
