"""What a local environment's files are: a mirror of an installed package made of symlinked
files (an overlay replaces single files without touching the original), and the manifest of
every installed file, checked after each run (an environment an oracle changed is made again).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

MANIFEST_FILE = "bisector-manifest.json"


def _site_files(env_dir: Path) -> dict[str, list[int]]:
    """size and mtime of every installed file (through symlinks: an installed base's too)."""
    out: dict[str, list[int]] = {}
    for site in env_dir.glob("lib/python*/site-packages"):
        for root, dirs, files in os.walk(site):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files:
                p = os.path.join(root, name)
                try:
                    st = os.stat(p)
                except OSError:
                    continue
                out[os.path.relpath(p, env_dir)] = [st.st_size, st.st_mtime_ns]
    return out


def write_manifest(env_dir: Path) -> None:
    (env_dir / MANIFEST_FILE).write_text(json.dumps(_site_files(env_dir)))


def changed_files(env_dir: Path) -> list[str]:
    """Installed files added, removed or changed since the environment was made."""
    try:
        before = json.loads((env_dir / MANIFEST_FILE).read_text())
    except (OSError, json.JSONDecodeError):
        return ["(no manifest)"]
    now = _site_files(env_dir)
    return sorted(p for p in before.keys() | now.keys() if before.get(p) != now.get(p))


def link_tree(src: Path, dest: Path) -> None:
    """Mirror ``src`` as real folders of symlinked files, so an overlay can replace single files
    of an installed package (a system torch) without touching the original."""
    for root, dirs, files in os.walk(src):
        rel = Path(root).relative_to(src)
        (dest / rel).mkdir(parents=True, exist_ok=True)
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            target = dest / rel / name
            if not target.exists():
                target.symlink_to(Path(root) / name)
