"""What ``bisect plan`` expects a performance oracle to spend: the shipped search, simulated.

A performance commit is not judged by one run: the search
(:func:`bisector.core.perf_search.search`, the very function the strategy in
:mod:`bisector.run.strategies.perf` calls each round) runs the good endpoint beside each commit
and asks for more pairs while the paired differences cannot tell, so what a bisection costs
depends on how noisy the oracle's runs are. A flat "two pairs a commit" was right for a quiet
machine and several times too low for a noisy one. So the plan runs the search itself, round
after round as a run does (the same :func:`layout`, one slot), over runs drawn from a
:class:`Machine`: each run's level moves by ``run_sd`` (a process's clocks, caches), each of its
samples by ``sample_sd`` around it, and the commits from the
culprit on are :data:`CHANGE` thresholds slower (faster when a fix is sought).

The noise is the oracle's own where it has run on the range before (:func:`noise_of`, the
spread of its stored runs), else :data:`QUIET`. Each simulation is seeded, so a plan is the
same every time it is asked, and a test can hand the very same machine to a real run.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from bisector.core import paired, perf, sampling
from bisector.core.perf_search import Run, layout, search
from bisector.core.search import Culprit, Next
from bisector.store.runs import Sample

# The change the simulated culprit makes, in thresholds: a regression one bisects is usually
# clearly past the threshold (one right at it costs the search its cap of pairs).
CHANGE = 2.0
# Simulated hunts a plan averages (each one culprit, one seed): a noisy oracle's hunt is a few
# hundred runs, each round the whole search again (about 1.5 s a hunt at 5 % noise).
HUNTS = 6
UNIT = "ms"


@dataclass(frozen=True)
class Noise:
    """How a performance oracle's runs move, on a log scale (0.01: about 1 %)."""

    run_sd: float  # a run's level around its commit's (run to run)
    sample_sd: float  # a sample around its run's level
    samples: int  # samples a run prints
    measured: int = 0  # stored runs it was read from (0: assumed)

    def describe(self) -> str:
        where = (f"from {self.measured} stored runs of this oracle" if self.measured else
                 "assumed: no stored runs of this oracle with samples")
        return (f"runs move {self.run_sd:.1%}, samples {self.sample_sd:.1%} within a run, "
                f"{self.samples} samples a run ({where})")


# A quiet GPU box, as ``make bench`` section 13 models one: runs 1 %, samples 2 %, 5 a run.
QUIET = Noise(0.01, 0.02, 5)


@dataclass(frozen=True)
class Model:
    """What the simulated hunts need of the oracle: its threshold, ``max-runs`` and noise."""

    threshold: float
    noise: Noise = QUIET
    max_runs: int | None = None
    find_fix: bool = False


def noise_of(found: Mapping[str, Sequence[Sample]]) -> Noise:
    """The oracle's noise from its stored runs (``store/runs.samples``: commit -> runs): the
    pooled spread of samples within a run, and of the run medians of one commit less what the
    samples alone explain. A part nothing measured (no run with two samples, no commit run
    twice) is :data:`QUIET`'s."""
    within: list[list[float]] = []
    medians: list[list[float]] = []
    for runs in found.values():
        logs = [[math.log(x) for x in s] for s in (_samples(r) for r in runs) if s]
        within += [xs for xs in logs if len(xs) >= 2]
        if len(logs) >= 2:
            medians.append([math.log(perf.median([math.exp(x) for x in xs])) for xs in logs])
    if not within and not medians:
        return QUIET
    sample_var = _pooled(within)
    sample_sd = math.sqrt(sample_var) if sample_var is not None else QUIET.sample_sd
    counts = sorted(len(xs) for xs in within) or [QUIET.samples]
    k = counts[len(counts) // 2]
    median_var = _pooled(medians)
    run_sd = (math.sqrt(max(0.0, median_var - paired.MEDIAN_SE ** 2 * sample_sd ** 2 / k))
              if median_var is not None else QUIET.run_sd)
    measured = sum(1 for runs in found.values() for r in runs if _samples(r))
    return Noise(run_sd, sample_sd, k, measured)


def _samples(s: Sample) -> list[float]:
    got = (s.facts.get("perf") or {}).get("samples") or []
    return [float(x) for x in got if isinstance(x, int | float) and x > 0]


def _pooled(groups: Iterable[list[float]]) -> float | None:
    """The pooled variance of several groups (each about its own mean), None with no dof."""
    ss, dof = 0.0, 0
    for xs in groups:
        if len(xs) >= 2:
            mean = sum(xs) / len(xs)
            ss += sum((x - mean) ** 2 for x in xs)
            dof += len(xs) - 1
    return ss / dof if dof else None


class Machine:
    """Runs of a commit drawn from ``model``'s noise, the culprit's change from ``culprit`` on,
    in the order they are asked for (seeded: the same runs for the same asks)."""

    def __init__(self, model: Model, culprit: int, seed: int) -> None:
        self.model, self.culprit, self.rng = model, culprit, random.Random(seed)

    def run(self, position: int) -> tuple[float, ...]:
        m, noise = self.model, self.model.noise
        change = (1 + CHANGE * m.threshold) ** (-1 if m.find_fix else 1)
        level = 10.0 * (change if position >= self.culprit else 1.0)
        level *= math.exp(self.rng.gauss(0, noise.run_sd))
        return tuple(level * math.exp(self.rng.gauss(0, noise.sample_sd))
                     for _ in range(noise.samples))


@dataclass(frozen=True)
class Hunt:
    """One simulated bisection: the oracle runs it made, the commits it obtained (first
    obtained first) and the culprit it named (None: a window, a stop, unsure)."""

    runs: int
    obtained: tuple[int, ...]
    named: int | None


def hunts(n: int) -> list[tuple[int, int]]:
    """The (culprit, seed) of each simulated hunt over ``n`` candidates: the middles of
    :data:`HUNTS` equal slices of the range, seeds 0, 1, ..."""
    return [(1 + ((2 * i + 1) * (n - 1)) // (2 * HUNTS), i) for i in range(HUNTS)]


def hunt(model: Model, n: int, culprit: int, seed: int,
         broken: Callable[[int], bool] = lambda _p: False) -> Hunt:
    """The performance search over ``n`` candidates with runs from a :class:`Machine`, as a
    new bisection with one slot runs it (no prior, nothing shown before): each round's
    positions from :func:`layout`, each run stored as the strategy reads it back. A commit
    that is ``broken`` gives no samples and costs no oracle run."""
    machine = Machine(model, culprit, seed)
    rule = paired.Rule(perf.Direction.LOWER, model.threshold)
    cap = sampling.perf_max_runs(model.max_runs)
    by_pos: dict[int, list[Run]] = {}
    obtained: dict[int, None] = {}
    last: int | None = None
    runs = rounds = made = 0
    while isinstance(step := search(by_pos, n, 1, cap, rule, model.find_fix,
                                    lambda _ready: None).step, Next):
        rounds += 1
        for p in layout(list(step.positions), last, 1, rounds):
            obtained.setdefault(p)
            samples = None if broken(p) else machine.run(p)
            runs, made = runs + (samples is not None), made + 1
            by_pos.setdefault(p, []).append(Run(samples, UNIT, perf.Direction.LOWER, True,
                                                float(made)))  # its start: the order run
            last = p
    return Hunt(runs, tuple(obtained), step.position if isinstance(step, Culprit) else None)
