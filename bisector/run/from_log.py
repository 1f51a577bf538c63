"""``bisect start --from-log FILE``: a ``git bisect log`` (git's, or ``bisect log``'s) seeds the
bisection (and ``--skip``'s commits, as skip marks), then the search goes on with the oracle
given (``--oracle``, a command) or by hand (``--manual``). The paths of its start line
(``git bisect start BAD GOOD -- PATHS``, as ``bisect log`` writes a ``--path`` bisection's)
are its ``--path`` unless ``--path`` is given (prepare.py), as ``--good``/``--bad`` win over its
endpoints.

Every mark becomes a person's verdict, stored as a run of a *manual oracle* (a judgement
nobody can run again) with a probe of the new bisection pointing at it, written in the
transaction that creates the bisection (``store/answers.seed``). Under ``--manual`` that
oracle is the bisection's own, so the marks are answers like the ones typed at the prompt
(``back`` takes them back too); with an oracle it is a fresh manual oracle of their own, so
the oracle's key never holds a verdict the oracle did not give. Everything is checked before
the store is opened (``prepare``): a bad log leaves the store as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import git

from bisector.base.errors import UsageError
from bisector.base.kinds import Verdict
from bisector.core.verdict import Outcome, Rules
from bisector.oracle.manual import manual_oracle
from bisector.oracle.script import Oracle
from bisector.project import bisect_log
from bisector.store.answers import Seed
from bisector.store.records import NewRun

EXIT = {Outcome.PASS: 0, Outcome.FAIL: 1, Outcome.SKIP: 125}


@dataclass(frozen=True)
class Seeding:
    """The marks of a log as runs to store, under ``oracle`` (a manual one)."""

    oracle: Oracle
    seeds: tuple[Seed, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Log:
    """A log read and its marks resolved in the clone; the range's refs it implies."""

    log: bisect_log.BisectLog
    marks: list[bisect_log.Resolved]
    good: str
    bad: str
    # What the range is shown by: the start line's refs as typed (``main``, ``v2.9.0``),
    # while ``good``/``bad`` are the commits they were when the log began; two 40-character
    # shas told the user nothing of the refs their log started from.
    names: tuple[str, str] = ("", "")


def read(repo: git.Repo, path: Path, good: str, bad: str, find_fix: bool) -> Log:
    """Read ``path``, resolve its marks, and pick the range: ``good``/``bad`` when given
    (non-empty), else the log's."""
    log = bisect_log.read(path)
    if log.terms == ("broken", "fixed") and not find_fix:
        raise UsageError(f"{path} is the log of a --find-fix bisection (its terms are broken "
                         f"and fixed): add --find-fix")
    marks = bisect_log.resolve(repo, log)
    g, b = bisect_log.endpoints(repo, log, marks, good or None, bad or None)
    typed = dict(zip((log.bad, *log.goods), log.typed, strict=False))
    return Log(log, marks, g, b, (good or typed.get(g, g), bad or typed.get(b, b)))


def refuse_sampled(oracle: Oracle, option: str = "--from-log") -> None:
    """A flaky or performance oracle weighs runs, not verdicts: a mark is not a run of it."""
    if oracle.meta.sampled:
        raise UsageError(f"{option} seeds a search that takes one verdict per commit; the "
                         f"oracle {oracle.name} is flaky or a performance oracle and weighs "
                         f"its own runs: drop {option}, or use a deterministic oracle")


def outcome_for(rules: Rules, verdict: Verdict) -> Outcome:
    """The raw outcome these rules judge as ``verdict`` (a mark is a side; the stored run is
    an outcome, as every run is)."""
    return next(o for o in (Outcome.PASS, Outcome.FAIL, Outcome.SKIP)
                if rules.judge(o) is verdict)


def seeding(read_log: Log, candidates: list[str], rules: Rules, oracle: Oracle,
            manual: bool) -> Seeding:
    """The log's marks on the range as runs of a manual oracle: the bisection's own under
    ``--manual``, else a fresh one (see the module docstring)."""
    log = read_log.log
    placed, outside = bisect_log.place(log, read_log.marks, candidates)
    under = oracle if manual else manual_oracle()
    name = Path(log.name).name
    word = {Verdict.GOOD: log.terms[0], Verdict.BAD: log.terms[1], Verdict.SKIP: "skip"}
    now = datetime.now(UTC)
    seeds = []
    for p in placed:
        outcome = outcome_for(rules, p.verdict)
        said = f"judged by hand: marked {word[p.verdict]} in the git bisect log {name}"
        seeds.append(Seed(p.position, NewRun(
            commit_sha=p.sha, outcome=outcome, reason=f"{said} (line {p.line})", reusable=True,
            started_at=now, exit_code=EXIT[outcome], output_tail=said,
            facts={"manual": f"marked {word[p.verdict]} in a git bisect log",
                   "from_log": {"file": name, "line": p.line}}), p.verdict.value))
    notes = [f"{len(seeds)} verdict(s) taken from the git bisect log {name}"]
    if outside:
        notes.append(f"{outside} mark(s) of {name} fall outside the range "
                     f"{candidates[0][:12]}..{candidates[-1][:12]} and were left out")
    return Seeding(under, tuple(seeds), tuple(notes))


def skipping(positions: list[int], candidates: list[str], skips: tuple[str, ...],
             rules: Rules, oracle: Oracle, manual: bool,
             seeded: Seeding | None) -> Seeding:
    """``--skip``'s commits as skip marks, stored as a log's marks are (beside the log's own,
    which win where both name a commit): the search never probes them, and a culprit hidden
    among them is answered as git does, with every commit it could be."""
    if not manual:
        refuse_sampled(oracle, "--skip")
    under = seeded.oracle if seeded is not None else oracle if manual else manual_oracle()
    taken = {s.position for s in seeded.seeds} if seeded is not None else set()
    now = datetime.now(UTC)
    said = f"skipped up front: --skip {' '.join(skips)}"
    outcome = outcome_for(rules, Verdict.SKIP)
    seeds = [Seed(p, NewRun(commit_sha=candidates[p], outcome=outcome, reason=said,
                            reusable=False, started_at=now, exit_code=EXIT[outcome],
                            output_tail=said, facts={"manual": said, "skip": list(skips)}),
                  Verdict.SKIP.value) for p in positions if p not in taken]
    note = f"{len(positions)} commit(s) skipped up front (--skip), never probed"
    old = seeded.seeds if seeded is not None else ()
    notes = seeded.notes if seeded is not None else ()
    return Seeding(under, (*old, *seeds), (*notes, note))
