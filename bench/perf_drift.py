"""Section 13: a performance bisection on a drifting, noisy machine, paired vs unpaired.

Each simulated hunt bisects 40 commits with a slowdown at a random culprit, on a machine whose
speed drifts (up to 2x slower over the bisection's expected runs, as a loaded shared box does)
and whose runs may fall into a slow mode (bimodal: one run in five 8 % slower); in the last two
rows another job's load comes and goes (2.3x slower for 11 runs, then 11 runs idle, as a
matrix-product load switched every 40 s did on an H100). A run prints 5
samples. The *paired* hunt is the shipped search: the very functions of
``bisector/run/strategies/perf.py`` (``assess``, ``layout``) and ``core/paired.py``, driven by
the same loop as ``Performance.decide``, with paired confirmation of the culprit beside its
parent. The *unpaired* hunt, measured in the same run, is the rule it replaced (3 runs of the
good endpoint first, each commit's runs against them by Mann-Whitney, ``core/perf``'s
``compare_runs``), whose state stayed ``done`` whatever its confirmation said (a grey note).

An answer is *right* when the state is ``done`` with the true culprit; *wrong* when ``done``
names another commit; *unsure* otherwise (``not reproducible``, ``inconclusive``, a window, an
endpoint stop): an unsure answer says so, which is the point.
"""

from __future__ import annotations

import functools
import math
import os
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

N = 40
SAMPLES = 5
SAMPLE_SIGMA = 0.02
RUN_SIGMA = 0.01
SLOW_MODE = 0.08
SLOW_MODE_P = 0.2
EXPECTED_RUNS = 120  # the drift reaches its full size after this many runs
LOAD = 2.3  # another job on the GPU: runs this much slower while it is on (as on the H100)


@dataclass(frozen=True)
class Setting:
    slowdown: float
    threshold: float
    drift: float  # the machine's slowdown over EXPECTED_RUNS runs (1.0: twice as slow)
    bimodal: bool
    hunts: int
    load: int = 0  # another job's load on for this many runs, off for as many (0: none)


class Machine:
    """Runs of a commit: its true level, times the drift so far, times run and sample noise."""

    def __init__(self, s: Setting, culprit: int, rng: random.Random) -> None:
        self.s, self.culprit, self.rng, self.t = s, culprit, rng, 0

    def run(self, position: int) -> tuple[float, tuple[float, ...]]:
        self.t += 1
        level = (1 + self.s.drift) ** (self.t / EXPECTED_RUNS)
        level *= (1 + self.s.slowdown) if position >= self.culprit else 1.0
        level *= math.exp(self.rng.gauss(0, RUN_SIGMA))
        if self.s.load and (self.t // self.s.load) % 2 == 1:
            level *= LOAD
        if self.s.bimodal and self.rng.random() < SLOW_MODE_P:
            level *= 1 + SLOW_MODE
        return float(self.t), tuple(10.0 * level * math.exp(self.rng.gauss(0, SAMPLE_SIGMA))
                                    for _ in range(SAMPLES))


def _paired_hunt(s: Setting, culprit: int, rng: random.Random) -> tuple[str, int]:
    from bisector.core import paired, perf
    from bisector.core.search import Culprit, Next, Verdict, next_step
    from bisector.run.strategies import perf as strategy
    from bisector.run.strategies.perf import Run

    m = Machine(s, culprit, rng)
    runs: dict[int, list[Run]] = {}
    cap = max(perf.DEFAULT_MAX_RUNS, paired.DEFAULT_MAX_PAIRS)
    last: int | None = None
    rounds = 0
    while True:
        like, refs = strategy.references(runs.get(0, []))
        wanted: list[int] = []
        if like is None:
            wanted = [0]
        else:
            rule = paired.Rule(perf.Direction.LOWER, s.threshold)
            known = {0: Verdict.GOOD}
            for p, rs in runs.items():
                if p == 0:
                    continue
                a = strategy.assess(rs, refs, like, rule, cap)
                if a.verdict is None:
                    wanted.append(p)
                else:
                    known[p] = a.verdict
            if not wanted:
                step = next_step(N, known)
                if not isinstance(step, Next):
                    if not isinstance(step, Culprit):
                        return "unsure", m.t
                    return _confirm_paired(m, step.position, rule), m.t
                wanted = list(step.positions)
        rounds += 1
        for p in strategy.layout(wanted, last, 1, rounds):
            start, samples = m.run(p)
            runs.setdefault(p, []).append(Run(samples, "ms", perf.Direction.LOWER, True, start))
            last = p


def _confirm_paired(m: Machine, c: int, rule: object) -> str:
    """As ``run/confirm.py``'s ``_beside``: parent, culprit, parent, ..., growing on the
    search's schedule while undecided, up to the search's cap of pairs."""
    from bisector.core import paired, perf

    assert isinstance(rule, paired.Rule)
    refs: list[paired.Timed] = []
    tests: list[paired.Timed] = []
    cap = paired.DEFAULT_MAX_PAIRS

    def run(p: int, into: list[paired.Timed]) -> None:
        t, samples = m.run(p)
        into.append(paired.Timed(t, perf.median(samples)))

    run(c - 1, refs)
    target = paired.MIN_PAIRS
    while True:
        while len(tests) < target:
            run(c, tests)
            run(c - 1, refs)
        got = paired.compare(paired.differences(refs, tests, rule), rule)
        if got.verdict is not perf.PerfVerdict.UNDECIDED or len(tests) >= cap:
            break
        target = paired.next_look(len(tests), cap)
    if got.verdict is perf.PerfVerdict.BAD:
        return "right" if c == m.culprit else "wrong"
    return "unsure"


def _unpaired_hunt(s: Setting, culprit: int, rng: random.Random) -> tuple[str, int]:
    """The replaced rule: 3 baseline runs first, then every commit against them."""
    from bisector.core import perf
    from bisector.core.search import Culprit, Next, Verdict, next_step

    m = Machine(s, culprit, rng)
    base_runs = [m.run(0)[1] for _ in range(3)]
    base = perf.Baseline.of(base_runs)
    cap = perf.DEFAULT_MAX_RUNS

    def judge(p: int) -> Verdict:
        got: list[tuple[float, ...]] = []
        while True:
            target = perf.next_sample_count(len(got), cap)
            if target is None:
                return Verdict.SKIP
            while len(got) < target:
                got.append(m.run(p)[1])
            v = perf.compare_runs(base, got, perf.Direction.LOWER, s.threshold).verdict
            if v is not perf.PerfVerdict.UNDECIDED:
                return Verdict.BAD if v is perf.PerfVerdict.BAD else Verdict.GOOD

    known = {0: Verdict.GOOD}
    while True:
        step = next_step(N, known)
        if not isinstance(step, Next):
            if not isinstance(step, Culprit):
                return "unsure", m.t
            c = step.position
            for _ in range(6):  # its confirmation ran, but only as a note: still "done"
                m.run(c)
            return ("right" if c == culprit else "wrong"), m.t
        for p in step.positions:
            known[p] = judge(p)


def _setting(s: Setting) -> dict[str, tuple[float, float, float, float]]:
    from bisector.core import paired

    cached = functools.lru_cache(maxsize=200_000)(paired._p.__wrapped__
                                                  if hasattr(paired._p, "__wrapped__")
                                                  else paired._p)
    paired._p = lambda x, alternative: cached(tuple(x), alternative)  # type: ignore[assignment]
    seed = round(s.slowdown * 1000 + s.threshold * 100 + s.drift * 10) + s.bimodal + s.load
    culprits = random.Random(seed).choices(range(1, N), k=s.hunts)
    out = {}
    hunts: dict[str, Callable[[Setting, int, random.Random], tuple[str, int]]] = {
        "paired": _paired_hunt, "unpaired": _unpaired_hunt}
    for name, hunt in hunts.items():
        rng = random.Random(seed + 1)
        got = [hunt(s, c, rng) for c in culprits]
        count = {k: sum(1 for g, _ in got if g == k) / s.hunts
                 for k in ("right", "wrong", "unsure")}
        out[name] = (count["right"], count["wrong"], count["unsure"],
                     statistics.mean(r for _, r in got))
    return out


def bench_perf_drift(line: Callable[[str, str], None]) -> None:
    from concurrent.futures import ProcessPoolExecutor

    hunts = int(os.environ.get("BENCH_PERF_HUNTS", "500"))
    settings = [Setting(sd, th, dr, bi, hunts, load) for sd, th, dr, bi, load in (
        (0.50, 0.20, 0.0, False, 0), (0.50, 0.20, 1.0, False, 0), (0.50, 0.20, 1.0, True, 0),
        (0.30, 0.10, 1.0, True, 0), (0.20, 0.10, 0.5, True, 0), (0.10, 0.05, 0.0, False, 0),
        (0.10, 0.05, 1.0, True, 0), (0.50, 0.05, 1.0, True, 0), (0.50, 0.20, 0.0, False, 11),
        (0.20, 0.10, 1.0, True, 11))]
    print(f"13. performance on a drifting machine: {hunts} hunts a row, {N} commits, "
          f"right / WRONG done / unsure / mean oracle runs")
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=min(len(settings), os.cpu_count() or 1)) as pool:
        rows = list(pool.map(_setting, settings))
    print(f"  {'slow':>5} {'thr':>4} {'drift':>5} {'modes':>5} {'load':>4} | "
          f"{'paired (shipped)':>30} | "
          f"{'unpaired (replaced)':>30}")
    for s, row in zip(settings, rows, strict=True):
        cells = [f"{r:6.1%} {w:5.1%} {u:5.1%} {runs:6.1f}" for r, w, u, runs in
                 (row["paired"], row["unpaired"])]
        print(f"  {s.slowdown:>5.0%} {s.threshold:>4.0%} {1 + s.drift:>4.1f}x "
              f"{'2' if s.bimodal else '1':>5} {s.load or '-':>4} | " + " | ".join(cells))
    right = min(row["paired"][0] for row in rows)
    wrong = sum(row["paired"][1] for row in rows)
    line("goal: paired >= 99 % right, 0 wrong culprits done",
         f"{'met' if right >= 0.99 and wrong == 0 else 'NOT met'} (lowest right "
         f"{right:.1%}, wrong done in {wrong * hunts:.0f} of {hunts * len(rows)} hunts); "
         f"section took {time.perf_counter() - t0:.0f}s")
