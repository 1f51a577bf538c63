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
    sha256: str | None = None  # of ``wheel`` as stored: checked before it is installed
    # Nothing to install: the oracle runs in the probed commit's tree (profiles.in_tree_at).
    tree: bool = False


# What a probe installs when its commit has nothing to build: nothing. Every such probe shares
# one environment (the oracle's dependencies alone): neither its key nor its words name a
# commit, so it is made once and reused by every probe, of any repository.
IN_TREE = Installable(artifact_key("tree", "", {}), "the commit's tree (nothing to build)",
                      tree=True)


def find_installed(python: str, packages: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """The site-packages folder and package folders of a distribution installed for
    ``python`` (the GPU box's torch): what ``--installed-base`` lays overlays on."""
    import json
    import os
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
