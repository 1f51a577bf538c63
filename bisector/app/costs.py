"""What a step of a bisection costs, in seconds, for ``bisect plan``: the user's ``--cost``, else
what the step took on this repository (:mod:`bisector.store.durations`), else the defaults of
this kind of project (its profile's), else PyTorch-sized defaults. Every figure says where it
came from, because a default build of an hour is right for PyTorch and wrong by three orders of
magnitude for a small project (a cold plan of a 12 s job once projected 8.4 h).

An oracle run is priced by that oracle's own runs only: other oracles of the same repository
say nothing about this one (a 30 s training step was once projected at 2 s from the 2 s checks
run there before). Until it has run it is priced by its kind (:func:`unrun_oracle`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import git

from bisector.base import defaults
from bisector.base.errors import UsageError
from bisector.base.kinds import Way
from bisector.oracle.dashboard import benchmark_runs
from bisector.project.profiles import COMPILED_BUILD_S, COMPILED_SUFFIXES, GENERIC, Profile
from bisector.store.durations import Measured

# Seconds per step. Defaults from measured figures: an oracle run of name_mangling on an H100
# took 22 s; a torch-sized env from a cached wheel ~2 s (make bench); a 2.5 GB nightly download
# plus env ~2 min on a 200 Mbit/s link; a cold single-arch CUDA source build 30-60 min.
# The steps are an oracle run and the ways of artifacts (base/kinds.Way) a plan prices: a
# package from the team's object store is priced as a download (its runs measure it apart).
DEFAULT_COSTS: dict[str, float] = {
    "oracle": 30.0, Way.CACHED: 2.0, Way.PREBUILT: 120.0, Way.OVERLAY: 10.0, Way.BUILD: 3600.0,
    Way.BROKEN: 0.0,
}


def price(overrides: Mapping[str, float], measured: Mapping[str, tuple[Measured, str]],
          project: Mapping[str, float] | None = None, kind: str | None = None,
          ) -> tuple[dict[str, float], dict[str, dict[str, Any]]]:
    """Seconds per step and where each figure came from: ``--cost`` first, then what the step
    took on this repository (``measured``: step -> (mean, what it is a mean over)), then the
    defaults of this kind of project (``project``, named ``kind``: see :func:`project_costs`),
    then :data:`DEFAULT_COSTS`."""
    costs: dict[str, float] = {}
    sources: dict[str, dict[str, Any]] = {}
    for step, default in DEFAULT_COSTS.items():
        if step in overrides:
            costs[step], sources[step] = overrides[step], {"from": "--cost"}
        elif step in measured:
            m, what = measured[step]
            costs[step] = m.mean_s
            sources[step] = {"from": "measured", "count": m.count, "over": what}
        elif project and step in project:
            costs[step], sources[step] = project[step], {"from": "default", "for": kind}
        else:
            costs[step], sources[step] = default, {"from": "default"}
    return costs, sources


def unrun_oracle(argv: tuple[str, ...] | None, project: Mapping[str, float], kind: str
                 ) -> tuple[float, dict[str, Any]]:
    """The price of one run of an oracle that has no runs in this store, and where it came
    from: a dashboard report's benchmark (``--from-report``) at its models' usual time
    (:data:`~bisector.base.defaults.BENCHMARK_MODEL_RUN_S` a model, each round), any other
    oracle at the default oracle run of this kind of project (``project``, named ``kind``),
    else bisector's own default."""
    bench = benchmark_runs(argv)
    if bench is not None:
        models, rounds = bench
        each = defaults.BENCHMARK_MODEL_RUN_S
        return models * rounds * each, {
            "from": "default",
            "for": f"PyTorch's benchmark of {models} model(s), {rounds} round(s) a run, "
                   f"{human(each)} a model's run"}
    if "oracle" in project:
        return project["oracle"], {"from": "default", "for": kind}
    return DEFAULT_COSTS["oracle"], {"from": "default"}


def unrun_note(seconds: float, source: Mapping[str, Any]) -> str:
    """What the plan says of an oracle it prices without a run of its own."""
    what = f"the {describe_source(source)}" if source.get("for") else "bisector's default"
    return (f"no runs of this oracle yet: priced at {human(seconds)} a run from {what}; other "
            f"oracles' runs never price it (--cost oracle=SECONDS sets it)")


# An assembled wheel (artifacts/assemble.py): read from the tree and zipped, no backend run.
ASSEMBLED_BUILD_S = 0.2


def project_costs(profile: Profile, compiled: bool,
                  assembles: bool = False) -> tuple[dict[str, float], str]:
    """The defaults a never-measured repository is priced with, by its profile, and what kind
    of project that is: PyTorch's hour-long build only for PyTorch. A generic project is
    priced as pure Python unless its tree has compiled sources, and its builds as assembled
    wheels when its trees assemble (``assembles``: both endpoints' do)."""
    costs = dict(profile.costs)
    if profile is not GENERIC:
        return costs, f"{profile.name} projects"
    if compiled:
        costs[Way.BUILD] = COMPILED_BUILD_S
        return costs, "a project with compiled sources"
    if assembles:
        costs[Way.BUILD] = ASSEMBLED_BUILD_S
        return costs, "a pure-Python project whose wheels assemble from the tree (both ends')"
    return costs, "a pure-Python project"


def trees_assemble(repo: git.Repo, shas: list[str]) -> bool:
    """Whether every one of ``shas`` has a wheel assembled from its tree, no backend run
    (what a run's first build of each will be)."""
    from bisector.artifacts.assemble import assemble  # lazy: packaging, for plan alone

    try:
        return all(assemble(repo, sha).filename is not None for sha in shas)
    except (ValueError, git.GitCommandError):
        return False


def has_compiled_sources(repo: git.Repo, sha: str) -> bool:
    """Whether the tree of ``sha`` has a file a compiler builds (C, C++, CUDA, Cython, Rust,
    Fortran, Go): one ``ls-tree``, whose names are only compared, never run."""
    try:
        names = str(repo.git.ls_tree("-r", "--name-only", sha)).splitlines()
    except git.GitCommandError:
        return False
    return any(n.lower().endswith(COMPILED_SUFFIXES) for n in names)


def describe_source(source: Mapping[str, Any]) -> str:
    """``measured over 11 source builds of this repository``, ``default for a pure-Python
    project``, ``default`` or ``--cost``."""
    if source.get("from") == "measured":
        return f"measured over {source['count']} {source['over']}"
    if source.get("from") == "default" and source.get("for"):
        return f"default for {source['for']}"
    return str(source.get("from", "default"))


def parse_costs(items: tuple[str, ...]) -> dict[str, float]:
    """The ``--cost STEP=SECONDS`` overrides, checked; steps not named are priced by
    :func:`price` (measured here, else a default)."""

    costs: dict[str, float] = {}
    for item in items:
        name, _, value = item.partition("=")
        if name not in DEFAULT_COSTS:
            raise UsageError(f"--cost {item!r}: unknown step {name!r}; "
                             f"choose one of {', '.join(DEFAULT_COSTS)}")
        try:
            costs[name] = float(value)
        except ValueError:
            raise UsageError(f"--cost {item!r}: {value!r} is not a number of seconds") from None
        if costs[name] < 0:
            raise UsageError(f"--cost {item!r}: seconds cannot be negative")
        if not (math.isfinite(costs[name]) and costs[name] <= defaults.MAX_SECONDS):
            # nan compares false with everything: every projection said "nan"
            raise UsageError(f"--cost {item[:60]!r}: give finite seconds from 0 to "
                             f"{defaults.MAX_SECONDS:.0f} (30 days)")
    return costs


def human(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
