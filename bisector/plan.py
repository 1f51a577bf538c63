"""``bisect plan``: what a bisection will cost, before anything is spent.

The projection runs the real search (the same ``next_step`` and the same cost ranking a run
uses) against every possible culprit position, or an even sample of them on long ranges, and
adds up per-step costs. So "expected source builds" is not a guess from counts: it is what the
search would do, averaged over where the culprit might be, with the worst case beside it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bisector.artifacts.provider import Provider
from bisector.core.search import Culprit, Probe, Verdict, next_step

# Seconds per step. Defaults from measured figures: an oracle run of name_mangling on an H100
# took 22 s; a torch-sized env from a cached wheel ~2 s (make bench); a 2.5 GB nightly download
# plus env ~2 min on a 200 Mbit/s link; a cold single-arch CUDA source build 30-60 min.
DEFAULT_COSTS: dict[str, float] = {
    "oracle": 30.0, "cached": 2.0, "prebuilt": 120.0, "overlay": 10.0, "build": 3600.0,
    "broken": 0.0,
}
SAMPLE = 256


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

    def as_dict(self) -> dict[str, Any]:
        d = self.__dict__.copy()
        d["kinds"] = dict(self.kinds)
        return d


def simulate(n: int, provider: Provider, costs: dict[str, float]) -> list[tuple[int, int, float]]:
    """(oracle runs, source builds, seconds) for each sampled culprit position."""
    step = max(1, (n - 1) // SAMPLE)
    out = []
    for culprit in range(1, n, step):
        verdicts: dict[int, Verdict] = {}
        runs = builds = 0
        seconds = 0.0
        while True:
            s = next_step(n, verdicts, cost=provider.cost)
            if not isinstance(s, Probe):
                assert isinstance(s, Culprit) and s.position == culprit
                break
            for p in s.positions:
                k = provider.kind(p)
                verdicts[p] = Verdict.BAD if p >= culprit else Verdict.GOOD
                runs += 1
                builds += k == "build"
                seconds += costs[k] + costs["oracle"]
        out.append((runs, builds, seconds))
    return out


def make_plan(
    provider: Provider, n: int, costs: dict[str, float], missing: list[str],
    unmapped: list[str], prebuilt: list[dict[str, Any]], notes: list[str],
) -> PlanReport:
    kinds: Counter[str] = Counter(provider.kind(p) for p in range(n))
    sims = simulate(n, provider, costs)
    runs = [r for r, _, _ in sims]
    builds = [b for _, b, _ in sims]
    secs = [s for _, _, s in sims]
    return PlanReport(
        candidates=n, kinds=kinds, prebuilt=prebuilt, missing=missing, unmapped=unmapped,
        probes_mean=sum(runs) / len(runs), probes_max=max(runs),
        builds_mean=sum(builds) / len(builds), builds_max=max(builds),
        seconds_mean=sum(secs) / len(secs), seconds_max=max(secs), costs=costs, notes=notes,
    )


def parse_costs(items: tuple[str, ...]) -> dict[str, float]:
    from bisector.errors import UsageError

    costs = dict(DEFAULT_COSTS)
    for item in items:
        name, _, value = item.partition("=")
        if name not in costs:
            raise UsageError(f"--cost {item!r}: unknown step {name!r}; "
                             f"choose one of {', '.join(costs)}")
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
