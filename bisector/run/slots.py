"""A round's probes on this box: one after the other with one slot, else a thread a probe,
each on a slot (a GPU, or none), and what the rest of the search should still take.

The queue's counterpart is :class:`~bisector.run.remote.Workers` (the same round as queue jobs
on other boxes); the runner picks one of the two and neither knows the loop.
"""

from __future__ import annotations

import math
import queue
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any

from bisector.base.events import Events
from bisector.executors.base import prepare
from bisector.infra import cancel
from bisector.run.pipeline import Pipeline, SampleRecorder, StoreRecorder
from bisector.run.prefetch import Prefetcher
from bisector.run.wiring import Judging, Means
from bisector.store import durations
from bisector.store import runs as run_store
from bisector.store.db import Store
from bisector.store.records import BisectionRecord

# Probe one position on one slot (its GPU, or None); raises only when it could not (a bug, a
# lost lease): a verdict, even skip, is stored by the probe itself (what it returns is not read).
Probe = Callable[[int, str | None], Any]


def probing(store: Store, bisection_id: int, key: run_store.Key, me: str, judging: Judging,
            means: Means, events: Events) -> tuple[Prefetcher | None, Pipeline]:
    """The pipeline every probe of this bisection run here goes through, and the prefetcher
    that feeds it what the next probes need while the oracles run (run/prefetch.py; None
    with ``--prefetch 0`` or workers: they obtain on their own boxes)."""
    oracle, source, executor = judging.oracle, means.source, means.executor
    # A flaky oracle's runs are samples: every probe runs and each run is kept.
    recorder = (SampleRecorder if oracle.meta.sampled else StoreRecorder)(
        store, bisection_id, key, me)
    ahead = None if means.prefetch <= 0 or means.workers is not None else \
        Prefetcher(source.obtain, source.kind, lambda inst: prepare(executor, inst, oracle),
                   means.prefetch, means.spare_builds, unbuilt=source.obtain_unbuilt)
    return ahead, Pipeline(source.obtain if ahead is None else ahead.obtain, executor, oracle,
                           judging.rules, recorder, events, judging.hunt)


def run_here(positions: Sequence[int], slots: Sequence[str | None], probe: Probe) -> None:
    """Run the round's probes on ``slots``; the first failure stops the rest (Ctrl-C too:
    what is still in flight is killed, nothing of it recorded) and is raised."""
    if len(slots) == 1:
        for pos in positions:  # the endpoints with one slot: one after the other
            probe(pos, slots[0])
        return
    free: queue.Queue[str | None] = queue.Queue()
    for slot in slots:
        free.put(slot)
    # A round that fits the slots runs its i-th probe on the i-th GPU: a performance round
    # places the reference so that each GPU alternates reference and candidate
    # (strategies/perf.layout), and its pairs never cross GPUs.
    placed = len(positions) <= len(slots)

    def work(i: int, pos: int) -> None:
        gpu = slots[i] if placed else free.get()
        try:
            probe(pos, gpu)
        finally:
            if not placed:
                free.put(gpu)

    with ThreadPoolExecutor(max_workers=len(slots), thread_name_prefix="probe") as pool:
        futures = [pool.submit(work, i, pos) for i, pos in enumerate(positions)]
        try:
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            for f in done:
                f.result()  # a probe that failed (not a verdict: a bug, a lost lease)
        except BaseException:
            cancel.stop_all()  # Ctrl-C or a failure: kill what is still in flight
            wait(futures)
            raise


def time_left(store: Store, record: BisectionRecord, width: int, left: int) -> float | None:
    """Seconds the search should still take: ``left`` probes, ``width`` at a time (a round of
    K probes cuts the window K+1 ways, worth log2(K+1) single probes), each at the mean
    paid-for probe of this oracle measured on this repository. None when nothing was
    measured yet: another oracle's probes are no estimate of this one's."""
    per = durations.probe_seconds(store, record.repo_path, record.oracle_sha256)
    if per is None or left <= 0:
        return None
    return math.ceil(left / math.log2(width + 1)) * per.mean_s
