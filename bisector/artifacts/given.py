"""The two ways ``bisect check`` is handed a torch rather than a commit: the Python already
installed here (``--env system``) and a wheel file (``--wheel``). Ways of the one protocol
(``shared.Source``: nothing to make, so priced CACHED and always serving), so a check of a
wheel, of the system or of a commit (the provider's chain) goes on through the same pipeline;
neither is stored (nothing was made)."""

from __future__ import annotations

from pathlib import Path

from bisector.artifacts.cache import wheel_file_key
from bisector.artifacts.installable import Installable
from bisector.artifacts.obtained import Answer, Obtained
from bisector.base.errors import UsageError
from bisector.base.kinds import Way


class System:
    """The torch installed in the interpreter the probe runs (no environment made)."""

    way = Way.CACHED

    def would(self, pos: int) -> bool:
        return True

    def obtain(self, pos: int, sha: str) -> Answer | None:
        return Obtained(Installable("system", "system"), None)


class WheelFile:
    """A wheel file on this box, keyed by its bytes (``cache.wheel_file_key``): the watch's
    and check's one key for it."""

    way = Way.CACHED

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise UsageError(f"wheel {path} does not exist: check the path")
        self.path = path

    def would(self, pos: int) -> bool:
        return True

    def obtain(self, pos: int, sha: str) -> Answer | None:
        key, digest = wheel_file_key(self.path)
        return Obtained(Installable(key, f"wheel {self.path.name}", wheel=self.path,
                                    sha256=digest), None)
