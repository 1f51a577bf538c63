"""One stored bisection, opened once: what the coordinator's :class:`~bisector.run.runner.Runner`
and a worker's probe (``app/tasks.Host``) both take.

Both used to read the row their own way (a worker read it twice, and its candidates, and built
its parts beside the runner's). :func:`open_bisection` reads the bisection row, its
configuration, candidates and oracle once, and hands back :class:`Opened`: frozen, so every
probe of one bisection in one process is judged and obtained from the same values; the worker
keeps one per bisection between probes. A box adjusts only where the bisection runs *here* (its
own mirror of the repository, its own Python of the same version) through ``here``, before the
parts are made.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from bisector.base import defaults
from bisector.base.events import Events, QuietEvents
from bisector.core.sampling import Kind, kind_of
from bisector.oracle.script import Oracle
from bisector.project import history
from bisector.run.at_culprit import Asked
from bisector.run.config import RunConfig
from bisector.run.factory import Parts, stored_config, stored_oracle
from bisector.run.policy import LOCAL, Policy
from bisector.run.prior import FailurePrior
from bisector.run.remote import Workers
from bisector.run.wiring import Judging, Means
from bisector.store import bisections
from bisector.store import runs as run_store
from bisector.store.db import Store
from bisector.store.records import BisectionRecord

# What a box changes in the stored configuration to run it here: (cfg, record, candidates).
Here = Callable[[RunConfig, BisectionRecord, list[str]], RunConfig]


@dataclass(frozen=True)
class Opened:
    """A stored bisection as it runs in this process: its row, configuration, candidates and
    oracle, read once, and the parts (executor, builder, provider) made from them on first use.

    ``candidates`` is the one list the runner, the provider's source and the search inside a
    merge share: it grows (once) when the walk's answer is a merge (run/into_merge.py)."""

    record: BisectionRecord
    cfg: RunConfig
    candidates: list[str]
    oracle: Oracle
    parts: Parts = field(compare=False, repr=False)

    @property
    def key(self) -> run_store.Key:
        """Its runs' key: the oracle's identity and the environment's fingerprint."""
        return run_store.Key(self.record.oracle_sha256, self.record.env_fingerprint)

    @property
    def store(self) -> Store:
        return self.parts.store

    @property
    def events(self) -> Events:
        return self.parts.events

    def subject(self, sha: str) -> str:
        """A commit's subject line for the progress, "" where git cannot say."""
        try:
            return history.commit_info(self.parts.repos(), sha).subject
        except Exception:
            return ""

    def judging(self) -> Judging:
        """How the coordinator judges this bisection's probes and reaches its answer."""
        req = self.cfg.request
        return Judging(
            self.oracle, self.cfg.rules, confirm=req.confirm and not req.manual,
            reconfirm=req.reconfirm,
            prior=FailurePrior(req.prior, self.parts.repos, req.command),
            hunt=self.parts.hunt(self.oracle, self.key),
            into_merge=into_merge(self.cfg, self.oracle),
            at_culprit=Asked(environment=not req.manual,
                             compiler=req.compiler_bisect and not req.manual))

    def means(self, remote: Workers | None = None, width: int | None = None) -> Means:
        """Where its probes run: this box's slots, or (``remote``) ``width`` at a time on
        workers."""
        slots = tuple(self.cfg.slots()) if remote is None else (None,) * (width or 1)
        parts = self.parts
        return Means(parts.source, parts.executor, slots, remote,
                     prefetch=prefetch_slots(self.cfg, len(slots)),
                     spare_builds=max(0, self.cfg.build_jobs - len(slots)),
                     contained=parts.executor.contained or parts.builder.contained)


def open_bisection(store: Store, bisection: int | BisectionRecord,
                   events: Events | None = None, here: Here | None = None, *,
                   policy: Policy = LOCAL) -> Opened:
    """Everything one stored bisection needs to run, from the store alone, its row read once
    (here, or by the caller that passes the record); ``here``: what this box changes to run it
    (a worker's mirror and Python); ``policy``: the command's resolved choices (its object
    store, run/policy.py)."""
    rec = bisections.get(store, bisection) if isinstance(bisection, int) else bisection
    cands = bisections.candidates(store, rec.id)
    cfg = stored_config(store, rec)
    if here is not None:
        cfg = here(cfg, rec, cands)
    parts = Parts(store, cfg, cands, events or QuietEvents(),
                  labels={"bisector.bisection": str(rec.id)}, bisection_id=rec.id,
                  walked=rec.n_candidates, policy=policy)
    return Opened(rec, cfg, cands, stored_oracle(store, rec), parts)


def prefetch_slots(cfg: RunConfig, width: int) -> int:
    """Commits made ahead at once (run/prefetch.py): ``--prefetch``, else
    :data:`defaults.PREFETCH_PER_SLOT` per probe slot."""
    asked = cfg.request.prefetch
    return defaults.PREFETCH_PER_SLOT * width if asked is None else asked


def into_merge(cfg: RunConfig, oracle: Oracle) -> bool:
    """Whether a first-parent culprit that is a merge is searched inside (run/into_merge.py):
    asked for (the default), a first-parent walk (the ancestry path already holds what a
    merge brings) and a deterministic oracle (the plain search's answer)."""
    return (cfg.request.into_merge and cfg.first_parent
            and kind_of(oracle.meta) is Kind.PLAIN)
