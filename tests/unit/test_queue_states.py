"""A queue job's state in bisector's words: Procrastinate's statuses are translated in
queue/procrastinate.py, every one of them, and nothing above the queue reads its names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bisector.queue.states import JobState, QueueCounts

pytestmark = pytest.mark.unit

procrastinate = pytest.importorskip("procrastinate")  # the optional postgres extra


def test_every_procrastinate_status_has_bisectors_word() -> None:
    from procrastinate.jobs import Status

    from bisector.queue.procrastinate import STATES

    assert set(STATES) == set(Status)
    assert len(set(STATES.values())) == len(Status)  # no two statuses said alike
    assert JobState.MISSING not in STATES.values()  # bisector's own: a job the queue lost


def test_which_states_end_a_job_and_which_were_stopped_from_outside() -> None:
    assert {s for s in JobState if s.ended} == {JobState.DONE, JobState.FAILED,
                                                JobState.CANCELLED, JobState.STOPPED,
                                                JobState.MISSING}
    assert {s for s in JobState if s.stopped} == {JobState.CANCELLED, JobState.STOPPED}
    assert not JobState.STOPPING.ended  # its worker has not stopped it yet


def test_a_queues_counts_are_said_in_bisectors_words() -> None:
    from bisector.queue.procrastinate import counts

    row = {"name": "probe", "jobs_count": 16, "todo": 1, "doing": 2, "succeeded": 3,
           "failed": 4, "cancelled": 5, "aborted": 1}
    assert counts(row) == QueueCounts("probe", waiting=1, running=2, done=3, failed=4,
                                      stopped=6)
    assert counts(row).as_dict() == {"name": "probe", "waiting": 1, "running": 2, "done": 3,
                                     "failed": 4, "stopped": 6}


def test_no_module_above_the_queue_names_procrastinates_statuses() -> None:
    """Its status names as strings (``"todo"``, ``"doing"``, ``"succeeded"``, ``"aborting"``,
    ``"aborted"``) appear in bisector only inside queue/."""
    package = Path(__file__).resolve().parents[2] / "bisector"
    names = re.compile(r"""["'](todo|doing|succeeded|aborting|aborted)["']""")
    found = [f"{p.relative_to(package)}:{n}" for p in package.rglob("*.py")
             if p.parent.name != "queue"
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if names.search(line)]
    # cli/failures.py's "aborted" is the JSON error kind of a Ctrl-C, not a job's status.
    assert [f for f in found if not f.startswith("cli/failures.py")] == []
