"""Deriving a nightly's direct URL, and the HEAD requests that check it (no network: the
index client is a fake that answers HEAD from a table; the history is a real git repository).
"""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import git
import pytest
from packaging.version import Version

from bisector.artifacts import nightly_urls
from bisector.artifacts.index import IndexClient, IndexFile
from bisector.artifacts.nightly_urls import (
    MAX_TAGS,
    Wanted,
    base_version,
    file_url,
    probe,
    spread,
    summary,
    tag_suffixes,
)
from bisector.project.profiles import PYTORCH, TORCHLET

INDEX = "http://index.invalid/whl/nightly/cu128/"
LINUX = ["manylinux_2_35_x86_64", "manylinux_2_28_x86_64", "manylinux_2_17_x86_64",
         "manylinux2014_x86_64", "manylinux_2_5_x86_64", "manylinux1_x86_64", "linux_x86_64"]


def test_spread_asks_the_middle_first_so_a_spent_budget_still_covers_the_range() -> None:
    assert spread(list(range(7))) == [3, 1, 5, 0, 2, 4, 6]
    assert sorted(spread(list(range(10)))) == list(range(10))
    assert spread([]) == []


def test_base_version_comes_from_the_commits_own_file(tmp_path: Path) -> None:
    """PyTorch: version.txt up to its pre-release part; torchlet: its version.py."""
    repo = tmp_path / "r"
    (repo / "torchlet").mkdir(parents=True)
    (repo / "version.txt").write_text("2.9.0a0\n")
    (repo / "torchlet" / "version.py").write_text('__version__ = "0.1.0a0"\n'
                                                 'git_version = "Unknown"\n')
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           "PATH": "/usr/bin:/bin"}
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "one"]):
        subprocess.run(["git", "-C", str(repo), *cmd], check=True, env=env)
    r = git.Repo(repo)
    sha = r.head.commit.hexsha
    assert base_version(r, sha, PYTORCH) == Version("2.9.0")
    assert base_version(r, sha, TORCHLET) == Version("0.1.0")
    (repo / "version.txt").unlink()
    subprocess.run(["git", "-C", str(repo), "commit", "-qam", "two"], check=True, env=env)
    assert base_version(r, r.head.commit.hexsha, PYTORCH) is None  # no name to derive


def test_tags_of_the_listing_first_then_the_profiles_platforms(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nightly_urls, "platform_tags", lambda: iter(LINUX))
    bare = tag_suffixes([], "cp312", PYTORCH)
    assert bare == ["cp312-cp312-manylinux_2_28_x86_64", "cp312-cp312-manylinux2014_x86_64",
                    "cp312-cp312-manylinux_2_17_x86_64", "cp312-cp312-manylinux1_x86_64"]
    listed = [IndexFile("torch-2.10.0.dev20251201+cu128-cp312-cp312-manylinux_2_28_x86_64.whl",
                        INDEX + "x.whl"),
              IndexFile("torch-2.10.0.dev20251130+cu128-cp312-cp312-"
                        "manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl", INDEX + "y.whl")]
    got = tag_suffixes(listed, "cp312", PYTORCH)
    assert got[:2] == ["cp312-cp312-manylinux_2_28_x86_64",
                       "cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64"]
    assert len(got) == MAX_TAGS and got[2] == "cp312-cp312-manylinux2014_x86_64"
    # A profile with no preference asks in the interpreter's own order, most specific first.
    assert tag_suffixes([], "cp311", TORCHLET)[0] == "cp311-cp311-manylinux_2_35_x86_64"


def test_file_url_next_to_the_listed_files_else_the_profiles_pattern() -> None:
    name = "torch-2.9.0.dev20250110+cu128-cp312-cp312-manylinux_2_28_x86_64.whl"
    elsewhere = [IndexFile("torch-2.10.0.dev20251201+cu128-cp312-cp312-linux_x86_64.whl",
                           "http://files.invalid/whl/nightly/cu128/torch-2.10.0.dev20251201"
                           "%2Bcu128-cp312-cp312-linux_x86_64.whl")]
    assert file_url(name, index_url=INDEX, listed=elsewhere, profile=PYTORCH,
                    project="torch") == ("http://files.invalid/whl/nightly/cu128/torch-2.9.0."
                                         "dev20250110%2Bcu128-cp312-cp312-manylinux_2_28_x86_64"
                                         ".whl")
    assert file_url(name, index_url=INDEX, listed=[], profile=PYTORCH, project="torch") == (
        INDEX + "torch-2.9.0.dev20250110%2Bcu128-cp312-cp312-manylinux_2_28_x86_64.whl")
    assert file_url("t.whl", index_url="http://i.invalid/n", listed=[], profile=TORCHLET,
                    project="torchlet") == "http://i.invalid/n/files/t.whl"


class TableClient(IndexClient):
    """Answers HEAD from a table (url -> why, "" when present) and counts what was asked."""

    def __init__(self, table: dict[str, str]) -> None:
        super().__init__(INDEX)
        self.table = table
        self.asked: list[str] = []
        self.lock = threading.Lock()

    def exists(self, url: str) -> tuple[bool, str]:
        with self.lock:
            self.asked.append(url)
        why = self.table.get(url, "HTTP 404")
        return why == "", why


def _wanted(day: int, *urls: str) -> Wanted:
    files = tuple(IndexFile(u.rsplit("/", 1)[-1], u) for u in urls)
    return Wanted(f"2025-01-{day:02d}", f"{day:040x}", day, Version(f"2.9.0.dev202501{day:02d}"),
                  files)


def test_head_stops_at_the_first_name_there_and_remembers_absence(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nightly_urls, "_ABSENT", {})
    a, b, c, d = (f"{INDEX}{x}.whl" for x in "abcd")
    client = TableClient({b: "", c: "unreachable: connection refused"})
    want = [_wanted(1, a, b), _wanted(2, c, d)]
    hits, sent = probe(client, want, lambda f, w: f.filename)
    assert [h.found for h in hits] == ["b.whl", None] and sent == 4
    assert hits[1].checked and "unreachable" in hits[1].why and "HTTP 404" in hits[1].why
    # Asked again in this process: the 404s are remembered, the network error is not.
    client.asked.clear()
    hits, sent = probe(client, want, lambda f, w: f.filename)
    assert sorted(client.asked) == [b, c] and sent == 2
    notes = summary(hits, sent)
    assert "2 nightlies of the range are past the index listing: 1 found" in notes[0]


def test_head_budget_leaves_the_rest_unchecked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nightly_urls, "_ABSENT", {})
    want = [_wanted(i, f"{INDEX}{i}-x.whl", f"{INDEX}{i}-y.whl") for i in range(1, 6)]
    client = TableClient({})
    hits, sent = probe(client, want, lambda f, w: f.filename, budget=5)
    assert sent == 5 == len(client.asked)
    assert sum(not h.checked for h in hits) >= 2
    assert any("were not checked" in n for n in summary(hits, sent))
