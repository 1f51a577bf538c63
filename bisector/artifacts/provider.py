"""Getting an installable torch for a commit, cheapest way first.

In order: an artifact already in the store (built, downloaded or overlaid before, or known not
to build); the commit's own prebuilt wheel (release or nightly); a Python-only overlay on the
nearest prebuilt base whose difference is overlay-safe; a source build. A prebuilt that fails
(gone from the index, wrong hash) is dropped for the rest of the run and the next way is tried,
so a broken download can cost time but never a wrong verdict.

The same ranking feeds the search (``cost``) and ``bisect plan`` (``kind``), so what the plan
projects is what the run does.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import git
from sqlalchemy import select

from bisector.artifacts import overlay
from bisector.artifacts.build import Builder, build_key, describe_stats, obtain_wheel, wheel_digest
from bisector.artifacts.cache import artifact_key, wheel_dir
from bisector.artifacts.index import IndexClient, IndexFile, IndexProblem
from bisector.artifacts.installable import Installable, InstalledBase
from bisector.artifacts.prebuilt import Prebuilt, triton_of, triton_requirement
from bisector.profiles import Profile
from bisector.store import models as m
from bisector.store.db import Store

# Probe cost classes, cheapest first; the search compares only their order.
OUTSIDE = -1  # position of an installed base that is not a candidate
COST = {"cached": 0, "prebuilt": 1, "overlay": 2, "build": 3, "broken": 4}


class Provider:
    def __init__(
        self,
        store: Store,
        repo: Callable[[], git.Repo],
        profile: Profile,
        python: str,
        candidates: list[str],
        prebuilts: dict[int, Prebuilt],
        installed: InstalledBase | None = None,
        build_timeout: float = 3600.0,
        on_phase: Callable[[str], None] = lambda _t: None,
        on_note: Callable[[str], None] = lambda _t: None,
        on_progress: Callable[[str, int, int], None] | None = None,
        client_for: Callable[[str], IndexClient] = IndexClient,
        builder: Builder | None = None,
    ) -> None:
        self.store, self._repo, self.profile, self.python = store, repo, profile, python
        self.candidates = candidates
        self.prebuilts = dict(prebuilts)
        self.installed = installed
        # The installed base may sit outside the range (e.g. the parent of --good): then it is
        # OUTSIDE, never probed itself, and only ever an overlay base decided by the exact diff.
        self.installed_pos: int | None = None
        if installed is not None:
            self.installed_pos = (candidates.index(installed.commit)
                                  if installed.commit in candidates else OUTSIDE)
        self.build_timeout = build_timeout
        self.on_phase, self.on_note, self.on_progress = on_phase, on_note, on_progress
        self.client_for = client_for
        self.builder = builder
        self._changes: overlay.ChangeIndex | None = None
        self._known: dict[str, str] | None = None
        self._base_memo: dict[int, int | None] = {}

    # -- ranking -------------------------------------------------------------------------

    @property
    def changes(self) -> overlay.ChangeIndex:
        if self._changes is None:
            self._changes = overlay.ChangeIndex.build(self._repo(), self.candidates, self.profile)
        return self._changes

    def _known_artifacts(self) -> dict[str, str]:
        """commit -> status of the source artifacts the store already has for the candidates."""
        if self._known is None:
            keys = {build_key(self.profile, sha, self.python, self.builder)[0]: sha
                    for sha in self.candidates}
            with self.store.session() as s:
                rows = s.execute(
                    select(m.Artifact.key, m.Artifact.status, m.Artifact.path)
                    .where(m.Artifact.commit_sha.in_(self.candidates))
                ).all()
            self._known = {}
            for key, status, path in rows:
                if key in keys and (status == "failed" or (path and Path(path).exists())):
                    self._known[keys[key]] = status
        return self._known

    def bases(self) -> list[int]:
        out = sorted(self.prebuilts)
        if self.installed_pos is not None and self.installed_pos != OUTSIDE:
            out = sorted({*out, self.installed_pos})
        return out

    def overlay_base(self, pos: int) -> int | None:
        """The nearest base whose difference to ``pos`` is overlay-safe (older on a tie).

        The change index answers first; where it refuses (it is conservative: a change and its
        revert both count) the exact diff against the nearest base on each side decides.
        """
        if pos not in self._base_memo:
            self._base_memo[pos] = self._find_base(pos)
        return self._base_memo[pos]

    def _find_base(self, pos: int) -> int | None:
        bases = self.bases()
        if pos in bases:
            return pos
        best: tuple[int, int] | None = None
        for b in bases:
            if self.changes.blocker_between(b, pos) is None:
                key = (abs(b - pos), b)
                if best is None or key < best:
                    best = key
        if best is not None:
            return best[1]
        below = [b for b in bases if b < pos][-1:]
        above = [b for b in bases if b > pos][:1]
        for b in sorted([*below, *above], key=lambda q: (abs(q - pos), q)):
            if overlay.check(self._repo(), self.candidates[b], self.candidates[pos],
                             self.profile).ok:
                return b
        if self.installed_pos == OUTSIDE and self.installed is not None and overlay.check(
                self._repo(), self.installed.commit, self.candidates[pos], self.profile).ok:
            return OUTSIDE
        return None

    def kind(self, pos: int) -> str:
        sha = self.candidates[pos]
        known = self._known_artifacts().get(sha)
        if known == "ok":
            return "cached"
        if known == "failed":
            return "broken"
        if pos in self.prebuilts or pos == self.installed_pos:
            return "prebuilt"
        if self.overlay_base(pos) is not None:
            return "overlay"
        return "build"

    def cost(self, pos: int) -> int:
        return COST[self.kind(pos)]

    # -- obtaining -------------------------------------------------------------------------

    def obtain(self, pos: int) -> tuple[m.Artifact, Installable | None]:
        sha = self.candidates[pos]
        if pos == self.installed_pos and self.installed is not None:
            return self._installed_row(), Installable(self.installed.key, "installed",
                                                      installed=self.installed)
        if pos in self.prebuilts:
            got = self._prebuilt(pos)
            if got is not None:
                return got
        row = self._existing(build_key(self.profile, sha, self.python, self.builder)[0])
        if row is not None:
            return row, self._installable(row)
        while (base := self.overlay_base(pos)) is not None:
            got = self._overlay(pos, base)
            if got is not None:
                return got
            if base in self.prebuilts or base == self.installed_pos:
                break  # the exact diff refused what the quick index allowed: build instead
        return self._build(pos)

    def _existing(self, key: str) -> m.Artifact | None:
        with self.store.session() as s:
            art = s.scalar(select(m.Artifact).where(m.Artifact.key == key))
            if art is None:
                return None
            if art.status == "failed" or (art.path and Path(art.path).exists()):
                s.expunge(art)
                return art
        return None

    def _save(self, key: str, sha: str, kind: str, settings: dict[str, Any],
              **fields: Any) -> m.Artifact:
        with self.store.session() as s:
            art = s.scalar(select(m.Artifact).where(m.Artifact.key == key))
            if art is None:
                art = m.Artifact(key=key, commit_sha=sha, kind=kind, settings=settings)
                s.add(art)
            for k, v in fields.items():
                setattr(art, k, v)
            s.flush()
            s.expunge(art)
            return art

    def _installable(self, art: m.Artifact) -> Installable | None:
        if art.status != "ok" or not art.path:
            return None
        if art.kind == "overlay":
            base_key = str(art.settings["base_key"])
            base_inst = self._base_installable(base_key, art.settings)
            return Installable(art.key, f"overlay of {art.commit_sha[:12]} on "
                               f"{art.settings.get('base_desc', base_key[:12])}",
                               wheel=base_inst.wheel, installed=base_inst.installed,
                               overlay=Path(art.path), extra=base_inst.extra)
        obtained = {"source": "source build", "prebuilt": f"prebuilt {Path(art.path).name}"}
        return Installable(art.key, obtained.get(art.kind, art.kind), wheel=Path(art.path),
                           extra=tuple(art.settings.get("extra", ())))

    def _base_installable(self, base_key: str, settings: dict[str, Any]) -> Installable:
        if self.installed is not None and base_key == self.installed.key:
            return Installable(base_key, "installed", installed=self.installed)
        return Installable(base_key, "prebuilt", wheel=Path(str(settings["base_path"])))

    def _installed_row(self) -> m.Artifact:
        inst = self.installed
        assert inst is not None
        return self._save(inst.key, inst.commit, "installed",
                          {"python": inst.python, "site": inst.site,
                           "packages": list(inst.packages)},
                          status="ok", path=inst.site, duration_s=0.0)

    def _prebuilt(self, pos: int) -> tuple[m.Artifact, Installable] | None:
        pb = self.prebuilts[pos]
        sha = self.candidates[pos]
        key = artifact_key("prebuilt", sha, {"url": pb.url, "sha256": pb.sha256})
        row = self._existing(key)
        if row is not None and row.status == "ok":
            inst = self._installable(row)
            assert inst is not None
            return row, inst
        dest = wheel_dir(key) / pb.filename
        if not dest.exists():
            self.on_phase(f"downloading {pb.filename}")
            client = self.client_for(pb.url.rsplit("/", 1)[0])
            f = IndexFile(pb.filename, pb.url, {"sha256": pb.sha256} if pb.sha256 else {})
            progress = None
            if self.on_progress is not None:
                cb = self.on_progress

                def progress(done: int, total: int) -> None:
                    cb(pb.filename, done, total)
            try:
                client.download(f, dest, progress)
            except IndexProblem as e:
                # Never a verdict from a wheel we could not trust: drop it, try the next way.
                self.on_note(f"prebuilt wheel not used: {e.message}")
                del self.prebuilts[pos]
                self._base_memo.clear()
                return None
        digest, size = wheel_digest(dest)
        triton = triton_of(pb.requires)
        settings = {"url": pb.url, "filename": pb.filename, "kind": pb.kind,
                    "version": pb.version, "triton": triton}
        row = self._save(key, sha, "prebuilt", settings, status="ok", path=str(dest),
                         sha256=digest, size=size, duration_s=0.0)
        return row, Installable(key, f"{pb.kind} wheel {pb.filename}", wheel=dest)

    def _overlay(self, pos: int, base: int) -> tuple[m.Artifact, Installable] | None:
        sha = self.candidates[pos]
        if base == self.installed_pos and self.installed is not None:
            base_row, base_inst = self._installed_row(), Installable(
                self.installed.key, "installed", installed=self.installed)
            base_sha = self.installed.commit
        else:
            got = self._prebuilt(base)
            if got is None:
                return None  # the base dropped out; the caller picks the next one
            base_row, base_inst = got
            base_sha = self.candidates[base]
        result = overlay.check(self._repo(), base_sha, sha, self.profile)
        if not result.ok:
            return None
        self.on_phase(f"overlaying {sha[:12]} on {base_sha[:12]} ({result.reason})")
        path = overlay.make_overlay(self._repo(), base_row.key, base_sha, sha, result,
                                    self.profile)
        key = overlay.overlay_key(base_row.key, sha, self.profile)
        desc = f"{base_row.kind} {base_sha[:12]}"
        settings = {"base_key": base_row.key, "base_path": base_row.path,
                    "base_commit": base_sha, "base_desc": desc,
                    "changed": len(result.changed), "deleted": len(result.deleted)}
        row = self._save(key, sha, "overlay", settings, status="ok", path=str(path),
                         duration_s=0.0)
        return row, Installable(key, f"overlay of {sha[:12]} on {desc}",
                                wheel=base_inst.wheel, installed=base_inst.installed,
                                overlay=path, extra=base_inst.extra)

    def _build(self, pos: int) -> tuple[m.Artifact, Installable | None]:
        sha = self.candidates[pos]
        key, settings = build_key(self.profile, sha, self.python, self.builder)
        where = "in the builder container" if self.builder and self.builder.where == "docker" \
            else "from source"
        res = obtain_wheel(
            self._repo(), sha, self.profile, python=self.python, timeout_s=self.build_timeout,
            on_build=lambda: self.on_phase(f"building {sha[:12]} {where}"),
            builder=self.builder,
        )
        status = "ok" if res.ok else ("error" if res.infra else "failed")
        fields: dict[str, Any] = {
            "status": status,
            "path": str(res.wheel) if res.wheel else None,
            "log_path": str(res.log_path), "log_tail": res.log_tail,
            "duration_s": res.duration_s,
            "stats": {**res.stats, **({"error": res.infra} if res.infra else {})} or None,
        }
        if res.wheel:
            fields["sha256"], fields["size"] = wheel_digest(res.wheel)
        if res.stats and res.duration_s:
            how = "built" if res.ok else "build failed for"
            self.on_note(f"{how} {sha[:12]} in {res.duration_s:.1f}s, "
                         f"{describe_stats(res.stats)}")
        triton = triton_requirement(self._repo(), sha, self.profile, nightly=True)
        if triton:
            settings = {**settings, "extra": [triton]}
        row = self._save(key, sha, "source", settings, **fields)
        self._known = None
        return row, self._installable(row)


def find_installed(python: str, packages: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """The site-packages folder and package folders of an installed distribution."""
    import subprocess

    code = ("import importlib.util, json, os, sys\n"
            "out = {}\n"
            "for name in sys.argv[1:]:\n"
            "    spec = importlib.util.find_spec(name)\n"
            "    if spec and spec.submodule_search_locations:\n"
            "        out[name] = list(spec.submodule_search_locations)[0]\n"
            "print(json.dumps(out))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    r = subprocess.run([python, "-c", code, *packages], capture_output=True, text=True,
                       env=env, check=False, timeout=120)
    found: dict[str, str] = json.loads(r.stdout or "{}") if r.returncode == 0 else {}
    if not found:
        return "", ()
    site = str(Path(next(iter(found.values()))).parent)
    return site, tuple(sorted(found))
