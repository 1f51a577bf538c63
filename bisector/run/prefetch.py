"""Preparing the next probes while the oracle runs.

Without it a probe's torch is obtained only once the probe is chosen, so every step pays the
download (a CUDA nightly is about 1 GB, and its Triton), the environment, then the oracle, one
after the other, while the GPU idles during the download and the network during the oracle.
Yet the next round is one of a few, known before this round's verdicts are in: the strategy
names the commits it may probe (:meth:`~bisector.run.strategies.base.Strategy.ahead`, most
likely first, each with its chance), and the :class:`Prefetcher` obtains their torch through
the provider's chain (a download, an overlay, a source build when it pays: :func:`pays`) and
makes their environment (:func:`bisector.executors.base.prepare`) in threads of its own, at
most ``slots`` at once, while the round's oracles run.

A probe asks the prefetcher for its torch. What was made ahead is taken, waiting for it when it
is still in flight; anything else is obtained as before. Nothing made ahead decides anything:
the chain and its locks are the same ones a probe uses, an artifact row means the same whoever
made it, and a prefetch that failed, was too slow or was dropped leaves the probe to obtain its
torch itself, so a verdict is exactly the one it would have been without. When a round starts,
the work for commits it no longer may probe (the losing side) is dropped: a download stops, a
build is killed (``infra/cancel.Scope``); whatever finished stays in the cache for a later
bisection, under ``bisect gc``'s rules. How much of a probe's torch was made ahead is read on
the prefetcher's :class:`~bisector.base.clock.Clock` (a test steps one instead of sleeping).
"""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from bisector.artifacts.installable import Installable
from bisector.artifacts.obtained import Answer, Obtained, Unobtainable
from bisector.base import defaults
from bisector.base.clock import MONOTONIC, Clock
from bisector.base.events import made_ahead
from bisector.base.kinds import Way
from bisector.base.paths import cache_dir
from bisector.infra import cancel


@dataclass
class _Job:
    """One commit made ahead: its torch (``got``, set once obtained), then its environment."""

    position: int
    may_build: bool = False  # a source build ahead paid (pays): else the chain stops before one
    scope: cancel.Scope = field(default_factory=cancel.Scope)
    got: Future[Answer] = field(default_factory=Future)
    # Phase -> (start, end) on the prefetcher's clock; an end of None: still running.
    spans: dict[str, tuple[float, float | None]] = field(default_factory=dict)


def pays(chance: float, kind: Way, spare_builds: int) -> bool:
    """Is making this commit's torch ahead worth it? A download, an overlay or a stored wheel
    always is (the network and the disk idle during the oracle). A source build is a bet: only
    on a build slot no probe of the round needs (``--build-jobs`` beyond ``--jobs``: a build
    box's or idle cores' time), and only when its expected saving, ``chance`` times the build
    time the GPU would otherwise wait, exceeds the build time priced at
    :data:`defaults.SPECULATIVE_BUILD_PRICE` of the GPU's."""
    if kind is Way.BUILD:
        return spare_builds > 0 and chance > defaults.SPECULATIVE_BUILD_PRICE
    return kind is not Way.BROKEN


def disk_allows() -> bool:
    """Room on the cache's disk for what a prefetch may bring (a CUDA wheel set is GBs)."""
    where = cache_dir()
    while not where.exists() and where != where.parent:
        where = where.parent
    return shutil.disk_usage(where).free >= defaults.PREFETCH_FREE_BYTES


class Prefetcher:
    """Makes ahead what the next probes need; a probe's :meth:`obtain` takes it."""

    def __init__(self, obtain: Callable[[int], Answer], kind: Callable[[int], Way],
                 prepare: Callable[[Installable], None] | None, slots: int,
                 spare_builds: int = 0, room: Callable[[], bool] = disk_allows,
                 clock: Clock = MONOTONIC,
                 unbuilt: Callable[[int], Answer] | None = None) -> None:
        self._obtain, self.kind, self.prepare = obtain, kind, prepare
        # What a job that may not build asks: the chain short of a source build (the provider's
        # ``obtain_unbuilt``); None: ``obtain`` never builds.
        self._unbuilt = unbuilt or obtain
        self.slots, self.spare_builds, self.room, self.clock = slots, spare_builds, room, clock
        self._pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="ahead")
        self._jobs: dict[int, _Job] = {}
        self._lock = threading.Lock()
        self.closed = False

    def ahead(self, chances: Sequence[tuple[int, float]], keep: Sequence[int] = ()
              ) -> list[int]:
        """Prepare these positions (most likely first, at most ``slots`` of them) and drop the
        work still in flight for any other but ``keep`` (the round starting now: its probes
        take what was made for them); returns the positions now being prepared."""
        wanted: list[tuple[int, bool]] = []  # position, may build
        if not self.closed and chances and self.room():
            builds = self.spare_builds
            for pos, chance in chances:
                if len(wanted) == self.slots:
                    break
                kind = self.kind(pos)
                if pays(chance, kind, builds):
                    wanted.append((pos, kind is Way.BUILD))
                    builds -= kind is Way.BUILD
        with self._lock:
            chosen = [pos for pos, _ in wanted]
            for pos in [p for p in self._jobs if p not in chosen and p not in keep]:
                job = self._jobs.pop(pos)
                if not job.got.done() or job.spans.get("environment", (0, 0))[1] is None:
                    job.scope.abandon()
            for pos, may_build in wanted:
                if pos not in self._jobs:
                    job = self._jobs[pos] = _Job(pos, may_build)
                    self._pool.submit(self._make, job)
        return chosen

    def _make(self, job: _Job) -> None:
        obtain = self._obtain if job.may_build else self._unbuilt
        with job.scope.inside(), made_ahead():
            try:
                if job.scope.abandoned.is_set():
                    raise cancel.Stopped("no longer needed")
                job.spans["obtain"] = (self.clock.now(), None)
                got = obtain(job.position)
                job.spans["obtain"] = (job.spans["obtain"][0], self.clock.now())
            except BaseException as e:  # handed to the probe, which then obtains it itself
                job.got.set_exception(e)
                return
            job.got.set_result(got)
            if isinstance(got, Obtained) and self.prepare is not None and \
                    not job.scope.abandoned.is_set():
                job.spans["environment"] = (self.clock.now(), None)
                # A failure here is the probe's to meet: it makes the environment itself, and
                # says why not.
                with contextlib.suppress(Exception):
                    self.prepare(got.installable)
                job.spans["environment"] = (job.spans["environment"][0], self.clock.now())

    def obtain(self, pos: int) -> Answer:
        """The torch of ``pos`` for its probe: the one made ahead (waited for while still in
        flight, with how much of it was made before the probe asked), else obtained now."""
        with self._lock:
            job = self._jobs.pop(pos, None)
        if job is None:
            return self._obtain(pos)
        asked = self.clock.now()
        try:
            got = job.got.result()
        except Exception:  # failed or dropped: as if never made ahead
            return self._obtain(pos)
        if isinstance(got, Unobtainable) and not got.permanent:
            return self._obtain(pos)  # the machine's failure then: tried again now, as always
        if not isinstance(got, Obtained):
            return got
        return replace(got, ahead=hidden(job.spans, asked, self.clock.now()))

    def close(self) -> None:
        """The bisection ended: drop every prefetch still in flight, wait for none."""
        with self._lock:
            self.closed = True
            jobs, self._jobs = list(self._jobs.values()), {}
        for job in jobs:
            job.scope.abandon()
        self._pool.shutdown(wait=False, cancel_futures=True)


def hidden(spans: dict[str, tuple[float, float | None]], asked: float, now: float
           ) -> dict[str, float]:
    """Seconds of each phase made before the probe asked for it (``asked``): the time the
    previous oracle hid. The environment's part is counted up to when the probe got its
    torch (``now``); what is left of it the probe's own environment phase shows as its wait."""
    out = {}
    for phase, (start, end) in spans.items():
        until = min(end if end is not None else now, asked if phase == "obtain" else now)
        if until > start:
            out[phase] = round(until - start, 3)
    return out
