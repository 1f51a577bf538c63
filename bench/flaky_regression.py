"""Section 14: a flaky oracle over ranges with and without a regression.

Spurious failures at a rate at every commit; a *real* regression makes every run fail from the
culprit on (the bad side always fails, as a broken test does, with the flakes on top); a
*flake-only* range has no culprit at all. Each hunt is driven by the very functions of the
shipped search (``run/strategies/noisy.py``'s ``endpoints`` and ``endpoint_runs``,
``core/contrast.py``, ``core/noisy.py``, ``run/confirm.py``'s ``weigh``) in the loop of
``Noisy.decide`` at one slot, with confirmation's groups of 3 + 3 runs counted (more groups
only while it is undecided). Rows: flake-only ranges
(right = "no regression"), real regressions (right = ``done`` on the culprit) and a
FACF-like mix (60 % real, 40 % flake-only). The floor beside the runs: the bits to name one of
n - 1 commits over the capacity of the oracle as a Z channel (false failures only), about 16
runs at 1000 commits and 20 %, and the same plus the log2(1 / (1 - 0.99)) = 6.6 bits of
being 0.99 sure (about 27 runs there), which any search stopping at that confidence pays.
"""

from __future__ import annotations

import math
import os
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Setting:
    n: int
    rate: float  # spurious failures at every commit
    real: float  # share of hunts with a real regression (1.0, 0.0, or a mix)
    hunts: int


def floor_runs(n: int, rate: float, confidence: float | None = None) -> float:
    """log2(n - 1) over the Z channel's capacity log2(1 + (1 - p) p^(p / (1 - p))); with
    ``confidence``, plus the log2(1 / (1 - confidence)) bits of being that sure (6.6 at
    0.99), which no search that stops at that confidence can do without."""
    capacity = math.log2(1 + (1 - rate) * rate ** (rate / (1 - rate)))
    sure = math.log2(1 / (1 - confidence)) if confidence is not None else 0.0
    return (math.log2(n - 1) + sure) / capacity


def hunt(n: int, culprit: int | None, rate: float, rng: random.Random) -> tuple[str, int]:
    """("right" | "wrong" | "unsure", oracle runs) for one hunt."""
    from bisector.base import defaults
    from bisector.core import noisy
    from bisector.run.confirm import CONFIRM_ROUNDS, Confirmation, weigh
    from bisector.run.strategies.noisy import Ending, Evidence, estimated_rates, plan

    def run(p: int) -> bool:
        return (culprit is not None and p >= culprit) or rng.random() < rate

    conf, want = noisy.DEFAULT_CONFIDENCE, defaults.NOISY_ENDPOINT_RUNS
    reports: list[tuple[int, bool]] = []
    while True:
        ev = Evidence(tuple(reports), {})
        fp, fn = estimated_rates(ev, n)
        post = noisy.Posterior.from_observations(n, fp, fn, reports)
        cap = noisy.default_max_runs(n, *noisy.cautious_rates(ev.at(0), ev.at(n - 1)), conf)
        got = plan(ev, n, want, conf, post, post, cap, len(reports), 1)
        if got.end is Ending.NO_REGRESSION:
            return ("right" if culprit is None else "wrong"), len(reports)
        if isinstance(got.end, noisy.Culprit):
            c = got.end.position
            seen: list[list[tuple[int, str, str]]] = [[], []]
            for _ in range(CONFIRM_ROUNDS):  # as run/confirm.py's confirm does
                for side, p in ((0, c), (1, c - 1)):
                    seen[side] += [(0, "bad" if run(p) else "good", "") for _ in range(want)]
                status, _, _ = weigh(post, c, seen[0], seen[1], conf)
                if status is not Confirmation.INCONCLUSIVE:
                    break
            runs = len(reports) + len(seen[0]) + len(seen[1])
            if status is not Confirmation.CONFIRMED:
                return "unsure", runs
            return ("right" if c == culprit else "wrong"), runs
        if got.end is not None:  # an endpoint stop, inconclusive, or only the most likely
            return "unsure", len(reports)
        for p in got.positions:
            reports.append((p, run(p)))


def _setting(s: Setting) -> tuple[float, float, float, float]:
    seed = s.n + round(s.rate * 1000) + round(s.real * 10)
    rng = random.Random(seed)
    got = []
    for _ in range(s.hunts):
        culprit = rng.randrange(1, s.n) if rng.random() < s.real else None
        got.append(hunt(s.n, culprit, s.rate, rng))
    share = {k: sum(1 for g, _ in got if g == k) / s.hunts for k in ("right", "wrong", "unsure")}
    return share["right"], share["wrong"], share["unsure"], statistics.mean(r for _, r in got)


def bench_flaky_regression(line: Callable[[str, str], None]) -> None:
    from concurrent.futures import ProcessPoolExecutor

    hunts = int(os.environ.get("BENCH_FLAKY_HUNTS", "500"))
    settings = [Setting(n, rate, real, hunts) for real in (0.0, 1.0, 0.6)
                for n, rate in ((100, 0.1), (100, 0.4), (1000, 0.1), (1000, 0.2),
                                (1000, 0.3), (1000, 0.4))]
    print(f"14. flaky oracle, no regression as an answer: {hunts} hunts a row, right / WRONG "
          f"/ unsure / mean oracle runs (confirmation included) / floor")
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=min(len(settings), os.cpu_count() or 1)) as pool:
        rows = list(pool.map(_setting, settings))
    from bisector.core import noisy

    conf = noisy.DEFAULT_CONFIDENCE
    print(f"  {'range':>10} {'n':>5} {'flakes':>6} | {'right':>6} {'wrong':>6} {'unsure':>6} "
          f"{'runs':>6} | floor (bits of n)  | floor with {conf} asked")
    for s, (right, wrong, unsure, runs) in zip(settings, rows, strict=True):
        kind = {0.0: "flake-only", 1.0: "real"}.get(s.real, "60/40 mix")
        floor, sure = floor_runs(s.n, s.rate), floor_runs(s.n, s.rate, conf)
        print(f"  {kind:>10} {s.n:>5} {s.rate:>6.0%} | {right:>6.1%} {wrong:>6.1%} "
              f"{unsure:>6.1%} {runs:>6.1f} | {floor:5.1f} ({runs / floor:.1f}x)      | "
              f"{sure:5.1f} ({runs / sure:.1f}x)"
              if s.real else
              f"  {kind:>10} {s.n:>5} {s.rate:>6.0%} | {right:>6.1%} {wrong:>6.1%} "
              f"{unsure:>6.1%} {runs:>6.1f} |")
    worst = min(r[0] for s, r in zip(settings, rows, strict=True) if s.real in (0.0, 1.0))
    line("goal: >= 99 % right on flake-only and on real ranges",
         f"{'met' if worst >= 0.99 else 'NOT met'} (lowest {worst:.1%}); section took "
         f"{time.perf_counter() - t0:.0f}s")
