"""``make bench`` section 11: change points over simulated nightly series, as the watch sees them.

Each simulated series has 30-120 builds; a build's level carries build-to-build noise (2-20 %)
and its 5 samples a little of their own, so a build is one median, as the watch counts it. The
scenarios: noise alone; one slowdown of 5, 10, 20 or 50 % at a random build in the middle
third; the 20 % step with one build in 15 an outlier (1.5-3x); a slow drift of 5 % over the whole
series and no step; the 20 % step with bimodal samples (a third of them 30 % slow).

Every method is run as the watch runs it: after each new build, on everything so far; an alarm
is a step it reports for the first time (the watch's rule: the same kind within
``WATCH_STEP_MOVE_BUILDS`` builds of an earlier alarm is that alarm, moved). An alarm of the
slowdown's kind within 2 builds of the true step is a detection; every other alarm is false.
Delay: builds at and after the step seen when it was detected (1 = on the first slow build).

Methods, in the same run on the same series: the watch's detector (``core/changepoint.py``:
ruptures segmentation, the threshold, a rank test at ``WATCH_STEP_ALPHA``), and a fixed rule
that alarms when the newest build's median is X % worse or better than the previous build's,
for X = the threshold (5 %) and X = 20 %.

Runnable alone: ``make bench-changepoints`` or ``python -m bench.changepoints``;
BENCH_CP_SERIES sets the series per row (default 6).
"""

from __future__ import annotations

import os
import random
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from bisector.base import defaults
from bisector.core.changepoint import MIN_BUILDS, detect

THRESHOLD = 0.05
NOISES = (0.02, 0.05, 0.10, 0.20)
SCENARIOS = ("noise", "step 5%", "step 10%", "step 20%", "step 50%", "outliers + 20%",
             "drift 5%", "bimodal + 20%")
NEAR = 2  # builds between a reported step and the true one that still count as found

Alarm = tuple[int, bool]  # (index of the first build of the new level, worse)
Method = Callable[[list[float]], list[Alarm]]  # all steps it sees in a series so far


@dataclass(frozen=True)
class Simulated:
    medians: list[float]
    step: int | None  # index of the first slow build


def simulate(rng: random.Random, scenario: str, noise: float) -> Simulated:
    n = rng.randint(30, 120)
    step: int | None = None
    size = 0.0
    if "%" in scenario and not scenario.startswith("drift"):
        size = float(scenario.split()[-1].rstrip("%")) / 100
        step = rng.randint(n // 3, 2 * n // 3)
    medians = []
    for i in range(n):
        level = 10.0 * (1 + (size if step is not None and i >= step else 0.0))
        if scenario.startswith("drift"):
            level *= 1 + 0.05 * i / (n - 1)
        build = level * max(0.05, 1 + rng.gauss(0, noise))
        if scenario.startswith("outliers") and rng.random() < 1 / 15:
            build *= rng.uniform(1.5, 3.0)
        samples = []
        for _ in range(5):
            x = build * max(0.05, 1 + rng.gauss(0, noise / 4))
            if scenario.startswith("bimodal") and rng.random() < 1 / 3:
                x *= 1.3
            samples.append(x)
        medians.append(statistics.median(samples))
    return Simulated(medians, step)


def changepoint(medians: list[float]) -> list[Alarm]:
    return [(s.index, s.worse) for s in detect(medians, THRESHOLD,
                                               alpha=defaults.WATCH_STEP_ALPHA)]


def fixed(x: float) -> Method:
    def rule(medians: list[float]) -> list[Alarm]:
        out = []
        for i in range(1, len(medians)):
            change = medians[i] / medians[i - 1] - 1
            if abs(change) > x:
                out.append((i, change > 0))
        return out
    return rule


METHODS: dict[str, Method] = {"watch (changepoint)": changepoint,
                              "fixed 5 % vs previous": fixed(0.05),
                              "fixed 20 % vs previous": fixed(0.20)}


@dataclass
class Score:
    steps: int = 0
    found: int = 0
    false: int = 0
    builds: int = 0
    delays: tuple[int, ...] = ()


def watch_like(method: Method, sim: Simulated, score: Score) -> None:
    """Run ``method`` after every build as the watch would, and score its alarms."""
    alarms: list[Alarm] = []
    detected = False
    start = 2 if method is not changepoint else 2 * MIN_BUILDS
    for t in range(start, len(sim.medians) + 1):
        for index, worse in method(sim.medians[:t]):
            if any(w == worse and abs(i - index) <= defaults.WATCH_STEP_MOVE_BUILDS
                   for i, w in alarms):
                continue
            alarms.append((index, worse))
            if (sim.step is not None and not detected and worse
                    and abs(index - sim.step) <= NEAR):
                detected = True
                score.found += 1
                score.delays += (t - sim.step,)
            else:
                score.false += 1
    score.steps += sim.step is not None
    score.builds += len(sim.medians)


def _row(job: tuple[str, float, int]) -> dict[str, Score]:
    scenario, noise, count = job
    rng = random.Random(f"{scenario}/{noise}")
    scores = {name: Score() for name in METHODS}
    for _ in range(count):
        sim = simulate(rng, scenario, noise)
        for name, method in METHODS.items():
            watch_like(method, sim, scores[name])
    return scores


def _cell(s: Score) -> str:
    found = f"{s.found / s.steps:4.0%}" if s.steps else "   -"
    delay = f"{statistics.mean(s.delays):4.1f}" if s.delays else "   -"
    return f"{found} {100 * s.false / s.builds:5.1f} {delay}"


def bench_changepoints() -> None:
    count = int(os.environ.get("BENCH_CP_SERIES", "6"))
    t0 = time.perf_counter()
    print(f"11. change points over nightlies: {count} simulated series per row (30-120 builds), "
          f"threshold {THRESHOLD:.0%}, alpha {defaults.WATCH_STEP_ALPHA}")
    print("   per method: detected / false alarms per 100 builds / mean delay in builds")
    head = "".join(f" | {name:<22}" for name in METHODS)
    print(f"   {'scenario':<16} {'noise':>5}{head}")
    jobs = [(sc, nz, count) for sc in SCENARIOS for nz in NOISES]
    totals = {name: Score() for name in METHODS}
    with ProcessPoolExecutor(max_workers=2) as pool:
        for (sc, nz, _), scores in zip(jobs, pool.map(_row, jobs), strict=True):
            cells = "".join(f" | {_cell(scores[name]):<22}" for name in METHODS)
            print(f"   {sc:<16} {nz:>5.0%}{cells}")
            for name, s in scores.items():
                t = totals[name]
                t.steps += s.steps
                t.found += s.found
                t.false += s.false
                t.builds += s.builds
                t.delays += s.delays
    cells = "".join(f" | {_cell(totals[name]):<22}" for name in METHODS)
    print(f"   {'all':<16} {'':>5}{cells}")
    print(f"   section took {time.perf_counter() - t0:.1f}s")


if __name__ == "__main__":
    bench_changepoints()
