"""The failure hunted (issue 31, item 3), in-process against fakes and a real SQLite store: a
probe that fails unlike the bad endpoint is a skip, not evidence of the regression, unless
``--any-failure``; stored runs stay raw and each bisection judges them by its own rule;
resume reaches the same answer. The measured case: commits 18-23 of 40 break an import (a
SyntaxError), the regression hunted (an AssertionError) lands at 31."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from bisector.artifacts.installable import Installable
from bisector.core.signature import normalise, same_failure
from bisector.core.verdict import Outcome, Rules
from bisector.executors.base import RunResult
from bisector.oracle.script import Oracle
from bisector.run.hunt import hunt_for
from bisector.run.runner import Finished, Runner
from bisector.run.wiring import Judging, Means
from bisector.store import bisections
from bisector.store import runs as run_store
from bisector.store.db import Store
from tests.unit.fakes import ORACLE, FakeClone, FakeExecutor, FakeSource, new_bisection, shas

WINDOW = range(18, 24)  # the import is broken here, fixed at 24
CULPRIT = 31  # the regression hunted


def syntax_error(pos: int) -> str:
    return (f'Traceback (most recent call last):\n  File "/tmp/run-{pos}/check.py", line 1\n'
            f'  File "/cache/trees/{pos:040x}/torchlet/__init__.py", line 7\n'
            f"    def _registry(:\n                  ^\nSyntaxError: invalid syntax\n")


def assertion(pos: int) -> str:
    """The bug's failure, with what differs from probe to probe: the environment's folder,
    an address, a number."""
    return (f'Traceback (most recent call last):\n  File "check.py", line 3, in <module>\n'
            f"AssertionError: norm is wrong: 7.0 (torchlet from /envs/e{pos}/lib/python3.12/"
            f"site-packages/torchlet/__init__.py, object at 0x7f{pos:04x}c0)\n")


class Failing(FakeExecutor):
    """Fails in the window with a SyntaxError and from the culprit on with ``bug``'s output
    (an AssertionError by default); passes elsewhere."""

    def __init__(self, candidates: list[str], bug: Callable[[int], str] = assertion,
                 hook: Callable[[int, str], None] | None = None) -> None:
        super().__init__(candidates, CULPRIT, hook=hook, outcome=lambda p: Outcome.FAIL
                         if p in WINDOW or p >= CULPRIT else Outcome.PASS)
        self.bug = bug

    def run(self, *, inst: Installable, oracle: Oracle, commit: str, run_dir: Path,
            gpu: str | None = None) -> RunResult:
        r = super().run(inst=inst, oracle=oracle, commit=commit, run_dir=run_dir, gpu=gpu)
        pos = self.position[commit]
        said = (syntax_error(pos) if pos in WINDOW else self.bug(pos) if pos >= CULPRIT
                else "")
        return replace(r, output_tail=said)


def runner(store: Store, bid: int, cands: list[str], ex: FakeExecutor, *,
           any_failure: bool = False) -> Runner:
    """The runner ``Runner.of`` makes of ``run/opened.open_bisection``, with its judge."""
    rec = bisections.get(store, bid)
    key = run_store.Key(rec.oracle_sha256, rec.env_fingerprint)
    hunt = hunt_for(store, key, cands, Rules(), ORACLE, any_failure=any_failure,
                    bisection_id=bid)
    return Runner(store, rec, cands, Judging(ORACLE, Rules(), hunt=hunt),
                  Means(FakeSource(), ex))


def culprit(done: Finished, cands: list[str]) -> int:
    assert done.record.culprit_sha is not None
    return cands.index(done.record.culprit_sha)


@pytest.mark.parametrize(("a", "b"), [
    ("AssertionError: norm is wrong: 7.0 at 0x7f3a2b1c", "AssertionError: norm is wrong: 9.5 at "
     "0x55d0"),
    ("FileNotFoundError: [Errno 2] No such file: '/tmp/tmpab12/data.bin'",
     "FileNotFoundError: [Errno 2] No such file: '/tmp/tmpzz99/data.bin'"),
    ("ImportError: cannot import name 'x' (/home/a/.cache/envs/1/lib/python3.12/site-packages/"
     "torchlet/__init__.py)", "ImportError: cannot import name 'x' (/opt/venv/lib/python3.11/"
     "site-packages/torchlet/__init__.py)"),
    ("SyntaxError: invalid syntax (/work/clone/torchlet/ops.py, line 7)",
     "SyntaxError: invalid syntax (/cache/trees/3fa9c1d2e4b5/torchlet/ops.py, line 9)"),
    ("RuntimeError: commit 3fa9c1d2e4b5a6f7 broke it", "RuntimeError: commit 0b1c2d3e4f5a6b7c "
     "broke it"),
])
def test_what_differs_from_run_to_run_is_the_same_failure(a: str, b: str) -> None:
    assert normalise(a) == normalise(b)
    assert same_failure(a, b)


@pytest.mark.parametrize(("a", "b"), [
    ("AssertionError: norm is wrong: 7.0", "SyntaxError: invalid syntax"),
    ("AssertionError: norm is wrong: 7.0", "AssertionError: dot is wrong: 7.0"),
    ("ImportError: cannot import name 'x'", "ImportError: cannot import name 'y'"),
    ("SyntaxError: invalid syntax (/a/torchlet/ops.py)", "SyntaxError: invalid syntax (/a/b.py)"),
    ("AssertionError: norm is wrong: 7.0", None),
])
def test_another_exception_or_message_is_another_failure(a: str, b: str | None) -> None:
    assert not same_failure(a, b)


def test_a_failure_unlike_the_bad_endpoint_is_a_skip_and_any_failure_restores_gits_rule(
        store: Store) -> None:
    cands = shas(40)
    # git's rule: the SyntaxError counts as the bug, the culprit is in its window.
    gits = new_bisection(store, cands)
    done = runner(store, gits, cands, Failing(cands), any_failure=True).run()
    assert culprit(done, cands) in WINDOW
    assert all(p.verdict != "skip" for p in run_store.probes(store, gits))

    # The default reuses every run stored meanwhile and judges it its own way.
    bid = new_bisection(store, cands)
    done = runner(store, bid, cands, Failing(cands)).run()
    assert culprit(done, cands) == CULPRIT
    probes = run_store.probes(store, bid)
    skipped = [p for p in probes if p.verdict == "skip"]
    assert skipped and all(p.position in WINDOW for p in skipped)
    assert any(p.reused for p in skipped)
    # The stored runs stay what the oracle did: failures, with their failure line.
    assert all(p.run.outcome is Outcome.FAIL and p.run.reason == "exit 1"
               and p.run.failure == "SyntaxError: invalid syntax" for p in skipped)


def test_a_bad_endpoint_with_no_failure_line_keeps_the_exit_code_rule(store: Store) -> None:
    cands = shas(40)
    bid = new_bisection(store, cands)
    done = runner(store, bid, cands, Failing(cands, bug=lambda _p: "norm is 7.0\n")).run()
    assert culprit(done, cands) == WINDOW[0]
    assert all(p.verdict != "skip" for p in run_store.probes(store, bid))


def test_runs_stored_before_the_bad_endpoint_has_run_are_judged_by_its_failure(
        store: Store) -> None:
    """An earlier bisection whose bad endpoint was in the window hunted the SyntaxError and
    stored failing runs there. A later one reads them only once its own bad endpoint has
    shown its failure: adopted before, they would have been bad."""
    cands = shas(40)
    early = new_bisection(store, cands[:21])
    first = runner(store, early, cands[:21], Failing(cands)).run()
    assert culprit(first, cands) == WINDOW[0]
    later = new_bisection(store, cands)
    done = runner(store, later, cands, Failing(cands)).run()
    assert culprit(done, cands) == CULPRIT
    at = {p.position: p.verdict for p in run_store.probes(store, later)}
    assert all(at[pos] == "skip" for pos in WINDOW if pos in at)


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def test_resume_gives_the_same_answer(store: Store, ctrl_c_raises: None) -> None:
    cands = shas(40)
    whole = Failing(cands)
    ref = new_bisection(store, cands, env="reference")
    assert culprit(runner(store, ref, cands, whole).run(), cands) == CULPRIT

    def interrupt(index: int, commit: str) -> None:
        if index == 4:
            raise KeyboardInterrupt

    bid = new_bisection(store, cands)
    with pytest.raises(KeyboardInterrupt):
        runner(store, bid, cands, Failing(cands, hook=interrupt)).run()
    again = Failing(cands)
    done = runner(store, bid, cands, again).run()
    assert culprit(done, cands) == CULPRIT
    probed = [p.commit_sha for p in run_store.probes(store, bid)]
    assert sorted(probed) == sorted(c.commit for c in whole.calls)


class Scripted(FakeExecutor):
    """Each position's outcome and output, as ``said`` gives them."""

    def __init__(self, candidates: list[str], said: Callable[[int], tuple[Outcome, str]]):
        super().__init__(candidates, 0, outcome=lambda p: said(p)[0])
        self.said = said

    def run(self, *, inst: Installable, oracle: Oracle, commit: str, run_dir: Path,
            gpu: str | None = None) -> RunResult:
        r = super().run(inst=inst, oracle=oracle, commit=commit, run_dir=run_dir, gpu=gpu)
        return replace(r, output_tail=self.said(self.position[commit])[1])


def test_find_fix_hunts_the_failure_of_the_broken_endpoint(store: Store) -> None:
    """Under --find-fix the failure hunted is the old (broken) endpoint's: a later commit
    that fails otherwise (the import broken at 40-45) is not "still broken"."""
    cands = shas(60)

    def said(pos: int) -> tuple[Outcome, str]:
        if pos in range(40, 46):
            return Outcome.FAIL, syntax_error(pos)
        return (Outcome.PASS, "") if pos >= 33 else (Outcome.FAIL, assertion(pos))

    rules = Rules(find_fix=True)
    bid = new_bisection(store, cands)
    rec = bisections.get(store, bid)
    hunt = hunt_for(store, run_store.Key(rec.oracle_sha256, rec.env_fingerprint), cands,
                    rules, ORACLE, any_failure=False, bisection_id=bid)
    assert hunt is not None and hunt.anchor == 0
    done = Runner(store, rec, cands, Judging(ORACLE, rules, hunt=hunt),
                  Means(FakeSource(), Scripted(cands, said))).run()
    assert culprit(done, cands) == 33
    assert hunt.failure() == assertion(0).splitlines()[-1]
    skipped = {p.position for p in run_store.probes(store, bid) if p.verdict == "skip"}
    assert skipped and skipped <= set(range(40, 46))


def test_a_confirmation_run_that_fails_differently_says_so(store: Store) -> None:
    """The culprit run again fails otherwise: confirmation judges it as the search would, a
    skip, with the reason that says why (the stored run says ``exit 1``)."""
    cands = shas(40)

    def said(pos: int) -> tuple[Outcome, str]:
        runs_here = sum(c.commit == cands[pos] for c in ex.calls)  # this one included
        if pos == CULPRIT and runs_here > 1:
            return Outcome.FAIL, syntax_error(pos)
        return (Outcome.FAIL, assertion(pos)) if pos >= CULPRIT else (Outcome.PASS, "")

    bid = new_bisection(store, cands)
    rec = bisections.get(store, bid)
    hunt = hunt_for(store, run_store.Key(rec.oracle_sha256, rec.env_fingerprint), cands,
                    Rules(), ORACLE, any_failure=False, bisection_id=bid)
    ex = Scripted(cands, said)
    runner = Runner(store, rec, cands, Judging(ORACLE, Rules(), hunt=hunt, confirm=True,
                                               clone=FakeClone()),  # no clone
                    Means(FakeSource(), ex))
    done = runner.run()
    again = done.record.result["confirmation"]["culprit"]
    assert again and again[0]["verdict"] == "skip"
    assert again[0]["reason"] == "fails differently: SyntaxError: invalid syntax"
