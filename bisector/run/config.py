"""The run configuration: what a request resolved to, as frozen types, and its codec.

``Request`` (``run/request.py``) is exactly what ``bisect start`` was given; ``RunConfig`` adds
what was resolved from it once, at start (the absolute repository, the profile, the indexes, the
wheels mapped onto candidates, where builds run). Both go through one codec (:func:`encode` /
:func:`decode`, cattrs) into the bisection's row, so ``resume`` runs with exactly the
configuration the run started with; the CLI's options become a request through the same
converter (:func:`request_from`).

The request's names are re-exported here: most readers of a stored run want both.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

import cattrs

from bisector.artifacts.installable import InstalledBase
from bisector.artifacts.prebuilt import Prebuilt
from bisector.base import defaults, oracle_env
from bisector.base.errors import UsageError
from bisector.base.kinds import BuildPlace, ExecutorKind
from bisector.core.verdict import Polarity, Rules, TimeoutRule
from bisector.run.reproduce import RECORDED, flag, reproduce_command
from bisector.run.request import VARIANT, CheckRequest, Request

__all__ = ["RECORDED", "VARIANT", "BuildConfig", "CheckRequest", "DockerConfig",
           "PlacedPrebuilt", "Request", "RunConfig", "check_request_from", "decode", "encode",
           "flag", "legacy_rules", "reproduce_command", "request_from"]


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


_T = TypeVar("_T")


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
