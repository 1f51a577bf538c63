"""What every way of the chain (``sources.py``, ``building.py``) shares in one run: the SQL
store, the clone, the ranking, the progress, the keepers (``keepers.py``: asked by key, filled
after making) and the index client; and the one protocol a way follows.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

import git

from bisector.artifacts import keepers
from bisector.artifacts.cache import artifact_key
from bisector.artifacts.index import IndexClient
from bisector.artifacts.keepers import Keeper
from bisector.artifacts.obtained import Answer, answer
from bisector.artifacts.ranking import Ranking
from bisector.base.events import Events
from bisector.base.kinds import Way
from bisector.store.artifacts import ArtifactStore
from bisector.store.records import ArtifactRecord


def prebuilt_key(sha: str, url: str, sha256: str | None) -> str:
    """The artifact key of ``sha``'s prebuilt wheel at ``url``."""
    return artifact_key("prebuilt", sha, {"url": url, "sha256": sha256})


@dataclass
class Shared:
    """What every way of one run uses: the store, the clone, the ranking, the progress, the
    keepers, the index client, and a lock per artifact key (one thread obtains a key)."""

    artifacts: ArtifactStore
    repo: Callable[[], git.Repo]
    ranking: Ranking
    events: Events
    keep: Keeper
    client_for: Callable[[str], IndexClient] = IndexClient
    key_locks: defaultdict[str, threading.Lock] = field(
        default_factory=lambda: defaultdict(threading.Lock))

    def keys(self, pos: int, sha: str) -> list[str]:
        """The artifact keys a made package of ``sha`` is stored under, cheapest first: its
        own prebuilt wheel's (when the index has one for ``pos``), then its source build's."""
        pb = self.ranking.prebuilt(pos)
        own = [prebuilt_key(sha, pb.url, pb.sha256)] if pb is not None else []
        return [*own, self.ranking.recipe.source_key(sha)]

    def downloading(self, name: str) -> AbstractContextManager[Callable[[int, int | None],
                                                                         None]]:
        return keepers.downloading(self.events, name)

    def answer(self, a: ArtifactRecord, fresh: bool = False, way: Way = Way.CACHED
               ) -> Answer:
        return answer(a, self.ranking.installed, fresh, way)


class Source(Protocol):
    """One way of the chain (``provider.WAYS``): what it costs, whether it would serve a
    candidate, and what it gives. ``provider.Provider`` builds each with the run's
    :class:`Shared` and asks them in order."""

    way: Way  # what the search ranks it at and ``bisect plan`` prices it as

    def would(self, pos: int) -> bool:
        """Whether this way would answer candidate ``pos`` now, without obtaining anything:
        the first way that would is what the search and the plan count on."""
        ...

    def obtain(self, pos: int, sha: str) -> Answer | None:
        """The torch of ``sha`` (at candidate ``pos``), or None: ask the next way. The answer
        says the way it took (a package found kept says CACHED or BUCKET)."""
        ...
