"""What the user asked for, as typed: ``bisect start``'s :class:`Request` and ``bisect check``'s
:class:`CheckRequest`, with the checks that refuse a combination that cannot work before
anything is stored.

Every default comes from :mod:`bisector.base.defaults`; what the request resolves to at start is
``run/config.RunConfig``, and the line that repeats it is ``run/reproduce.py``: three concerns
that change for different reasons (a new option; a new resolved field or the stored layout;
how a pasted command reads), so three modules.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from bisector.base import defaults, oracle_env
from bisector.base.errors import UsageError
from bisector.base.kinds import BuildPlace, ExecutorKind, PriorMode
from bisector.core.verdict import Polarity, check_terms
from bisector.oracle.command import check_match

# A wheel variant (``--variant``) is a PEP 440 local version label, ``+cu128``: what an index's
# file names carry, what prebuilt.pick_wheels compares, and what goes into the index URL.
VARIANT = re.compile(r"[a-z0-9]+(?:\.[a-z0-9]+)*")


@dataclass(frozen=True)
class Request:
    """``bisect start`` as typed. None means "not given": the resolved value is in RunConfig."""

    good: str
    bad: str
    oracle: str = ""  # "" with a command oracle
    repo: Path = Path(".")
    # Where workers clone the repository from (their own mirror); "": the clone's origin.
    repo_url: str = ""
    find_fix: bool = False
    regress: Polarity | None = None
    ancestry_path: bool = False
    # A first-parent culprit that is a merge: search the commits it brings (run/into_merge.py).
    into_merge: bool = True
    # A torch.compile failure: torch's compiler bisector at the culprit (run/at_culprit.py).
    compiler_bisect: bool = True
    profile: str | None = None
    python: str | None = None
    offline: bool = False
    build_timeout: float = defaults.BUILD_TIMEOUT_S
    prebuilt: bool = True
    nightly_index: str | None = None  # None: the profile's; "" turns nightlies off
    release_index: str | None = None  # None: the configured index for PyTorch, else none
    variant: str | None = None
    installed_base: str | None = None
    executor: ExecutorKind = ExecutorKind.LOCAL
    image: str | None = None
    gpus: str | None = None  # "all" or "0,1"
    # The GPU model the verdicts are for, when the probes run on workers of another box
    # (queue/routing.py); None: this box's GPUs, as nvidia-smi names them.
    gpu_model: str | None = None
    memory: str = defaults.MEMORY
    pids: int = defaults.PIDS
    build_in: BuildPlace | None = None
    builder_image: str | None = None
    cuda_arch: str | None = None
    max_jobs: int | None = None
    build_env: tuple[str, ...] = ()
    jobs: int | None = None  # None: one per GPU of --gpus, else defaults.JOBS
    build_jobs: int = defaults.BUILD_JOBS
    # Commits made ahead while the oracle runs (run/prefetch.py); None: PREFETCH_PER_SLOT per
    # probe slot; 0: none (each probe obtains its torch when chosen).
    prefetch: int | None = None
    confirm: bool = True  # re-run the culprit, its parent and its revert before answering
    reconfirm: bool = False  # fresh confirmation runs even where one under the key exists
    match: str | None = None  # the failure that is the bug (core/signature.py)
    # git's rule: every failure is bad. Without it a failure unlike the bad endpoint's is a
    # skip, "fails differently" (run/hunt.py).
    any_failure: bool = False
    timeout: float | None = None  # a command oracle's (an oracle file says its own)
    # A command oracle's performance threshold ("5%"): it prints BISECTOR_RESULT samples.
    threshold: str | None = None
    dependency: tuple[str, ...] = ()  # a command oracle's, installed into the environment
    # The oracle environment, NAME=VALUE (base/oracle_env.py): as given with --env, and after
    # ``prepare`` with what the run inherits (TORCH_LOGS=...) folded in.
    env: tuple[str, ...] = ()
    # The names in ``env`` that came from the environment the run inherited, not from --env
    # (``prepare``): keyed and recorded like the rest, shown as the environment the runs had,
    # never put into a command to type (:attr:`typed_env`).
    inherited: tuple[str, ...] = ()
    command: tuple[str, ...] = ()  # `-- CMD ARGS...`: a command oracle (oracle/command.py)
    manual: bool = False  # a person answers for each probe (manual.py)
    prior: PriorMode = PriorMode.AUTO  # weigh candidates by what the failure names (prior.py)
    from_log: Path | None = None  # a `git bisect log` whose marks seed the search (from_log.py)
    path: tuple[str, ...] = ()  # only commits touching these are candidates (project/limits.py)
    skip: tuple[str, ...] = ()  # REF or A..B: untestable up front, never probed (as git's)
    term_old: str | None = None  # the words for good and bad in every output (as git's)
    term_new: str | None = None
    # What showed the bad endpoint bad before this search (the watch's series of nightlies:
    # a step of the performance oracle there); "": nothing, the search checks it first.
    bad_shown: str = ""

    @property
    def typed_env(self) -> tuple[str, ...]:
        """The oracle environment as a suggested command repeats it (the reproduce line,
        the by-hand steps, ``bisect check`` lines): what ``--env`` gave, not what the run
        inherited (:func:`bisector.base.oracle_env.chosen`)."""
        return oracle_env.chosen(self.env, self.inherited)

    @property
    def gpu_list(self) -> tuple[str, ...]:
        """``--gpus 0,1`` as ("0", "1"); "all" and none give (). Read once, by ``prepare``:
        after it the resolved ``RunConfig.gpus`` and ``device_spec`` travel."""
        if not self.gpus or self.gpus == "all":
            return ()
        return tuple(g.strip() for g in self.gpus.split(","))

    def check(self) -> None:
        """The option combinations that cannot work, refused before anything is stored."""
        if not (self.good and self.bad) and self.from_log is None:
            raise UsageError("give --good REF and --bad REF (bisect start also takes them "
                             "from a git bisect log: --from-log FILE)")
        gpus = self.gpu_list
        if self.gpus is not None and self.gpus != "all" and (
                not gpus or not all(g.isdigit() for g in gpus) or len(set(gpus)) != len(gpus)):
            raise UsageError(f"--gpus {self.gpus!r}: write all, or distinct GPU indexes like 0,1")
        if self.jobs is not None and self.jobs < 1:
            raise UsageError(f"--jobs {self.jobs}: give at least 1")
        if self.build_jobs < 1:
            raise UsageError(f"--build-jobs {self.build_jobs}: give at least 1")
        self._check_bounds()
        if gpus and self.jobs is not None and self.jobs > len(gpus):
            raise UsageError(f"--jobs {self.jobs} with {len(gpus)} GPU(s) in --gpus "
                             f"{self.gpus}: one probe runs per GPU; name more GPUs or lower --jobs")
        if not re.fullmatch(r"\d+(\.\d+)?[bkmgBKMG]?", self.memory):
            raise UsageError(f"--memory {self.memory!r}: write a size like 16g or 512m")
        if self.pids < 1:
            raise UsageError(f"--pids {self.pids}: give a positive process limit")
        if self.build_timeout <= 0:
            raise UsageError("--build-timeout must be positive seconds")
        if self.match is not None:
            check_match(self.match)
            if self.any_failure:
                raise UsageError("--match and --any-failure both say which failure is the "
                                 "bug: give --match REGEX for one failure, --any-failure for "
                                 "every failure, not both")
        oracle_env.parse(self.env)
        check_terms(self.term_old, self.term_new)
        if self.oracle and self.command:
            raise UsageError(f"--oracle {self.oracle} and a command after -- both name the "
                             f"oracle: give one of them")
        if self.executor.sealed and self.command:
            raise UsageError("a command oracle (-- CMD) needs --executor local: the Docker "
                             "executor runs Python oracle files only")
        if self.manual:
            self._check_manual()
        if self.executor.sealed and self.installed_base:
            raise UsageError("--installed-base needs --executor local: a container cannot see "
                             "the host's installed torch")

    def _check_bounds(self) -> None:
        """Every number finite and in range, also where no CLI type checked it (a watch's
        ``[suite.bisect]``): a ``nan`` timeout is no timeout, and a huge ``--jobs`` a list of
        that size once the bisection is stored."""
        for flag, n, high in (("--jobs", self.jobs, defaults.MAX_JOBS),
                              ("--build-jobs", self.build_jobs, defaults.MAX_JOBS),
                              ("--max-jobs", self.max_jobs, defaults.MAX_JOBS),
                              ("--pids", self.pids, defaults.MAX_PIDS)):
            if n is not None and not 1 <= n <= high:
                raise UsageError(f"{flag} {n}: give a number from 1 to {high}")
        for flag, x in (("--build-timeout", self.build_timeout), ("--timeout", self.timeout)):
            if x is not None and not (math.isfinite(x) and 0 < x <= defaults.MAX_SECONDS):
                raise UsageError(f"{flag} {x}: give seconds above 0 and at most "
                                 f"{defaults.MAX_SECONDS:.0f} (30 days)")
        if self.variant is not None and not (len(self.variant) <= 40
                                             and VARIANT.fullmatch(self.variant)):
            raise UsageError(f"--variant {self.variant[:40]!r}: write a wheel variant like "
                             f"cu128, cu126, cpu or rocm6.3 (lower case letters and digits, "
                             f"dots between)")

    def _check_manual(self) -> None:
        """A person judges one probe at a time, on this machine, by whether the bug shows."""
        other = ("--oracle" if self.oracle else "a command after --" if self.command
                 else "--match" if self.match is not None else None)
        if other:
            raise UsageError(f"--manual and {other} both say how probes are judged: give one")
        if self.width > 1:
            raise UsageError("--manual asks about one probe at a time: drop --jobs/--gpus "
                             "lists (or give --jobs 1)")
        if self.executor.sealed:
            raise UsageError("--manual needs --executor local: the shell it offers opens in "
                             "a local environment")
        if self.regress is not None:
            raise UsageError("--manual asks whether the bug shows; --regress does not apply: "
                             "drop it (--find-fix still works)")

    @property
    def width(self) -> int:
        """How many probes run at once."""
        if self.jobs is not None:
            return self.jobs
        return len(self.gpu_list) or defaults.JOBS


@dataclass(frozen=True)
class CheckRequest:
    """What ``bisect check`` was given: one run of an oracle (or a command) in one environment.
    Its oracle fields are :class:`Request`'s, declared by the same CLI options."""

    oracle: str = ""  # "" with a command oracle
    command: tuple[str, ...] = ()
    match: str | None = None
    timeout: float | None = None
    dependency: tuple[str, ...] = ()
    regress: Polarity | None = None
    repo: Path = Path(".")
    profile: str | None = None
    python: str | None = None
    system: bool = False  # the interpreter and torch installed here
    wheel: Path | None = None  # ... or this wheel in a fresh environment
    commit: str | None = None  # ... or this commit of ``repo``, built
    gpu: str | None = None
    env: tuple[str, ...] = ()  # the oracle environment's --env NAME=VALUE (oracle_env.py)

    def check(self) -> None:
        if sum((self.system, self.wheel is not None, self.commit is not None)) != 1:
            raise UsageError("give exactly one of --env system, --wheel FILE or --commit SHA")
        oracle_env.parse(self.env)
