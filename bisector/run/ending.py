"""After the search: the answer confirmed, written, and what follows it at the culprit.

The search's :class:`~bisector.run.strategies.base.Conclusion` names a position; what happens
then is not the loop's business: the prior's summary is added (what it saved), the culprit and
its parent run again when asked (:mod:`bisector.run.confirm`), the answer is written while the
lease is still ours, the culprit's git facts are kept for ``bisect list``'s filters
(:mod:`bisector.run.culprit_facts`) and, on this box only, what runs at the culprit once the
answer is stored (:mod:`bisector.run.at_culprit`). :class:`Ending` is everything those need of
the bisection, fixed when the runner starts, so the runner hands over one value, not itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from bisector.base.errors import EndpointError, LeaseLost
from bisector.base.events import Events
from bisector.base.kinds import State
from bisector.core.search import Verdict
from bisector.executors.base import Executor
from bisector.infra import cancel
from bisector.project.revert import Clone
from bisector.run import at_culprit, confirm, culprit_facts
from bisector.run.lease import Lease
from bisector.run.pipeline import Source
from bisector.run.strategies.base import Conclusion, View
from bisector.run.wiring import Judging
from bisector.store import bisections
from bisector.store import runs as run_store
from bisector.store.db import Store, connection_lost
from bisector.store.records import BisectionRecord


@dataclass(frozen=True)
class Ending:
    """What confirming, writing and following the answer need of one bisection."""

    store: Store
    record: BisectionRecord
    judging: Judging
    source: Source
    executor: Executor
    events: Events
    gpu: str | None  # the first probe slot: confirmation and the culprit's helpers run there
    width: int  # probes a round: the prior's saving is counted in rounds this wide
    here: bool  # False when the probes ran on workers: nothing runs at the culprit here
    clone: Clone  # the culprit's revert and git parents (project/revert.py)

    @property
    def key(self) -> run_store.Key:
        return run_store.Key(self.record.oracle_sha256, self.record.env_fingerprint)

    def check(self, walk: View) -> confirm.CulpritCheck:
        """Confirmation's context, and the culprit helpers' (run/at_culprit.py): the walk's
        candidates, this bisection's judge of failing runs, the first slot."""
        j = self.judging
        return confirm.CulpritCheck(self.store, self.key, self.record.id,
                                    list(walk.candidates), self.source, self.executor,
                                    j.oracle, j.rules, self.events, self.gpu,
                                    self.clone.revert, j.reconfirm, j.hunt, self.clone.parents)


def finish(end: Ending, answer: Conclusion, walk: View, lease: Lease) -> BisectionRecord:
    """Confirm the culprit (when asked), then write the answer while ``lease`` is ours; the
    endpoints' failure raises with its message once written."""
    b, result, message, state = end.record, dict(answer.result), answer.message, answer.state
    culprit = None if answer.culprit is None else walk.candidates[answer.culprit]
    info = walk.prior.info if walk.prior is not None else None
    if info is not None:  # which prior the search used, and what it saved
        paid = run_store.paid_runs(end.store, b.id, below=b.n_candidates)  # the walk's
        # Plain bisection is priced from the verdicts this one reused, as it would have
        began = {p.position: Verdict(p.verdict) for p in run_store.probes(end.store, b.id)
                 if p.reused and p.position < b.n_candidates}
        result["prior"] = info.summary(walk.n, end.width, paid, answer.culprit, began)
    if answer.culprit is not None and end.judging.confirm:
        result["confirmation"] = checked = confirm.confirm(
            end.check(walk), answer.culprit, answer.judge, answer.posterior)
        message = confirm.warning(checked)
        state = confirm.state_after(state, checked)
    if not bisections.finish(end.store, b.id, me=lease.me, state=state, result=result,
                             culprit_sha=culprit, message=message):
        raise LeaseLost(f"bisection {b.id} was taken over by another process before it "
                        f"finished here")
    lease.stop_beating()
    if culprit is not None:  # its author, PR and paths, for `bisect list`'s filters
        culprit_facts.keep(end.store, b.repo_path, culprit)
    if culprit is not None and answer.culprit is not None and state is State.DONE:
        follow(end, walk, answer.culprit, culprit)
    if answer.stop:
        raise EndpointError(message or "")
    return bisections.get(end.store, b.id)


def follow(end: Ending, walk: View, position: int, sha: str) -> None:
    """What runs at the culprit once the answer is stored (run/at_culprit.py), added to the
    result. Ctrl-C there stops it alone: the answer is already written."""
    if not end.here:  # the probes ran on workers: this box is no culprit's
        return
    try:
        found = at_culprit.after(end.check(walk), end.judging.at_culprit, position, sha)
    except (cancel.Stopped, KeyboardInterrupt):
        end.events.note("stopped at the culprit: its answer is stored; what ran there after "
                        "it (collect_env, the compiler bisector) is not")
        return
    except Exception as e:  # never the answer's loss: it is stored already
        if connection_lost(e):
            raise
        end.events.note(f"what runs at the culprit failed ({type(e).__name__}: {e}); the "
                        f"answer is stored")
        return
    if found:
        bisections.add_to_result(end.store, end.record.id, found)
