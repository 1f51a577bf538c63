"""The last way to a commit's torch: a source build by the recipe's builder (host or
container), claimed in the store so that boxes sharing it build each commit once, stored as an
artifact (a wheel, or the fact that the commit does not build) and kept (uploaded to the team's
object store). A caller that must not build (the prefetch without a build slot, the watch's
nightlies) asks the chain without this way (``provider.Provider.unbuilt``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any

from bisector.artifacts.build import BuildResult, build_key, obtain_wheel, wheel_digest
from bisector.artifacts.build_logs import describe_stats
from bisector.artifacts.obtained import Answer
from bisector.artifacts.prebuilt import triton_requirement
from bisector.artifacts.shared import Shared
from bisector.base.kinds import ArtifactKind, ArtifactStatus, Way
from bisector.infra import cancel
from bisector.infra.owner import owner_alive, owner_id
from bisector.store import claims
from bisector.store.records import ArtifactRecord, NewArtifact


class Build:
    """A source build by the recipe's builder (host or container), at most ``build_jobs`` at
    once; a failure is stored as a fact about the commit, an infrastructure error is not.
    Each build is claimed in the store first, so two processes (two boxes sharing the store
    and an object store) never build one commit twice at once."""

    poll_s = 2.0
    way = Way.BUILD

    def __init__(self, shared: Shared) -> None:
        self.s = shared
        self._slots = threading.Semaphore(shared.ranking.recipe.build_jobs)
        self.me = owner_id()

    def _claim(self, key: str, sha: str) -> Answer | None:
        """Claim the build of ``key``: None when it is ours to build; the answer when another
        process built it meanwhile (waited for while it builds, taken over if it died)."""
        store, said = self.s.artifacts.store, False
        while True:
            holder = claims.claim_build(store, key, sha, self.me)
            if holder is None:
                found = self.s.keep.get(key)  # built (and kept) just before we claimed it
                if found is None or found.row.status is ArtifactStatus.ERROR:
                    return None
                claims.release_build(store, key, sha, self.me)
                return self.s.keep.answer(found)
            if holder.owner and not owner_alive(holder.owner, holder.at):
                claims.take_over_build(store, key, sha, self.me, holder.owner)
                continue
            if not said:
                self.s.events.phase(sha, f"{sha[:12]} is being built by {holder.owner}: "
                                         f"waiting for its wheel")
                said = True
            if cancel.stopping():
                raise cancel.Stopped("stopped while waiting for another process's build")
            time.sleep(self.poll_s)

    def would(self, pos: int) -> bool:
        return True  # the last way: every commit can be built (or found not to build)

    def obtain(self, pos: int, sha: str) -> Answer:
        recipe, events = self.s.ranking.recipe, self.s.events
        builder = recipe.builder
        key, settings = build_key(recipe.profile, sha, recipe.python, builder)
        where = "in the builder container" if builder and builder.where == "docker" \
            else "from source"
        with self.s.key_locks[key], self._slots:
            made = self._claim(key, sha)
            if made is not None:
                return made
            try:
                res = obtain_wheel(
                    self.s.repo(), sha, recipe.profile, python=recipe.python,
                    timeout_s=recipe.timeout_s, builder=builder,
                    on_build=lambda: events.phase(sha, f"building {sha[:12]} {where}"),
                    on_line=lambda line: events.build_line(sha, line),
                )
                # Stored and uploaded before the claim goes: a process waiting for this
                # build finds the row (and the object) the moment it may claim.
                row, mine = self._save(sha, key, settings, res)
            finally:
                claims.release_build(self.s.artifacts.store, key, sha, self.me)
        # A new base: commits near it may overlay on it now.
        self.s.ranking.forget_stored(new_base=row.status is ArtifactStatus.OK)
        fresh = not res.cached  # a wheel already in the build cache was found, not built
        return self.s.answer(mine, fresh=fresh, way=Way.BUILD if fresh else Way.CACHED)

    def _save(self, sha: str, key: str, settings: dict[str, Any],
              res: BuildResult) -> tuple[ArtifactRecord, ArtifactRecord]:
        """The build's artifact row (a wheel, a failure, or an error to retry), uploaded to
        the team's object store when it is a wheel; and the row this probe installs.

        When the bucket already holds a wheel of this key (this box built it again while the
        store was down, or raced another box) the row keeps the bucket's digest: every other
        box fetches that object rather than building again, and this box's own wheel, which
        no other box can fetch, serves this probe only (later ones take the bucket's)."""
        recipe, events = self.s.ranking.recipe, self.s.events
        status = ArtifactStatus.OK if res.ok else (
            ArtifactStatus.ERROR if res.infra else ArtifactStatus.FAILED)
        stats = {**res.stats, **({"error": res.infra} if res.infra else {})} or None
        digest, size = wheel_digest(res.wheel) if res.wheel else (None, None)
        if res.stats.get("assembled"):
            events.note(f"assembled {sha[:12]}'s wheel from its tree (pure Python: no build)")
        elif res.stats and res.duration_s:
            how = "built" if res.ok else "build failed for"
            events.note(f"{how} {sha[:12]} in {res.duration_s:.1f}s, "
                        f"{describe_stats(res.stats)}")
        triton = triton_requirement(self.s.repo(), sha, recipe.profile, nightly=True)
        if triton:
            settings = {**settings, "extra": [triton]}
        held = self.s.keep.held_elsewhere(key, digest) if digest else None
        if held is not None:
            events.note(f"{sha[:12]}'s wheel built here differs from the one the team's object "
                        f"store holds (sha256 {str(digest)[:12]} here, {held.sha256[:12]} "
                        f"there): the store's stays recorded for every box; this one serves "
                        f"this probe")
        row = self.s.artifacts.save(NewArtifact(
            key, sha, ArtifactKind.SOURCE, status, settings,
            path=str(res.wheel) if res.wheel else None,
            sha256=held.sha256 if held else digest, size=held.size if held else size,
            log_path=str(res.log_path), log_tail=res.log_tail, duration_s=res.duration_s,
            stats=stats))
        self.s.keep.put(row)
        return row, (replace(row, sha256=digest, size=size) if held else row)
