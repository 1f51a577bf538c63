"""After the answer, at the culprit, in the culprit's own environment: what a maintainer asks
next. ``python -m torch.utils.collect_env`` (the issue's versions block, from the probed torch
itself, not imitated from facts), and on a ``torch.compile`` failure torch's compiler bisector
over the same oracle (which backend, subsystem and pass or lowering is at fault).

Both are helper oracles (``oracle/at_culprit.py``) run through the one probe pipeline, so any
executor runs them where it ran the probes; what they need of the bisection is what its
confirmation needs (``run/confirm.CulpritCheck``). Their runs are stored under their own keys (the
helper's hash and the bisection's environment fingerprint), never as the bisection's probes:
an environment is described once, and a compiler bisection of a commit is found again by any
later bisection of it. Neither can change the answer; a helper that cannot run leaves a line
saying why, and the report falls back to the facts recorded at the probes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bisector.base.events import QuietEvents
from bisector.base.kinds import Way
from bisector.core import compile_failure
from bisector.core.search import Verdict
from bisector.core.verdict import Outcome, Polarity, Rules
from bisector.oracle.at_culprit import (
    blamed,
    collect_env_oracle,
    compiler_bisect_oracle,
    read_compiler,
    read_env,
)
from bisector.oracle.script import Oracle
from bisector.run.confirm import CulpritCheck
from bisector.run.pipeline import NullRecorder, Pipeline
from bisector.store import bisections
from bisector.store import runs as run_store
from bisector.store.db import Store
from bisector.store.records import NewRun
from bisector.store.views import probe_views


@dataclass(frozen=True)
class Asked:
    """What runs at the culprit (``--no-compiler-bisect`` turns the second off)."""

    environment: bool = False  # collect_env, where the culprit's environment has torch
    compiler: bool = False  # the compiler bisector, on a torch.compile failure


class _Saved(NullRecorder):
    """Stores the helper's run under the helper's key (no probe of the bisection) and keeps
    its id and facts."""

    def __init__(self, store: Store, key: run_store.Key) -> None:
        self.store, self.key = store, key
        self.run_id: int | None = None
        self.facts: dict[str, Any] = {}
        self.outcome: Outcome | None = None
        self.reason = ""

    def record(self, position: int, sha: str, run: NewRun, verdict: Verdict,
               round_: int | None) -> None:
        self.run_id = run_store.save_run(self.store, self.key, run)
        self.facts, self.outcome, self.reason = dict(run.facts), run.outcome, run.reason


def _helper_run(ctx: CulpritCheck, helper: Oracle, position: int, sha: str) -> dict[str, Any]:
    """The helper's stored run at ``sha`` in this environment, else a fresh one: its id, its
    outcome, its structured result and how the culprit's package was obtained."""
    key = run_store.Key(helper.sha256, ctx.key.env_fingerprint)
    stored = [s for s in run_store.samples(ctx.store, key, [sha]).get(sha, [])
              if s.run.reusable]
    if stored:
        s = stored[-1]
        return {"run_id": s.run.id, "reused": True, "outcome": s.run.outcome.value,
                "reason": s.run.reason, "facts": s.facts}
    bisections.save_oracle(ctx.store, helper.sha256, helper.name,
                           helper.content.decode("utf-8"), helper.stored_meta())
    saved = _Saved(ctx.store, key)
    Pipeline(ctx.source.obtain, ctx.executor, helper, Rules(), saved,
             QuietEvents()).probe(position, sha, gpu=ctx.gpu)
    return {"run_id": saved.run_id, "reused": False,
            "outcome": saved.outcome.value if saved.outcome else None,
            "reason": saved.reason, "facts": saved.facts}


def _shown(done: dict[str, Any], sha: str) -> dict[str, Any]:
    facts = done["facts"]
    return {"sha": sha, "run_id": done["run_id"], "reused": done["reused"],
            "obtained": facts.get("obtained"), "outcome": done["outcome"]}


def environment(ctx: CulpritCheck, position: int, sha: str) -> dict[str, Any]:
    """collect_env's text in the culprit's environment, or why there is none."""
    ctx.events.note(f"at the culprit {sha[:12]}: python -m torch.utils.collect_env in its "
                    f"environment (the issue's versions block)")
    done = _helper_run(ctx, collect_env_oracle(ctx.oracle), position, sha)
    out = _shown(done, sha)
    text = read_env(done["facts"].get("result"))
    if text is None:
        out["error"] = f"collect_env gave no report: {done['reason']}"[:300]
    else:
        out["text"] = text
    return out


def compiler(ctx: CulpritCheck, position: int, sha: str) -> dict[str, Any]:
    """torch's compiler bisector over the oracle at the culprit."""
    ctx.events.note(f"at the culprit {sha[:12]}: torch's compiler bisector over "
                    f"{ctx.oracle.name} (python -m torch._inductor.compiler_bisector run ...; "
                    f"it runs the oracle 15-30 times)")
    done = _helper_run(ctx, compiler_bisect_oracle(ctx.oracle), position, sha)
    out = {**_shown(done, sha), **read_compiler(done["facts"].get("result"))}
    if done["outcome"] != Outcome.PASS.value and "error" not in out:
        out["error"] = f"the compiler bisector's run did not finish: {done['reason']}"[:300]
    ctx.events.note(f"compiler bisector at {sha[:12]}: {summary(out)}")
    return out


def summary(c: dict[str, Any]) -> str:
    """One line of what the compiler bisector found (or why nothing)."""
    if c.get("error"):
        return str(c["error"])
    if not c.get("available"):
        return (f"torch {c.get('torch', '?')} has no torch._inductor.compiler_bisector: "
                f"not run")
    found = c.get("found")
    if found is None:
        return "it ended without a result"
    if not found:
        return "no backend or subsystem reproduces the failure alone (no issue found)"
    number = found.get("bisect_number")
    return blamed(c) + (f" (application {number})" if found.get("kind") == "bisect"
                    and number is not None else "")


def _culprit_facts(ctx: CulpritCheck, sha: str) -> tuple[dict[str, Any], str]:
    """The facts of the culprit's runs in this bisection and what its failing runs printed."""
    views = [v for v in probe_views(ctx.store, ctx.bisection_id) if v.commit_sha == sha]
    facts = next((v.facts for v in views if v.facts.get("python")), {})
    failing = "\n".join(v.output_tail for v in views if v.outcome == Outcome.FAIL.value)
    return facts, failing


def after(ctx: CulpritCheck, asked: Asked, position: int, sha: str) -> dict[str, Any]:
    """The result's entries for what ran at the culprit: ``environment_report`` and
    ``compiler_bisector`` (each only where it applies)."""
    if not (asked.environment or asked.compiler):
        return {}
    facts, failing = _culprit_facts(ctx, sha)
    if not facts.get("torch"):  # no torch there: the probes' facts describe it all
        return {}
    if ctx.source.kind(position) in (Way.BUILD, Way.BROKEN):
        return {"environment_report": {"sha": sha, "error": (
            "the culprit's package is not made here any more (it would take a source "
            "build): the versions block comes from the facts its probes recorded")}}
    out: dict[str, Any] = {}
    if asked.environment:
        out["environment_report"] = environment(ctx, position, sha)
    rules = ctx.rules
    if (asked.compiler and rules.polarity is Polarity.FAILURE and not rules.find_fix
            and not ctx.oracle.judging  # a signature judges it; the compiler bisector can't
            and not ctx.oracle.meta.sampled and failing
            and compile_failure.is_compile_failure(
                failing, ctx.oracle.content.decode("utf-8", "replace"))):
        out["compiler_bisector"] = compiler(ctx, position, sha)
    return out
