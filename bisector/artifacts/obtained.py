"""What obtaining a commit's torch answers, and how a stored artifact row becomes that answer.

:class:`Obtained` (what to install, and the artifact row it came from) or :class:`Unobtainable`
(why not, and whether that is a fact about the commit or about this machine) is decided here
once, for every source of the chain in ``provider.py`` and for ``bisect check``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bisector.artifacts.build import Builder, build_key
from bisector.artifacts.build_logs import failure_summary
from bisector.artifacts.installable import Installable, InstalledBase
from bisector.artifacts.prebuilt import Prebuilt
from bisector.base.kinds import ArtifactKind, ArtifactStatus, Way
from bisector.project.profiles import Profile
from bisector.store.records import ArtifactRecord


@dataclass(frozen=True)
class Obtained:
    installable: Installable
    artifact: ArtifactRecord | None  # None for `bisect check` of the system Python
    fresh: bool = False  # made by this probe (built, downloaded, overlaid), not found stored
    # Made ahead while an earlier probe's oracle ran (run/prefetch.py): phase -> seconds it
    # took then ({"obtain": 19.2, "environment": 0.8}); empty when made when asked.
    ahead: dict[str, float] = field(default_factory=dict)
    # The way it was had (what ``bisect plan`` prices it as, the ``obtained_as`` fact): a
    # package found kept is CACHED (this box) or BUCKET (another box's upload).
    way: Way = Way.CACHED


@dataclass(frozen=True)
class Unobtainable:
    """No installable for this commit. ``permanent``: the commit does not build (a fact,
    reused); otherwise the machine could not build it now (retried by a later probe)."""

    reason: str
    permanent: bool
    artifact: ArtifactRecord | None = None
    fresh: bool = False  # this probe paid for the failed build

    @property
    def way(self) -> Way:
        return Way.BROKEN  # no package: a skip


Answer = Obtained | Unobtainable


@dataclass(frozen=True)
class Recipe:
    """How this run builds: the profile, the Python, where, how long, how many at once."""

    profile: Profile
    python: str
    builder: Builder | None = None
    timeout_s: float = 3600.0
    build_jobs: int = 1
    # A source-built wheel serves as an overlay base (off with --no-prebuilt: every probe built).
    reuse_builds: bool = True

    def source_key(self, sha: str) -> str:
        """The artifact key of ``sha`` built from source by this recipe."""
        return build_key(self.profile, sha, self.python, self.builder)[0]


@dataclass(frozen=True)
class Sources:
    """Wheels that exist without building: the index's, mapped to positions, and an installed
    torch (``--installed-base``)."""

    prebuilts: dict[int, Prebuilt] = field(default_factory=dict)
    installed: InstalledBase | None = None


def usable(a: ArtifactRecord) -> bool:
    """A stored fact we can still act on: a known failure, or a wheel that is still on disk."""
    return a.status is ArtifactStatus.FAILED or bool(
        a.status is ArtifactStatus.OK and a.path and Path(a.path).exists())


def answer(a: ArtifactRecord, installed: InstalledBase | None,
           fresh: bool = False, way: Way = Way.CACHED) -> Answer:
    """The answer a stored artifact row gives: its installable (had the ``way`` said), or why
    the commit has none."""
    if a.status is ArtifactStatus.OK and a.path:
        return Obtained(installable(a, installed), a, fresh, way=way)
    if a.status is ArtifactStatus.ERROR:
        why = (a.stats or {}).get("error", "unknown")
        return Unobtainable(f"build could not run: {why}", False, a, fresh)
    summary = failure_summary(Path(a.log_path)) if a.log_path else "no log"
    return Unobtainable(f"build failed: {summary}", True, a, fresh)


def installable(a: ArtifactRecord, installed: InstalledBase | None) -> Installable:
    """What to install for a stored OK row; an overlay names its base wheel (or the installed
    torch) and the overlay archive."""
    assert a.path is not None
    if a.kind is ArtifactKind.OVERLAY:
        base_key = str(a.settings["base_key"])
        base = _base_installable(base_key, a.settings, installed)
        return Installable(a.key, f"overlay of {a.commit_sha[:12]} on "
                           f"{a.settings.get('base_desc', base_key[:12])}",
                           wheel=base.wheel, installed=base.installed,
                           overlay=Path(a.path), extra=base.extra, sha256=base.sha256)
    if a.kind is ArtifactKind.INSTALLED and installed is not None:
        return Installable(a.key, "installed", installed=installed)
    obtained = {ArtifactKind.SOURCE: "source build",
                ArtifactKind.PREBUILT: f"prebuilt {Path(a.path).name}"}
    return Installable(a.key, obtained.get(a.kind, a.kind.value), wheel=Path(a.path),
                       extra=tuple(a.settings.get("extra", ())), sha256=a.sha256)


def _base_installable(base_key: str, settings: dict[str, Any],
                      installed: InstalledBase | None) -> Installable:
    if installed is not None and base_key == installed.key:
        return Installable(base_key, "installed", installed=installed)
    return Installable(base_key, "prebuilt", wheel=Path(str(settings["base_path"])),
                       sha256=settings.get("base_sha256"))


NO_SOURCES = Sources()  # a run with no index wheels and no installed torch
