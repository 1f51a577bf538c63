"""The ``git bisect log`` reader (``start --from-log``): what git and ``bisect log`` write is
read as sides and commits, everything else is refused with its line; marks are placed on a
range and contradictions named."""

from __future__ import annotations

import pytest

from bisector.base.errors import UsageError
from bisector.base.kinds import Verdict
from bisector.project.bisect_log import BisectLog, Mark, Resolved, parse, place

pytestmark = pytest.mark.unit

A, B, C, D, E = (c * 40 for c in "abcde")

# As git 2.47 writes it: the start refs as typed, the commits they were noted above them.
GIT_LOG = f"""# bad: [{E}] Release 2.0
# good: [{A}] Release 1.0
git bisect start 'HEAD' 'v1.0'
# skip: [{C}] a commit that does not build
git bisect skip {C}
# bad: [{D}] Speed up the loop
git bisect bad {D}
# first bad commit: [{D}] Speed up the loop
"""


def test_git_log_with_start_refs_comments_and_a_skip() -> None:
    log = parse(GIT_LOG, "bisect.log")
    # The start refs are marks at the commits noted above them (HEAD has moved since).
    assert log.terms == ("good", "bad") and log.bad == E and log.goods == (A,)
    assert [(m.line, m.verdict, m.rev) for m in log.marks] == [
        (3, Verdict.BAD, E), (3, Verdict.GOOD, A), (5, Verdict.SKIP, C), (7, Verdict.BAD, D)]


def test_start_refs_without_notes_are_marks_as_typed() -> None:
    log = parse(f"git bisect start v2.0 v1.0 v1.1\ngit bisect good {B}\n")
    assert log.bad == "v2.0" and log.goods == ("v1.0", "v1.1")
    assert [(m.verdict, m.rev) for m in log.marks] == [
        (Verdict.BAD, "v2.0"), (Verdict.GOOD, "v1.0"), (Verdict.GOOD, "v1.1"), (Verdict.GOOD, B)]


def test_bisectors_own_log_with_find_fix_terms() -> None:
    text = (f"git bisect start '--term-old=broken' '--term-new=fixed'\n"
            f"# broken: [{A}] old\ngit bisect broken {A}\n# fixed: [{E}] new\n"
            f"git bisect fixed {E}\ngit bisect skip {B} {C}\n"
            f"# first fixed commit: [{E}] new\n")
    log = parse(text)
    assert log.terms == ("broken", "fixed") and log.bad is None
    assert [m.verdict for m in log.marks] == [Verdict.GOOD, Verdict.BAD, Verdict.SKIP,
                                              Verdict.SKIP]
    assert [m.rev for m in log.marks][2:] == [B, C]


def test_paths_after_the_start_line_s_double_dash_are_read() -> None:
    # As git writes a path-limited start, and bisect log a --path bisection's.
    log = parse(f"# bad: [{E}] new\n# good: [{A}] old\ngit bisect start '--first-parent' "
                f"'{E}' '{A}' '--' 'src/a b.py' 'lib/'\ngit bisect good {B}\n")
    assert log.paths == ("src/a b.py", "lib/") and log.bad == E and log.goods == (A,)
    assert [m.rev for m in log.marks] == [E, A, B]
    assert parse(f"git bisect start\ngit bisect good {A}\n").paths == ()


def test_old_new_words_and_start_options() -> None:
    log = parse(f"git bisect start --no-checkout --first-parent\ngit bisect old {A}\n"
                f"git bisect new {E}\n")
    assert [m.verdict for m in log.marks] == [Verdict.GOOD, Verdict.BAD]


@pytest.mark.parametrize(("text", "needle"), [
    ("hello world\n", "line 1 is not a git bisect log line ('hello world')"),
    ("# only comments\n\n", "holds no git bisect start or marks"),
    ("", "holds no git bisect start or marks"),
    (f"git bisect start\ngit bisect good {A}\ngit bisect start\n", "line 3: a second git bisect"),
    (f"git bisect start\ngit bisect reset {A}\n", "git bisect 'reset' is not a mark"),
    ("git bisect start\ngit bisect bad\n", "line 2: git bisect bad names no commit"),
    (f"git bisect skip {A}..{B}\n", "is not one commit"),
    ("git bisect start 'v2' 'v1' '--' '-x'\n", "line 1: --path '-x' is not a path"),
    ("git bisect start --bogus\n", "unknown git bisect start option '--bogus'"),
    ("git bisect start 'v2\n", "cannot be split into words"),
    ("git bisect start --term-old=x --term-new=x\n", "both 'x'"),
    (f"git bisect start --term-old=broken --term-new=fixed\ngit bisect good {A}\n",
     "marks are broken, fixed, skip"),
    ("git bisect\n", "is not a git bisect log line"),
    ("\x1b[31mred\n", "('␛[31mred')"),  # control characters shown, never sent
])
def test_what_is_not_a_bisect_log_is_refused_with_its_line(text: str, needle: str) -> None:
    with pytest.raises(UsageError) as e:
        parse(text, "f.log")
    assert needle in e.value.message and "\n" not in e.value.message
    assert "\x1b" not in e.value.message


def _log(*marks: tuple[Verdict, str]) -> tuple[BisectLog, list[Resolved]]:
    ms = tuple(Mark(i + 1, v, sha) for i, (v, sha) in enumerate(marks))
    log = BisectLog("f.log", ("good", "bad"), None, (), ms)
    return log, [Resolved(m, m.rev) for m in ms]


def test_marks_are_placed_in_order_duplicates_once_outside_counted() -> None:
    log, marks = _log((Verdict.GOOD, A), (Verdict.BAD, E), (Verdict.SKIP, C),
                      (Verdict.GOOD, A), (Verdict.GOOD, "f" * 40))
    placed, outside = place(log, marks, [A, B, C, D, E])
    assert [(p.position, p.verdict, p.line) for p in placed] == [
        (0, Verdict.GOOD, 1), (4, Verdict.BAD, 2), (2, Verdict.SKIP, 3)]
    assert outside == 1


@pytest.mark.parametrize(("marks", "needle"), [
    (((Verdict.GOOD, B), (Verdict.BAD, B)), "lines 1 and 2 mark bbbbbbbbbbbb both good and bad"),
    (((Verdict.SKIP, B), (Verdict.GOOD, B)), "both skip and good"),
    (((Verdict.BAD, B), (Verdict.GOOD, D)), "lines 2 and 1 contradict: dddddddddddd is marked "
                                            "good but the older (or same) commit bbbbbbbbbbbb"),
])
def test_contradicting_marks_name_both_lines(marks: tuple[tuple[Verdict, str], ...],
                                             needle: str) -> None:
    log, resolved = _log(*marks)
    with pytest.raises(UsageError) as e:
        place(log, resolved, [A, B, C, D, E])
    assert needle in e.value.message
