"""``bisect workers``: who serves the queue, what each offers, what waits there, and where the
fleet's packages came from."""

from __future__ import annotations

from typing import Any

from bisector.base.kinds import Way
from bisector.queue import need_queue
from bisector.queue.routing import BUILD, PROBE, Offer, kind
from bisector.store import workers
from bisector.store.db import Store

FOUND = (Way.CACHED, Way.BUCKET)  # a package found made: this box's cache, or another's upload


def hit_rate(counts: dict[str, int]) -> float | None:
    """The share of probes whose package was found made in the fleet (its local cache or the
    team's object store) rather than built, downloaded from an index or overlaid; None with
    no probe."""
    total = sum(v for k, v in counts.items() if k != Way.BROKEN)
    return sum(counts.get(k, 0) for k in FOUND) / total if total else None


def _kinds(queues: list[str]) -> list[str]:
    """``probe``, ``build``: what a worker's per-environment queues amount to."""
    return [k for k in (PROBE, BUILD) if any(kind(q) == k for q in queues)]


def workers_data(store: Store) -> dict[str, Any]:
    """``bisect workers``: the workers seen in the last day (live ones first), each with its
    GPU, what it offers, the probe it runs and its last heartbeat; the queue's jobs by
    status; and per worker and in all, how the last day's probes got their packages."""
    by_worker = workers.origins(store)
    rows = []
    for w in workers.listing(store):
        d = w.as_dict()
        d["kinds"] = _kinds(w.queues)
        d["offers"] = Offer.from_dict(w.offer).words() if w.offer else "-"
        d["obtained"] = by_worker.get(w.name, {})
        rows.append(d)
    fleet: dict[str, int] = {}
    for counts in by_worker.values():
        for k, v in counts.items():
            fleet[k] = fleet.get(k, 0) + v
    queue: list[dict[str, Any]] = []
    if store.engine.dialect.name == "postgresql" and need_queue(required=False):
        # lazy: procrastinate is the optional postgres extra
        from bisector.queue.procrastinate import JobQueue, has_queue

        if has_queue(store):
            jq = JobQueue(store)
            try:
                queue = [q.as_dict() for q in jq.summary()]
            finally:
                jq.close()
    return {"workers": rows, "queues": queue,
            "fleet": {"obtained": fleet, "hit_rate": hit_rate(fleet)}}
