"""``bisect gc``: remove least recently used artifacts that no unfinished bisection needs.

What an unfinished bisection (running, or interrupted and waiting for ``resume``) needs is
read from the store, not guessed from times: for every candidate commit of its range, the
artifact rows of that commit (wheels, overlays, and the base wheel each overlay lies on), the
environments those artifacts were installed into (their names come from the artifact key, the
oracle's dependencies and the Python tag or image id the bisection recorded, by the executors'
own formula), its oracle's copy, and the logs of its commits and builds. While any bisection is
*running*, uv's caches are kept too (an install in progress reads them). The log of a build
that failed is kept as long as its row: it is the reason a later probe of that commit gives.
A protected item is kept whatever the limits say; so is anything a live process has marked in
use (``infra/inuse.py``: the environment, wheel and tree of every probe running now, a
``bisect tick``'s or ``bisect check``'s included; the mark of a dead owner counts for nothing),
and anything used in the last ``GC_GRACE_S`` (a wheel a build just published before its row was
written). An item is moved away only while gc holds it exclusively, so a probe that comes at
that moment waits, then makes it again.

gc never follows a symbolic link out of its folders: a link inside them is an item removed as
a link, and a cache folder (``wheels``, ``envs``...) that is itself a link is listed as
``links`` and never opened, with one line saying so.

Times alone would have been simpler ("keep everything used since the oldest unfinished
bisection started") but one interrupted bisection from last spring would then pin every cache
since, and an old wheel it will need on resume would not be protected at all.

The store is the one given to gc: a cache shared between stores (``BISECTOR_CACHE_DIR``) is
protected only for the bisections of that store.

A removed wheel's artifact row stays (it is history: which probe ran on what); the provider
treats a row whose file is gone as not cached (``obtained.usable``) and builds or downloads
again. Items leave by rename into the scratch folder, then deletion, so no reader ever sees a
half-deleted wheel or environment.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from bisector.app import disk
from bisector.app.disk import LOGS, MANAGED, Item
from bisector.artifacts.cache import sweep_scratch
from bisector.base import defaults
from bisector.base.errors import BisectorError
from bisector.base.kinds import ArtifactStatus, State
from bisector.base.paths import cache_dir
from bisector.executors.base import env_name
from bisector.executors.bytecode import forget
from bisector.infra import inuse
from bisector.oracle.script import parse_metadata
from bisector.store import bisections
from bisector.store.artifacts import ArtifactStore
from bisector.store.db import Store


@dataclass
class Needs:
    """What unfinished bisections need, each with the reason shown for keeping it."""

    keys: dict[str, str] = field(default_factory=dict)  # artifact key (wheel, overlay, log)
    envs: dict[str, str] = field(default_factory=dict)  # environment folder name
    oracles: dict[str, str] = field(default_factory=dict)  # oracle copy folder (sha256[:16])
    commits: dict[str, str] = field(default_factory=dict)  # sha[:12]: oracle run log folders
    running: str | None = None  # uv's caches are kept while a bisection runs
    failed: set[str] = field(default_factory=set)  # keys of builds that failed: logs kept


def needs(store: Store) -> Needs:
    out = Needs()
    artifacts = ArtifactStore(store)
    for b in bisections.unfinished(store):
        why = f"bisection {b.id} is {b.state.value}"
        if b.state is State.RUNNING and out.running is None:
            out.running = why
        cands = bisections.candidates(store, b.id)
        deps = _dependencies(store, b.oracle_sha256)
        executor = b.environment.get("executor") or {}
        places = [str(p) for p in (executor.get("python"), executor.get("image_id")) if p]
        for a in artifacts.for_commits(cands):
            for key in (a.key, a.settings.get("base_key")):
                if isinstance(key, str):
                    out.keys.setdefault(key, why)
            for place in places:
                out.envs.setdefault(env_name(a.key, deps, place), why)
        out.oracles.setdefault(b.oracle_sha256[:16], why)
        for sha in cands:
            out.commits.setdefault(sha[:12], why)
    return out


def _dependencies(store: Store, oracle_sha256: str) -> tuple[str, ...]:
    try:
        row = bisections.get_oracle(store, oracle_sha256)
        return parse_metadata(row.content, row.name).dependencies
    except BisectorError:
        return ()  # an oracle the store lost: its environments cannot be named, nor run


def protect(items: list[Item], need: Needs, now: float, grace_s: float) -> None:
    """Set ``Item.protected`` to the reason gc must leave it, on every item that must stay."""
    live = inuse.marks()
    for i in items:
        name = i.path.name
        busy = inuse.busy(i.path, live) if i.kind in MANAGED else None
        if i.kind not in (*MANAGED, LOGS):
            i.protected = f"{i.kind} are never removed by gc"
        elif busy is not None:
            i.protected = busy
        elif i.kind in ("wheels", "overlays") and name in need.keys:
            i.protected = need.keys[name]
        elif i.kind == "envs" and name in need.envs:
            i.protected = need.envs[name]
        elif i.kind == "oracles" and name in need.oracles:
            i.protected = need.oracles[name]
        elif i.kind == "trees" and name[:12] in need.commits:
            i.protected = need.commits[name[:12]]
        elif i.kind == "uv" and need.running:
            i.protected = f"{need.running} (it installs from uv's cache)"
        elif i.kind == LOGS and (name[:12] in need.commits or name.removesuffix(".log")
                                 in need.keys):
            i.protected = need.commits.get(name[:12]) or need.keys[name.removesuffix(".log")]
        elif i.kind == LOGS and name.removesuffix(".log") in need.failed:
            i.protected = ("the log of a build that failed: the reason every later probe of "
                           "that commit gives")
        elif i.last_used > now - grace_s:
            i.protected = f"used in the last {grace_s / 60:.0f} minutes"


@dataclass
class Removal:
    remove: list[Item]
    items: list[Item]
    max_size: int | None
    older_than_s: float | None
    dry_run: bool = True
    errors: list[str] = field(default_factory=list)
    swept: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # one line per thing gc would not touch

    @property
    def managed_before(self) -> int:
        return sum(i.bytes for i in self.items if i.kind in MANAGED)

    @property
    def freed(self) -> int:
        return sum(i.bytes for i in self.remove)

    @property
    def managed_after(self) -> int:
        return self.managed_before - sum(i.bytes for i in self.remove if i.kind in MANAGED)

    @property
    def over_cap(self) -> bool:
        return self.max_size is not None and self.managed_after > self.max_size

    def kept(self) -> dict[str, dict[str, int]]:
        """reason -> items and bytes kept for it (managed kinds and logs only)."""
        out: dict[str, dict[str, int]] = {}
        for i in self.items:
            if i.protected and i.kind in (*MANAGED, LOGS):
                row = out.setdefault(i.protected, {"items": 0, "bytes": 0})
                row["items"] += 1
                row["bytes"] += i.bytes
        return out

    def as_dict(self) -> dict[str, Any]:
        """What ``bisect gc --json`` prints."""
        return {"dry_run": self.dry_run, "max_size": self.max_size,
                "older_than_s": self.older_than_s,
                "removed": [i.as_dict() for i in self.remove], "freed_bytes": self.freed,
                "managed_bytes_before": self.managed_before,
                "managed_bytes_after": self.managed_after, "over_cap": self.over_cap,
                "kept": [{"reason": r, **v} for r, v in sorted(self.kept().items())],
                "scratch_swept": self.swept, "notes": self.notes, "errors": self.errors}


def choose(items: list[Item], *, max_size: int | None, older_than_s: float | None,
         now: float) -> Removal:
    """Everything older than ``older_than_s`` (logs included), then least recently used
    managed items until the managed kinds fit in ``max_size``; protected items never."""
    free = sorted((i for i in items if i.protected is None and i.kind in (*MANAGED, LOGS)),
                  key=lambda i: (i.last_used, str(i.path)))
    chosen: list[Item] = []
    if older_than_s is not None:
        chosen = [i for i in free if i.last_used < now - older_than_s]
    if max_size is not None:
        total = sum(i.bytes for i in items if i.kind in MANAGED)
        total -= sum(i.bytes for i in chosen if i.kind in MANAGED)
        taken = {id(i) for i in chosen}
        for i in free:
            if total <= max_size:
                break
            if i.kind in MANAGED and id(i) not in taken:
                chosen.append(i)
                total -= i.bytes
    chosen.sort(key=lambda i: (i.last_used, str(i.path)))
    return Removal(chosen, items, max_size, older_than_s)


def collect(store: Store, *, max_size: int | None, older_than_s: float | None,
            dry_run: bool, now: float | None = None,
            grace_s: float = defaults.GC_GRACE_S) -> Removal:
    """Inventory, protect, choose, and (unless ``dry_run``) remove; the Removal says what went."""
    now = time.time() if now is None else now
    recorded = ArtifactStore(store).last_uses()
    items = disk.inventory({u.key: u.last_used.timestamp() for u in recorded})
    need = needs(store)
    need.failed = {u.key for u in recorded if u.status is ArtifactStatus.FAILED}
    protect(items, need, now, grace_s)
    p = choose(items, max_size=max_size, older_than_s=older_than_s, now=now)
    p.dry_run = dry_run
    p.notes = [f"not followed: {i.path} is a symbolic link to {os.readlink(i.path)}; gc never "
               f"follows a link out of its folders (make it a real folder to have gc manage it)"
               for i in items if i.kind == "links" and i.path.is_symlink()]
    if not dry_run:
        p.swept = sweep_scratch()
        gone = []
        for i in p.remove:
            with inuse.exclusive(i.path) as busy:
                if busy is not None:  # taken since the inventory: it stays
                    i.protected = busy
                elif _remove(i, p.errors):
                    gone.append(i)
        p.remove = gone
        disk.record_removed(gone, now)
    return p


def _remove(item: Item, errors: list[str]) -> bool:
    """Out of sight first (one rename into the scratch folder), then deleted; logs, which live
    in the data folder, are deleted where they are. False when it could not go. A link is
    removed as a link: what it points to is never touched."""
    target = item.path
    scratch = cache_dir() / "tmp"
    if item.kind != LOGS and not scratch.is_symlink():
        scratch.mkdir(parents=True, exist_ok=True)
        moved = scratch / f"gc-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            item.path.rename(moved)
            target = moved
        except FileNotFoundError:
            return True  # another gc (or a discard) was first
        except OSError:
            pass  # another filesystem or no permission to rename: delete in place
    if item.kind == "envs":
        log = item.path.with_name(item.path.name + ".log")
        if log.is_file() and not log.is_symlink():
            log.unlink(missing_ok=True)
        forget(item.path)  # its bytecode (executors/bytecode.py)
    failed: list[str] = []
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target, onerror=lambda _f, p, e: failed.append(f"{p}: {e[1]}"))
    else:
        try:
            target.unlink()
        except FileNotFoundError:
            pass
        except OSError as e:
            failed.append(f"{target}: {e}")
    if failed:
        errors.append(f"could not remove all of {item.path} ({failed[0]}"
                      f"{f' and {len(failed) - 1} more' if len(failed) > 1 else ''})")
    return not failed or not target.exists()


def configured_cap() -> str | None:
    """The size cap applied after each bisection: ``BISECTOR_MAX_CACHE`` (e.g. ``50G``)."""
    return os.environ.get("BISECTOR_MAX_CACHE") or defaults.MAX_CACHE


def after_bisection(store: Store) -> str | None:
    """Apply the configured cap, if any; a line for the run's notes (None: nothing to say).
    Never raises for a bad setting: the bisection's answer matters more than the cache."""
    cap = configured_cap()
    if not cap:
        return None
    try:
        limit = disk.parse_size(cap, "BISECTOR_MAX_CACHE")
    except BisectorError as e:
        return f"cache cap not applied: {e.message}"
    p = collect(store, max_size=limit, older_than_s=None, dry_run=False)
    if not p.remove and not p.over_cap:
        return None
    said = (f"cache cap {cap}: removed {len(p.remove)} least recently used item(s), "
            f"{disk.human(p.freed)}; caches now {disk.human(p.managed_after)}")
    if p.over_cap:
        said += " (still over the cap: the rest is needed by unfinished bisections or in use)"
    if p.errors:
        said += f"; {p.errors[0]}"
    return said


def describe(p: Removal) -> list[str]:
    """The text ``bisect gc`` prints (the JSON is ``Removal.as_dict``)."""
    verb = "would remove" if p.dry_run else "removed"
    lines = [f"{verb} {i.kind:<8} {disk.human(i.bytes):>10}  last used "
             f"{(disk.iso(i.last_used) or '-')[:10]}  {i.path}" for i in p.remove]
    lines.append(f"{verb} {len(p.remove)} item(s), {disk.human(p.freed)}; caches "
                 f"{disk.human(p.managed_before)} -> {disk.human(p.managed_after)}"
                 + (f" (cap {disk.human(p.max_size)})" if p.max_size is not None else ""))
    for reason, row in sorted(p.kept().items()):
        lines.append(f"kept {row['items']} item(s), {disk.human(row['bytes'])}: {reason}")
    if p.over_cap:
        lines.append("still over the cap: what is left is needed by unfinished bisections or "
                     "in use")
    lines += p.notes
    lines += [f"error: {e}" for e in p.errors]
    return lines
