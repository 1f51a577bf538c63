"""Getting an installable torch for a commit, cheapest way first.

The chain (``sources.py``, ``building.py``), in order: nothing, for a commit with nothing to
build (no Python packaging: the oracle runs in its tree); the installed torch when the commit
is its base; the commit's package made before, in this box's cache, then in the team's object
store; its own prebuilt wheel in an index (release or nightly); the stored fact that it does
not build; a Python-only overlay on the nearest base whose difference is overlay-safe; a
source build. The ranking (``ranking.py``)
says which of these a commit will take without taking it, for the search (``cost``) and
``bisect plan`` (``kind``), so what the plan projects is what the run does.

Several probes may obtain at once (one thread each); what they share is guarded in the
ranking and the sources.
"""

from __future__ import annotations

from collections.abc import Callable

import git

from bisector.artifacts import building
from bisector.artifacts import sources as chain
from bisector.artifacts.index import IndexClient
from bisector.artifacts.obtained import NO_SOURCES, Answer, Recipe, Sources
from bisector.artifacts.ranking import Ranking
from bisector.artifacts.remote import Remote
from bisector.artifacts.shared import Shared, Source
from bisector.base.events import Events, QuietEvents
from bisector.store.artifacts import ArtifactStore

__all__ = ["Provider"]


class Provider:
    def __init__(
        self,
        artifacts: ArtifactStore,
        repo: Callable[[], git.Repo],
        candidates: list[str],
        recipe: Recipe,
        sources: Sources = NO_SOURCES,
        events: Events | None = None,
        client_for: Callable[[str], IndexClient] = IndexClient,
        remote: Remote | None = None,
    ) -> None:
        self.candidates = candidates
        self.ranking = Ranking(artifacts, repo, candidates, recipe, sources,
                               remote.bucket.url if remote else None)
        shared = Shared(artifacts, repo, self.ranking, events or QuietEvents(), remote=remote)
        installed, index = chain.Installed(shared), chain.Index(shared, client_for)
        self.tree = chain.Tree(shared)
        self.local, self.bucket = chain.LocalCache(shared), chain.ObjectStore(shared)
        self.broken = chain.Broken(shared)
        self.overlay = chain.Overlay(shared, installed, index)
        self.build = building.Build(shared)
        # The chain, cheapest first: adding a way is one class and one line here.
        self.chain: tuple[Source, ...] = (self.tree, installed, self.local, self.bucket,
                                          index, self.broken, self.overlay, self.build)

    # The ranking, as the search and the plan ask for it.
    def kind(self, pos: int) -> str:
        return self.ranking.kind(pos)

    def cost(self, pos: int) -> int:
        return self.ranking.cost(pos)

    def safe_between(self, a: int, b: int) -> bool:
        return self.ranking.safe_between(a, b)

    def obtain(self, pos: int) -> Answer:
        sha = self.candidates[pos]
        for source in self.chain:
            got = source.obtain(pos, sha)
            if got is not None:
                return got
        raise AssertionError("the build source always answers")  # pragma: no cover

    def obtain_commit(self, sha: str, near: int) -> Answer:
        """A commit outside the candidates (the culprit's revert on the bad endpoint): its
        tree when it has nothing to build, else from the cache, as an overlay on the wheel
        that served ``near`` when only Python files differ, else built from source."""
        for made in (self.tree, self.local, self.bucket, self.broken):
            got = made.obtain(-1, sha)  # -1: no candidate, so no prebuilt wheel of its own
            if got is not None:
                return got
        r = self.ranking
        base = r.overlay_base(near)
        if base is None and (r.prebuilt(near) is not None or near == r.installed_pos):
            base = near
        if base is not None and (over := self.overlay.onto(base, sha)) is not None:
            return over
        return self.build.obtain(near, sha)
