"""``bisect workers``: who serves the queue, and what waits there."""

from __future__ import annotations

from typing import Any

from bisector.queue import need_queue
from bisector.store import workers
from bisector.store.db import Store


def workers_data(store: Store) -> dict[str, Any]:
    """``bisect workers``: the workers seen in the last day (live ones first), each with its
    GPU, the probe it runs and its last heartbeat, and the queue's jobs by status."""
    rows = [w.as_dict() for w in workers.listing(store)]
    queue: list[dict[str, Any]] = []
    if store.engine.dialect.name == "postgresql" and need_queue(required=False):
        # lazy: procrastinate is the optional postgres extra
        from bisector.queue.procrastinate import JobQueue, has_queue

        if has_queue(store):
            jq = JobQueue(store)
            try:
                queue = jq.summary()
            finally:
                jq.close()
    return {"workers": rows, "queues": queue}
