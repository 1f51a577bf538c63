"""The ``bisect worker`` process: register, take probe jobs one at a time, beat, hand back the
jobs of workers that went silent, stop cleanly on SIGTERM.

One worker runs one probe at a time (one per GPU: ``--gpu N`` pins its probes there), in a
thread of Procrastinate's asyncio worker, whose event loop keeps both heartbeats (the queue's
and bisector's ``worker`` row) going during an hour-long build. Beside it, every beat, this
worker hands back to the queue any job whose worker stopped heartbeating: a worker killed
with ``kill -9`` loses its probe to the next worker that looks, and its oracle's process
tree has already died with it (the reaper's parent-death signal) or is swept by the next
worker on that box. This is a loop of every worker rather than a periodic Procrastinate job,
because a periodic job would wait in the queue behind probes that take an hour.

SIGTERM (``systemctl stop``) lets the probe in hand finish for ``WORKER_SHUTDOWN_S``, then
aborts it and hands it back; a second signal kills the worker.

``burst`` (rq's ``--burst``, Procrastinate's ``wait=False``): take the jobs waiting now, one
after the other, and return once none is left; a test drains the queue in its own process
and then asserts, instead of starting a worker and polling for what it did.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable, Sequence

import procrastinate

from bisector.app.bisections import sweep_leftovers
from bisector.app.tasks import Host
from bisector.base import defaults
from bisector.queue import procrastinate as q
from bisector.queue.routing import Offer
from bisector.run.policy import Policy
from bisector.store import workers
from bisector.store.db import Store
from bisector.worker.offer import offer as read_offer


def listened(kinds: Sequence[str], offer: Offer) -> list[str]:
    """The queues of ``--queue`` kinds: ``probe``, one per environment this box offers
    (``queue/routing.py``), and the plain ``probe`` queue of coordinators that predate them
    (their waiting jobs are not stranded by an upgrade); ``build``, one per Python it has
    (a build needs no GPU), and the plain one likewise."""
    return [*([*offer.queues(), q.PROBE_QUEUE] if q.PROBE_QUEUE in kinds else []),
            *([*offer.build_queues(), q.BUILD_QUEUE] if q.BUILD_QUEUE in kinds else [])]


def serve(store: Store, *, gpu: str | None, queues: Sequence[str], name: str | None,  # noqa: PLR0913
          say: Callable[[str], None], pythons: Sequence[str] = (),
          shutdown_s: float = defaults.WORKER_SHUTDOWN_S, policy: Policy,
          burst: bool = False) -> None:
    """Run a worker until it is stopped (``burst``: until no job waits); ``policy``: the
    command's (its object store)."""
    offer = read_offer(gpu, pythons)
    q.ensure_schema(store)
    host_name = socket.gethostname()
    name = name or f"{host_name}/{'gpu' + gpu if gpu is not None else 'cpu'}"
    host = Host(store, gpu=gpu, name=name, say=say, pythons=offer.pythons, policy=policy)
    qapp = q.worker_app(store, lambda ctx, task_id: host.run(task_id, ctx.should_abort),
                        lambda ctx, task_id: host.build(task_id, ctx.should_abort))
    sweep_leftovers(host.events)
    listen = listened(queues, offer)
    host.worker_id = workers.register(store, name=name, owner=host.me, host=host_name,
                                      pid=os.getpid(), gpu=gpu, queues=listen,
                                      offer=offer.as_dict())
    say(f"worker {name} (id {host.worker_id}) takes {', '.join(queues)} jobs from "
        f"{store.url}" + (f", probes on GPU {gpu}" if gpu is not None else "")
        + (f"; it offers {offer.words()}" if q.PROBE_QUEUE in queues else ""))
    logging.getLogger("procrastinate").setLevel(logging.WARNING)
    try:
        asyncio.run(_main(qapp, store, host.worker_id, listen, name, say, shutdown_s, burst))
    finally:
        workers.stop(store, host.worker_id)
        say(f"worker {name} stopped")


async def _main(qapp: procrastinate.App, store: Store, worker_id: int, queues: list[str],
                name: str, say: Callable[[str], None], shutdown_s: float,
                burst: bool = False) -> None:
    async with qapp.open_async():
        side = asyncio.create_task(_beat(qapp, store, worker_id, say), name="bisector-beat")
        try:
            await qapp.run_worker_async(
                queues=queues, name=name, concurrency=1, wait=not burst,
                update_heartbeat_interval=defaults.WORKER_BEAT_S,
                stalled_worker_timeout=defaults.WORKER_STALE_S,
                # a burst runs inside its caller (a test): the caller's signals stay its own
                shutdown_graceful_timeout=shutdown_s, install_signal_handlers=not burst)
        finally:
            side.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await side


async def _beat(qapp: procrastinate.App, store: Store, worker_id: int,
                say: Callable[[str], None]) -> None:
    while True:
        try:
            await asyncio.to_thread(workers.beat, store, worker_id)
            handed = await q.hand_back_stalled(qapp, defaults.WORKER_STALE_S)
            if handed:
                say(f"handed job(s) {', '.join(map(str, handed))} of a silent worker back "
                    f"to the queue")
        except Exception as e:  # the database was away: the next beat tries again
            say(f"warning: heartbeat failed ({type(e).__name__}: {e})")
        await asyncio.sleep(defaults.WORKER_BEAT_S)
