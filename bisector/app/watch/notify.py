"""Telling people: the ``[notify] command`` of ``bisector.toml``, run on a flip and on the end
of the bisection it started.

The command is split with ``shlex`` and run without a shell (a suite name or an oracle's
output can never become shell syntax), with the event as one JSON object on stdin. Beside the
event, a paste-ready Markdown body is written to a file whose path is in the JSON
(``issue_file``): the GitHub issue text of ``bisect show --format issue`` for a culprit, a
short account of the flip otherwise. The event's ``text`` is one line, the field chat
webhooks (Slack, Mattermost, Rocket.Chat) show, so ``curl --data-binary @- URL`` is a whole
notifier. A notifier that fails, hangs or does not exist is a warning and never fails the
tick: the results and the bisection are stored either way, and ``bisect watch`` shows them. A
hung one is stopped after ``[notify] timeout`` with its whole process group, so a ``curl`` it
started does not outlive it.

Both files and the notifier's stdin leave the box (a GitHub notifier posts them): the event and
the body go through :mod:`bisector.base.redact` here, whoever built them.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from bisector.app.watch.config import Notify
from bisector.base import redact
from bisector.base.escape import code, fence
from bisector.infra.owner import owner_id
from bisector.infra.proc import call_bounded, reaped, reaper_env


def write_event(folder: Path, stem: str, event: dict[str, Any], markdown: str,
                picture: str | None = None) -> Path:
    """Write ``STEM.md`` (the body) and ``STEM.json`` (the event, naming the body); returns
    the JSON's path. Written whether or not a command is configured: the files are the
    record a person can paste from. A performance step's ``picture`` (its series as SVG) is
    written beside them as ``STEM.svg`` and shown by the body."""
    folder.mkdir(parents=True, exist_ok=True)
    md = folder / f"{stem}.md"
    if picture is not None:
        svg = folder / f"{stem}.svg"
        svg.write_text(redact.text(picture), encoding="utf-8")
        event["picture_file"] = str(svg)
        markdown = (f"{markdown.rstrip()}\n\n![the series over nightlies, the step marked]"
                    f"({svg.name})\n")
    md.write_text(redact.text(markdown), encoding="utf-8")
    event["issue_file"] = str(md)
    path = folder / f"{stem}.json"
    path.write_text(json.dumps(redact.data(event), indent=2, default=str) + "\n",
                    encoding="utf-8")
    return path


def send(cfg: Notify, event: dict[str, Any]) -> str | None:
    """Run the notifier with ``event`` on stdin; a line for the log (None: nothing to do)."""
    if not cfg.command or event["event"] not in cfg.on:
        return None
    payload = json.dumps(redact.data(event), default=str)
    # Under the reaper (a child subreaper), so that "everything it started" is true: a
    # `setsid` child leaves the process group a timeout kills, never the reaper's care.
    try:
        if shutil.which(cfg.command[0]) is None:
            raise FileNotFoundError(2, "no such program")
        r, timed_out = call_bounded(reaped(cfg.command, f"{owner_id()}|notify"), input=payload,
                                    env=reaper_env(os.environ), timeout_s=cfg.timeout_s)
    except OSError as e:
        return (f"warning: the notify command {cfg.command[0]!r} could not start "
                f"({e.strerror or e}); fix [notify] command ({event['event']} event kept in "
                f"{event['issue_file']})")
    if timed_out:
        return (f"warning: the notify command ran past {cfg.timeout_s:g} s and was stopped, "
                f"with everything it started ({event['event']} event kept in "
                f"{event['issue_file']})")
    if r.returncode != 0:
        said = (r.stderr or r.stdout).strip().splitlines()
        return (f"warning: the notify command exited {r.returncode}"
                + (f" ({said[-1][:200]})" if said else "")
                + f"; the {event['event']} event is kept in {event['issue_file']}")
    return f"notified: {event['text']}"


def flip_words(kind: str, facts: dict[str, Any]) -> str:
    """What a flip says happened: ``regressed``, ``was fixed``, or a performance step's size
    (``got 18 % worse``; a speed-up that gives back an earlier slowdown says which)."""
    if kind == "regression":
        return "regressed"
    if kind == "fix":
        return "was fixed"
    change = float(facts.get("change", 0.0))
    word = f"got {abs(change):.0%} {'worse' if change > 0 else 'better'}".replace("%", " %")
    if facts.get("undoes") is not None:
        word += f" (a step back: the fix of flip {facts['undoes']})"
    return word


def flip_markdown(event: dict[str, Any], output_tail: str) -> str:
    """The body for a flip: what changed, between which torches, what happens next."""
    old, new = event["from"], event["to"]
    step = event.get("step")
    word = flip_words(event["kind"], step or {})
    lines = [f"## {code(event['oracle'])} {word} between torch {old['version']} and "
             f"{new['version']}", ""]
    if step:
        unit = f" {step['unit']}" if step.get("unit") else ""
        lines += [f"Watch suite {code(event['suite'])}: the median of {code(step['metric'])} "
                  f"over {step['builds_before']} builds up to torch {old['version']} (commit "
                  f"`{old['commit']}`) was {step['before']:.4g}{unit}, and over "
                  f"{step['builds_after']} builds from torch {new['version']} (commit "
                  f"`{new['commit']}`) {step['after']:.4g}{unit}: {step['change']:+.1%} "
                  f"({step['direction']}; threshold {step['threshold']:.0%}, two-sided rank "
                  f"test over build medians p = {step['p_value']:.2g}).", ""]
    else:
        lines += [f"Watch suite {code(event['suite'])}: the oracle {code(event['oracle'])} "
                  f"said **{old['verdict']}** on torch {old['version']} (commit "
                  f"`{old['commit']}`) and **{new['verdict']}** on torch {new['version']} "
                  f"(commit `{new['commit']}`).", ""]
    b = event.get("bisection")
    if b and b.get("id") is not None:
        lines += [f"Bisection {b['id']} was started between the two commits; "
                  f"`bisect show {b['id']} --format issue` gives the culprit once it ends.", ""]
    elif b and b.get("message"):
        lines += [f"No bisection was started: {b['message']}", ""]
    if output_tail:
        lines += [f"The oracle's output on torch {new['version']}:", "",
                  *fence(output_tail.rstrip()), ""]
    return "\n".join(lines)
