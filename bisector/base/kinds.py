"""Typed choices shared by every layer: what used to travel as strings."""

from __future__ import annotations

import enum


class Polarity(enum.StrEnum):
    """Which exit status means the bug is present.

    ``failure``: the usual oracle, non-zero exit when the bug shows.
    ``success``: a seed-style repro script that exits 0 when the bug reproduces
    (``--regress success``).
    """

    FAILURE = "failure"
    SUCCESS = "success"


class PriorMode(enum.StrEnum):
    """Whether the search weighs candidates by what the failure names (core/prior.py)."""

    AUTO = "auto"  # from the bad endpoint's failure; plain bisection when it names nothing
    NONE = "none"  # plain bisection


class BuildPlace(enum.StrEnum):
    """Where source builds run."""

    HOST = "host"
    DOCKER = "docker"  # the builder image, with a ccache volume per repository


class ExecutorKind(enum.StrEnum):
    """Where oracles run."""

    LOCAL = "local"  # a uv virtualenv on this machine
    DOCKER = "docker"  # one container of the runtime image per probe

    @property
    def sealed(self) -> bool:
        """Probes run in a container: nothing of the host reaches them (its shell's
        variables, its installed torch, a command's programs, a terminal to judge in). What a
        request may ask of this kind is checked against this, not against the kind's name."""
        return self is ExecutorKind.DOCKER

    @property
    def build_place(self) -> BuildPlace:
        """Where source builds run unless ``--build-in`` says: beside the probes."""
        return BuildPlace.DOCKER if self.sealed else BuildPlace.HOST


class ArtifactKind(enum.StrEnum):
    SOURCE = "source"  # built from the commit
    PREBUILT = "prebuilt"  # a release or nightly wheel of the commit
    OVERLAY = "overlay"  # the commit's Python files over a nearby wheel
    INSTALLED = "installed"  # a torch already installed here (--installed-base)


class Way(enum.StrEnum):
    """How a probe has its commit's torch, cheapest first: the one list of cost classes that
    the search ranks by (:attr:`rank`: only the order counts), ``bisect plan`` prices
    (``--cost WAY=SECONDS``), the run records (a probe's ``obtained_as`` fact) and reports
    count. A way of the chain (``artifacts/ways.py``) carries one and predicts it
    (``would``); the answer it gives says the one it took. The values are stored: never
    rename one."""

    CACHED = "cached"  # made before on this box, or nothing to make (the commit's tree)
    BUCKET = "bucket"  # made by another box: from the team's object store
    PREBUILT = "prebuilt"  # a wheel that exists without building (an index's, installed)
    OVERLAY = "overlay"  # the commit's Python files over a nearby base
    BUILD = "build"  # a source build
    BROKEN = "broken"  # none: the commit does not build (a skip)

    @property
    def rank(self) -> int:
        """Cheaper ways rank lower (the order of the members)."""
        return list(Way).index(self)


class ArtifactStatus(enum.StrEnum):
    OK = "ok"
    FAILED = "failed"  # the commit does not build: a fact, reused forever
    ERROR = "error"  # the build could not run (engine down, timeout): retried


class State(enum.StrEnum):
    """A bisection's life."""

    RUNNING = "running"
    INTERRUPTED = "interrupted"
    # `bisect cancel` stopped it: kept as it was, never taken up again by the watch; only an
    # explicit `bisect resume` finishes it.
    CANCELLED = "cancelled"
    DONE = "done"  # a culprit
    AMBIGUOUS = "ambiguous"  # a window of suspects hidden by skips
    FAILED = "failed"  # an endpoint did not behave as claimed
    # Answers that are honest about evidence that is not clean: the culprit named did not hold
    # up when it ran again; the runs could not decide; a flaky oracle fails as often at the
    # bad endpoint as at the good one (no commit to name).
    NOT_REPRODUCIBLE = "not reproducible"
    INCONCLUSIVE = "inconclusive"
    NO_REGRESSION = "no regression"

    @property
    def finished(self) -> bool:
        return self in (State.DONE, State.AMBIGUOUS, State.FAILED, State.NOT_REPRODUCIBLE,
                        State.INCONCLUSIVE, State.NO_REGRESSION)

    @property
    def answered(self) -> bool:
        """Ended with an answer (right, or openly unsure): resume only reports it again."""
        return self.finished and self is not State.FAILED

    @property
    def exit_code(self) -> int:
        """What ``bisect start``/``resume`` exit with: 0 for a culprit or a window, 12 for
        "no regression", 13 for an answer that is openly unsure."""
        if self is State.NO_REGRESSION:
            return 12
        if self in (State.NOT_REPRODUCIBLE, State.INCONCLUSIVE):
            return 13
        return 0


class TaskState(enum.StrEnum):
    """A probe handed to the workers (``probe_task``)."""

    QUEUED = "queued"  # enqueued, no worker has started it
    RUNNING = "running"  # a worker runs attempt N (a retry starts N + 1)
    DONE = "done"  # a verdict is stored (written by the current attempt only)
    CANCELLED = "cancelled"  # `bisect cancel`: never judged; `resume` enqueues it again
    FAILED = "failed"  # the job failed for good (a bug, a box missing the clone)

    @property
    def open(self) -> bool:
        return self in (TaskState.QUEUED, TaskState.RUNNING)


class WorkerState(enum.StrEnum):
    IDLE = "idle"
    BUSY = "busy"
    STOPPED = "stopped"  # stopped cleanly (a worker killed with -9 just stops beating)


class Verdict(enum.Enum):
    """What one commit is, as far as the search is concerned: the only three values a verdict
    has (a run's raw outcome is :class:`bisector.core.verdict.Outcome`)."""

    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"
