"""What the repository says about the candidates for the prior: changed paths, subjects, and the
functions the changes to the failure's files sit in (:mod:`bisector.core.prior` weighs them).

Read from git in a few calls, whatever the range's length: one ``git diff-tree --stdin`` for
every candidate's paths against the previous candidate (a merge on a first-parent list changes
what its whole branch changed, as the search sees it), one ``git log --no-walk --stdin`` for
the subjects, and, only for the candidates that touched a file the failure names, one patch
with no context restricted to those files for the functions (``@@ ... @@ def f`` headers and
``def``/``class`` lines). Paths and subjects of a range are cached in the cache directory by
the candidate list's hash, so a resumed bisection reads them once.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import keyword
import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

import git

from bisector.base.paths import cache_dir
from bisector.core.prior import Change, Evidence, same_file, shared_tail

# Candidates read for functions at most (each is one patch, restricted to the evidence's files).
FUNCTIONS_MAX = 500
# A definition opens the code of a patch line (``+    def f(``) or a hunk header's context
# (``@@ -1,2 +1,3 @@ class C:``); prose that says "a class for" or "def of" is not one.
_DEF = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+(\w+)")


def defined_in(line: str) -> str | None:
    """The function or class a patch line (``+``/``-``) or hunk header (``@@``) defines or
    sits in, if it names one."""
    code = line.split("@@", 2)[2] if line.startswith("@@") else line[1:]
    m = _DEF.match(code)
    return m.group(1) if m and not keyword.iskeyword(m.group(1)) else None


def _git(repo: git.Repo, args: list[str], stdin: str) -> str:
    return subprocess.run(["git", "-C", str(repo.git_dir), *args], input=stdin,
                          capture_output=True, text=True, check=True,
                          errors="replace").stdout


def _cache_file(candidates: Sequence[str]) -> Path:
    digest = hashlib.sha256("\n".join(candidates).encode()).hexdigest()[:32]
    return cache_dir() / "prior" / f"{digest}.json"


def paths_and_subjects(repo: git.Repo,
                       candidates: Sequence[str]) -> list[tuple[tuple[str, ...], str]]:
    """Per candidate (the good endpoint's entry empty): what it changed and its subject."""
    cached = _cache_file(candidates)
    try:
        data = json.loads(cached.read_text())
        if len(data) == len(candidates):
            return [(tuple(p), str(s)) for p, s in data]
    except (OSError, ValueError, TypeError):
        pass
    out = _git(repo, ["diff-tree", "--stdin", "-r", "--no-renames", "--name-only", "--always"],
               "".join(f"{b} {a}\n" for a, b in itertools.pairwise(candidates)))
    changed: dict[str, list[str]] = {}
    current: list[str] | None = None
    wanted = set(candidates[1:])
    for line in out.splitlines():
        if line in wanted and line not in changed:  # diff-tree prints the commit, then paths
            current = changed.setdefault(line, [])
        elif line and current is not None:
            current.append(line)
    subjects: dict[str, str] = {}
    for line in _git(repo, ["log", "--no-walk=unsorted", "--stdin", "--format=%H%x09%s"],
                     "\n".join(candidates) + "\n").splitlines():
        sha, _, subject = line.partition("\t")
        subjects[sha] = subject
    result = [((), subjects.get(candidates[0], ""))] + [
        (tuple(changed.get(sha, ())), subjects.get(sha, "")) for sha in candidates[1:]]
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps([[list(p), s] for p, s in result]))
        tmp.replace(cached)
    except OSError:
        pass  # a cache that cannot be written only costs the next reader a git call
    return result


def resolve(repo: git.Repo, sha: str, evidence: Evidence) -> Evidence:
    """The evidence with each file named as the repository names it at ``sha`` (a traceback's
    ``/venv/.../site-packages/torch/ir.py`` is ``torch/ir.py``, and in a src layout
    ``.../site-packages/black/parsing.py`` is ``src/black/parsing.py``: the one file sharing
    the most trailing components, two at least); files the repository does not have (the
    standard library, other packages, the oracle itself) are left out."""
    tree = repo.git.ls_tree("-r", "--name-only", sha).splitlines()
    by_name: dict[str, list[str]] = {}
    for path in tree:
        by_name.setdefault(path.rsplit("/", 1)[-1], []).append(path)
    files: list[str] = []
    functions: dict[str, tuple[str, ...]] = {}
    raised: dict[str, tuple[str, ...]] = {}
    for f in evidence.files:
        named = by_name.get(f.rsplit("/", 1)[-1], [])
        hits = [p for p in named if same_file(p, f)]
        if not hits:  # a src layout: site-packages/pkg/x.py is src/pkg/x.py
            tails = {p: shared_tail(p, f) for p in named}
            best = max(tails.values(), default=0)
            hits = [p for p, k in tails.items() if k == best and k >= 2]
        if len(hits) != 1:
            continue  # not in the repository, or too short a path to say which file
        if hits[0] in files:
            files.remove(hits[0])
        files.append(hits[0])
        functions[hits[0]] = tuple(dict.fromkeys(
            (*functions.get(hits[0], ()), *evidence.functions.get(f, ()))))
        if evidence.raised.get(f):
            raised[hits[0]] = tuple(dict.fromkeys(
                (*raised.get(hits[0], ()), *evidence.raised[f])))
    return Evidence(tuple(files), functions, evidence.source, raised)


def changes(repo: git.Repo, candidates: Sequence[str], evidence: Evidence) -> list[Change]:
    """One :class:`Change` per candidate, with the functions of its hunks in the evidence's
    files for the candidates that touched one (at most :data:`FUNCTIONS_MAX` of them)."""
    rows = paths_and_subjects(repo, candidates)
    touching = [i for i, (paths, _) in enumerate(rows) if i and any(
        same_file(p, f) for p in paths for f in evidence.files)][:FUNCTIONS_MAX]
    funcs: dict[str, set[str]] = {}
    if touching and evidence.functions:
        patch = _git(repo, ["diff-tree", "--stdin", "-r", "-p", "-U0", "--no-renames",
                            "--always", "--", *evidence.files],
                     "".join(f"{candidates[i]} {candidates[i - 1]}\n" for i in touching))
        wanted = {candidates[i] for i in touching}
        current: set[str] | None = None
        for line in patch.splitlines():
            if line in wanted:
                current = funcs.setdefault(line, set())
            elif current is not None and (line.startswith(("@@", "+", "-"))
                                          and not line.startswith(("+++", "---"))):
                name = defined_in(line)
                if name:
                    current.add(name)
    return [Change(paths, tuple(sorted(funcs.get(sha, ()))), subject)
            for sha, (paths, subject) in zip(candidates, rows, strict=True)]
