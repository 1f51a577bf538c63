"""git bisect's habits for narrowing a range: ``--path`` (only commits touching these paths
are candidates, as ``git bisect start ... -- PATHS``) and ``--skip REF|A..B`` (commits known
untestable before the search starts, as ``git bisect skip``).

A path-limited walk is git's own: ``rev-list`` with the same walk (first-parent, or the
ancestry path) and the pathspec, so a merge counts as touching a path when it changes it
against its first parent, exactly as ``git log --first-parent -- PATH`` shows. The endpoints
stay whatever they touch: they are what the user said is good and bad.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import git

from bisector.base.errors import RepoError, UsageError
from bisector.project.history import Range, resolve

MAX_PATHS = 100  # a pathspec list longer than this is a mistake, not a narrowing


def check_paths(paths: Sequence[str]) -> None:
    """A one-line refusal of a path git would read as an option or that names nothing."""
    if len(paths) > MAX_PATHS:
        raise UsageError(f"{len(paths)} --path options: give at most {MAX_PATHS} (a directory "
                         f"covers what is under it)")
    for p in paths:
        if not p.strip() or p.startswith("-") or "\0" in p or "\n" in p:
            raise UsageError(f"--path {p!r} is not a path: give a file or directory of the "
                             f"repository, like torch/_inductor/")


def limit_to_paths(repo: git.Repo, span: Range, paths: Sequence[str],
                   first_parent: bool) -> Range:
    """``span`` with only the commits between its endpoints that touch ``paths`` (the
    endpoints kept), and a note saying how many of how many."""
    if not paths:
        return span
    check_paths(paths)
    walk = ["--first-parent"] if first_parent else ["--ancestry-path"]
    try:
        out = str(repo.git.rev_list(*walk, span.candidates[-1], f"^{span.candidates[0]}",
                                    "--", *paths))
    except git.GitCommandError as e:
        raise RepoError(f"--path {' '.join(paths)}: git cannot walk with it "
                        f"({str(e.stderr).strip().splitlines()[-1:] or e}): give paths "
                        f"of the repository") from None
    touching = set(out.split())
    inner = span.candidates[1:-1]
    kept = tuple(c for c in inner if c in touching)
    # The count the range's other lines give (show's "N commits", plan's "N candidate
    # commits"): the kept commits and the bad endpoint, which is a candidate whatever it
    # touches. Saying only "4 of the 22" beside "5 commits" read as two answers.
    note = (f"--path {', '.join(paths)}: {len(kept)} of the {len(inner)} commits between "
            f"the endpoints touch it; they and the bad endpoint, {len(kept) + 1} commits, are "
            f"the candidates (as git bisect start -- PATHS)")
    return replace(span, candidates=(span.candidates[0], *kept, span.candidates[-1]),
                   notes=(*span.notes, note))


def skipped(repo: git.Repo, skips: Sequence[str], candidates: Sequence[str]) -> list[int]:
    """The positions among ``candidates`` that ``--skip REF`` or ``--skip A..B`` name (git's
    range: reachable from B, not from A), endpoints refused."""
    pos = {sha: i for i, sha in enumerate(candidates)}
    out: set[int] = set()
    for given in skips:
        if ".." in given and "..." not in given:
            a, b = given.split("..", 1)
            lo, hi = resolve(repo, a, "skip"), resolve(repo, b or "HEAD", "skip")
            named = str(repo.git.rev_list(hi, f"^{lo}", "--")).split()
        else:
            named = [resolve(repo, given, "skip")]
        for sha in named:
            p = pos.get(sha)
            if p in (0, len(candidates) - 1):
                end = "good" if p == 0 else "bad"
                raise UsageError(f"--skip {given} names the {end} endpoint {sha[:12]}: the "
                                 f"endpoints are judged, not skipped; give a range between them")
            if p is not None:
                out.add(p)
    return sorted(out)
