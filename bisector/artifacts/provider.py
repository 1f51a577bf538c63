"""Getting an installable torch for a commit, cheapest way first.

The chain is :data:`WAYS`, in order (``sources.py``, ``building.py``): nothing, for a commit
with nothing to build (no Python packaging: the oracle runs in its tree); the installed torch
when the commit is its base; the keepers, asked by key (the commit's package made before, in
this box's cache, then in the team's object store); its own prebuilt wheel in an index
(release or nightly); the stored fact that it does not build; a Python-only overlay on the
nearest base whose difference is overlay-safe; a source build. Each way carries its
:class:`~bisector.base.kinds.Way` and ``would(pos)``: what a commit will take, without taking
it, is the first way that would serve it (:meth:`Provider.kind`), for the search (``cost``)
and ``bisect plan``, so what the plan projects is what the run does. The answer a way gives
says the way it took (the probe's ``obtained_as`` fact).

A new way is one class (``way``, ``would``, ``obtain``, built from the run's ``Shared``) and
one line in :data:`WAYS`. A caller that must not build asks :attr:`Provider.unbuilt`, the chain
without the build.

Several probes may obtain at once (one thread each); what they share is guarded in the
ranking and the ways.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import git

from bisector.artifacts import building
from bisector.artifacts import sources as chain
from bisector.artifacts.index import IndexClient
from bisector.artifacts.keepers import Keeper
from bisector.artifacts.obtained import NO_SOURCES, Answer, Recipe, Sources, Unobtainable
from bisector.artifacts.ranking import Ranking
from bisector.artifacts.remote import Remote
from bisector.artifacts.shared import Shared, Source
from bisector.base.events import Events, QuietEvents
from bisector.base.kinds import Way
from bisector.store.artifacts import ArtifactStore

__all__ = ["WAYS", "Provider"]

# The chain, in the order it is asked: adding a way is one class and one line here.
WAYS: list[Callable[[Shared], Source]] = [
    chain.Tree, chain.Installed, chain.Kept, chain.Index, chain.Broken, chain.Overlay,
    building.Build,
]


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
        events = events or QuietEvents()
        keep = Keeper(artifacts, events, remote, sources.installed)
        self.ranking = Ranking(artifacts, repo, candidates, recipe, sources, keep.shared_keys)
        self.shared = Shared(artifacts, repo, self.ranking, events, keep, client_for)
        self.chain: tuple[Source, ...] = tuple(make(self.shared) for make in WAYS)
        # The chain short of a source build: what a caller that must not build asks.
        self.unbuilt = tuple(w for w in self.chain if w.way is not Way.BUILD)

    # The ranking, as the search and the plan ask for it.
    def kind(self, pos: int) -> Way:
        """The way ``pos`` would be had now: the first of the chain that would serve it."""
        return next(w.way for w in self.chain if w.would(pos))

    def cost(self, pos: int) -> int:
        return self.kind(pos).rank

    def safe_between(self, a: int, b: int) -> bool:
        return self.ranking.safe_between(a, b)

    def obtain(self, pos: int, ways: Sequence[Source] | None = None) -> Answer:
        """The torch of candidate ``pos`` from the first of ``ways`` (the whole chain unless
        given) that answers; without a build among them, maybe none."""
        sha = self.candidates[pos]
        for way in self.chain if ways is None else ways:
            got = way.obtain(pos, sha)
            if got is not None:
                return got
        return Unobtainable("not made here: no build slot to spare", permanent=False)

    def obtain_unbuilt(self, pos: int) -> Answer:
        """:meth:`obtain` short of a source build (made ahead without a build slot)."""
        return self.obtain(pos, self.unbuilt)

    def _one(self, kind: type[Source]) -> Source:
        return next(w for w in self.chain if isinstance(w, kind))

    def obtain_commit(self, sha: str, near: int) -> Answer:
        """A commit outside the candidates (the culprit's revert on the bad endpoint): its
        tree when it has nothing to build, else from the keepers, as an overlay on the wheel
        that served ``near`` when only Python files differ, else built from source."""
        for made in (chain.Tree, chain.Kept, chain.Broken):
            got = self._one(made).obtain(-1, sha)  # -1: no candidate, no prebuilt of its own
            if got is not None:
                return got
        r = self.ranking
        base = r.overlay_base(near)
        if base is None and (r.prebuilt(near) is not None or near == r.installed_pos):
            base = near
        over = self._one(chain.Overlay)
        assert isinstance(over, chain.Overlay)
        if base is not None and (got := over.onto(base, sha)) is not None:
            return got
        built = self._one(building.Build).obtain(near, sha)
        assert built is not None  # the build always answers
        return built
