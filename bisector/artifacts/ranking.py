"""What the ways of the chain ask before obtaining anything: which commits have their package
stored (or stored as broken), which have a prebuilt wheel, which have nothing to build, and
the nearest overlay base of each. The ways' ``would`` read it, and the provider's ``kind``
(the first way that would) feeds the search (``cost``: probe cheap commits when the split
allows) and ``bisect plan``, so what the plan projects is what the run does. It also holds what
the run has learnt about its bases: a prebuilt that failed is dropped here, a new source build
becomes a base here, and every thread of the run sees both at once (under one lock).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import git

from bisector.artifacts import overlay, pure
from bisector.artifacts.installable import InstalledBase
from bisector.artifacts.obtained import Recipe, Sources, usable
from bisector.artifacts.prebuilt import Prebuilt
from bisector.base.kinds import ArtifactStatus
from bisector.project.profiles import Profile, in_tree_at
from bisector.store.artifacts import ArtifactStore

OUTSIDE = -1  # position of an installed base that is not a candidate


class Ranking:
    def __init__(self, artifacts: ArtifactStore, repo: Callable[[], git.Repo],
                 candidates: list[str], recipe: Recipe, sources: Sources,
                 shared_keys: Callable[[], set[str]] = set) -> None:
        self.artifacts, self._repo, self.candidates = artifacts, repo, candidates
        # The keys the team's object store holds (keepers.py): a wheel another box built is a
        # base here too.
        self._shared_keys = shared_keys
        self.recipe, self.profile = recipe, recipe.profile
        self.prebuilts = dict(sources.prebuilts)
        self.installed: InstalledBase | None = sources.installed
        # The installed base may sit outside the range (e.g. the parent of --good): then it is
        # OUTSIDE, never probed itself, and only ever an overlay base decided by the exact diff.
        self.installed_pos: int | None = None
        if self.installed is not None:
            self.installed_pos = (candidates.index(self.installed.commit)
                                  if self.installed.commit in candidates else OUTSIDE)
        self.position = {sha: i for i, sha in enumerate(candidates)}
        self._changes: overlay.ChangeIndex | None = None
        self._known: dict[str, ArtifactStatus] | None = None
        self._base_memo: dict[int, int | None] = {}
        self._derived: dict[str, Profile] = {}
        self._derived_changes: dict[str, overlay.ChangeIndex] = {}
        self._exact: dict[tuple[int, int], bool] = {}
        self._trees: dict[str, bool] = {}
        self._lock = threading.RLock()

    # -- what the run learns ----------------------------------------------------------------

    def prebuilt(self, pos: int) -> Prebuilt | None:
        with self._lock:
            return self.prebuilts.get(pos)

    def drop_prebuilt(self, pos: int) -> None:
        """A prebuilt that could not be trusted (gone, wrong hash): never a base again."""
        with self._lock:
            self.prebuilts.pop(pos, None)
            self._base_memo.clear()

    def forget_stored(self, new_base: bool = True) -> None:
        """The stored artifacts changed (a build landed, or a base was found removed by
        ``bisect gc``): read them again; with ``new_base``, nearest bases are looked up again."""
        with self._lock:
            self._known = None
            if new_base:
                self._base_memo.clear()

    def look_again(self, pos: int) -> None:
        with self._lock:
            self._base_memo.pop(pos, None)

    def profile_for(self, base_sha: str) -> Profile:
        """The overlay rules on the base built from ``base_sha``: the profile's own, or, for
        a profile that derives them (the generic one), those its stored wheel allows
        (artifacts/pure.py: none unless it is a pure-Python project's)."""
        if not self.profile.derive_overlays:
            return self.profile
        with self._lock:
            if base_sha in self._derived:
                return self._derived[base_sha]
        row = self.artifacts.get(self.recipe.source_key(base_sha))
        ok = row is not None and row.status is ArtifactStatus.OK and row.path
        layout = pure.layout_of(self._repo(), base_sha, Path(row.path)) \
            if ok and row is not None and row.path else None
        derived = pure.derive(self.profile, layout)
        with self._lock:
            if ok:  # a base not built (yet) is asked again once it is
                self._derived[base_sha] = derived
        return derived

    def in_tree(self, sha: str) -> bool:
        """Whether ``sha`` has nothing to build: its probe runs the oracle in its tree (the
        profile's rule, ``profiles.in_tree_at``: a commit with no Python packaging under the
        generic profile, every commit under the tree profile). Read once per commit."""
        if self.profile.probe_tree != "unpackaged":
            return self.profile.probe_tree == "always"
        with self._lock:
            if sha in self._trees:
                return self._trees[sha]
        try:
            # ``path``, not ``name``: a submodule's entry (a gitlink) has no name GitPython can
            # give without its .gitmodules, and at the root the path is the name
            names = {str(e.path) for e in self._repo().commit(sha).tree}
        except (ValueError, git.BadName, git.BadObject):
            return False  # the build's own error says what is wrong with the commit
        found = in_tree_at(self.profile, names.__contains__)
        with self._lock:
            self._trees[sha] = found
        return found

    # -- ranking ----------------------------------------------------------------------------

    @property
    def changes(self) -> overlay.ChangeIndex:
        with self._lock:
            if self._changes is None:
                self._changes = overlay.ChangeIndex.build(self._repo(), self.candidates,
                                                          self.profile)
            return self._changes

    def _known_artifacts(self) -> dict[str, ArtifactStatus]:
        """commit -> status of the source artifacts already stored for the candidates."""
        with self._lock:
            if self._known is None:
                keys = {self.recipe.source_key(sha): sha for sha in self.candidates}
                shared = self._shared_keys()
                self._known = {}
                for a in self.artifacts.for_commits(self.candidates):
                    if a.key in keys and (usable(a) or (a.key in shared and a.status is
                                                        ArtifactStatus.OK)):
                        self._known[keys[a.key]] = a.status
            return self._known

    def stored(self, pos: int) -> ArtifactStatus | None:
        """The status of the source build stored for candidate ``pos`` that this box can act
        on (its wheel here or in the team's object store, or the fact it does not build)."""
        return self._known_artifacts().get(self.candidates[pos])

    def built(self) -> set[int]:
        """Positions whose source build is stored and still on disk: build once, overlay many
        (a Python-only change next to a built commit needs no second build)."""
        if not self.recipe.reuse_builds:
            return set()
        known = self._known_artifacts()
        return {self.position[sha] for sha, status in known.items()
                if status is ArtifactStatus.OK and sha in self.position}

    def bases(self) -> list[int]:
        with self._lock:
            out = set(self.prebuilts)
        out |= self.built()
        if self.installed_pos is not None and self.installed_pos != OUTSIDE:
            out.add(self.installed_pos)
        return sorted(out)

    def safe_between(self, a: int, b: int) -> bool:
        """A wheel built at ``a`` would serve ``b`` as an overlay base: build reuse is on and
        no change between them blocks an overlay (the quick index; the exact diff decides at
        obtain time). The plan uses it to project build reuse."""
        return self.recipe.reuse_builds and self.changes.blocker_between(a, b) is None

    def overlay_base(self, pos: int) -> int | None:
        """The nearest base whose difference to ``pos`` is overlay-safe (older on a tie).

        The change index answers first; where it refuses (it is conservative: a change and its
        revert both count) the exact diff against the nearest base on each side decides.
        """
        with self._lock:
            if pos in self._base_memo:
                return self._base_memo[pos]
        found = self._find_base(pos)
        with self._lock:
            self._base_memo[pos] = found
        return found

    def _find_base(self, pos: int) -> int | None:
        bases = self.bases()
        if pos in bases:
            return pos
        best: tuple[int, int] | None = None
        for b in bases:
            if self._changes_on(b).blocker_between(b, pos) is None:
                key = (abs(b - pos), b)
                if best is None or key < best:
                    best = key
        if best is not None:
            return best[1]
        below = [b for b in bases if b < pos][-1:]
        above = [b for b in bases if b > pos][:1]
        for b in sorted([*below, *above], key=lambda q: (abs(q - pos), q)):
            if self._exact_ok(b, pos):
                return b
        if self.installed_pos == OUTSIDE and self.installed is not None and overlay.check(
                self._repo(), self.installed.commit, self.candidates[pos], self.profile).ok:
            return OUTSIDE
        return None

    def _changes_on(self, base: int) -> overlay.ChangeIndex:
        """The quick index under the overlay rules of the base at ``base``: the profile's, or
        for derived rules (artifacts/pure.py) one built with them, per base."""
        prof = self.profile_for(self.candidates[base]) if self.profile.derive_overlays \
            else self.profile
        if prof is self.profile:
            return self.changes
        sha = self.candidates[base]
        with self._lock:
            if sha not in self._derived_changes:
                self._derived_changes[sha] = overlay.ChangeIndex.build(
                    self._repo(), self.candidates, prof)
            return self._derived_changes[sha]

    def _exact_ok(self, base: int, pos: int) -> bool:
        """The exact diff from the base at ``base`` to ``pos`` allows an overlay (kept: the
        search asks again for the same pairs after every new base)."""
        with self._lock:
            if (base, pos) in self._exact:
                return self._exact[base, pos]
        ok = overlay.check(self._repo(), self.candidates[base], self.candidates[pos],
                           self.profile_for(self.candidates[base])).ok
        with self._lock:
            self._exact[base, pos] = ok
        return ok
