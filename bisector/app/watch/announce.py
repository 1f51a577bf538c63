"""A tick's announcements: every flip and every ended bisection is told once (an event file
with its Markdown body, and the configured notification), by whichever tick takes that right
first (``store/watch.mark_notified``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from bisector.app.report import views
from bisector.app.watch import series as perf_series
from bisector.app.watch.config import WatchConfig
from bisector.app.watch.context import Pass
from bisector.app.watch.notify import flip_markdown, flip_words, send, write_event
from bisector.base import redact
from bisector.base.errors import BisectorError
from bisector.base.kinds import State
from bisector.base.paths import data_dir
from bisector.store import bisections
from bisector.store import watch as ws


def events_folder(cfg: WatchConfig) -> Path:
    """Where event JSON and Markdown bodies go: ``[watch] events``, else the data folder."""
    return cfg.events_dir or data_dir() / "watch"


def ends(p: Pass) -> None:
    """Announce every bisection of a flip that ended and was not announced yet."""
    for flip in ws.flips(p.store):
        if flip.bisection_id is None or flip.end_notified_at is not None:
            continue
        if bisections.get(p.store, flip.bisection_id).state.finished:
            announce(p, flip, "end")


def announce(p: Pass, flip: ws.FlipRecord, which: str) -> None:
    """``which``: ``flip`` (it was seen, its bisection started or not) or ``end``."""
    if not ws.mark_notified(p.store, flip.id, "flip" if which == "flip" else "end"):
        return
    event = _event(p, flip, which)
    if which == "flip":
        body = flip_markdown(event, ws.get_result(p.store, flip.to_result_id).output_tail)
    else:
        try:
            body = views.issue_report(p.store, event["bisection"]["id"])
        except BisectorError as e:
            body = flip_markdown(event, f"(no issue report: {e.message})")
    tag = hashlib.sha256(p.store.url.encode()).hexdigest()[:8]
    folder = events_folder(p.cfg)
    picture = perf_series.flip_picture(p.store, flip) if flip.performance else None
    try:
        write_event(folder, f"flip-{flip.id}-{event['event']}-{tag}", event, body, picture)
    except OSError as e:
        p.say(f"warning: could not write the {event['event']} event into {folder} "
              f"({e.strerror}); fix [watch] events")
        return
    said = send(p.cfg.notify, event)
    if said:
        p.say(said)


def _event(p: Pass, flip: ws.FlipRecord, which: str) -> dict[str, Any]:
    old = ws.get_result(p.store, flip.from_result_id)
    new = ws.get_result(p.store, flip.to_result_id)

    def side(r: ws.ResultRecord) -> dict[str, Any]:
        # A private index's URL may carry a token: never in a message that leaves the box.
        return {"version": r.key.torch_version, "commit": r.key.commit_sha,
                "verdict": r.verdict, "source": redact.url(r.source)}

    word = flip_words(flip.kind, flip.facts)
    text = (f"[{flip.suite}] {flip.oracle} {word} between torch {old.key.torch_version} "
            f"and {new.key.torch_version}")
    bisection: dict[str, Any] | None = {"id": None, "message": flip.message}
    name = "flip"
    if flip.bisection_id is not None:
        b = bisections.get(p.store, flip.bisection_id)
        bisection = {"id": b.id, "state": b.state.value, "culprit": b.culprit_sha,
                     "message": b.message}
        if which == "end":
            name = "culprit" if b.state is State.DONE and b.culprit_sha else "inconclusive"
            text += (f": culprit {b.culprit_sha[:12]} (bisection {b.id})" if name ==
                     "culprit" and b.culprit_sha else f": bisection {b.id} {b.state.value}")
        else:
            text += f": bisection {b.id} started"
    return {"event": name, "text": text, "suite": flip.suite, "oracle": flip.oracle,
            "kind": flip.kind, "from": side(old), "to": side(new), "bisection": bisection,
            "flip": flip.id, "store": redact.url(p.store.url),
            **({"step": flip.facts} if flip.performance else {})}
