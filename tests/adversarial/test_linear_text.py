"""Issue 32, item 1: no output can hang bisector.

An oracle's output (and a repository's commit messages, a bug report's traceback, a
``git bisect log``) is untrusted text, and it meets every scrubber, escaper and parser of a
report. A pattern with nested repetition over overlapping classes backtracks exponentially:
``(?:/[^\\s"':]+)*/site-packages/`` took 3.3 s on a 22-segment path and never returned on 30,
so ``bisect start`` stored the culprit and hung, and so did every report. Each function here
is fed random and adversarial text (the fragments those patterns choke on, repeated), and its
time per kilobyte is bounded; a watchdog ends the worker (a failed test, never a hung run) if
one still goes exponential. Last, a command oracle that prints a deep path at bad commits is
bisected end to end, and its reports are made, within a bound.
"""

from __future__ import annotations

import faulthandler
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bisector.app.demo.torchlet import SyntheticHistory
from bisector.app.report import compile_debug
from bisector.app.report.portable import scrubber
from bisector.app.report.show import tail
from bisector.base import escape, redact
from bisector.core import prior, signature
from bisector.project import bisect_log
from tests.support import copy_world, run_cli

pytestmark = [pytest.mark.adversarial]

# What the patterns of reports, redaction and failure parsing are made of: path segments,
# dotted words, schemes, assignments, token prefixes, Markdown punctuation, traceback lines.
FRAGMENTS = ["/a", "a.", "a-", "A=", "A_", " ", "_", "`", "]", "[", "(", 'File "', '"', "'",
             "E ", "FAILED x - ", "://", "http", "@", "ghp_", "xoxa-", "-", "a", "1", "0x",
             "Error", "Error:", ".py", ":1: ", "\n", "\t", "&", "#", "/home/", "/root/",
             "torchinductor_", "site-packages", "authorization: ", "compile(", "in f\n",
             "Traceback (most recent call last)\n", "\x1b[", "\u202e", "é", "*", "\\"]
MS_PER_KB = 20.0  # measured worst here: 0.65 ms/KB (redact, md); a quadratic one is ~100
FLOOR_S = 0.5  # a loaded, shared machine: a pause is not a pattern gone quadratic


def _compile_source(s: str) -> bool:
    d = {"culprit": {"sha": "x"}, "oracle": {"source": s},
         "probes": [{"sha": "x", "verdict": "bad", "output_tail": s}]}
    return compile_debug.is_compile_failure(d)


def _log(s: str) -> object:
    try:
        return bisect_log.parse(s)
    except Exception:  # a refused log is an answer; only the time matters here
        return None


FUNCTIONS: dict[str, Callable[[str], Any]] = {
    "issue scrubber": scrubber("/x/repo", {"home": "/home/u", "data": "/d/b", "cache": "/c"}),
    "redact.text": redact.text,
    "redact.url": redact.url,
    "redact.data": lambda s: redact.data({"out": s, "HF_TOKEN": s, "list": [s]}),
    "escape.md": escape.md,
    "escape.code": escape.code,
    "escape.fence": escape.fence,
    "escape.terminal": escape.terminal,
    "escape.safe_text": escape.safe_text,
    "escape.line": escape.line,
    "signature.failure_line": signature.failure_line,
    "signature.signature": signature.signature,
    "signature.last_line": lambda s: signature.last_line(s, s),
    "signature.normalise": signature.normalise,
    "prior.read_evidence": prior.read_evidence,
    "compile_debug": _compile_source,
    "reports.tail": tail,
    "bisect_log.parse": _log,
}


@pytest.fixture(autouse=True)
def watchdog() -> Iterator[None]:
    """A C-level timer that ends the process (a crashed worker: the test fails) when a
    pattern backtracks for a minute: Python's ``re`` holds the GIL, so nothing else could."""
    faulthandler.dump_traceback_later(60, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def _timed(f: Callable[[str], Any], text: str) -> float:
    start = time.perf_counter()
    f(text)
    return time.perf_counter() - start


def _bound(text: str) -> float:
    return FLOOR_S + MS_PER_KB / 1000 * len(text.encode("utf-8", "surrogatepass")) / 1024


adversarial = st.builds(lambda parts, n: "".join(parts) * n,
                        st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=4),
                        st.integers(min_value=1000, max_value=8000))
mixed = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=20)),
                 max_size=3000).map("".join)


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=st.one_of(adversarial, mixed))
def test_every_reader_of_untrusted_text_is_linear(name: str, text: str) -> None:
    took = _timed(FUNCTIONS[name], text)
    assert took <= _bound(text), (name, f"{took:.2f} s for {len(text)} characters",
                                  text[:80])


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_the_shapes_that_hung_stay_linear(name: str) -> None:
    """The reported ones, at sizes where the old patterns took seconds or forever: a
    30-segment path (and a 30,000-segment one), a dotted word for the URL scheme, a line of
    ``compile(`` without ``backend=``."""
    for text in ('File "' + "/a" * 30 + '"', "/a" * 30_000, "a." * 32_000, "a-" * 32_000,
                 "compile(" * 8_000, "/home/" * 10_000, "xoxa-" * 12_000):
        took = _timed(FUNCTIONS[name], text)
        assert took <= _bound(text), (name, f"{took:.2f} s", text[:40])


def test_scrubbing_still_shortens_package_paths() -> None:
    """The linear scrubber says what the old pattern said."""
    scrub = scrubber("/x/repo")
    assert scrub('File "/opt/venv/lib/python3.11/site-packages/torch/x.py", line 3') == \
        'File "…/site-packages/torch/x.py", line 3'
    assert scrub("/usr/lib/python3/dist-packages/a/site-packages/b.py:1") == \
        "…/site-packages/b.py:1"
    assert scrub("x/y/site-packages/z and /a/b") == "x…/site-packages/z and /a/b"
    assert scrub("/x/repo/torch/x.py") == "<repo>/torch/x.py"


def test_urls_are_found_as_before() -> None:
    """The one-pass URL finder redacts exactly what ``\\b[A-Za-z][...]*://...`` found."""
    assert redact.text("see https://u:p@h/x?token=abc.") == "see https://***@h/x?token=***."
    assert redact.text("1a.http://u:p@h/ and git+ssh://k:s@h/r") == \
        "1a.http://***@h/ and git+ssh://***@h/r"
    assert redact.text("_://u:p@h x_http://u:p@h") == "_://u:p@h x_http://u:p@h"


DEEP = "/a" * 30
ORACLE = f"""import sys, torchlet
bad = abs(torchlet.norm([3.0, 4.0]) - 5.0) > 1e-9
if bad:
    print('Traceback (most recent call last):')
    print('  File "{DEEP}/mod.py", line 1, in f')
    print('  File "{"/b" * 500}/x.py", line 2, in g')
    print('AssertionError: ' + 'a.' * 600)
sys.exit(1 if bad else 0)
"""


@pytest.fixture(scope="module")
def hist(world: SyntheticHistory, tmp_path_factory: pytest.TempPathFactory) -> SyntheticHistory:
    return copy_world(world, tmp_path_factory.mktemp("deep") / "repo")


@pytest.mark.e2e
def test_a_deep_path_in_the_output_never_hangs_a_bisection(hist: SyntheticHistory,
                                                          tmp_path: Path, home: Path) -> None:
    oracle = tmp_path / "deep.py"
    oracle.write_text(ORACLE)
    db = tmp_path / "s.db"
    env = {"BISECTOR_HOME": str(home)}
    r = run_cli("--db", str(db), "start", "--repo", str(hist.path), "--good", hist.main[0],
                "--bad", hist.main[-1], "--no-confirm", "--json", "--oracle", str(oracle),
                env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["culprit"]["sha"] == hist.culprit
    for fmt in ("issue", "html", "markdown"):
        start = time.monotonic()
        shown = run_cli("--db", str(db), "show", "last", "--format", fmt, env=env, timeout=60)
        assert shown.returncode == 0, shown.stderr
        assert time.monotonic() - start < 30
        assert "AssertionError" in shown.stdout


def test_a_folder_is_replaced_only_up_to_a_path_boundary() -> None:
    """Issue 32, item 8: a clone at .../ev and an oracle at .../evorc.sh gave
    ``-- sh <repo>orc.sh`` in the reproduce line."""
    scrub = scrubber("/x/ev")
    assert scrub("-- sh /x/evorc.sh") == "-- sh /x/evorc.sh"
    assert scrub("/x/ev/a.py, '/x/ev' and /x/ev") == "<repo>/a.py, '<repo>' and <repo>"
