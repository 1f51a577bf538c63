"""The prior from the failure (issue 23) in the runner, for all three oracle kinds and K slots:
the same culprit as without it, in fewer oracle runs when the evidence is right, and the answer
says which prior was used. A real SQLite store and a real git repository; the runs come from
the fakes (a deterministic, a lying and a timing executor)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import git
import pytest

from bisector.base.kinds import PriorMode, State
from bisector.core.prior import Evidence, Prior, read_evidence
from bisector.core.verdict import Outcome, Rules
from bisector.oracle.script import Oracle
from bisector.project import evidence as repo_evidence
from bisector.run.prior import FailurePrior, PriorInfo
from bisector.run.runner import Runner
from bisector.run.wiring import Judging, Means
from bisector.store import bisections
from bisector.store import runs as run_store
from bisector.store.db import Store
from bisector.store.records import NewRun
from tests.support import git as run_git
from tests.unit.fakes import ORACLE, FakeExecutor, FakeSource, new_bisection, shas
from tests.unit.run.test_noisy_runner import FLAKY, liar
from tests.unit.run.test_perf_runner import PERF, Timer


class Fixed(FailurePrior):
    """A prior source whose evidence is given (the git side is tested below on a real repo)."""

    def __init__(self, points: set[int]) -> None:
        super().__init__(PriorMode.AUTO, lambda: None)  # type: ignore[arg-type, return-value]
        self.points = points

    def make(self, found: Evidence, candidates: Sequence[str]) -> PriorInfo:
        n = len(candidates)
        prior = Prior.from_weights([0.5 / (n - 1) + (0.5 / len(self.points)
                                                     if c in self.points else 0.0)
                                    for c in range(1, n)], matched=len(self.points))
        return PriorInfo(PriorMode.AUTO, prior, Evidence(("torch/x.py",)), "given")


def runner(store: Store, cands: list[str], ex: FakeExecutor, oracle: Oracle = ORACLE,
           prior: FailurePrior | None = None, width: int = 1) -> Runner:
    bid = new_bisection(store, cands, oracle=oracle)
    return Runner(store, bisections.get(store, bid), cands,
                  Judging(oracle, Rules(), prior=prior),
                  Means(FakeSource(), ex, tuple(str(i) for i in range(width))))


@pytest.mark.parametrize("width", [1, 3])
def test_deterministic_oracle_fewer_probes_same_culprit(store: Store, width: int) -> None:
    cands = shas(3000)
    plain_ex, prior_ex = FakeExecutor(cands, 2021), FakeExecutor(cands, 2021)
    plain = runner(store, cands, plain_ex, width=width).run().record
    # Its own key (other oracle bytes): with the plain run's, it reused all 14 verdicts and
    # made no run, so "fewer" held with 0 and it read "saved 14 probes" (issue 50 item 8).
    ours = runner(store, cands, prior_ex, _other(ORACLE), prior=Fixed({2021, 77}),
                  width=width).run().record
    assert plain.culprit_sha == ours.culprit_sha == cands[2021]
    assert 0 < len(prior_ex.calls) < len(plain_ex.calls), (len(prior_ex.calls),
                                                           len(plain_ex.calls))
    p = ours.result["prior"]
    assert p["used"] is True and p["matched"] == 2 and p["probes"] == len(prior_ex.calls)
    assert p["plain_probes"] == len(plain_ex.calls) or width > 1
    # Under the plain run's key every verdict is reused: plain bisection from them pays
    # nothing either, so nothing is saved.
    again_ex = FakeExecutor(cands, 2021)
    again = runner(store, cands, again_ex, prior=Fixed({2021, 77}), width=width).run().record
    q = again.result["prior"]
    assert not again_ex.calls and q["probes"] == q["plain_probes"] == 0 and q["reused"] > 0


def test_flaky_oracle_fewer_runs_same_culprit(store: Store) -> None:
    cands = shas(2000)
    plain_ex, prior_ex = liar(cands, 1234, 0.1, 5), liar(cands, 1234, 0.1, 5)
    plain = runner(store, cands, plain_ex, FLAKY).run().record
    ours = runner(store, cands, prior_ex, _other(FLAKY), Fixed({1234})).run().record
    assert plain.culprit_sha == ours.culprit_sha == cands[1234]
    assert ours.result["noisy"]["probability"] >= 0.99  # judged from the uniform posterior
    # The prior says where to look: far fewer commits probed. Most of a flaky search's runs
    # are at the endpoints, the split and confirmation, so the total only does not grow.
    assert len({c.commit for c in prior_ex.calls}) < len({c.commit for c in plain_ex.calls}) / 2
    assert len(prior_ex.calls) <= len(plain_ex.calls)


def test_performance_oracle_fewer_runs_same_culprit(store: Store) -> None:
    cands = shas(600)
    plain_ex, prior_ex = Timer(cands, 345, 1.3, 1), Timer(cands, 345, 1.3, 1)
    plain = runner(store, cands, plain_ex, PERF).run().record
    ours = runner(store, cands, prior_ex, _other(PERF), Fixed({345})).run().record
    assert plain.state is ours.state is State.DONE
    assert plain.culprit_sha == ours.culprit_sha == cands[345]
    assert len(prior_ex.calls) < len(plain_ex.calls)


def _other(oracle: Oracle) -> Oracle:
    """The same oracle with other bytes: its own key, so nothing of the first run is reused."""
    return replace(oracle, content=oracle.content + b"# again\n")


def test_no_stored_run_at_the_bad_endpoint_means_no_prior_yet(store: Store) -> None:
    cands = shas(10)
    src = FailurePrior(PriorMode.AUTO, lambda: None)  # type: ignore[arg-type, return-value]
    key = run_store.Key(ORACLE.sha256, "env0")
    assert src.get(store, key, cands, Rules()) is None
    none = FailurePrior(PriorMode.NONE, lambda: None)  # type: ignore[arg-type, return-value]
    info = none.get(store, key, cands, Rules())
    assert info is not None and info.prior is None and info.why == "--prior none"


# -- the git side ----------------------------------------------------------------------------

@pytest.fixture
def repo(tmp_path: Path) -> tuple[git.Repo, list[str]]:
    r = tmp_path / "r"
    r.mkdir()
    run_git(r, "init", "-q", "-b", "main")
    shas_: list[str] = []
    for i in range(12):
        path = r / ("pkg/ops.py" if i == 7 else f"pkg/u{i % 3}.py")
        path.parent.mkdir(exist_ok=True)
        body = "def norm(x):\n    return x\n" if i == 7 else f"def helper_{i}():\n    return {i}\n"
        path.write_text(path.read_text() + body if path.exists() else body)
        run_git(r, "add", "-A")
        run_git(r, "commit", "-q", "-m", "[ops] change the norm" if i == 7 else f"change {i}")
        shas_.append(run_git(r, "rev-parse", "HEAD"))
    return git.Repo(r), shas_


TRACE = ('Traceback (most recent call last):\n'
         '  File "/venv/lib/site-packages/pkg/ops.py", line 2, in norm\n'
         '  File "/usr/lib/python3.11/json/decoder.py", line 9, in decode\n'
         'ValueError: bad\n')


def test_git_evidence_resolves_files_and_reads_changes(repo: tuple[git.Repo, list[str]],
                                                       home: Path) -> None:
    r, cands = repo
    named = repo_evidence.resolve(r, cands[-1], read_evidence(TRACE))
    assert named.files == ("pkg/ops.py",)  # json/decoder.py is not in the repository
    changes = repo_evidence.changes(r, cands, named)
    assert changes[7].paths == ("pkg/ops.py",) and changes[7].functions == ("norm",)
    assert changes[7].subject == "[ops] change the norm"
    assert changes[3].paths == ("pkg/u0.py",)
    # Read once: the cached paths come back without git.
    assert repo_evidence.paths_and_subjects(r, cands)[7][0] == ("pkg/ops.py",)


def test_only_a_definition_names_a_hunks_function() -> None:
    """Seen on click's history: prose and comments in a patch (``# a class for the``, ``will
    continue``) had made ``for`` and ``continue`` functions of a hunk."""
    assert repo_evidence.defined_in("@@ -116,13 +116,6 @@ class _Wrapper(io.TextIOWrapper):") \
        == "_Wrapper"
    assert repo_evidence.defined_in("+    def __next__(self) -> str:") == "__next__"
    assert repo_evidence.defined_in("-async def fetch(url):") == "fetch"
    assert repo_evidence.defined_in("+    # a class for the runner") is None
    assert repo_evidence.defined_in("+    class for the runner") is None  # a keyword
    assert repo_evidence.defined_in("+    x = undefined(self)") is None
    assert repo_evidence.defined_in("@@ -1,2 +1,3 @@") is None


def test_a_src_layout_names_the_installed_frames_as_its_own(tmp_path: Path) -> None:
    """Seen on black's history: every frame of ``.../site-packages/black/x.py`` was dropped
    because the repository names it ``src/black/x.py``; only the exception's module was left."""
    r = tmp_path / "src-layout"
    for path in ("src/black/__init__.py", "src/black/parsing.py", "src/blib2to3/parsing.py",
                 "tests/test_black.py"):
        (r / path).parent.mkdir(parents=True, exist_ok=True)
        (r / path).write_text("x = 1\n")
    run_git(r.parent, "init", "-q", "-b", "main", str(r))
    run_git(r, "add", "-A")
    run_git(r, "commit", "-q", "-m", "layout")
    trace = ('Traceback (most recent call last):\n'
             '  File "/s/oracle.py", line 3, in <module>\n'
             '  File "/env/lib/python3.11/site-packages/black/__init__.py", line 9, in format_str\n'
             '  File "/env/lib/python3.11/site-packages/black/parsing.py", line 90, in parse\n'
             'black.parsing.InvalidInput: Cannot parse\n')
    repo = git.Repo(r)
    named = repo_evidence.resolve(repo, repo.head.commit.hexsha, read_evidence(trace))
    assert named.files == ("src/black/__init__.py", "src/black/parsing.py")
    assert named.functions["src/black/parsing.py"] == ("parse",)
    assert named.raised == {"src/black/parsing.py": ("parse",)}


def test_failure_prior_reads_the_bad_endpoints_stored_failure(
        repo: tuple[git.Repo, list[str]], store: Store, home: Path, tmp_path: Path) -> None:
    r, cands = repo
    new_bisection(store, cands)  # stores the oracle a run points at
    key = run_store.Key(ORACLE.sha256, "env0")
    err = tmp_path / "stderr.txt"
    err.write_text("noise\n" * 1000 + TRACE)
    run_store.save_run(store, key, NewRun(cands[-1], Outcome.FAIL, "exit 1", True,
                                          datetime.now(UTC), stderr_path=str(err)))
    info = FailurePrior(PriorMode.AUTO, lambda: r).get(store, key, cands, Rules())
    assert info is not None and info.prior is not None
    assert info.prior.matched >= 1
    assert max(range(1, 12), key=info.prior.prob) == 7  # the commit that changed norm
    assert info.summary(12)["evidence"]["files"] == ["pkg/ops.py"]  # type: ignore[index]
