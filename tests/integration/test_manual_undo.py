"""``--manual`` as people expect it (mozregression's prompt): yes/no and the short words,
``back`` (repeatedly, across ``quit`` and ``resume``, nothing to undo at the first question),
``retry`` (a fresh tree, the shell opened again), a reproduce line the CLI accepts, and
``--from-log`` seeded from ``bisect log`` output. Answers are piped through stdin, a line at
a time as each question appears, the way a person types them."""

from __future__ import annotations

import json
import os
import re
import shlex
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

from bisector.app.demo.torchlet import SyntheticHistory, generate
from tests.support import BISECT, ROOT, run_cli

ASKED = re.compile(r"judge ([0-9a-f]{12})")
Respond = Callable[[str], str | None]


def drive(args: list[str], respond: Respond, env: dict[str, str] | None = None
          ) -> subprocess.CompletedProcess[str]:
    """Run ``bisect ARGS``; after each line it writes on stderr, ``respond(line)`` may type
    one line of input (None: nothing)."""
    p = subprocess.Popen([*BISECT, *args], cwd=ROOT, env=env or os.environ.copy(), text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    assert p.stdin and p.stderr and p.stdout
    err: list[str] = []
    for line in p.stderr:
        err.append(line)
        word = respond(line)
        if word is not None:
            p.stdin.write(word + "\n")
            p.stdin.flush()
    out = p.stdout.read()
    p.wait(timeout=60)
    return subprocess.CompletedProcess(args, p.returncode, out, "".join(err))


def truth(hist: SyntheticHistory, short: str) -> bool:
    """Does this commit show the bug (at or after the planted culprit)?"""
    culprit_at = hist.main.index(hist.culprit)
    return next(i for i, sha in enumerate(hist.main) if sha.startswith(short)) >= culprit_at


class Person:
    """Answers truthfully with a rotating choice of words, unless ``plan`` says otherwise for
    the n-th question (a word, or a list of words typed one per prompt line)."""

    WORDS = (("yes", "no"), ("y", "n"), ("bad", "good"), ("b", "g"))

    def __init__(self, hist: SyntheticHistory, plan: dict[int, list[str]] | None = None
                 ) -> None:
        self.hist, self.plan = hist, plan or {}
        self.asked: list[str] = []
        self.pending: list[str] = []

    def __call__(self, line: str) -> str | None:
        m = ASKED.search(line)
        if m:
            self.asked.append(m.group(1))
            self.pending = list(self.plan.get(len(self.asked), []))
            if not self.pending:
                yes, no = self.WORDS[len(self.asked) % len(self.WORDS)]
                return yes if truth(self.hist, m.group(1)) else no
            return self.pending.pop(0)
        if self.pending and "nothing to undo" in line:
            return self.pending.pop(0)  # the prompt asks again on the same commit
        return None

    def lie(self, n: int) -> str:
        """The wrong answer for the n-th question (known once it was asked)."""
        return "no" if truth(self.hist, self.asked[n - 1]) else "yes"


def db_rows(home: Path, sql: str, *args: object) -> list[tuple[object, ...]]:
    with sqlite3.connect(home / "data" / "bisector.db") as c:
        return list(c.execute(sql, args))


def test_back_takes_answers_back_across_quit_and_resume(home: Path, tmp_path: Path) -> None:
    hist = generate(tmp_path / "t", commits=24, culprit=13, broken=(), seed=8131,
                    release_at=None, side_branch_at=None)
    args = ["start", "--repo", str(hist.path), "--good", hist.main[0], "--bad", hist.main[-1],
            "--manual", "--json"]

    class Liar(Person):
        """Back at the first question (nothing to undo), a wrong third answer, then back
        twice (the wrong answer, then the bad endpoint's), then quit."""

        def __call__(self, line: str) -> str | None:
            if ASKED.search(line) and len(self.asked) == 2:  # the third question
                self.asked.append(ASKED.search(line).group(1))  # type: ignore[union-attr]
                return self.lie(3)
            return super().__call__(line)

    person = Liar(hist, {1: ["back", "no"], 4: ["back"], 5: ["back"], 6: ["quit"]})
    r = drive(args, person)
    assert r.returncode == 130, r.stderr
    assert "nothing to undo: no answer was given yet" in r.stderr
    first, endpoint, lied, _after, again, endpoint_again = person.asked
    assert first.startswith(hist.main[0][:12]) and endpoint.startswith(hist.main[-1][:12])
    assert again == lied and endpoint_again == endpoint  # each back asks the undone commit
    assert f"took back {'good' if truth(hist, lied) else 'bad'} for {lied}" in r.stderr
    assert f"took back bad for {endpoint}" in r.stderr
    # The wrong answer left the bisection and is not reusable by anything any more.
    wrong = db_rows(home, "select reusable, facts from run where commit_sha like ?",
                    lied + "%")
    assert len(wrong) == 1 and not wrong[0][0] and "taken_back" in json.loads(str(wrong[0][1]))
    assert db_rows(home, "select count(*) from probe") == [(1,)]  # the good endpoint only

    bid = json.loads(run_cli("list", "--json", check=True).stdout)[0]["id"]
    person = Person(hist)
    r = drive(["resume", str(bid), "--json"], person)
    assert r.returncode == 0, r.stderr
    assert person.asked[0] == endpoint  # the undone commit first, as it was in flight
    d = json.loads(r.stdout)
    assert d["culprit"]["sha"] == hist.culprit
    verdicts = {p["sha"][:12]: p["verdict"] for p in d["probes"]}
    assert verdicts[lied] == ("bad" if truth(hist, lied) else "good")  # answered again
    log = run_cli("log", str(bid), check=True).stdout
    assert log.count(lied) == 2  # its comment and its one (true) mark


def test_retry_makes_the_tree_again_and_opens_the_shell(home: Path, tmp_path: Path) -> None:
    hist = generate(tmp_path / "t", commits=8, culprit=5, broken=(), seed=8132,
                    release_at=None, side_branch_at=None)
    seen = tmp_path / "shell.txt"
    user = tmp_path / "user-home"
    user.mkdir()
    (user / ".bashrc").write_text(f"PROMPT_COMMAND='pwd >> {seen}; exit'\n")
    env = {**os.environ, "HOME": str(user)}
    person = Person(hist, {1: ["retry"], 2: ["retry"], 4: ["quit"]})
    r = drive(["start", "--repo", str(hist.path), "--good", hist.main[0], "--bad",
               hist.main[-1], "--manual"], person, env)
    assert r.returncode == 130, r.stderr
    assert len(set(person.asked[:3])) == 1  # the same commit, asked three times
    assert "made again: retry 2" in r.stderr
    trees = seen.read_text().split()
    assert len(trees) == 2 and trees[0] != trees[1]  # two fresh private copies, one per retry
    assert not any(Path(t).exists() for t in trees)


def test_reproduce_lines_are_accepted_and_bisect_log_round_trips(home: Path,
                                                                  tmp_path: Path) -> None:
    hist = generate(tmp_path / "t", commits=6, culprit=3, broken=(), seed=8133,
                    release_at=None, side_branch_at=None)
    r = drive(["start", "--repo", str(hist.path), "--good", hist.main[0], "--bad",
               hist.main[-1], "--manual", "--json"], Person(hist))
    assert r.returncode == 0, r.stderr
    first = json.loads(r.stdout)
    line = first["reproduce"]
    assert "--manual" in line and "--oracle" not in line
    args = shlex.split(line)
    assert args[:2] == ["bisect", "start"]
    again = drive(args[1:], lambda text: "quit" if ASKED.search(text) else None)
    assert again.returncode == 130, again.stderr  # accepted: it asked, the person quit
    # `bisect log` seeds a new manual bisection that needs no question at all.
    log = tmp_path / "manual.log"
    log.write_text(run_cli("log", str(first["id"]), check=True).stdout)
    nobody = Person(hist)
    r = drive(["start", "--repo", str(hist.path), "--manual", "--from-log", str(log),
               "--json"], nobody)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert not nobody.asked and d["culprit"]["sha"] == hist.culprit
    ends = [first["bad"]["sha"], first["good"]["sha"]]  # git's start line: bad, then good
    assert [(p["sha"], p["verdict"]) for p in d["probes"]] == [
        (ends[0], "bad"), (ends[1], "good"),
        *((p["sha"], p["verdict"]) for p in first["probes"] if p["sha"] not in ends)]
    assert f"--from-log {log}" in d["reproduce"] and "--manual" in d["reproduce"]
    r = drive(shlex.split(d["reproduce"])[1:], nobody)
    assert r.returncode == 0 and not nobody.asked, r.stderr  # accepted, and as seeded


def test_a_git_log_seeds_a_manual_bisection_and_back_undoes_its_marks(
        home: Path, tmp_path: Path) -> None:
    hist = generate(tmp_path / "t", commits=16, culprit=9, broken=(), seed=8134,
                    release_at=None, side_branch_at=None)
    m = hist.main
    mid = m[5]
    log = tmp_path / "git.log"
    log.write_text(f"# bad: [{m[-1]}] end\n# good: [{m[0]}] start\n"
                   f"git bisect start 'main' 'v0'\n# good: [{mid}] mid\n"
                   f"git bisect good {mid}\n")
    person = Person(hist, {1: ["back"]})
    r = drive(["start", "--repo", str(hist.path), "--manual", "--from-log", str(log),
               "--json"], person)
    assert r.returncode == 0, r.stderr
    assert f"took back good for {mid[:12]}" in r.stderr  # a mark of the log is an answer
    assert person.asked[1] == mid[:12]
    assert not {m[0][:12], m[-1][:12]} & set(person.asked)  # the log's endpoints: not asked
    d = json.loads(r.stdout)
    assert d["culprit"]["sha"] == hist.culprit
    assert [p["sha"] for p in d["probes"][:2]] == [m[-1], m[0]]
    assert "marked bad in the git bisect log git.log (line 3)" in d["probes"][0]["reason"]
