"""The chain of ways (artifacts/provider.py): what a commit will take is the first way whose
``would`` holds, in the chain's own order; a caller that must not build asks the chain without
its build (no flag set anywhere)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

from bisector.artifacts.building import Build
from bisector.artifacts.installable import Installable
from bisector.artifacts.obtained import Answer, Obtained, Recipe, Sources
from bisector.artifacts.prebuilt import Prebuilt
from bisector.artifacts.provider import Provider
from bisector.base.kinds import ArtifactKind, ArtifactStatus, Way
from bisector.project.profiles import TORCHLET
from bisector.run.prefetch import Prefetcher
from bisector.store.artifacts import ArtifactStore
from bisector.store.db import Store
from bisector.store.records import NewArtifact

CANDS = [f"{i:040x}" for i in range(3)]


def _provider(store: Store, sources: Sources) -> Provider:
    return Provider(ArtifactStore(store), lambda: None, CANDS,  # type: ignore[arg-type,return-value]
                    Recipe(TORCHLET, sys.executable), sources)


def test_a_commit_that_does_not_build_is_predicted_as_its_own_wheel_when_it_has_one(
        store: Store) -> None:
    """The chain asks the index before the stored failure (a wheel of the commit itself is as
    good as any verdict needs), so the prediction says the wheel too; only a commit with no
    wheel of its own is predicted a skip."""
    recipe = Recipe(TORCHLET, sys.executable)
    for sha in CANDS[1:]:
        ArtifactStore(store).save(NewArtifact(recipe.source_key(sha), sha, ArtifactKind.SOURCE,
                                              ArtifactStatus.FAILED, {}))
    wheel = Prebuilt("nightly", "torchlet-1.0-py3-none-any.whl", "https://index.invalid/t.whl",
                     "1.0", None, commit=CANDS[1])
    p = _provider(store, Sources({1: wheel}))
    assert p.kind(1) is Way.PREBUILT
    assert p.kind(2) is Way.BROKEN
    assert p.cost(1) < p.cost(2)


def test_the_chain_without_its_build_is_the_chain_less_build(store: Store) -> None:
    p = _provider(store, Sources())
    assert any(isinstance(w, Build) for w in p.chain)
    assert [w for w in p.chain if not isinstance(w, Build)] == list(p.unbuilt)


def test_a_prefetch_without_a_build_slot_asks_the_chain_without_its_build() -> None:
    """Made ahead: a commit whose build pays is obtained by the whole chain, any other by the
    chain short of its build (``unbuilt``), so nothing is built on a slot the round needs."""
    asked: dict[str, list[int]] = {"whole": [], "unbuilt": []}
    lock = threading.Lock()

    def by(name: str) -> Callable[[int], Answer]:
        def obtain(pos: int) -> Answer:
            with lock:
                asked[name].append(pos)
            return Obtained(Installable(f"k{pos}", "made"), None)
        return obtain

    kinds = {1: Way.BUILD, 2: Way.PREBUILT}
    pf = Prefetcher(by("whole"), kinds.__getitem__, None, 2, spare_builds=1,
                    room=lambda: True, unbuilt=by("unbuilt"))
    try:
        assert sorted(pf.ahead([(1, 0.9), (2, 0.9)])) == [1, 2]
        for pos in (1, 2):
            assert isinstance(pf.obtain(pos), Obtained)
    finally:
        pf.close()
    assert asked == {"whole": [1], "unbuilt": [2]}
