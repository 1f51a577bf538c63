"""git bisect's habits (issue 36, item 1): ``--path``, ``--skip``, ``--term-old/--term-new``
and dates for a project without nightlies, on real repositories made here."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import git
import pytest

from bisector.app.demo.small_project import NAME, generate_small
from bisector.project import history
from tests.support import invoke, one_line_error, run_cli

pytestmark = pytest.mark.integration

F_IS_ONE = f"import {NAME}, sys; sys.exit(0 if {NAME}.f() == 1 else 1)"


def _start(path: Path, good: str, bad: str, *args: str) -> dict[str, object]:
    r = run_cli("start", "--repo", str(path), "--good", good, "--bad", bad, "--no-confirm",
                "--json", *args, "--", "python", "-c", F_IS_ONE)
    assert r.returncode in (0, 11), r.stderr
    out: dict[str, object] = json.loads(r.stdout)
    return out


def test_path_limits_the_candidates_and_the_report_says_so(home: Path,
                                                             tmp_path: Path) -> None:
    # Commit i touches src/<name>/mod{i % 5}.py; the culprit (15) also core.py.
    hist = generate_small(tmp_path / "proj", commits=24, culprit=15)
    m = hist.main
    d = _start(hist.path, m[0], m[-1], "--path", f"src/{NAME}/mod0.py")
    assert d["culprit"]["sha"] == hist.culprit  # type: ignore[index]
    probed = {p["sha"] for p in d["probes"]}  # type: ignore[attr-defined,union-attr]
    assert probed <= {m[i] for i in (0, 5, 10, 15, 20, 23)}, probed
    assert any("--path src/" in n and "4 of the 22 commits" in n
               for n in d["notes"]), d["notes"]  # type: ignore[union-attr]
    assert "--path src/" in str(d["reproduce"])
    show = invoke("show", str(d["id"]))
    assert "4 of the 22 commits between the endpoints touch it" in show.stdout


def test_skip_is_never_probed_and_a_culprit_among_skips_is_a_window(home: Path,
                                                                    tmp_path: Path) -> None:
    hist = generate_small(tmp_path / "proj", commits=24, culprit=15)
    m = hist.main
    d = _start(hist.path, m[0], m[-1], "--skip", f"{m[13]}..{m[16]}", "--skip", m[3])
    probed = {p["sha"] for p in d["probes"] if p["verdict"] != "skip"}  # type: ignore[attr-defined,union-attr]
    assert not probed & {m[3], m[14], m[15], m[16]}
    # git's answer too: the first bad commit could be any of the skipped ones or the next.
    assert d["state"] == "ambiguous" and hist.culprit in d["result"]["suspects"]  # type: ignore[index,operator]
    assert any("skipped up front" in n for n in d["notes"])  # type: ignore[union-attr]
    # An endpoint cannot be skipped; a ref that is not one says so; the store is untouched.
    db = home / "data" / "bisector.db"
    before = db.stat().st_mtime_ns
    one_line_error(invoke("start", "--repo", str(hist.path), "--good", m[0], "--bad", m[-1],
                          "--skip", m[-1], "--", "python", "-c", F_IS_ONE),
                   "names the bad endpoint", 2)
    one_line_error(invoke("start", "--repo", str(hist.path), "--good", m[0], "--bad", m[-1],
                          "--skip", "nope..HEAD", "--", "python", "-c", F_IS_ONE),
                   "unknown skip ref 'nope'", 3)
    assert db.stat().st_mtime_ns == before


def test_terms_are_the_user_s_words(home: Path, tmp_path: Path) -> None:
    hist = generate_small(tmp_path / "proj", commits=12, culprit=7)
    m = hist.main
    d = _start(hist.path, m[0], m[-1], "--term-old", "fast", "--term-new", "slow")
    assert d["culprit"]["sha"] == hist.culprit  # type: ignore[index]
    log = invoke("log", str(d["id"])).stdout
    assert "'--term-old=fast' '--term-new=slow'" in log, log
    assert f"git bisect slow {hist.culprit}" in log
    assert "--term-old fast --term-new slow" in str(d["reproduce"])
    for args, needle in ((("--term-old", "fast"), "give --term-old and --term-new together"),
                         (("--term-old", "x", "--term-new", "skip"), "--term-new 'skip'"),
                         (("--term-old", "bad", "--term-new", "slow"), "--term-old 'bad'"),
                         (("--term-old", "a b", "--term-new", "c"), "give one word")):
        one_line_error(invoke("start", "--repo", str(hist.path), "--good", m[0], "--bad",
                              m[-1], *args, "--", "true"), needle, 2)


def test_a_date_is_the_main_line_at_the_end_of_that_day(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    shas = []
    for i, day in enumerate(("2025-01-09", "2025-01-10", "2025-01-10", "2025-01-12")):
        (repo / "f").write_text(str(i))
        env = {**os.environ, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b",
               "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@b",
               "GIT_COMMITTER_DATE": f"{day}T1{i}:00:00Z", "GIT_AUTHOR_DATE": f"{day}T10:00Z"}
        subprocess.run(["git", "-C", str(repo), "commit", "-qam" if i else "-qm", str(i)]
                       if i else ["sh", "-c", f"git -C {repo} add f && git -C {repo} commit "
                                  f"-qm 0"], check=True, env=env)
        shas.append(subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True,
                                   capture_output=True, text=True).stdout.strip())
    r = git.Repo(repo)
    assert history.resolve(r, "2025-01-10", "good") == shas[2]
    assert history.resolve(r, "2025-01-11", "bad") == shas[2]
    span = history.resolve_range(r, "2025-01-09", "2025-01-12")
    assert span.candidates == tuple(shas)
    assert any("last first-parent commit of HEAD on 2025-01-09" in n for n in span.notes)
    with pytest.raises(Exception, match="no commit on or before 2024-12-31"):
        history.resolve(r, "2024-12-31", "good")
