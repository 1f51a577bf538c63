"""``bisect log``'s text, as ``git bisect replay`` needs it: git's start line, each side's marks
in the order that narrows the range (git keeps only the last bad mark), the endpoints off the
start line when the oracle judged one otherwise. tests/integration/test_log_replay.py replays
each kind in a real git; these pin the shape on plain data."""

from __future__ import annotations

from typing import Any

import pytest

from bisector.app.report.log_text import log_text
from bisector.project.bisect_log import parse

pytestmark = pytest.mark.unit

C = [f"{i:x}" * 40 for i in range(10)]  # the walk: C[0] good endpoint .. C[9] bad endpoint


def _d(probes: list[tuple[int, str]], culprit: int | None = 5, **extra: Any) -> dict[str, Any]:
    return {"terms": {"old": "good", "new": "bad"}, "walk": "first-parent",
            "good": {"ref": "v1", "sha": C[0]}, "bad": {"ref": "v2", "sha": C[9]},
            "result": {"kind": "culprit"}, "culprit": {"sha": C[culprit], "subject": "it"}
            if culprit is not None else None,
            "probes": [{"seq": i, "sha": C[pos], "position": pos, "verdict": v,
                        "reused": True, "subject": f"s{pos}"}
                       for i, (pos, v) in enumerate(probes)], **extra}


def _marks(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if not ln.startswith("#")]


def test_reused_verdicts_come_out_narrowing_the_range() -> None:
    # Reused verdicts come back by position: goods, then bads oldest first.
    text = log_text(_d([(0, "good"), (3, "good"), (4, "good"), (5, "bad"), (7, "bad"),
                        (9, "bad")]))
    assert _marks(text) == [f"git bisect start '--first-parent' '{C[9]}' '{C[0]}'",
                            f"git bisect good {C[3]}", f"git bisect good {C[4]}",
                            f"git bisect bad {C[7]}", f"git bisect bad {C[5]}"]
    assert text.splitlines()[:2] == [f"# bad: [{C[9]}] s9", f"# good: [{C[0]}] s0"]
    log = parse(text)  # --from-log reads it: the endpoints, then the marks
    assert (log.bad, log.goods, log.paths) == (C[9], (C[0],), ())


def test_a_sequential_search_keeps_its_order_and_skips_their_places() -> None:
    probes = [(0, "good"), (9, "bad"), (4, "good"), (6, "skip"), (7, "bad"), (5, "bad")]
    assert _marks(log_text(_d(probes)))[1:] == [
        f"git bisect good {C[4]}", f"git bisect skip {C[6]}", f"git bisect bad {C[7]}",
        f"git bisect bad {C[5]}"]


def test_terms_paths_and_the_merge_base_on_the_start_line() -> None:
    d = _d([(0, "good"), (9, "bad")], culprit=9, paths=["src/a b.py"])
    d["terms"] = {"old": "good", "new": "slow"}  # git's own old word: both given all the same
    d["good"]["searched"] = C[1]  # v1 on another branch: the merge-base started the search
    text = log_text(d)
    assert _marks(text)[0] == (f"git bisect start '--first-parent' '--term-old=good' "
                               f"'--term-new=slow' '{C[9]}' '{C[1]}' '--' 'src/a b.py'")
    assert f"git bisect good {C[0]}" in text  # the tag's commit is no endpoint of the walk
    assert "v1 (" in text and "merge-base" in text
    log = parse(text)
    assert log.terms == ("good", "slow") and log.paths == ("src/a b.py",)


def test_an_endpoint_judged_otherwise_keeps_the_start_line_bare() -> None:
    text = log_text(_d([(0, "good"), (9, "good")], culprit=None))
    assert _marks(text) == ["git bisect start '--first-parent'", f"git bisect good {C[0]}",
                            f"git bisect good {C[9]}"]


def test_a_window_lists_its_suspects_and_an_unmarked_culprit_is_marked_last() -> None:
    d = _d([(0, "good"), (9, "bad"), (4, "skip"), (5, "skip")], culprit=None,
           suspects=[{"sha": C[4], "subject": "x"}, {"sha": C[5], "subject": "y"}])
    text = log_text(d)
    assert text.endswith(f"# the first bad commit could be any of:\n# [{C[4]}] x\n# [{C[5]}] y")
    text = log_text(_d([(0, "good"), (9, "bad"), (4, "good")], culprit=5))
    assert _marks(text)[-1] == f"git bisect bad {C[5]}"
