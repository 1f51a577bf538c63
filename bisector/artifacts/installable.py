"""What an executor installs for one probe, whatever way the artifact was obtained."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bisector.artifacts.cache import artifact_key


@dataclass(frozen=True)
class InstalledBase:
    """A torch already installed for ``python`` (e.g. the GPU box's), built from ``commit``."""

    commit: str
    python: str
    site: str
    packages: tuple[str, ...]

    @property
    def key(self) -> str:
        return artifact_key("installed", self.commit,
                            {"python": self.python, "site": self.site,
                             "packages": list(self.packages)})


@dataclass(frozen=True)
class Installable:
    """What an executor installs: a wheel, or an installed base, plus an optional overlay."""

    key: str
    obtained: str
    wheel: Path | None = None
    installed: InstalledBase | None = None
    overlay: Path | None = None
    extra: tuple[str, ...] = ()
