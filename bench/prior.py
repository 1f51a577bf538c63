"""``make bench`` section 8: the prior from the failure, over simulated priors of varying quality.

A simulated prior is what :func:`bisector.core.prior.build` makes when the evidence points at
``m`` candidates equally (half the mass on them, half uniform); the culprit is among them with
probability ``hit``. Every hunt runs plain bisection and the search with the prior on the
same culprit, in the same run: mean and worst-case probes (endpoints included) against plain,
and the worst against the promised bound ceil(log2 n) + 2. A flaky oracle's rows: oracle runs
of the shipped flaky search with and without the prior steering it, same culprits, same lying
oracle (the answer is judged without the prior either way).

Runnable alone: ``python -c "from bench.prior import bench_prior; bench_prior()"``;
BENCH_PRIOR_HUNTS lowers the hunts per setting.
"""

from __future__ import annotations

import math
import os
import random
import statistics
import time
from concurrent.futures import ProcessPoolExecutor

from bisector.core import noisy
from bisector.core.prior import Prior, probes_to

Setting = tuple[int, int, float, int]  # n, candidates pointed at, P(culprit among them), hunts


def simulated(n: int, points: set[int]) -> Prior:
    return Prior.from_weights([0.5 / (n - 1) + (0.5 / len(points) if c in points else 0.0)
                               for c in range(1, n)], matched=len(points))


def _draw(rng: random.Random, n: int, m: int, hit: float) -> tuple[int, set[int]]:
    culprit = rng.randint(1, n - 1)
    others = [c for c in rng.sample(range(1, n), min(n - 1, m + 1)) if c != culprit]
    if rng.random() < hit:
        return culprit, {culprit, *others[:m - 1]}
    return culprit, set(others[:m])


def _setting(s: Setting) -> tuple[float, int, float, int]:
    n, m, hit, hunts = s
    rng = random.Random(n * 7919 + m * 31 + round(hit * 100))
    plain, weighted = [], []
    for _ in range(hunts):
        culprit, points = _draw(rng, n, m, hit)
        plain.append(probes_to(n, culprit))
        weighted.append(probes_to(n, culprit, simulated(n, points)))
    return statistics.mean(plain), max(plain), statistics.mean(weighted), max(weighted)


def flaky_hunt(n: int, culprit: int, prior: Prior | None, lies: random.Random,
               rate: float = 0.1) -> tuple[object, int]:
    """(the answer, oracle runs) of the shipped flaky search (``run/strategies/noisy.py``'s
    ``step``, rates read off its runs) against an oracle wrong ``rate`` of the time both ways,
    the prior (when given) steering where it looks; its answer is judged without it."""
    from bisector.run.strategies.noisy import Evidence, step

    reports: list[tuple[int, bool]] = []
    while True:
        got, _, _ = step(Evidence(tuple(reports), {}), n, 1, noisy.DEFAULT_CONFIDENCE,
                      len(reports), max_runs=10**6, prior=prior)
        if got.end is not None:
            return got.end, len(reports)
        for p in got.positions:
            reports.append((p, (p >= culprit) != (lies.random() < rate)))


def _noisy_setting(s: Setting) -> tuple[float, float, float, float]:
    """(runs plain, runs with the prior, right plain, right with the prior) at 10 % lies."""
    n, m, hit, hunts = s
    rng = random.Random(n + m + round(hit * 100))
    runs: dict[bool, list[int]] = {False: [], True: []}
    right: dict[bool, int] = {False: 0, True: 0}
    for _ in range(hunts):
        culprit, points = _draw(rng, n, m, hit)
        seed = rng.randrange(2**32)
        for use in (False, True):
            got, paid = flaky_hunt(n, culprit, simulated(n, points) if use else None,
                                   random.Random(seed))
            runs[use].append(paid)
            right[use] += getattr(got, "position", None) == culprit
    return (statistics.mean(runs[False]), statistics.mean(runs[True]),
            right[False] / hunts, right[True] / hunts)


def bench_prior() -> None:
    hunts = int(os.environ.get("BENCH_PRIOR_HUNTS", "300"))
    print(f"8. a prior from the failure: probes with the prior vs plain bisection, same "
          f"culprits ({hunts} hunts per row)")
    settings = [(n, m, hit, hunts) for n in (100, 1_000, 5_000) for m in (1, 5, 20, 100)
                for hit in (1.0, 0.8, 0.0) if m < n]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        rows = list(pool.map(_setting, settings))
        flaky = [(1_000, m, hit, max(20, hunts // 6)) for m in (1, 5) for hit in (1.0, 0.0)]
        noisy_rows = list(pool.map(_noisy_setting, flaky))
    print(f"  {'n':>6} {'points at':>9} {'culprit in':>10} | {'plain mean':>10} {'max':>4} | "
          f"{'prior mean':>10} {'max':>4} | mean ratio | max/(ceil(log2 n)+2)")
    for (n, m, hit, _), (pm, px, wm, wx) in zip(settings, rows, strict=True):
        bound = math.ceil(math.log2(n)) + 2
        print(f"  {n:>6} {m:>9} {hit:>10.0%} | {pm:>10.2f} {px:>4} | {wm:>10.2f} {wx:>4} | "
              f"{wm / pm:>10.2f} | {wx / bound:.2f}")
    worst = max(wx / (math.ceil(math.log2(n)) + 2)
                for (n, _, _, _), (_, _, _, wx) in zip(settings, rows, strict=True))
    print(f"  bound ceil(log2 n) + 2 {'held' if worst <= 1 else 'BROKEN'} in every hunt "
          f"(worst {worst:.2f} of it)")
    print("  flaky oracle (10 % wrong answers, n=1000): oracle runs plain -> with the prior "
          "(right-culprit rate)")
    for (n, m, hit, h), (rp, rw, ap, aw) in zip(flaky, noisy_rows, strict=True):
        print(f"  {n:>6} {m:>9} {hit:>10.0%} | {rp:6.1f} ({ap:.0%}) -> {rw:6.1f} ({aw:.0%})"
              f" = {rw / rp:.2f}x over {h} hunts")
    print(f"  section took {time.perf_counter() - t0:.1f}s")


if __name__ == "__main__":
    bench_prior()
