"""``bisect start --manual``: a person answers for each probe (here a script reading the
prompts): the environment and tree are ready, the shell line opens there, the answers are
stored as a manual oracle's verdicts, and ``quit`` then ``resume`` ask only what is left."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from bisector.app.demo.torchlet import SyntheticHistory, generate
from tests.support import BISECT, ROOT, run_cli

ASKED = re.compile(r"judge ([0-9a-f]{12})")


def answer(hist: SyntheticHistory, args: list[str], stop_after: int | None = None,
           shell_first: bool = False, env: dict[str, str] | None = None
           ) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run ``bisect ARGS``, answering each question truthfully (bad at and after the planted
    commit) until ``stop_after`` answers, then ``quit``."""
    p = subprocess.Popen([*BISECT, *args], cwd=ROOT, env=env or os.environ.copy(), text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    assert p.stdin and p.stderr and p.stdout
    asked: list[str] = []
    err: list[str] = []
    culprit_at = hist.main.index(hist.culprit)
    for line in p.stderr:
        err.append(line)
        m = ASKED.search(line)
        if not m:
            continue
        short = m.group(1)
        if stop_after is not None and len(asked) == stop_after:
            p.stdin.write("quit\n")
            p.stdin.flush()
            continue
        asked.append(short)
        if shell_first and len(asked) == 1:
            p.stdin.write("shell\n")
        pos = next(i for i, sha in enumerate(hist.main) if sha.startswith(short))
        p.stdin.write("bad\n" if pos >= culprit_at else "good\n")
        p.stdin.flush()
    out = p.stdout.read()
    p.wait(timeout=60)
    return subprocess.CompletedProcess(args, p.returncode, out, "".join(err)), asked


def test_a_person_finds_the_culprit_and_resume_asks_only_what_is_left(
        home: Path, tmp_path: Path) -> None:
    hist = generate(tmp_path / "t", commits=24, culprit=13, broken=(), seed=8123,
                    release_at=None, side_branch_at=None)
    # The shell the prompt offers (bash): here the person's ~/.bashrc tries the probed
    # torchlet in the tree before the first prompt, then leaves (stdin is the answers' pipe).
    seen = tmp_path / "shell.txt"
    user = tmp_path / "user-home"
    user.mkdir()
    # (From /, as in the tree `import torchlet` would find the unbuilt source folder first.)
    (user / ".bashrc").write_text(
        f"PROMPT_COMMAND='test -f setup.py && pwd >> {seen}; (cd / && python -c "
        f"\"import torchlet; print(torchlet.__file__)\") >> {seen}; exit'\n")
    env = {**os.environ, "HOME": str(user)}
    args = ["start", "--repo", str(hist.path), "--good", hist.main[0], "--bad", hist.main[-1],
            "--manual", "--json"]
    r, first = answer(hist, args, stop_after=3, shell_first=True, env=env)
    assert r.returncode == 130, r.stderr  # quit: interrupted, every answer kept
    assert len(first) == 3 and "bisect resume" in r.stderr
    cwd, module = seen.read_text().split()
    assert "/tmp/tree-" in cwd  # a private copy of the commit's tree (it had setup.py) ...
    assert not Path(cwd).exists()  # ... removed after the answer
    assert "/envs/" in module  # torchlet from the probed environment, not the tree
    bid = json.loads(run_cli("list", "--json", check=True).stdout)[0]["id"]
    r, rest = answer(hist, ["resume", str(bid), "--json"])
    assert r.returncode == 0, r.stderr
    assert not set(first) & set(rest)  # nobody is asked twice
    d = json.loads(r.stdout)
    assert d["culprit"]["sha"] == hist.culprit and "confirmation" not in d["result"]
    assert "--manual" in d["reproduce"]
    assert all("judged by hand" in p["reason"] for p in d["probes"] if not p.get("reused"))


def test_manual_with_an_oracle_or_several_probes_is_refused(home: Path, tmp_path: Path) -> None:
    hist = generate(tmp_path / "t", commits=8, culprit=5, broken=(), seed=8124,
                    release_at=None, side_branch_at=None)
    base = ["start", "--repo", str(hist.path), "--good", hist.main[0], "--bad", hist.main[-1],
            "--manual"]
    r = run_cli(*base, "--oracle", "torchlet_norm")
    assert r.returncode == 2 and "--manual and --oracle" in r.stderr
    r = run_cli(*base, "--jobs", "2")
    assert r.returncode == 2 and "one probe at a time" in r.stderr
    assert not (home / "data" / "bisector.db").exists()


@pytest.mark.adversarial
def test_an_endpoint_judged_the_wrong_way_says_its_reason_once(home: Path,
                                                               tmp_path: Path) -> None:
    """Issue 32, item 8: an endpoint error in manual mode printed its reason twice ("judged by
    hand: it shows the bug; judged by hand: it shows the bug")."""
    hist = generate(tmp_path / "t", commits=8, culprit=5, broken=(), seed=11,
                    release_at=None, side_branch_at=None)
    p = subprocess.run([*BISECT, "start", "--repo", str(hist.path), "--good", hist.main[0],
                        "--bad", hist.main[-1], "--manual"], cwd=ROOT, input="bad\nbad\n",
                       capture_output=True, text=True, timeout=300)
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 7 and len(errors) == 1, p.stderr
    assert errors[0].count("judged by hand: it shows the bug") == 1, errors[0]
