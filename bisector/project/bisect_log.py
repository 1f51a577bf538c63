"""``git bisect log`` output read back (``bisect start --from-log FILE``): the marks a person
(or ``git bisect run``, or ``bisect log``) made, so a bisection begun by hand, in git or in
another bisector, goes on where it stopped.

Only what ``git bisect replay`` reads is read: ``git bisect start [options] [bad [good...]]
[-- paths...]`` and one line per mark (``good``/``bad``, ``old``/``new`` or the log's own
terms, ``skip``); comment lines (``# good: [sha] subject``, ``# first bad commit: ...``) and
blank lines are passed over. A mark is a *side*: the old term is the good (older) side, the
new term the bad side, whatever the words; skips are commits that cannot be judged; the paths
limit the candidates as ``--path`` does (``bisect log`` writes a ``--path`` bisection's).
Anything else is refused with the line it is on: a log is input typed or pasted by a person,
and a guess would seed a search with verdicts nobody gave.

:func:`parse` is pure (text in, :class:`BisectLog` out); :func:`endpoints` and :func:`place`
ask the clone which commits the marks name and where they fall in the range.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import git

from bisector.base.errors import RepoError, UsageError
from bisector.base.escape import line as one_line
from bisector.base.kinds import Verdict
from bisector.project import history, limits

MAX_BYTES = 4 * 2**20  # a log of a million marks is not a bisect log
# Marks a log may hold: a bisection of a million commits marks about 20, a flaky one with many
# skips a few hundred; a 4 MiB file of marks (about 10 minutes of git before, one process a
# mark and one per pair of marks) is not a bisect log.
MAX_MARKS = 2000
# The options ``git bisect start`` writes into its log that change nothing here.
IGNORED_START = frozenset({"--no-checkout", "--first-parent"})
# What git writes before ``git bisect start B G``: the commits B and G were when it started
# (the start line keeps the refs as typed, ``HEAD`` or ``main`` that have moved since).
STARTED_AT = re.compile(r"#\s*([^\s:\[\]]+):\s*\[([0-9a-fA-F]{7,64})\]")


@dataclass(frozen=True)
class Mark:
    """One commit named by one mark line."""

    line: int  # 1-based, for messages
    verdict: Verdict  # the side: GOOD (old term), BAD (new term), SKIP
    rev: str  # as written (a full sha in logs git and bisector write)


@dataclass(frozen=True)
class BisectLog:
    name: str  # the file, for messages
    terms: tuple[str, str]  # (old, new) as the log calls them
    bad: str | None  # ``git bisect start BAD GOOD...``: the refs it started from, if any
    goods: tuple[str, ...]
    marks: tuple[Mark, ...]
    paths: tuple[str, ...] = ()  # after ``--`` on the start line: as ``--path``
    # The start line's refs as typed (bad first: ``main``, ``v2.9.0``), where ``bad`` and
    # ``goods`` hold the commits noted above it: the names the bisection is shown by.
    typed: tuple[str, ...] = ()


def _shown(text: str) -> str:
    """A piece of the file quoted for a one-line message (control characters made visible)."""
    return repr(one_line(text[:60]) + ("..." if len(text) > 60 else ""))


def read(path: Path) -> BisectLog:
    """The log in ``path``: a one-line error when it cannot be read or is not a bisect log."""
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise UsageError(f"--from-log {path}: cannot read it ({e.strerror or e}): give the "
                         f"file git bisect log (or bisect log) wrote") from None
    if len(raw) > MAX_BYTES:
        raise UsageError(f"--from-log {path}: larger than {MAX_BYTES // 2**20} MiB, not a "
                         f"bisect log: give the output of git bisect log (or bisect log)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"--from-log {path}: not UTF-8 text, not a bisect log: give the "
                         f"output of git bisect log (or bisect log)") from None
    return parse(text, str(path))


def _start(words: list[str], where: str
           ) -> tuple[tuple[str, str], list[str], tuple[str, ...]]:
    """The terms, refs and paths of a ``git bisect start`` line."""
    old, new = "good", "bad"
    refs: list[str] = []
    paths: tuple[str, ...] = ()
    if "--" in words:
        at = words.index("--")
        words, paths = words[:at], tuple(words[at + 1:])
        try:
            limits.check_paths(paths)
        except UsageError as e:
            raise UsageError(f"{where}: {e}") from None
    for w in words:
        key, _, value = w.partition("=")
        if key in ("--term-old", "--term-good") and value:
            old = value
        elif key in ("--term-new", "--term-bad") and value:
            new = value
        elif w in IGNORED_START:
            continue
        elif w.startswith("-"):
            raise UsageError(f"{where}: unknown git bisect start option {_shown(w)}: delete "
                             f"it from that line")
        else:
            refs.append(w)
    if old == new:
        raise UsageError(f"{where}: the old and new terms are both {_shown(old)}: fix that line")
    return (old, new), refs, paths


# Above ruff's limits on purpose: one branch per git bisect log line kind.
def parse(text: str, name: str = "the log") -> BisectLog:  # noqa: C901
    """Read the lines of a ``git bisect log`` (see the module docstring)."""
    terms = ("good", "bad")
    started = False
    bad: str | None = None
    goods: list[str] = []
    marks: list[Mark] = []
    paths: tuple[str, ...] = ()
    typed: tuple[str, ...] = ()
    noted: list[tuple[str, str]] = []  # (word, sha) of the comments just above a line
    for n, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if stripped.startswith("#"):
            if (found := STARTED_AT.match(stripped)) is not None:
                noted.append((found.group(1), found.group(2).lower()))
            continue
        if not stripped:
            continue
        above, noted = noted, []
        where = f"{name} line {n}"
        try:
            words = shlex.split(stripped)
        except ValueError as e:
            raise UsageError(f"{where}: cannot be split into words ({e}): fix its quotes") \
                from None
        if words[:2] != ["git", "bisect"] or len(words) < 3:
            raise UsageError(f"{where} is not a git bisect log line ({_shown(stripped)}): give "
                             f"the output of git bisect log (or bisect log)")
        command, args = words[2], words[3:]
        if command == "start":
            if started or marks:
                raise UsageError(f"{where}: a second git bisect start; give the log of one "
                                 f"bisection (from its start line on)")
            started = True
            terms, refs, paths = _start(args, where)
            typed = tuple(refs)
            if refs:  # marks too, as git counts them: at the commits noted above, if noted
                at = {side: [sha for word, sha in above if word == term]
                      for side, term in zip((Verdict.GOOD, Verdict.BAD), terms, strict=True)}
                ends = [(Verdict.BAD, refs[0]), *((Verdict.GOOD, g) for g in refs[1:])]
                shas = [at[v].pop(0) if at[v] else ref for v, ref in ends]
                bad, goods = shas[0], shas[1:]
                marks += [Mark(n, v, sha) for (v, _), sha in zip(ends, shas, strict=True)]
            continue
        sides = {terms[0]: Verdict.GOOD, terms[1]: Verdict.BAD, "old": Verdict.GOOD,
                 "new": Verdict.BAD, "skip": Verdict.SKIP}
        verdict = sides.get(command)
        if verdict is None:
            known = ", ".join(dict.fromkeys((terms[0], terms[1], "skip")))
            raise UsageError(f"{where}: git bisect {_shown(command)} is not a mark (the log's "
                             f"marks are {known}): delete that line")
        if not args:
            raise UsageError(f"{where}: git bisect {command} names no commit: add the sha "
                             f"it marked")
        for rev in args:
            if ".." in rev or rev.startswith("-"):
                raise UsageError(f"{where}: {_shown(rev)} is not one commit: list the "
                                 f"commits one by one")
            marks.append(Mark(n, verdict, rev))
        if len(marks) > MAX_MARKS:
            raise UsageError(f"{where}: more than {MAX_MARKS} marks, not the log of one "
                             f"bisection: give the output of git bisect log (or bisect log) of "
                             f"one search")
    if not marks and bad is None:
        raise UsageError(f"{name} holds no git bisect start or marks: give the output of git "
                         f"bisect log (or bisect log)")
    return BisectLog(name, terms, bad, tuple(goods), tuple(marks), paths, typed)


@dataclass(frozen=True)
class Resolved:
    """A mark with the commit it names."""

    mark: Mark
    sha: str


def _batch(repo: git.Repo, revs: list[str]) -> dict[str, str]:
    """rev -> the commit it names, for every rev git resolves: one ``git cat-file
    --batch-check`` for them all (a process per mark took minutes on a long log)."""
    if not revs:
        return {}
    # Revs one a line: a rev holding a newline or a space would shift every answer after it.
    revs = [r for r in revs if r.isprintable() and " " not in r]
    try:
        done = subprocess.run(["git", "--git-dir", str(repo.git_dir), "cat-file",
                               "--batch-check"], input="".join(f"{r}^{{commit}}\n" for r in revs),
                              capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.SubprocessError):
        return {}
    if done.returncode != 0:
        return {}
    out: dict[str, str] = {}
    for rev, line in zip(revs, done.stdout.splitlines(), strict=False):
        sha, _, kind = line.partition(" ")
        if kind.startswith("commit ") and len(sha) == 40:
            out[rev] = sha
    return out


def resolve(repo: git.Repo, log: BisectLog) -> list[Resolved]:
    """Each mark's commit; an unknown one is a one-line error naming its line."""
    found = _batch(repo, [r for r in dict.fromkeys(mk.rev for mk in log.marks)
                          if history.nightly_date(r) is None and not r.startswith("-")])
    out = []
    for mk in log.marks:
        sha = found.get(mk.rev)
        if sha is None:  # a date, a tag git's batch did not peel, or not a commit: the slow way
            try:
                sha = history.resolve(repo, mk.rev, "marked")
            except RepoError:
                raise RepoError(f"{log.name} line {mk.line}: {_shown(mk.rev)} is not a commit "
                                f"of {repo.working_dir}: fetch it, or give the log of this "
                                f"repository") from None
        out.append(Resolved(mk, sha))
    return out


def _outermost(repo: git.Repo, shas: list[str], newest: bool) -> str | None:
    """The one commit every other is an ancestor of (``newest``) or a descendant of; None
    when they lie on different lines of history. One git process either way: the commits none
    of the others reach (``merge-base --independent``) must be one, or their common ancestor
    (``merge-base --octopus``) must be one of them."""
    distinct = list(dict.fromkeys(shas))
    if len(distinct) == 1:
        return distinct[0]
    try:
        if newest:
            tips = str(repo.git.merge_base("--independent", *distinct)).split()
            return tips[0] if len(tips) == 1 else None
        base = str(repo.git.merge_base("--octopus", *distinct)).split()
    except git.GitCommandError:
        return None
    return base[0] if len(base) == 1 and base[0] in distinct else None


def endpoints(repo: git.Repo, log: BisectLog, marks: list[Resolved], good: str | None,
              bad: str | None) -> tuple[str, str]:
    """The range's refs: ``good``/``bad`` when given, else the log's start line, else its
    outermost marks (the oldest good, the newest bad), as the log's bisection had them."""
    if bad is None:
        bad = log.bad
    if bad is None:
        bad = _outermost_marked(repo, log, marks, Verdict.BAD)
    if good is None and len(log.goods) > 1:
        raise UsageError(f"{log.name} starts from {len(log.goods)} {log.terms[0]} commits; "
                         f"bisector takes one: give --good")
    if good is None and log.goods:
        good = log.goods[0]
    if good is None:
        good = _outermost_marked(repo, log, marks, Verdict.GOOD)
    return good, bad


def _outermost_marked(repo: git.Repo, log: BisectLog, marks: list[Resolved],
                      verdict: Verdict) -> str:
    """The oldest commit marked good (newest marked bad) when all lie on one line; else a
    one-line error asking for the endpoint."""
    bad = verdict is Verdict.BAD
    term, flag = (log.terms[1], "--bad") if bad else (log.terms[0], "--good")
    shas = [r.sha for r in marks if r.mark.verdict is verdict]
    if not shas:
        raise UsageError(f"{log.name} marks no commit {term}: give {flag}")
    found = _outermost(repo, shas, newest=bad)
    if found is None:
        raise UsageError(f"{log.name} marks {term} commits on different lines of history: "
                         f"give {flag}")
    return found


@dataclass(frozen=True)
class Placed:
    """A mark on a candidate of the range."""

    position: int
    sha: str
    verdict: Verdict
    line: int


def place(log: BisectLog, marks: list[Resolved], candidates: list[str]
          ) -> tuple[list[Placed], int]:
    """The marks that fall on the range's candidates, in the log's order (a commit marked
    twice the same way once), and how many fall outside it. Marks that contradict each other
    (one commit marked two ways; an old-side mark on a commit newer than a new-side one) are a
    one-line error naming both lines: the search would stop on them anyway, after asking."""
    position = {sha: i for i, sha in enumerate(candidates)}
    seen: dict[str, Resolved] = {}
    placed: list[Placed] = []
    outside = 0
    old, new = log.terms
    word = {Verdict.GOOD: old, Verdict.BAD: new, Verdict.SKIP: "skip"}
    for r in marks:
        first = seen.get(r.sha)
        if first is not None:
            if first.mark.verdict is not r.mark.verdict:
                raise UsageError(
                    f"{log.name} lines {first.mark.line} and {r.mark.line} mark {r.sha[:12]} "
                    f"both {word[first.mark.verdict]} and {word[r.mark.verdict]}: delete the "
                    f"wrong one")
            continue
        seen[r.sha] = r
        if r.sha not in position:
            outside += 1
            continue
        placed.append(Placed(position[r.sha], r.sha, r.mark.verdict, r.mark.line))
    goods = [p for p in placed if p.verdict is Verdict.GOOD]
    bads = [p for p in placed if p.verdict is Verdict.BAD]
    if goods and bads:
        g = max(goods, key=lambda p: p.position)
        b = min(bads, key=lambda p: p.position)
        if g.position >= b.position:
            raise UsageError(
                f"{log.name} lines {g.line} and {b.line} contradict: {g.sha[:12]} is marked "
                f"{old} but the older (or same) commit {b.sha[:12]} is marked {new}: delete "
                f"the wrong mark")
    return placed, outside
