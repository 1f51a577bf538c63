"""The run configuration: what the user asked for, and what it resolved to, as frozen types.

``Request`` is exactly what ``bisect start`` was given (every default from
:mod:`bisector.base.defaults`); ``RunConfig`` adds what was resolved from it once, at start (the
absolute repository, the profile, the indexes, the wheels mapped onto candidates, where builds
run). Both go through one codec (:func:`encode` / :func:`decode`, cattrs) into the bisection's
row, so ``resume`` runs with exactly the configuration the run started with, and
:func:`reproduce_command` is derived from the request field by field: an option cannot be
forgotten there without a test noticing.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

import cattrs

from bisector.artifacts.installable import InstalledBase
from bisector.artifacts.prebuilt import Prebuilt
from bisector.base import defaults, oracle_env, redact
from bisector.base.errors import UsageError
from bisector.base.kinds import BuildPlace, ExecutorKind, PriorMode
from bisector.core.verdict import Polarity, Rules, TimeoutRule, check_terms
from bisector.oracle.command import check_match

# A wheel variant (``--variant``) is a PEP 440 local version label, ``+cu128``: what an index's
# file names carry, what prebuilt.pick_wheels compares, and what goes into the index URL.
VARIANT = re.compile(r"[a-z0-9]+(?:\.[a-z0-9]+)*")
# Options that change how fast a run goes, never what it finds: left out of the reproduce line.
SPEED_ONLY = frozenset({"jobs", "build_jobs", "max_jobs", "reconfirm", "prefetch",
                        "compiler_bisect"})
# NAME=VALUE options: a secret-named variable's value is shown as *** in the reproduce line.
ENV_FIELDS = frozenset({"env", "build_env"})
# Fields filled from what was found (``prepare``; the watch's series), never an option: not on
# the reproduce line.
RECORDED = frozenset({"inherited", "bad_shown"})


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
class BuildConfig:
    """Where and how source builds run, resolved."""

    place: BuildPlace = BuildPlace.HOST
    image: str = defaults.BUILDER_IMAGE
    repo_id: str = ""  # the repository's root commit: names the ccache volume
    cuda_arch: str | None = None
    max_jobs: int | None = None
    env: dict[str, str] = field(default_factory=dict)  # the user's --build-env overrides
    requires: tuple[str, ...] = ()
    timeout_s: float = defaults.BUILD_TIMEOUT_S


@dataclass(frozen=True)
class DockerConfig:
    image: str = defaults.RUNTIME_IMAGE
    memory: str = defaults.MEMORY
    pids: int = defaults.PIDS


@dataclass(frozen=True)
class PlacedPrebuilt:
    """A wheel of an index mapped onto a candidate position."""

    position: int
    wheel: Prebuilt


@dataclass(frozen=True)
class RunConfig:
    request: Request
    repo: str  # absolute path of the clone
    profile: str
    python: str
    rules: Rules
    executor: ExecutorKind = ExecutorKind.LOCAL
    docker: DockerConfig = DockerConfig()
    build: BuildConfig = BuildConfig()
    variant: str | None = None
    nightly_index: str | None = None  # resolved; None: not used
    release_index: str | None = None
    installed: InstalledBase | None = None
    prebuilts: tuple[PlacedPrebuilt, ...] = ()
    gpus: tuple[str, ...] = ()
    width: int = defaults.JOBS
    build_jobs: int = defaults.BUILD_JOBS
    version: int = 2  # of this codec's layout
    # The repository's URL (--repo-url, else the clone's origin): a worker keeps its own
    # mirror of it (project/mirrors.py) instead of needing the clone at ``repo``.
    repo_url: str = ""

    @property
    def oracle_env(self) -> dict[str, str]:
        """The variables every oracle run of this bisection gets (and its key holds)."""
        return oracle_env.parse(self.request.env)

    @property
    def first_parent(self) -> bool:
        return not self.request.ancestry_path

    @property
    def offline(self) -> bool:
        return self.request.offline

    @property
    def asked_width(self) -> int | None:
        """The probes a round holds when ``--jobs`` was given; None lets the runner size
        rounds by what serves them (slots here, live workers through a queue)."""
        return self.request.jobs

    @property
    def device_spec(self) -> str | None:
        """The GPUs a container or a build may use, resolved: "all", "0,1" (no spaces, the
        list ``--gpus`` was checked into), or None."""
        if self.request.gpus == "all":
            return "all"
        return ",".join(self.gpus) or None

    def slots(self) -> list[str | None]:
        """One entry per probe that may run at once: its GPU, or None (no pinning)."""
        if self.gpus:
            return list(self.gpus[: self.width])
        return [None] * self.width


_conv = cattrs.Converter()
_conv.register_unstructure_hook(Path, str)
_conv.register_structure_hook(Path, lambda v, _t: Path(v))


def encode(cfg: RunConfig) -> dict[str, Any]:
    out: dict[str, Any] = _conv.unstructure(cfg)
    return out


def decode(data: dict[str, Any]) -> RunConfig:
    """Read a stored configuration back; a bisection stored by an older bisector too.

    A request stored before ``any_failure`` existed was judged by git's rule (every failure
    bad): it is read back with ``any_failure`` on, so its resume judges as it began."""
    if data.get("version") != 2:
        data = _legacy(data)
    if isinstance(data.get("request"), dict) and "any_failure" not in data["request"]:
        data = {**data, "request": {**data["request"], "any_failure": True}}
    try:
        return _conv.structure(data, RunConfig)
    except cattrs.BaseValidationError as e:
        raise UsageError(f"the stored configuration cannot be read ({e}): start the bisection "
                         f"again with this bisector") from None


def _legacy(d: dict[str, Any]) -> dict[str, Any]:
    """Settings as the first version stored them (untyped dicts) in today's layout."""
    b = d.get("build") or {}
    dk = d.get("docker") or {}
    req = {"good": d.get("good", ""), "bad": d.get("bad", ""), "oracle": d.get("oracle", ""),
           "repo": d["repo"], "find_fix": d.get("find_fix", False),
           "ancestry_path": not d.get("first_parent", True), "python": d.get("python"),
           "offline": d.get("offline", False),
           "build_timeout": d.get("build_timeout", defaults.BUILD_TIMEOUT_S),
           "executor": d.get("executor", "local"), "gpus": dk.get("gpus")}
    return {
        "request": req, "repo": d["repo"], "profile": d["profile"], "python": d["python"],
        "rules": d.get("rules", {}), "executor": d.get("executor", "local"),
        "docker": {k: dk[k] for k in ("image", "memory", "pids") if k in dk},
        "build": {"place": b.get("in", "host"), "image": b.get("image") or defaults.BUILDER_IMAGE,
                  "repo_id": b.get("repo_id", ""), "cuda_arch": b.get("cuda_arch"),
                  "max_jobs": b.get("max_jobs"), "env": b.get("env") or {},
                  "requires": b.get("requires", ()),
                  "timeout_s": d.get("build_timeout", defaults.BUILD_TIMEOUT_S)},
        "variant": d.get("variant"), "nightly_index": d.get("nightly_index"),
        "release_index": d.get("release_index"), "installed": d.get("installed"),
        "prebuilts": [{"position": p["position"],
                       "wheel": {k: v for k, v in p.items() if k != "position"}}
                      for p in d.get("prebuilts", [])],
        "gpus": [], "width": 1, "build_jobs": 1, "version": 2,
    }


def legacy_rules(stored_polarity: str, find_fix: bool, on_timeout: str) -> Rules:
    """Rules of a bisection stored before they were: its polarity had find-fix folded in."""
    pol = Polarity(stored_polarity)
    if find_fix:
        pol = Polarity.SUCCESS if pol is Polarity.FAILURE else Polarity.FAILURE
    return Rules(pol, find_fix, TimeoutRule(on_timeout))


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def reproduce_command(req: Request) -> str:
    """A command line that repeats this bisection: every option that can change the result.

    Walks the request's fields, so a new option appears here without anyone remembering to
    add it. ``prepare`` stores the request with the absolute repository and the oracle's
    name (bundled) or absolute path, so the line works from any directory. The line is for
    reading and pasting, never run by bisector: every word is redacted (an index URL's
    ``user:token@`` and ``?token=``, ``--build-env HF_TOKEN=...``), the store keeps the raw
    request.
    """
    parts = ["bisect", "start", "--repo", str(req.repo), "--good", req.good, "--bad", req.bad]
    # Manual bisections were stored naming their oracle "manual": never a flag to repeat.
    if req.oracle and not (req.manual and req.oracle == "manual"):
        parts += ["--oracle", req.oracle]
    for f in fields(Request):
        if f.name in {"good", "bad", "oracle", "repo", "command"} | SPEED_ONLY | RECORDED:
            continue
        value, default = getattr(req, f.name), f.default
        if f.name == "env":  # what --env gave; the inherited rest is no flag to type
            value = req.typed_env
        if value == default:
            continue
        if isinstance(value, bool):
            parts.append(flag(f.name) if value else f"--no-{f.name.replace('_', '-')}")
        elif isinstance(value, tuple):
            for item in value:  # a secret variable's value never shows (--env HF_TOKEN=***)
                parts += [flag(f.name), oracle_env.word(item) if f.name in ENV_FIELDS
                          else str(item)]
        else:
            parts += [flag(f.name), str(value)]
    if req.command:  # last, after --: its words are never read as bisect's options
        parts += ["--", *req.command]
    return shlex.join(redact.text(p) for p in parts)


_T = TypeVar("_T")


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


def request_from(values: dict[str, Any]) -> Request:
    """A Request from the CLI's parsed options (names match the fields; types are checked)."""
    return _structure(values, Request)


def check_request_from(values: dict[str, Any]) -> CheckRequest:
    """A CheckRequest from ``bisect check``'s parsed options, as :func:`request_from`."""
    return _structure(values, CheckRequest)


def _structure(values: dict[str, Any], kind: type[_T]) -> _T:
    known = {f.name for f in fields(kind)}  # type: ignore[arg-type]
    if values.get("oracle") is None:  # not given: a command oracle, or a usage error
        values = {**values, "oracle": ""}
    # --good/--bad not given: taken from --from-log, or a usage error (Request.check).
    values = {**values, **{k: "" for k in ("good", "bad") if k in values and values[k] is None}}
    try:
        return _conv.structure({k: v for k, v in values.items() if k in known}, kind)
    except cattrs.BaseValidationError as e:
        raise UsageError(f"bad option value ({e})") from None
