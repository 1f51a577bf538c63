"""Into the merge: when the first-parent answer is a merge, name the commit inside it.

A first-parent walk of PyTorch's main answers a landed change; a merge that landed a side
branch of several commits is such an answer, and the commit inside it that did it is what the
user wants next. The search goes on, in the same bisection, among the commits the merge brings
(:func:`bisector.project.merges.merge_brings`): its first parent (good, as the walk found),
the commits reachable from its other parent(s) only, oldest first in topological order, then
the merge itself (bad). Both bounds are verdicts the walk already has, so they are reused by
their key and cost nothing; a commit with the merge's own tree gets the merge's verdict
without a run. The answer stays the merge (the first-parent culprit, confirmed as before); the
commit inside is named beside it in ``result["into_merge"]``.

Where the second search is stored: its candidates go into the bisection's candidate table at
the positions after the walk's (``n_candidates`` onwards), and its probes at those positions,
so the probe table, ``in_flight``, the queue's tasks and ``resume`` need nothing new: resume
repeats the walk's answer from its stored verdicts, finds the merge's candidates stored, and
goes on where the second search stopped. Only the plain (deterministic) search goes in: a
flaky or performance oracle's answer is a posterior over the walk, and a second posterior
inside a merge is not what its strategies are built for (docs/commands.md says so).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from bisector.artifacts.obtained import Obtained, Unobtainable
from bisector.base.kinds import State, Way
from bisector.core.search import Verdict
from bisector.project import history, merges
from bisector.run.pipeline import Source
from bisector.run.strategies.base import Conclusion, View


@dataclass(frozen=True)
class Inside:
    """The search among the commits a merge brings, and the walk's answer it stands beside."""

    walk: Conclusion  # the first-parent answer: the merge, at ``walk.culprit``
    offset: int  # stored position of ``candidates[0]``
    candidates: tuple[str, ...]  # the merge's first parent, the commits it brings, the merge
    same_tree: frozenset[int]  # own indexes whose tree is the merge's
    repo_path: str  # the clone: the commit named inside is described from it

    @property
    def merge(self) -> str:
        return self.candidates[-1]

    def view(self, walk: View) -> View:
        """The walk's view narrowed to the merge's candidates (no prior: it was read for the
        walk's range; no cost rank: every commit inside is obtained like the merge)."""
        return replace(walk, candidates=self.candidates, offset=self.offset, cost=None,
                       prior=None, implied=dict.fromkeys(self.same_tree, Verdict.BAD))

    def answer(self, found: Conclusion, terms: tuple[str, str]) -> Conclusion:
        """The walk's answer with what the search inside found beside it."""
        return replace(self.walk, result={**self.walk.result,
                                          "into_merge": self.describe(found, terms)})

    def describe(self, found: Conclusion, terms: tuple[str, str]) -> dict[str, Any]:
        """``result["into_merge"]``: ``kind`` culprit (``sha``, ``position``), merge (the merge
        itself: its second parent is good), window (``suspects``) or undecided, with ``said``,
        the one line every report prints."""
        old, new = terms
        cands, merge = self.candidates, self.merge
        out: dict[str, Any] = {"merge": merge, "first_parent": cands[0],
                               "commits": len(cands) - 2,
                               "same_tree": [cands[i] for i in sorted(self.same_tree)]}
        kind = found.result.get("kind")
        at = found.culprit
        if kind == "culprit" and at is not None and at == len(cands) - 1:
            side = cands[-2]
            return {**out, "kind": "merge", "said": (
                f"the merge itself: its second parent {side[:12]} is {old}, so no commit it "
                f"brings is {new} alone (a conflict resolution, or the sides break only "
                f"together)")}
        if kind == "culprit" and at is not None:
            sha = cands[at]
            how = ", the merge's own tree" if at in self.same_tree else ""
            return {**out, "kind": "culprit", "sha": sha, "position": self.offset + at,
                    **self.about(sha), "said": f"inside the merge: {sha[:12]}{how}"}
        if kind == "window":
            listed = found.result.get("suspects")
            suspects = [str(x) for x in listed] if isinstance(listed, list) else []
            return {**out, "kind": "window", "suspects": suspects, "said": (
                f"inside the merge skipped commits hide the first {new} commit: it is one "
                f"of {len(suspects)} suspects")}
        why = {"not_monotonic": f"a commit it brings is {new} and a later one {old}: its "
                                f"commits are not ordered as the change landed",
               "bad_is_good": f"the merge was judged {old} there and {new} by the walk",
               "good_is_bad": f"its first parent was judged {new} there and {old} by the walk",
               }.get(str(found.result.get("problem")), "its bounds could not be tested")
        return {**out, "kind": "undecided", "said": (
            f"inside the merge the search could not decide ({why}), so no commit inside is "
            f"named; the answer is the merge")}


    def about(self, sha: str) -> dict[str, Any]:
        """Subject, author, date and PR of the commit named, kept with the answer (the
        reports read them again from the clone; these stand when it is gone)."""
        info = history.commit_info(history.open_repo(self.repo_path), sha)
        return {"subject": info.subject, "author": info.author,
                "author_email": info.author_email, "date": info.date, "pr": info.pr_number}


def go_inside(walk: Conclusion, candidates: list[str], walked: int, repo_path: str,
              store_extra: Callable[[Sequence[str]], None]) -> Inside | None:
    """The search inside the merge the walk answered, or None when the answer is no merge.

    ``candidates`` holds the walk's ``walked`` commits, then the merge's candidates when an
    earlier run of this bisection stored them; otherwise they are read from git, stored
    (``store_extra``, fenced by the lease) and appended to ``candidates``."""
    if walk.culprit is None or walk.state is not State.DONE or walk.stop:
        return None
    merge = candidates[walk.culprit]
    stored = tuple(candidates[walked:])
    repo = history.open_repo(repo_path)
    if stored and stored[-1] == merge:
        inner = stored
    else:
        inner = merges.merge_brings(repo, merge)
        if len(inner) < 3:  # no merge (or one that brings nothing)
            return None
        store_extra(inner)
        del candidates[walked:]
        candidates.extend(inner)
    same = merges.same_tree(repo, inner[1:-1], merge)
    return Inside(walk, walked, inner, frozenset(i + 1 for i in same), repo_path)


class IntoMerge:
    """The runner's side of the search inside a merge: whether to go in (the walk answered a
    merge and ``--into-merge`` holds), the view the search reads (the walk's, or the merge's
    candidates), the answer with the commit inside beside it, and the way back to the walk
    when a manual answer of the walk is taken back."""

    def __init__(self, walk: View, enabled: bool, candidates: list[str], repo_path: str,
                 store_extra: Callable[[Sequence[str]], None],
                 note: Callable[[str], None]) -> None:
        self.walk, self.enabled, self.candidates = walk, enabled, candidates
        self.repo_path, self.store_extra, self.note = repo_path, store_extra, note
        self.inside: Inside | None = None

    @property
    def view(self) -> View:
        """What the search reads now: the walk, or the merge's candidates once inside."""
        return self.walk if self.inside is None else self.inside.view(self.walk)

    def enter(self, walk: Conclusion) -> bool:
        """The walk answered: go on among the commits its merge brings (True, the search
        inside asked from now on); False when there is no merge or the user said no."""
        if not self.enabled or self.inside is not None:
            return False
        inside = go_inside(walk, self.candidates, self.walk.offset + len(self.walk.candidates),
                           self.repo_path, self.store_extra)
        if inside is None:
            return False
        self.inside = inside
        self.note(f"the first-parent culprit {inside.merge[:12]} is a merge bringing "
                  f"{len(inside.candidates) - 2} commit(s): searching among them "
                  f"(--no-into-merge stops at the merge)")
        return True

    def answer(self, found: Conclusion, terms: tuple[str, str]) -> Conclusion:
        """The bisection's answer: the walk's, with what was found inside beside it."""
        return found if self.inside is None else self.inside.answer(found, terms)

    def taken_back(self, position: int) -> None:
        """A manual answer at ``position`` was taken back: one of the walk's takes the search
        back to the walk (its answer may change, and with it the merge)."""
        if self.inside is not None and position < self.inside.offset:
            self.inside = None


class Beside:
    """The walk's source, with the positions past the walk (the commits inside a merge)
    obtained like the merge: from the cache, as an overlay on the merge's base when only
    overlay-safe files differ, else built (the provider's ``obtain_commit``). Its candidate
    list is read again from the store when a position lies past it (a worker's, made before
    the merge's candidates were stored)."""

    def __init__(self, source: Source, candidates: list[str], walked: int,
                 reread: Callable[[], list[str]]) -> None:
        self.source, self.candidates, self.walked = source, candidates, walked
        self.reread = reread

    def sha(self, pos: int) -> str:
        if pos >= len(self.candidates):
            self.candidates[:] = self.reread()
        return self.candidates[pos]

    def near(self) -> int:
        """The merge's position in the walk (the last candidate inside is the merge)."""
        return self.candidates.index(self.candidates[-1])

    def obtain(self, pos: int) -> Obtained | Unobtainable:
        if pos < self.walked:
            return self.source.obtain(pos)
        sha = self.sha(pos)
        return self.source.obtain_commit(sha, self.near())

    def obtain_unbuilt(self, pos: int) -> Obtained | Unobtainable:
        return self.source.obtain_unbuilt(pos) if pos < self.walked else self.obtain(pos)

    def cost(self, pos: int) -> int:
        return self.source.cost(pos if pos < self.walked else self.near())

    def kind(self, pos: int) -> Way:
        return self.source.kind(pos) if pos < self.walked else Way.OVERLAY

    def obtain_commit(self, sha: str, near: int) -> Obtained | Unobtainable:
        return self.source.obtain_commit(sha, near)

