"""The two ways ``bisect check`` is handed a torch rather than a commit: the Python already
installed here (``--env system``) and a wheel file (``--wheel``). Sources of the one protocol
(``shared.Source``), so a check of a wheel, of the system or of a commit (the provider's chain)
goes on through the same pipeline; neither is stored (nothing was made)."""

from __future__ import annotations

from pathlib import Path

from bisector.artifacts.cache import wheel_file_key
from bisector.artifacts.installable import Installable
from bisector.artifacts.obtained import Answer, Obtained
from bisector.base.errors import UsageError


class System:
    """The torch installed in the interpreter the probe runs (no environment made)."""

    def obtain(self, pos: int, sha: str) -> Answer | None:
        return Obtained(Installable("system", "system"), None)


class WheelFile:
    """A wheel file on this box, keyed by its bytes (``cache.wheel_file_key``): the watch's
    and check's one key for it."""

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise UsageError(f"wheel {path} does not exist: check the path")
        self.path = path

    def obtain(self, pos: int, sha: str) -> Answer | None:
        key, digest = wheel_file_key(self.path)
        return Obtained(Installable(key, f"wheel {self.path.name}", wheel=self.path,
                                    sha256=digest), None)
