"""One stored bisection, opened once (run/opened.py): a worker's probe reads the bisection row
once, and the worker and the coordinator (``bisect start``/``resume``) take the same bundle."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event

from bisector.app.tasks import Host
from bisector.core.verdict import Rules
from bisector.infra.owner import owner_id
from bisector.run.config import RunConfig, encode
from bisector.run.opened import open_bisection
from bisector.run.request import Request
from bisector.run.runner import Runner
from bisector.store import bisections
from bisector.store.db import Store
from tests.unit.fakes import ORACLE, shas

ROW = re.compile(r"\bFROM bisection\b", re.IGNORECASE)


@contextmanager
def statements(store: Store) -> Iterator[list[str]]:
    """Every SQL statement the store's engine runs meanwhile."""
    seen: list[str] = []

    def note(_conn: Any, _cursor: Any, sql: str, *_args: Any) -> None:
        seen.append(sql)

    event.listen(store.engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        event.remove(store.engine, "before_cursor_execute", note)


def stored(store: Store, repo: Path) -> int:
    """A bisection stored as ``start`` stores it (today's configuration layout), its clone
    ``repo`` on this box and its Python a name the box's PATH resolves."""
    cands = shas(12)
    cfg = RunConfig(Request(good=cands[0], bad=cands[-1], oracle=ORACLE.name, repo=repo),
                    repo=str(repo), profile="generic", python="python3", rules=Rules())
    bisections.save_oracle(store, ORACLE.sha256, ORACLE.name, ORACLE.content.decode(), {})
    return bisections.create(
        store, candidates=cands, owner=owner_id(), repo_path=str(repo), good_ref="good",
        bad_ref="bad", good_sha=cands[0], bad_sha=cands[-1], oracle_name=ORACLE.name,
        oracle_sha256=ORACLE.sha256, polarity=cfg.rules.polarity.value,
        env_fingerprint="env0", environment={}, settings=encode(cfg), notes=[])


def test_a_worker_reads_the_bisection_row_once_and_keeps_what_it_opened(
        store: Store, tmp_path: Path) -> None:
    bid = stored(store, tmp_path)
    host = Host(store, gpu=None, name="box", say=lambda _line: None)
    with statements(store) as seen:
        first = host.context(bid)
        again = host.context(bid)  # the next probe of the same bisection: nothing read
    assert sum(bool(ROW.search(sql)) for sql in seen) == 1, seen
    assert again is first


def test_the_worker_and_the_coordinator_take_the_same_bundle(store: Store,
                                                             tmp_path: Path) -> None:
    bid = stored(store, tmp_path)
    worker = Host(store, gpu=None, name="box", say=lambda _line: None).context(bid)
    coordinator = open_bisection(store, bid)
    assert worker == coordinator
    assert worker.key == coordinator.key and worker.candidates == shas(12)
    # The coordinator's runner is made from that bundle: its record, candidates and oracle.
    runner = Runner.of(coordinator)
    assert runner.record == coordinator.record and runner.candidates is coordinator.candidates
    assert runner.oracle == coordinator.oracle and runner.key == coordinator.key
