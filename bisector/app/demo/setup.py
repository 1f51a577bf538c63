"""``bisect demo``'s bisection, made ready: the bundled torchlet history generated afresh, and
the request that bisects it (v0.1.0..v0.2.0, or with ``nightlies`` a range of dates over its
nightly wheels, served from 127.0.0.1 while the block runs). The CLI only runs and prints it.

The nightly demo runs in a store of its own, made anew each time (:func:`nightly_store`): in
the first demo's store its commits' verdicts and source builds were there already (the history
is the same every time), so it ran 2 oracle runs, reused 9 and named a culprit obtained as an
overlay on a source build, never showing the nightly path it promises.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from bisector.app.demo import nightlies as demo_nightlies
from bisector.app.demo.torchlet import SyntheticHistory, generate
from bisector.base import defaults
from bisector.base.paths import data_dir
from bisector.run.config import Request


@dataclass(frozen=True)
class Demo:
    hist: SyntheticHistory
    request: Request
    store: str | None = None  # the nightly demo's own store; None: the command's store


def nightly_store(folder: Path) -> Path:
    """``folder/nightlies.db``, removed with its journal files if it was there: the nightly
    demo's store, empty, so every probe is a nightly wheel or an overlay on one."""
    path = folder / "nightlies.db"
    for leftover in (path, *(path.with_name(path.name + s) for s in ("-wal", "-shm",
                                                                     "-journal"))):
        leftover.unlink(missing_ok=True)
    return path


@contextlib.contextmanager
def demo(directory: Path | None, jobs: int | None, nightlies: bool,
         say: Callable[[str], None], own_store: bool = True) -> Iterator[Demo]:
    """The history at ``directory`` (default: the data directory's ``demo/torchlet``, made
    anew), and its request; ``say`` is told what was made and served. ``own_store``: the
    nightly demo runs in :func:`nightly_store` beside the history (False: the user named a
    store with --db or $BISECTOR_DB, and gets it)."""
    path = directory or data_dir() / "demo" / "torchlet"
    if path.exists():
        shutil.rmtree(path)
    hist = generate(path, nightly_every=defaults.DEMO_NIGHTLY_EVERY if nightlies else None)
    say(f"demo history: {len(hist.main)} commits on main in {path}; the planted regression "
        f"is {hist.culprit[:12]} (the bisection does not know that)")
    served = (demo_nightlies.served(hist, path.parent / "index") if nightlies
              else contextlib.nullcontext(None))
    with served as index:
        # The demo's builds take seconds: with several probes at once, build as many at once.
        req = Request(repo=path, good="v0.1.0", bad="v0.2.0", oracle="torchlet_norm",
                      jobs=jobs, build_jobs=jobs or 1)
        if index is not None:
            days = [demo_nightlies.day(stamp) for _, _, stamp in hist.nightlies]
            say(f"serving {len(days)} nightly wheels at {index}; bisecting by dates "
                f"{days[1]}..{days[-1]}")
            req = replace(req, good=days[1], bad=days[-1], nightly_index=index)
        store = None
        if index is not None and own_store:
            store = str(nightly_store(path.parent))
            say(f"a store of its own, made anew (the first demo's would answer most probes "
                f"with its own builds): {store}; bisect --db {store} show reads it")
        yield Demo(hist, req, store)
