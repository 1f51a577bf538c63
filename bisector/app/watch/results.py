"""A tick's results: for each suite, its newest torch; for each oracle, claim the result key
(suite, oracle, torch version, commit) and run the oracle once, through the same pipeline as
``bisect check`` and every probe. A key already recorded runs nothing, and one another live
tick is judging is waited for, so every tick ends knowing every result of its pass.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from bisector.app.watch import flips, sources
from bisector.app.watch.config import Suite
from bisector.app.watch.context import Pass
from bisector.artifacts.installable import Installable
from bisector.base import defaults, redact
from bisector.executors.base import Executor
from bisector.infra import cancel
from bisector.infra.ticker import Ticker
from bisector.oracle.script import Oracle
from bisector.run.factory import judge_for, ready_pipeline
from bisector.store import watch as ws

POLL_S = 2.0  # how often a tick looks whether another tick's result is in

Environment = Callable[[], tuple[Installable, Executor]]


def suite_pass(p: Pass, suite: Suite) -> None:
    """The suite's newest torch judged by each of its oracles, then its flips looked for."""
    place = p.place(suite)
    if place.index is not None and place.kind in ("nightly", "release"):
        # An index's listing can take a minute: never a silent wait (issue 21)
        p.events.status(f"{suite.name}: listing {redact.url(place.index)} for the newest "
                        f"{place.kind} torch")
    torch = sources.newest(p.store, place)
    p.say(f"{suite.name}: newest {torch.kind} torch {torch.version} "
          f"(main commit {torch.commit[:12]})")
    # Builds are compared by what they are (sources.precedes), never by when a tick saw
    # them: results from before positions were recorded get theirs first.
    ws.fill_positions(p.store, suite.name, lambda sha: sources.position(place.repo, sha))
    latest = ws.newest_judged(p.store, suite.name)
    if latest is not None and sources.precedes(place.repo, torch, latest):
        p.say(f"{suite.name}: torch {torch.version} is older than torch "
              f"{latest.key.torch_version} (main commit {latest.key.commit_sha[:12]}), "
              f"judged already (withdrawn from the index?): nothing new, no flip")
        return
    env: list[tuple[Installable, Executor]] = []  # made once, only if a run is ours

    def environment() -> tuple[Installable, Executor]:
        if not env:
            env.append(sources.environment(p.store, torch, place, p.events,
                                           policy=p.policy))
        return env[0]

    for spec in suite.oracles:
        oracle = p.oracle(spec)
        key = ws.ResultKey(suite.name, oracle.name, torch.version, torch.commit)
        result(p, key, torch, oracle, environment)
        if oracle.meta.threshold is not None:  # measured: its steps, not its exit codes
            flips.steps(p, suite, spec, oracle.name, oracle.meta.threshold)
        else:
            flips.exit_codes(p, suite, spec, oracle.name)


def result(p: Pass, key: ws.ResultKey, torch: sources.Torch, oracle: Oracle,
           environment: Environment) -> ws.ResultRecord:
    """The key's result: recorded before, judged by another tick (waited for), or ours."""
    waited = False
    while True:
        state, rec = ws.claim_result(p.store, key, source=torch.source,
                                     git_version=torch.git_version, me=p.me,
                                     position=torch.position)
        if state == "done":
            p.say(f"  {key.oracle}: {rec.verdict} "
                  + (f"(judged by {rec.owner})" if waited else "(recorded before)"))
            return rec
        if state == "mine":
            return _judge(p, rec, torch, oracle, environment)
        if not waited:
            p.say(f"  {key.oracle}: being judged by {rec.owner}; waiting for it")
            waited = True
        if cancel.stopping():
            raise cancel.Stopped("stopped while waiting for another tick")
        time.sleep(POLL_S)


def _judge(p: Pass, rec: ws.ResultRecord, torch: sources.Torch, oracle: Oracle,
           environment: Environment) -> ws.ResultRecord:
    def beat() -> bool:
        ws.beat_result(p.store, rec.id, p.me)
        return True

    beating = Ticker(defaults.LEASE_BEAT_S, beat, f"watch-result-{rec.id}").start()
    done = False
    try:
        inst, executor = environment()
        judging, rules = judge_for(oracle)
        # Quiet: the one line this run deserves is said below, with the oracle's name.
        res = ready_pipeline(inst, executor, judging, rules).probe(0, torch.commit)
        run = res.run
        ws.finish_result(p.store, rec.id, p.me, ws.Finding(
            verdict=res.verdict.value, outcome=run.outcome.value, reason=run.reason,
            exit_code=run.exit_code, duration_s=run.duration_s,
            output_tail=run.output_tail, oracle_sha256=oracle.sha256,
            # A skip of this machine (an install that failed, a timeout) is tried again
            # by the next tick; a skip that is a fact (exit 125) is not.
            facts={**run.facts, "reusable": run.reusable}))
        done = True
    finally:
        beating.stop()
        if not done:  # stopped or failed before a verdict: the next tick runs it
            ws.release_result(p.store, rec.id, p.me)
    p.report.ran += 1
    out = ws.get_result(p.store, rec.id)
    p.say(f"  {rec.key.oracle}: {out.verdict} ({out.reason or 'ran now'})")
    return out
