"""``bisect worker``, ``bisect workers`` and ``bisect cancel``: several boxes sharing a
PostgreSQL store, from the command line.

A worker is started by systemd (``deploy/systemd/bisector-worker@.service``, one per GPU) or
by hand; ``bisect start`` against a store with a live worker enqueues its probes (``--enqueue``
/ ``--no-enqueue`` force either way). Every bad input is refused before the store is touched.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

from bisector.base.errors import UsageError
from bisector.base.kinds import Way
from bisector.cli.config_file import ConfiguredCommand
from bisector.cli.console import err, escape, out
from bisector.cli.context import Ctx
from bisector.cli.options import BISECTION_ID
from bisector.store.location import url_from

if TYPE_CHECKING:
    pass

QUEUES = ("probe", "build")  # bisector.queue.procrastinate.QUEUES, without importing procrastinate

ENQUEUE = click.option(
    "--enqueue/--no-enqueue", "enqueue", default=None,
    help="Send each round's probes to `bisect worker`s through the store's queue, or run them "
    "in this process (default: enqueue when the store is PostgreSQL and a worker is alive).")


def check_enqueue(db: str, enqueue: bool | None) -> bool | None:
    """``--enqueue`` names a queue in the store: refused on SQLite before anything is written."""
    if enqueue and not url_from(db).startswith("postgresql"):
        raise UsageError(f"--enqueue sends probes to workers through a PostgreSQL store, and "
                         f"{db} is not one: give --db postgresql+psycopg://USER@HOST/DB (or "
                         f"set BISECTOR_DB), or drop --enqueue to probe in this process")
    if enqueue:
        # lazy: `bisect --help` and completion import none of this
        from bisector import queue

        queue.need_queue()
    return enqueue


def _say(line: str) -> None:
    stamp = datetime.now().strftime("%H:%M:%S")
    err.print(f"{stamp} {escape(line)}", highlight=False)


def check_gpu(gpu: str | None) -> str | None:
    if gpu is None:
        return None
    if not re.fullmatch(r"\d{1,3}", gpu.strip()):
        raise UsageError(f"--gpu {gpu!r}: give one GPU index, like 0 (start one worker per "
                         f"GPU: bisector-worker@0, bisector-worker@1, ...)")
    return gpu.strip()


def check_name(name: str | None) -> str | None:
    if name is not None and not re.fullmatch(r"[\w.@:/+-]{1,100}", name):
        raise UsageError(f"--name {name!r}: use up to 100 letters, digits and . _ - / : @ +")
    return name


@click.command(cls=ConfiguredCommand)
@click.option("--gpu", default=None, metavar="N", help="Run this worker's probes on GPU N "
              "(CUDA_VISIBLE_DEVICES, or the container's device request); one worker per GPU. "
              "Default: nothing pinned.")
@click.option("--queue", "queues", multiple=True, type=click.Choice(QUEUES),
              help="Queues to take jobs from (repeatable; default: probe). A CPU-only box: "
              "--queue build (see docs/fleet.md).")
@click.option("--name", default=None, help="Shown by `bisect workers` (default: HOST/gpuN).")
@click.option("--python", "python", multiple=True, metavar="PATH",
              help="A Python this box probes with (repeatable): a bisection's probes go to a "
              "worker with a Python of its version, at whatever path it has here. Default: "
              "this worker's own and every python3.N on PATH.")
@click.pass_obj
def worker(c: Ctx, gpu: str | None, queues: tuple[str, ...], name: str | None,
           python: tuple[str, ...]) -> None:
    """Take probes from the queue of a PostgreSQL store and run them, one at a time, until
    stopped. SIGTERM or Ctrl-C: the probe in hand finishes (or is handed back after 4 min);
    a worker killed outright loses nothing: its probe is handed to another worker."""
    # lazy: `bisect --help` and completion import none of this
    from bisector import queue
    from bisector.worker import process as worker_process

    gpu, name = check_gpu(gpu), check_name(name)
    if not url_from(c.db).startswith("postgresql"):  # refused before any file is made
        raise UsageError(f"a worker shares a PostgreSQL store with its coordinators, and "
                         f"{c.db} is not one: give --db postgresql+psycopg://USER@HOST/DB "
                         f"(or set BISECTOR_DB) to the workers and to bisect start")
    queue.need_queue()
    store = c.store()
    worker_process.serve(store, gpu=gpu, queues=queues or ("probe",), name=name, say=_say,
                         pythons=python, policy=c.policy)


def _age(iso: str) -> str:
    s = int((datetime.now(UTC) - datetime.fromisoformat(iso)).total_seconds())
    return f"{s} s ago" if s < 120 else f"{s // 60} min ago" if s < 7200 else f"{s // 3600} h ago"


@click.command(name="workers", cls=ConfiguredCommand)
@click.option("--json", "json_out", is_flag=True)
@click.pass_obj
def workers_cmd(c: Ctx, json_out: bool) -> None:
    """List the workers seen in the last day: GPU, queues, the probe each runs now, and its
    last heartbeat (a worker silent past BISECTOR_WORKER_STALE_S is gone)."""
    # lazy: `bisect --help` and completion import none of this
    from bisector.app import workers as app_workers

    data = app_workers.workers_data(c.store(create=False, reads_only=True))
    if json_out:
        click.echo(json.dumps(data, indent=2))
        return
    if not data["workers"]:
        err.print("no worker has been seen in the last day: start one with "
                  "`bisect --db postgresql+psycopg://... worker --gpu 0`")
        return
    # lazy: rich's table, once there is a table to show
    from rich.table import Table

    t = Table("id", "name", "gpu", "queues", "offers", "state", "probe", "heartbeat", "jobs")
    for w in data["workers"]:
        p = w["probe"]
        probe = (f"#{p['bisection']} {p['commit'][:12]}"
                 + (f" (attempt {p['attempt']})" if p["attempt"] and p["attempt"] > 1 else "")
                 if p else "-")
        t.add_row(str(w["id"]), escape(w["name"]), w["gpu"] or "-", ",".join(w["kinds"]),
                  escape(w["offers"]), w["state"], probe, _age(w["heartbeat"]), str(w["jobs"]))
    out.print(t)
    fleet = data["fleet"]
    if fleet["obtained"]:
        got = fleet["obtained"]
        words = {Way.CACHED: "local cache", Way.BUCKET: "object store", Way.PREBUILT: "index",
                 Way.OVERLAY: "overlay", Way.BUILD: "built", Way.BROKEN: "unbuildable"}
        parts = [f"{got[k]} {words.get(k, k)}" for k in sorted(got, key=lambda k: -got[k])]
        rate = fleet["hit_rate"]
        out.print(f"packages of the last day's {sum(got.values())} probe(s): {', '.join(parts)}"
                  + (f"; hit rate {rate:.0%} (found made in the fleet)"
                     if rate is not None else ""))
    for q in data["queues"]:
        out.print(f"queue {q['name']}: {q['waiting']} waiting, {q['running']} running, "
                  f"{q['done']} done, {q['failed']} failed, {q['stopped']} cancelled")


@click.command(cls=ConfiguredCommand)
@click.argument("bisection_id", type=BISECTION_ID)
@click.option("--json", "json_out", is_flag=True)
@click.pass_obj
def cancel(c: Ctx, bisection_id: int, json_out: bool) -> None:
    """Stop a bisection: its probes in flight are killed on their workers and none of them is
    judged; its coordinator stops within a second (a build or a confirmation run too). `bisect
    resume ID` finishes it from what is stored."""
    # lazy: `bisect --help` and completion import none of this
    from bisector.app import bisections

    data = bisections.cancel(c.store(create=False), bisection_id)
    if json_out:
        click.echo(json.dumps(data, indent=2))
        return
    stopped = data["stopped"]
    where = "; ".join(f"{s['commit'][:12]}" + (f" on {s['worker']}" if s["worker"] else
                                                " (waiting)") for s in stopped)
    own = data.get("in_process") or []
    err.print(f"cancelled bisection {bisection_id}: "
              + (f"stopped {len(stopped)} probe(s) in flight ({escape(where)})" if stopped
                 else f"its coordinator ({escape(str(data['coordinator']))}) stops the "
                      f"{len(own)} probe(s) it runs ({', '.join(s[:12] for s in own)}) within "
                      f"a second" if own else "no probe was in flight")
              + f"; `bisect resume {bisection_id}` finishes it")
