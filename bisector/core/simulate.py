"""Simulated hunts against a lying oracle: how often each search names the true culprit, and how
many oracle runs it pays. Pure (the caller's ``random.Random`` is the only randomness), so
``make bench`` and the tests can compare strategies reproducibly.

The oracle lies with probability ``wrong_rate`` on every run, independently, endpoints included.
"""

from __future__ import annotations

import enum
import random

from bisector.core import noisy
from bisector.core.search import Culprit, Next, Verdict, next_step


class Strategy(enum.Enum):
    # Ordinary bisection, one run per probe; any stop other than a culprit is a wrong answer.
    PLAIN = "plain"
    # Ordinary bisection where each probe is the majority of 3 runs. The third run is made only
    # when the first two disagree: the same majority, fewer runs (the strongest honest form).
    MAJORITY3 = "majority3"
    # The posterior search of bisector.core.noisy, told the true rate (fp = fn = wrong_rate).
    NOISY = "noisy"


class _Oracle:
    """Truth "bad" iff ``p >= culprit``, flipped with probability ``wrong_rate``; counts runs."""

    def __init__(self, culprit: int, wrong_rate: float, rng: random.Random) -> None:
        self.culprit, self.wrong_rate, self.rng = culprit, wrong_rate, rng
        self.runs = 0

    def __call__(self, p: int) -> bool:
        self.runs += 1
        return (p >= self.culprit) != (self.rng.random() < self.wrong_rate)


def _bisect(n: int, run: _Oracle, votes: int) -> int | None:
    known: dict[int, Verdict] = {}
    while True:
        step = next_step(n, known)
        if not isinstance(step, Next):
            return step.position if isinstance(step, Culprit) else None
        for p in step.positions:
            if votes == 1:
                bad = run(p)
            else:
                first, second = run(p), run(p)
                bad = first if first == second else run(p)
            known[p] = Verdict.BAD if bad else Verdict.GOOD


def _noisy(n: int, run: _Oracle, rate: float, confidence: float) -> int | None:
    """The endpoints are not run: under the model they say nothing about the culprit, and the
    rate is given (a real search runs them to check them and to estimate the rates)."""
    post = noisy.Posterior(n, rate, rate)
    while True:
        step = noisy.decide(post, confidence)
        if isinstance(step, noisy.Culprit):
            return step.position
        if isinstance(step, noisy.GiveUp):
            return None
        for p in step.positions:
            post.observe(p, run(p))


def hunt(strategy: Strategy, n: int, culprit: int, wrong_rate: float, rng: random.Random,
         confidence: float = noisy.DEFAULT_CONFIDENCE) -> tuple[int | None, int]:
    """(the position the search names, or None when it stops without one; oracle runs paid).

    ``confidence`` is NOISY's stopping target; ``wrong_rate`` 0 is told to NOISY as
    :data:`noisy.RATE_MIN` (its rates must be positive).
    """
    if not 1 <= culprit <= n - 1:
        raise ValueError(f"culprit must be in 1..{n - 1}")
    run = _Oracle(culprit, wrong_rate, rng)
    if strategy is Strategy.NOISY:
        rate = min(noisy.RATE_MAX, max(noisy.RATE_MIN, wrong_rate))
        found = _noisy(n, run, rate, confidence)
    else:
        found = _bisect(n, run, 1 if strategy is Strategy.PLAIN else 3)
    return found, run.runs
