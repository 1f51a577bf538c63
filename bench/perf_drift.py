"""Section 13: a performance bisection on a drifting, noisy machine, the shipped search against
the rule it replaced, on the same simulated hunts.

Each simulated hunt bisects 40 commits with a slowdown at a random culprit, on a machine whose
speed drifts (up to 2x slower over the bisection's expected runs, as a loaded shared box does)
and whose runs may fall into a slow mode (bimodal: one run in five 8 % slower); in the two
``load`` rows another job's load comes and goes (2.3x slower for 11 runs, then 11 runs idle,
as a matrix-product load switched every 40 s did on an H100); in the ``corr`` row the samples
of a run are strongly correlated (runs move 5 %, samples within a run 0.4 %: a run that is slow
is slow in all its samples, so within-run spread alone would decide wrongly). A run prints 5
samples.

*after* is the shipped search: the very functions of ``bisector/core/perf_search.py``
(``spread_of``, ``assess``, ``layout``) and ``core/paired.py``, driven by the same loop as
``Performance.decide``, then the confirmation of ``run/confirm.py`` (the culprit beside its
parent, the search's pairs of both counted under ``core/perf_confirm``'s guards, then its
revert beside the parent, each sequential with the search's scale; ``BENCH_PERF_FRESH_ONLY=1``:
fresh pairs alone, as before 2026-11-29's change). *before*
is the rule it replaced, kept here as the baseline: a one-sided exact Wilcoxon test of the
paired differences at 0.01, looked at 7, 14, 28 and 32 pairs, and the same confirmation on
that schedule. Runs count the confirmation's. The *deterministic* figure is what ``git bisect``
would pay on the same range: both endpoints, one probe per halving, and the culprit, its
parent and the revert once each.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

N = 40
SAMPLES = 5
SAMPLE_SIGMA = 0.02
RUN_SIGMA = 0.01
CORR_RUN_SIGMA, CORR_SAMPLE_SIGMA = 0.05, 0.004
SLOW_MODE = 0.08
SLOW_MODE_P = 0.2
EXPECTED_RUNS = 120  # the drift reaches its full size after this many runs
LOAD = 2.3  # another job on the GPU: runs this much slower while it is on (as on the H100)
REVERT = -1  # the machine's position for the revert: the good level
FRESH_ONLY = bool(os.environ.get("BENCH_PERF_FRESH_ONLY"))  # confirmation as before: no lent


@dataclass(frozen=True)
class Setting:
    slowdown: float
    threshold: float
    drift: float  # the machine's slowdown over EXPECTED_RUNS runs (1.0: twice as slow)
    bimodal: bool
    hunts: int
    load: int = 0  # another job's load on for this many runs, off for as many (0: none)
    correlated: bool = False  # run-to-run noise large, within-run noise tiny
    shown: bool = False  # the bad endpoint shown bad before (a watch's series): never run


class Machine:
    """Runs of a commit: its true level, times the drift so far, times run and sample noise."""

    def __init__(self, s: Setting, culprit: int, rng: random.Random) -> None:
        self.s, self.culprit, self.rng, self.t = s, culprit, rng, 0

    def run(self, position: int) -> tuple[float, tuple[float, ...]]:
        self.t += 1
        run_sigma, sample_sigma = (CORR_RUN_SIGMA, CORR_SAMPLE_SIGMA) if self.s.correlated \
            else (RUN_SIGMA, SAMPLE_SIGMA)
        level = (1 + self.s.drift) ** (self.t / EXPECTED_RUNS)
        level *= (1 + self.s.slowdown) if position >= self.culprit else 1.0
        level *= math.exp(self.rng.gauss(0, run_sigma))
        if self.s.load and (self.t // self.s.load) % 2 == 1:
            level *= LOAD
        if self.s.bimodal and self.rng.random() < SLOW_MODE_P:
            level *= 1 + SLOW_MODE
        return float(self.t), tuple(10.0 * level * math.exp(self.rng.gauss(0, sample_sigma))
                                    for _ in range(SAMPLES))


# The rule it replaced, frozen here as the baseline (core/paired.py of 2026-11-28).
OLD_MIN_PAIRS, OLD_ALPHA = 7, 0.01


@functools.cache
def _tail(k: int) -> tuple[float, ...]:
    """P(W+ >= w) for w = 0..k(k+1)/2 under the null: the exact signed-rank distribution
    (what scipy's exact ``wilcoxon`` uses without ties), counted once per k."""
    counts = [1] + [0] * (k * (k + 1) // 2)
    for r in range(1, k + 1):
        for w in range(len(counts) - 1, r - 1, -1):
            counts[w] += counts[w - r]
    total, out, acc = 2 ** k, [], 0
    for c in reversed(counts):
        acc += c
        out.append(acc / total)
    return tuple(reversed(out))


def _old_compare(diffs: Sequence[float], margin: float) -> str:
    if len(diffs) < OLD_MIN_PAIRS:
        return "undecided"
    shifted = [d - margin for d in diffs if d != margin]
    if not shifted:
        return "undecided"
    order = sorted(range(len(shifted)), key=lambda i: abs(shifted[i]))
    plus = sum(rank + 1 for rank, i in enumerate(order) if shifted[i] > 0)
    k = len(shifted)
    tail = _tail(k)
    if tail[plus] < OLD_ALPHA:  # P(W+ >= plus)
        return "bad"
    if tail[k * (k + 1) // 2 - plus] < OLD_ALPHA:  # W- = total - W+, same distribution
        return "good"
    return "undecided"


def _old_due(pairs: int, cap: int) -> int:
    point = OLD_MIN_PAIRS
    while point < pairs and point < cap:
        point = min(cap, point * 2)
    return max(0, min(point, cap) - pairs) if pairs < cap else 0


class Hunt:
    """One hunt's runs, as the strategy's ``gather`` gives them."""

    def __init__(self, s: Setting, culprit: int, rng: random.Random, new: bool) -> None:
        from bisector.core import paired, perf

        self.m, self.new, self.shown = Machine(s, culprit, rng), new, s.shown
        self.rule = paired.Rule(perf.Direction.LOWER, s.threshold)
        self.cap = paired.DEFAULT_MAX_PAIRS

    def search(self) -> tuple[str, int]:
        from bisector.core import perf
        from bisector.core import perf_search as strategy
        from bisector.core.perf_search import Run
        from bisector.core.search import Culprit, Next

        runs: dict[int, list[Run]] = {}
        last: int | None = None
        rounds = 0
        while True:
            if self.new:  # the shipped search, as Performance.decide calls it
                got = strategy.search(runs, N, 1, self.cap, self.rule, False, lambda _: None,
                                      shown=self.shown)
                step, spread, lent = got.step, got.spread, got.rule
            else:
                (step, spread), lent = self._old_step(runs), None
            if not isinstance(step, Next):
                if not isinstance(step, Culprit):
                    return "unsure", self.m.t
                return self.confirm(step.position, spread, lent), self.m.t
            rounds += 1
            for p in strategy.layout(list(step.positions), last, 1, rounds):
                start, samples = self.m.run(p)
                runs.setdefault(p, []).append(Run(samples, "ms", perf.Direction.LOWER, True,
                                                  start))
                last = p

    def _old_step(self, runs: dict[int, list[Any]]) -> tuple[Any, Any]:
        """The replaced rule's step: every undecided commit one more pair, then the plain
        search on the decided ones."""
        from bisector.core import perf_search as strategy
        from bisector.core.search import Next, Verdict, next_step

        like, refs = strategy.references(runs.get(0, []))
        if like is None:
            return Next((0,)), None
        spread = strategy.spread_of(runs, refs, like, self.rule)
        known, wanted = {0: Verdict.GOOD}, []
        for p, rs in runs.items():
            if p == 0:
                continue
            v = self._assess(rs, refs, like, spread)
            if v is None:
                wanted.append(p)
            else:
                known[p] = v
        return (Next(tuple(wanted)) if wanted else next_step(N, known)), spread

    def _assess(self, rs: list[Any], refs: list[Any], like: Any, spread: Any) -> Any:
        """The replaced rule's verdict on one commit (Wilcoxon at 7, 14, 28, 32 pairs)."""
        from bisector.core import paired
        from bisector.core.search import Verdict

        diffs = paired.differences([r.timed for r in refs], [r.timed for r in rs], self.rule)
        k = len(diffs)
        if _old_due(k, self.cap) and len(rs) < 2 * self.cap:
            return None
        said = _old_compare(diffs, self.rule.margin)
        if said != "undecided":
            return Verdict.BAD if said == "bad" else Verdict.GOOD
        return Verdict.SKIP if k >= self.cap or len(rs) >= 2 * self.cap else None

    def beside(self, parent: int, refs: list[Any], test: int, spread: Any,
               alpha_good: float | None = None, claim: Any = None) -> str:
        """``parent, test, parent, ...``, the parent's runs shared by both checks: as
        ``run/confirm.py``'s ``_beside``; ``claim`` judges the culprit's check (the search's
        pairs counted, ``core/perf_confirm.Claim``), else each look is ``judge_beside``."""
        from bisector.core import paired

        tests: list[paired.Timed] = []

        def run(p: int, into: list[paired.Timed]) -> None:
            t, samples = self.m.run(p)
            into.append(paired.Timed.of(t, samples))

        if not refs:
            run(parent, refs)
        while True:
            run(test, tests)
            run(parent, refs)
            if self.new:
                rule = replace(self.rule, spread=spread)
                got = (claim(refs, tests) if claim is not None else
                       paired.judge_beside(refs, tests, rule, alpha_good=alpha_good)).verdict.value
                if got != "undecided" or len(tests) >= 2 * self.cap:
                    return got
                continue
            if _old_due(len(tests), self.cap):
                continue
            got = _old_compare(paired.differences(refs, tests, self.rule), self.rule.margin)
            if got != "undecided" or len(tests) >= self.cap:
                return got

    def confirm(self, c: int, spread: Any, lent: Any = None) -> str:
        """The culprit beside its parent (the search's pairs of both counted, under
        ``core/perf_confirm``'s guards, unless ``BENCH_PERF_FRESH_ONLY`` is set), then the
        revert."""
        from bisector.core import paired, perf_confirm

        refs: list[Any] = []
        claim = None
        if self.new and lent is not None:
            searched = perf_confirm.lent(lent, c, c - 1)
            claim = perf_confirm.Claim(replace(lent, spread=spread),
                                       None if FRESH_ONLY else searched)
        if self.beside(c - 1, refs, c, spread, claim=claim) != "bad":
            return "unsure"

        fixed = paired.REVERT_ALPHA if self.new else None
        if self.beside(c - 1, refs, REVERT, spread, fixed) == "bad":  # the revert did not fix
            return "unsure"
        return "right" if c == self.m.culprit else "wrong"


def deterministic() -> float:
    """``git bisect``'s runs on the same range: endpoints, halvings, culprit, parent, revert."""
    return 2 + math.log2(N - 1) + 3


def _setting(s: Setting) -> dict[str, tuple[float, float, float, float]]:
    seed = round(s.slowdown * 1000 + s.threshold * 100 + s.drift * 10) + s.bimodal + s.load \
        + 7 * s.correlated + 13 * s.shown
    culprits = random.Random(seed).choices(range(1, N), k=s.hunts)
    out = {}
    before = int(os.environ.get("BENCH_PERF_BEFORE_HUNTS", "1000"))
    for name, new, hunts in (("after", True, s.hunts), ("before", False, min(before, s.hunts))):
        rng = random.Random(seed + 1)
        got = [Hunt(s, c, rng, new).search() for c in culprits[:hunts]]
        count = {k: sum(1 for g, _ in got if g == k) / hunts
                 for k in ("right", "wrong", "unsure")}
        out[name] = (count["right"], count["wrong"], count["unsure"],
                     statistics.mean(r for _, r in got))
    return out


SETTINGS = (  # slowdown, threshold, drift, bimodal, load, correlated[, shown]
    (0.50, 0.20, 0.0, False, 0, False), (0.50, 0.20, 1.0, False, 0, False),
    (0.50, 0.20, 1.0, True, 0, False), (0.30, 0.10, 1.0, True, 0, False),
    (0.20, 0.10, 0.5, True, 0, False), (0.10, 0.05, 0.0, False, 0, False),
    (0.10, 0.05, 1.0, True, 0, False), (0.50, 0.05, 1.0, True, 0, False),
    (0.50, 0.20, 0.0, False, 11, False), (0.20, 0.10, 1.0, True, 11, False),
    (0.50, 0.20, 0.0, False, 0, True), (0.50, 0.20, 0.0, False, 0, False, True))


def bench_perf_drift(line: Callable[[str, str], None]) -> None:
    from concurrent.futures import ProcessPoolExecutor

    hunts = int(os.environ.get("BENCH_PERF_HUNTS", "5000"))
    before = min(hunts, int(os.environ.get("BENCH_PERF_BEFORE_HUNTS", "1000")))
    settings = [Setting(sd, th, dr, bi, hunts, load, co, *rest)
                for sd, th, dr, bi, load, co, *rest in SETTINGS]
    print(f"13. performance on a drifting machine: {hunts} hunts a row after, the first {before} "
          f"of them before (its mean is steady by then: the replaced rule costs 3x the time), "
          f"{N} commits, "
          f"right / WRONG done / unsure / mean oracle runs (confirmation included); "
          f"git bisect on a deterministic oracle: {deterministic():.1f} runs")
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=min(len(settings), os.cpu_count() or 1)) as pool:
        rows = list(pool.map(_setting, settings))
    print(f"  {'slow':>5} {'thr':>4} {'drift':>5} {'modes':>5} {'load':>4} {'more':>5} | "
          f"{'after (shipped)':>30} | {'before (Wilcoxon, 7 pairs)':>30} | after/before")
    for s, row in zip(settings, rows, strict=True):
        cells = [f"{r:6.1%} {w:5.1%} {u:5.1%} {runs:6.1f}" for r, w, u, runs in
                 (row["after"], row["before"])]
        print(f"  {s.slowdown:>5.0%} {s.threshold:>4.0%} {1 + s.drift:>4.1f}x "
              f"{'2' if s.bimodal else '1':>5} {s.load or '-':>4} "
              f"{'corr' if s.correlated else 'shown' if s.shown else '-':>5} | "
              + " | ".join(cells) +
              f" | {row['after'][3] / row['before'][3]:.2f}")
    right = min(row["after"][0] for row in rows)
    wrong = sum(row["after"][1] for row in rows)
    line("goal: >= 99 % right, 0 wrong culprits done",
         f"{'met' if right >= 0.99 and wrong == 0 else 'NOT met'} (lowest right "
         f"{right:.1%}, wrong done in {wrong * hunts:.0f} of {hunts * len(rows)} hunts)")
    halved = max(row["after"][3] / row["before"][3] for row in rows)
    line("goal: mean runs at most half of the replaced rule's, every row",
         f"{'met' if halved <= 0.5 else 'NOT met'} (worst row {halved:.2f}x)")
    clear = rows[0]["after"][3]
    line("goal: a clear +50 % step in about 22 runs (2x git bisect's)",
         f"{'met' if clear <= 22.5 else 'NOT met'} ({clear:.1f} runs; git bisect "
         f"{deterministic():.1f}: {clear / deterministic():.2f}x)")
    hard = settings.index(next(s for s in settings if s.slowdown == 0.10 and s.drift == 1.0))
    line("goal: the hardest row never wrong, at most 120 runs",
         f"{'met' if rows[hard]['after'][1] == 0 and rows[hard]['after'][3] <= 120 else 'NOT met'}"
         f" ({rows[hard]['after'][3]:.1f} runs); section took {time.perf_counter() - t0:.0f}s")
