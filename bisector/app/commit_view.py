"""`bisect commit REF` and the web view's commit page: everything the store knows of one
commit, as one JSON-shaped view (docs/store.md, "One commit").

The store answers each part with one query (store/commits.py); this module resolves the REF,
marks what this machine holds (a wheel's file) and names the disagreements: one oracle's runs
at this commit that did not all end alike (another environment, a flaky oracle, a run that
timed out). The view is redacted and printable (base/escape.py), as every view that leaves.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bisector.base import escape
from bisector.base.errors import NotFoundError, UsageError
from bisector.store import commits
from bisector.store.db import Store

HEX = re.compile(r"[0-9a-f]{4,40}")


def resolve(store: Store, ref: str, repo: str | None) -> str:
    """The full sha ``ref`` names: a sha prefix the store knows, else a ref of the clone."""
    word = ref.strip().lower()
    if HEX.fullmatch(word):
        found = commits.resolve(store, word)
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise UsageError(f"{ref} names {len(found)}{'+' if len(found) >= 10 else ''} "
                             f"commits the store knows ({', '.join(s[:12] for s in found[:3])}"
                             f", ...): give more of the sha")
        if len(word) == 40:
            return word  # a whole sha the store has never seen: its (empty) record
    from bisector.project import history  # lazy: only a ref that is no stored sha needs git

    try:
        return str(history.open_repo(repo or ".").commit(ref).hexsha)
    except Exception:
        where = f"the clone at {repo}" if repo else "the current folder"
        raise NotFoundError(f"{ref}: no commit the store knows starts with it, and {where} "
                            f"does not name it: give a sha prefix from `bisect list` or "
                            f"--repo of the clone") from None


def commit_data(store: Store, ref: str, repo: str | None = None) -> dict[str, Any]:
    sha = resolve(store, ref, repo)
    facts = commits.facts_of(store, sha)
    verdicts = [{
        "oracle": r.oracle, "oracle_sha256": r.oracle_sha256,
        "environment": r.env_fingerprint, "executor": _executor(r.environment),
        "at": r.finished_at.isoformat(timespec="seconds"), "bisection": r.bisection_id,
        "verdict": r.verdict, "outcome": r.outcome, "exit_code": r.exit_code,
        "reason": r.reason, "reused_by_others": r.reusable, "run": r.run_id,
        "duration_s": round(r.duration_s, 3),
    } for r in commits.runs_at(store, sha)]
    builds = [{
        "kind": a.kind, "status": a.status, "at": a.created_at.isoformat(timespec="seconds"),
        "path": a.path, "size": a.size, "buckets": list(a.buckets),
        "here": bool(a.status == "ok" and a.path and Path(a.path).exists()),
        "log_tail": a.log_tail if a.status != "ok" else None,
    } for a in commits.builds_at(store, sha)]
    data = {
        "sha": sha,
        "subject": facts.subject if facts else None,
        "author": facts.author if facts else None,
        "author_email": facts.author_email if facts else None,
        "authored_at": facts.authored_at.isoformat() if facts and facts.authored_at else None,
        "pr": facts.pr if facts else None,
        "files": list(facts.files) if facts else None,
        "culprit_of": [{"bisection": n.bisection_id, "state": n.state, "oracle": n.oracle,
                        "created": n.created_at.isoformat(timespec="seconds")}
                       for n in commits.named_in(store, sha)],
        "verdicts": verdicts,
        "wheel_cached": any(b["here"] or (b["status"] == "ok" and b["buckets"])
                            for b in builds),
        "build_failed": any(b["status"] == "failed" for b in builds),
        "builds": builds,
        "disagreements": disagreements(verdicts),
    }
    shown: dict[str, Any] = escape.safe(data)
    return shown


def _executor(facts: dict[str, Any]) -> str:
    """A short name of where a run ran: the executor and its Python (``local py3.11``)."""
    words = [str(facts.get("executor") or ""), str(facts.get("python") or "")]
    return " ".join(w for w in words if w)


def disagreements(verdicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each oracle (by its bytes) whose runs here did not all end alike: its outcomes, each
    with the environments it came from and the runs."""
    by_oracle: dict[str, dict[str, dict[str, set[Any]]]] = {}
    names: dict[str, str] = {}
    for v in verdicts:
        names[v["oracle_sha256"]] = v["oracle"]
        seen = by_oracle.setdefault(v["oracle_sha256"], {}).setdefault(
            v["outcome"], {"environments": set(), "runs": set()})
        seen["environments"].add(v["environment"])
        seen["runs"].add(v["run"])
    return [{"oracle": names[sha], "oracle_sha256": sha,
             "outcomes": {o: {"environments": sorted(s["environments"]),
                              "runs": sorted(s["runs"])} for o, s in sorted(outs.items())}}
            for sha, outs in by_oracle.items() if len(outs) > 1]
