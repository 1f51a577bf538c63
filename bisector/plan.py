"""``bisect plan``: what a bisection will cost, before anything is spent.

The projection runs the real search (the same ``next_step`` and the same cost ranking a run
uses) against every possible culprit position, or an even sample of them on long ranges, and
adds up per-step costs. So "expected source builds" is not a guess from counts: it is what the
search would do, averaged over where the culprit might be, with the worst case beside it.

It starts from what a run would start from: every reusable verdict already stored for the
range (a run seeds its search with them before its first probe, so they cost nothing and rule
out every culprit position they contradict). Steps are priced with what they took on this
repository when that was measured, a default otherwise, and ``--cost`` over both; the report
says which, because a default build of an hour is right for PyTorch and wrong by three orders of
magnitude for a small project.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from bisector.core.search import Probe, Verdict, next_step
from bisector.store.durations import Measured

# Seconds per step. Defaults from measured figures: an oracle run of name_mangling on an H100
# took 22 s; a torch-sized env from a cached wheel ~2 s (make bench); a 2.5 GB nightly download
# plus env ~2 min on a 200 Mbit/s link; a cold single-arch CUDA source build 30-60 min.
DEFAULT_COSTS: dict[str, float] = {
    "oracle": 30.0, "cached": 2.0, "prebuilt": 120.0, "overlay": 10.0, "build": 3600.0,
    "broken": 0.0,
}
SAMPLE = 256


class Ranking(Protocol):
    """What the projection needs of the artifact provider: how each commit would be obtained
    (``cached``, ``prebuilt``, ``overlay``, ``build``, ``broken``) and the rank the search uses."""

    def kind(self, pos: int) -> str: ...
    def cost(self, pos: int) -> int: ...


@dataclass
class PlanReport:
    candidates: int
    kinds: Counter[str]
    prebuilt: list[dict[str, Any]]
    missing: list[str]
    unmapped: list[str]
    probes_mean: float
    probes_max: int
    builds_mean: float
    builds_max: int
    seconds_mean: float
    seconds_max: float
    costs: dict[str, float]
    notes: list[str] = field(default_factory=list)
    stored_verdicts: int = 0  # candidates with a reusable verdict of this oracle and environment
    # step -> {"from": "--cost" | "measured" | "default", and for measured "count", "over"}
    cost_sources: dict[str, dict[str, Any]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d = self.__dict__.copy()
        d["kinds"] = dict(self.kinds)
        return d


def consistent_culprits(n: int, known: Mapping[int, Verdict]) -> list[int]:
    """Positions the first bad commit can still be at, given verdicts already known: after
    every good, at or before every bad (a skip rules out nothing). Empty when they contradict
    each other (then a run stops as soon as it sees that)."""
    goods = [p for p, v in known.items() if v is Verdict.GOOD]
    bads = [p for p, v in known.items() if v is Verdict.BAD]
    return list(range(max([0, *goods]) + 1, min([n - 1, *bads]) + 1))


def simulate(n: int, provider: Ranking, costs: dict[str, float],
             known: Mapping[int, Verdict] | None = None) -> list[tuple[int, int, float]]:
    """(oracle runs, source builds, seconds) for each sampled culprit position.

    ``known``: the stored verdicts a run would seed its search with. They are never paid for,
    and only culprit positions consistent with them are sampled. A commit known not to build
    is a skip, as in a run: no oracle run, and the search steps around it.
    """
    seeded = dict(known or {})
    if not isinstance(next_step(n, seeded, cost=provider.cost), Probe):
        return [(0, 0, 0.0)]  # the stored verdicts already answer: a run only reports them
    culprits = consistent_culprits(n, seeded) or list(range(1, n))
    out = []
    for culprit in culprits[::max(1, len(culprits) // SAMPLE)]:
        verdicts = dict(seeded)
        runs = builds = 0
        seconds = 0.0
        while isinstance(s := next_step(n, verdicts, cost=provider.cost), Probe):
            for p in s.positions:
                k = provider.kind(p)
                if k == "broken":
                    verdicts[p] = Verdict.SKIP
                    seconds += costs[k]
                    continue
                verdicts[p] = Verdict.BAD if p >= culprit else Verdict.GOOD
                runs += 1
                builds += k == "build"
                seconds += costs[k] + costs["oracle"]
        out.append((runs, builds, seconds))
    return out


def make_plan(
    provider: Ranking, n: int, costs: dict[str, float], missing: list[str],
    unmapped: list[str], prebuilt: list[dict[str, Any]], notes: list[str],
    known: Mapping[int, Verdict] | None = None,
    cost_sources: dict[str, dict[str, Any]] | None = None,
) -> PlanReport:
    kinds: Counter[str] = Counter(provider.kind(p) for p in range(n))
    sims = simulate(n, provider, costs, known)
    runs = [r for r, _, _ in sims]
    builds = [b for _, b, _ in sims]
    secs = [s for _, _, s in sims]
    return PlanReport(
        candidates=n, kinds=kinds, prebuilt=prebuilt, missing=missing, unmapped=unmapped,
        probes_mean=sum(runs) / len(runs), probes_max=max(runs),
        builds_mean=sum(builds) / len(builds), builds_max=max(builds),
        seconds_mean=sum(secs) / len(secs), seconds_max=max(secs), costs=costs, notes=notes,
        stored_verdicts=len(known or {}), cost_sources=dict(cost_sources or {}))


def price(overrides: Mapping[str, float], measured: Mapping[str, tuple[Measured, str]],
          ) -> tuple[dict[str, float], dict[str, dict[str, Any]]]:
    """Seconds per step and where each figure came from: ``--cost`` first, then what the step
    took on this repository (``measured``: step -> (mean, what it is a mean over)), then
    :data:`DEFAULT_COSTS`."""
    costs: dict[str, float] = {}
    sources: dict[str, dict[str, Any]] = {}
    for step, default in DEFAULT_COSTS.items():
        if step in overrides:
            costs[step], sources[step] = overrides[step], {"from": "--cost"}
        elif step in measured:
            m, what = measured[step]
            costs[step] = m.mean_s
            sources[step] = {"from": "measured", "count": m.count, "over": what}
        else:
            costs[step], sources[step] = default, {"from": "default"}
    return costs, sources


def describe_source(source: Mapping[str, Any]) -> str:
    """``measured over 11 source builds of this repository``, ``default`` or ``--cost``."""
    if source.get("from") == "measured":
        return f"measured over {source['count']} {source['over']}"
    return str(source.get("from", "default"))


def parse_costs(items: tuple[str, ...]) -> dict[str, float]:
    """The ``--cost STEP=SECONDS`` overrides, checked; steps not named are priced by
    :func:`price` (measured here, else a default)."""
    from bisector.errors import UsageError

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
    return costs


def human(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
