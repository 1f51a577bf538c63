"""Section 14: a flaky oracle over ranges with and without a regression.

Spurious failures at a rate at every commit; a *real* regression makes every run fail from the
culprit on (the bad side always fails, as a broken test does, with the flakes on top); a
*flake-only* range has no culprit at all; a *partial* one ("+70 % fails") fails that share of
runs from the culprit on, flakes on top, as a new race does. Each hunt is driven by the very
functions of the shipped search (``run/strategies/noisy.py``'s ``step``, ``core/joint.py``,
``core/noisy.py``, ``core/confirmation.py``'s ``owed``, ``weigh`` and ``confirm_rounds``) in
the loop of ``Noisy.decide`` at one slot, with confirmation's groups of 1 + 1 runs counted (the
search's own runs of the culprit and its parent stand in for the first; more groups only while
it is undecided). Rows: flake-only ranges (right = "no regression"), real regressions
(right = ``done`` on the culprit), a FACF-like mix (60 % real, 40 % flake-only), partial
regressions, and an oracle wrong both ways ("20 % passes": a real regression's runs pass a
fifth of the time as well). The floor beside the runs: the bits to name one of n - 1 commits
over the capacity of the oracle as a Z channel (false failures only), about 16 runs at 1000
commits and 20 %;
and the same plus the log2(1 / (1 - 0.99)) = 6.6 bits of being 0.99 sure (about 27 runs there).
The second is no hard floor: with feedback, a pass where the test is broken for good rules a
commit out at once (Burnashev's exponent is unbounded on a Z channel), so being sure costs
little beyond the first; the issue's target is twice the first.
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
    broken: float = 1.0  # a real regression's failures from the culprit on (1: every run)
    lies: float = 0.0  # a real regression's false passes from the culprit on (symmetric noise)


def floor_runs(n: int, rate: float, confidence: float | None = None) -> float:
    """log2(n - 1) over the Z channel's capacity log2(1 + (1 - p) p^(p / (1 - p))); with
    ``confidence``, plus the log2(1 / (1 - confidence)) bits of being that sure (6.6 at
    0.99), which no search that stops at that confidence can do without."""
    capacity = math.log2(1 + (1 - rate) * rate ** (rate / (1 - rate)))
    sure = math.log2(1 / (1 - confidence)) if confidence is not None else 0.0
    return (math.log2(n - 1) + sure) / capacity


def hunt(n: int, culprit: int | None, rate: float, rng: random.Random,
         broken: float = 1.0, lies: float = 0.0) -> tuple[str, int]:
    """("right" | "wrong" | "unsure", oracle runs) for one hunt; ``broken``: the share of runs
    a real regression fails from the culprit on, before the flakes; ``lies``: the share of
    those that pass anyway (an oracle wrong both ways)."""
    from bisector.base import defaults
    from bisector.core import noisy
    from bisector.core.confirmation import Confirmation, confirm_rounds, owed, weigh
    from bisector.run.strategies.noisy import Ending, Evidence, step

    def run(p: int) -> bool:
        if culprit is not None and p >= culprit:
            if lies and rng.random() < lies:
                return False
            if broken >= 1 or rng.random() < broken:
                return True
        return rng.random() < rate

    conf, want = noisy.DEFAULT_CONFIDENCE, defaults.NOISY_ENDPOINT_RUNS
    reports: list[tuple[int, bool]] = []
    while True:
        got, post, _ = step(Evidence(tuple(reports), {}), n, want, conf, len(reports))
        if got.end is Ending.NO_REGRESSION:
            return ("right" if culprit is None else "wrong"), len(reports)
        if isinstance(got.end, noisy.Culprit):
            c = got.end.position
            seen: list[list[tuple[int, str, str]]] = [[], []]
            # As run/confirm.py's confirm does: the search's own runs of the culprit and its
            # parent stand in for the first group's fresh ones (confirm.owed).
            first = owed(post.history, c, c - 1, want)
            for group in range(confirm_rounds(want)):
                for side, p in ((0, c), (1, c - 1)):
                    times = first[side] if group == 0 else want
                    seen[side] += [(0, "bad" if run(p) else "good", "") for _ in range(times)]
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
        got.append(hunt(s.n, culprit, s.rate, rng, s.broken, s.lies))
    share = {k: sum(1 for g, _ in got if g == k) / s.hunts for k in ("right", "wrong", "unsure")}
    return share["right"], share["wrong"], share["unsure"], statistics.mean(r for _, r in got)


def bench_flaky_regression(line: Callable[[str, str], None]) -> None:
    from concurrent.futures import ProcessPoolExecutor

    hunts = int(os.environ.get("BENCH_FLAKY_HUNTS", "500"))
    settings = [Setting(n, rate, real, hunts) for real in (0.0, 1.0, 0.6)
                for n, rate in ((100, 0.1), (100, 0.4), (1000, 0.1), (1000, 0.2),
                                (1000, 0.3), (1000, 0.4))]
    # Regressions that raise the failure rate without breaking the test for good.
    settings += [Setting(1000, 0.2, 1.0, hunts, 0.7), Setting(1000, 0.1, 1.0, hunts, 0.5)]
    # An oracle wrong both ways: 20 % false failures and 20 % false passes (the unit tests' liar).
    settings += [Setting(200, 0.2, 1.0, hunts, lies=0.2), Setting(1000, 0.1, 1.0, hunts, lies=0.1)]
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
        if s.broken < 1 or s.lies:
            kind = f"+{s.broken:.0%} fails" if s.broken < 1 else f"{s.lies:.0%} passes"
            print(f"  {kind:>10} {s.n:>5} {s.rate:>6.0%} | {right:>6.1%} {wrong:>6.1%} "
                  f"{unsure:>6.1%} {runs:>6.1f} |")
            continue
        floor, sure = floor_runs(s.n, s.rate), floor_runs(s.n, s.rate, conf)
        print(f"  {kind:>10} {s.n:>5} {s.rate:>6.0%} | {right:>6.1%} {wrong:>6.1%} "
              f"{unsure:>6.1%} {runs:>6.1f} | {floor:5.1f} ({runs / floor:.1f}x)      | "
              f"{sure:5.1f} ({runs / sure:.1f}x)"
              if s.real else
              f"  {kind:>10} {s.n:>5} {s.rate:>6.0%} | {right:>6.1%} {wrong:>6.1%} "
              f"{unsure:>6.1%} {runs:>6.1f} |")
    pairs = list(zip(settings, rows, strict=True))
    worst = min(r[0] for s, r in pairs if s.real in (0.0, 1.0) and s.broken == 1 and not s.lies)
    wrong = max(r[1] for _, r in pairs)
    line("goal: >= 99 % right on flake-only and on real ranges",
         f"{'met' if worst >= 0.99 else 'NOT met'} (lowest {worst:.1%}); section took "
         f"{time.perf_counter() - t0:.0f}s")
    line("goal: no row over 1 % wrong (the confidence asked for), partial regressions too",
         f"{'met' if wrong <= 0.01 else 'NOT met'} (highest {wrong:.1%})")
    main = next(r[3] for s, r in pairs
                if (s.n, s.rate, s.real, s.broken, s.lies) == (1000, 0.2, 1.0, 1, 0))
    floor = floor_runs(1000, 0.2)
    line("goal: 1000 commits, 20 % false failures within 2x the floor, confirmation included",
         f"{'met' if main <= 2 * floor else 'NOT met'} ({main:.1f} runs, {main / floor:.2f}x "
         f"the {floor:.1f}-run floor)")
