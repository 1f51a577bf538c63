"""What bisector keeps on disk, by kind: ``bisect du``, and the inventory ``bisect gc`` plans on.

Every cache lives under the cache folder (``paths.cache_dir``) and every log under the
data folder (``paths.data_dir``); nothing here looks anywhere else. An *item* is what gc
removes as one piece: a wheel's folder (its key), an overlay, an environment, uv's whole cache,
an oracle run's log folder. Its size counts each file once, as ``du`` does: a file hardlinked
into several items (uv links the same torch into its cache and into every environment) counts
where it is met first, uv's cache before the environments. Its last use is the newest access
or change time of its files and folders (atime is coarse under ``relatime`` and absent under
``noatime``, so an environment's readiness marker is touched on every reuse), and for wheels
and overlays also the store's record (made, or an oracle run on it), whichever is newer.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

# What gc removed: its ledger, read by `show` too (app/removed.py, no store import).
from bisector.app.removed import LEDGER as LEDGER
from bisector.app.removed import LOGS as LOGS
from bisector.app.removed import mark_removed_logs as mark_removed_logs
from bisector.artifacts.overlay import MANIFEST as OVERLAY_MANIFEST
from bisector.base.errors import UsageError
from bisector.base.paths import cache_dir, data_dir
from bisector.store.artifacts import ArtifactStore
from bisector.store.db import Store

# gc may remove these, least recently used first, to get under --max-size or --older-than.
MANAGED = ("wheels", "overlays", "envs", "uv", "oracles", "trees")
# Only --older-than removes logs (LOGS): they are the evidence `show` and the web view point at.
# Listed by du, never removed by gc: ccache caps itself (CCACHE_MAXSIZE); scratch folders
# belong to live processes (a dead one's go with the sweep start and gc run); reports are
# results, not caches.
KEPT = ("ccache", "bytecode", "scratch", "reports", "links", "other")
KINDS = (*MANAGED, LOGS, *KEPT)
DESCRIBE = {
    "wheels": "built and downloaded wheels (one folder per artifact key)",
    "overlays": "a commit's Python files to lay over a nearby wheel",
    "envs": "uv virtualenvs, one per artifact and oracle dependencies (Docker's included)",
    "uv": "uv's cache (downloads, unpacked wheels the environments hardlink)",
    "oracles": "stored oracles written out to run",
    "trees": "commits' exported trees a command oracle runs in (one folder per commit)",
    "logs": "oracle output and build logs",
    "ccache": "host builds' compiler cache (capped by CCACHE_MAXSIZE)",
    "bytecode": "probe runs' compiled Python (goes with each environment gc removes)",
    "scratch": "exported trees and installs in progress",
    "reports": "reports of finished bisections",
    "links": "symbolic links in place of a cache or log folder: never followed, never removed",
    "other": "anything else in the cache folder",
}


@dataclass
class Item:
    kind: str
    path: Path
    bytes: int = 0
    files: int = 0
    last_used: float = 0.0  # epoch seconds
    protected: str | None = None  # why gc must leave it (None: it may go)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": str(self.path), "bytes": self.bytes,
                "last_used": iso(self.last_used)}


@dataclass
class Usage:
    kind: str
    bytes: int = 0
    items: int = 0
    oldest: float | None = None
    newest: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "bytes": self.bytes, "items": self.items,
                "oldest_use": iso(self.oldest), "newest_use": iso(self.newest),
                "what": DESCRIBE[self.kind]}


def iso(t: float | None) -> str | None:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds") if t else None


# -- sizes and ages ---------------------------------------------------------------------------

_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50}
_AGES = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
MAX_SIZE = 2**63 - 1  # bytes: 8 EiB, more than any file system holds
MAX_AGE_S = 100 * 365 * 86400


def parse_size(text: str, option: str = "--max-size") -> int:
    """``50G``, ``500M``, ``1.5T``, ``1024`` (bytes); K/M/G/T are powers of 1024, and a
    trailing ``B`` or ``iB`` changes nothing (``50GB`` = ``50GiB`` = ``50G``)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGTP]?)(?:I?B)?\s*", text.upper())
    if not m:
        raise UsageError(f"{option} {text[:40]!r} is not a size: a number with K, M, G or T, "
                         f"e.g. {option} 50G")
    size = Decimal(m.group(1)) * _UNITS[m.group(2)]
    if size > MAX_SIZE:  # a typo; as a float it was inf, and int(inf) a traceback
        raise UsageError(f"{option} {text[:40]!r} is larger than any disk: give at most "
                         f"{MAX_SIZE // _UNITS['P']}P, e.g. {option} 50G")
    return int(size)


def parse_age(text: str, option: str = "--older-than") -> float:
    """``30d``, ``12h``, ``90m``, ``45s``, ``2w``: seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text.lower())
    if not m:
        raise UsageError(f"{option} {text[:40]!r} is not an age: a number with s, m, h, d or "
                         f"w, e.g. {option} 30d")
    age = Decimal(m.group(1)) * _AGES[m.group(2)]
    if age > MAX_AGE_S:  # older than any cache; as a float inf, which selected nothing
        raise UsageError(f"{option} {text[:40]!r} is longer than 100 years: give e.g. "
                         f"{option} 30d")
    return float(age)


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


# -- the inventory -----------------------------------------------------------------------------

def _children(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except OSError:
        return []


def _linked(top: Path, folder: Path) -> bool:
    """Whether ``folder`` or a folder between it and ``top`` is a symbolic link: gc never looks
    through one (lstat), so a link to a folder outside the cache is never a way out of it."""
    while folder != top and top in folder.parents:
        if folder.is_symlink():
            return True
        folder = folder.parent
    return False


def _inside(top: Path, folder: Path) -> list[Path]:
    """The entries of a folder of ``top``, none when it, or a folder on the way, is a link
    (``links`` names it instead); an entry that is itself a link is an item, never opened."""
    return [] if _linked(top, folder) else _children(folder)


# Above ruff's limits on purpose: one branch per cache folder `du` counts, in the order it prints
# them.
def _places() -> Iterator[tuple[str, Path]]:  # noqa: C901, PLR0912
    """(kind, item path) for everything bisector keeps, in the order sizes are counted."""
    cache, data = cache_dir(), data_dir()
    for shard in _inside(cache, cache / "wheels"):
        if shard.is_symlink():  # a link where a shard folder should be: an item, as a link
            yield "wheels", shard
            continue
        for d in _children(shard):
            yield ("overlays" if not d.is_symlink() and (d / OVERLAY_MANIFEST).exists()
                   else "wheels"), d
    for uv in (cache / "uv", cache / "docker" / "uv-cache"):
        if uv.exists() and not _linked(cache, uv.parent):
            yield "uv", uv
    for root in (cache / "envs", cache / "docker" / "envs"):
        for d in _inside(cache, root):
            if not d.name.endswith(".log"):  # a Docker environment's install log goes with it
                yield "envs", d
    for d in _inside(cache, cache / "oracles"):
        yield "oracles", d
    for d in _inside(cache, cache / "trees"):
        yield "trees", d
    if (cache / "ccache").exists():
        yield "ccache", cache / "ccache"
    if (cache / "pycache").exists():
        yield "bytecode", cache / "pycache"
    for d in _inside(cache, cache / "tmp"):
        yield "scratch", d
    for folder in links():
        yield "links", folder
    known = {"wheels", "uv", "envs", "docker", "oracles", "trees", "ccache", "pycache", "tmp",
             "in-use"}
    for d in _children(cache):
        if d.name not in known:
            yield "other", d
    for sub in ("runs", "builds"):
        for d in _inside(data, data / "logs" / sub):
            yield LOGS, d
    for d in _children(data / "reports"):
        yield "reports", d


# The folders gc opens; a link in place of one (or of a folder above it) is never followed.
FOLDERS = ("wheels", "envs", "docker", "docker/envs", "oracles", "trees", "tmp")


def links() -> list[Path]:
    """Cache and log folders that are symbolic links: listed as ``links``, never opened."""
    cache, data = cache_dir(), data_dir()
    found = [cache / f for f in FOLDERS if (cache / f).is_symlink()]
    found += [data / f for f in ("logs", "logs/runs", "logs/builds") if (data / f).is_symlink()]
    return found


def _measure(item: Item, seen: set[tuple[int, int]]) -> None:
    """Bytes (each inode once over the whole inventory) and the newest use of one item."""
    paths: Iterable[Path] = [item.path]
    if item.kind == "envs" and item.path.with_name(item.path.name + ".log").exists():
        paths = [item.path, item.path.with_name(item.path.name + ".log")]
    newest = 0.0
    for top in paths:
        for root, _dirs, files, is_dir in _walk(top):
            if is_dir:
                newest = max(newest, _dir_mtime(root))
            for name in files:
                try:
                    st = os.lstat(os.path.join(root, name))
                except OSError:
                    continue
                # A symlink's atime moves whenever a path through it is resolved (a listing
                # that asks "is it a folder?" does): only its mtime says anything.
                used = st.st_mtime if stat.S_ISLNK(st.st_mode) else st.st_atime
                newest = max(newest, st.st_mtime, used)
                item.files += 1
                if st.st_nlink > 1:
                    if (st.st_dev, st.st_ino) in seen:
                        continue
                    seen.add((st.st_dev, st.st_ino))
                item.bytes += st.st_size
    item.last_used = max(item.last_used, newest)


def _walk(top: Path) -> Iterator[tuple[str, list[str], list[str], bool]]:
    if top.is_symlink() or not top.is_dir():
        yield str(top.parent), [], [top.name], False
        return
    for root, dirs, files in os.walk(top):
        # Symlinks are counted as links (an installed base's tree of links), never followed.
        yield root, dirs, files, True


def _dir_mtime(path: str) -> float:
    """A folder's mtime (a file made or removed in it); not its atime, which listing it moves."""
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def inventory(store_uses: dict[str, float] | None = None) -> list[Item]:
    """Everything on disk, measured; ``store_uses``: artifact key -> the store's last use."""
    seen: set[tuple[int, int]] = set()
    items = []
    for kind, path in _places():
        item = Item(kind, path)
        _measure(item, seen)
        if store_uses and path.name in store_uses and kind in ("wheels", "overlays"):
            item.last_used = max(item.last_used, store_uses[path.name])
        items.append(item)
    return items


def usage(items: list[Item]) -> list[Usage]:
    """Per kind, in ``KINDS`` order; kinds with nothing on disk are left out."""
    out: dict[str, Usage] = {}
    for i in items:
        u = out.setdefault(i.kind, Usage(i.kind))
        u.bytes += i.bytes
        u.items += 1
        if i.last_used:
            u.oldest = i.last_used if u.oldest is None else min(u.oldest, i.last_used)
            u.newest = i.last_used if u.newest is None else max(u.newest, i.last_used)
    return [out[k] for k in KINDS if k in out]


def du_data(items: list[Item]) -> dict[str, Any]:
    """What ``bisect du --json`` prints."""
    kinds = usage(items)
    return {"cache_dir": str(cache_dir()), "data_dir": str(data_dir()),
            "total_bytes": sum(u.bytes for u in kinds),
            "kinds": [u.as_dict() for u in kinds]}


# -- what gc removed ----------------------------------------------------------------------------

def record_removed(items: Iterable[Item], when: float) -> None:
    """Append every removed item to the ledger in the data folder: an audit of what went, and
    how ``show`` tells a log removed by gc from one that was never on this machine."""
    lines = [json.dumps({"at": iso(when), "kind": i.kind, "path": str(i.path),
                         "bytes": i.bytes}) + "\n" for i in items]
    if lines:
        with (data_dir() / LEDGER).open("a", encoding="utf-8") as f:
            f.writelines(lines)


def du(store: Store | None) -> dict[str, Any]:
    """``bisect du``: usage by kind; the store (when there is one) adds its record of when
    each artifact was last used."""
    uses = ({u.key: u.last_used.timestamp() for u in ArtifactStore(store).last_uses()}
            if store is not None else None)
    return du_data(inventory(uses))
