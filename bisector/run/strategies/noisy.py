"""Driving a bisection whose oracle is flaky: every run is evidence, none is the truth.

Plain bisection trusts each verdict, so one wrong answer sends it to the wrong commit. Here the
runner keeps a posterior over which commit is the culprit (:mod:`bisector.core.noisy`), built
from every run stored under the bisection's (oracle, environment) key, its own and any earlier
bisection's (confirmation runs and others' passing skips left out: :func:`gather`), so reuse and
resume need nothing special: the same evidence gives the same next probe. Each endpoint is run a
few times first; that both checks the endpoints and, when the oracle's metadata gives no error
rates, gives their first estimate (a "bad" at the good endpoint is a false positive, a "good" at
the bad endpoint a false negative), which every later run refines (:func:`estimated_rates`).
Then each round probes where a run tells most (K places with K slots) until the most likely
commit reaches the oracle's confidence, or the run cap is hit and the answer is "most likely",
not "found".

"No regression" is an answer too: a flaky test over a range where nothing changed fails as
often at the bad endpoint as at the good one, and a posterior search would still end on some
commit. So the search keeps one posterior over "no regression" and every culprit
(:mod:`bisector.core.joint`, the model of :mod:`bisector.core.contrast`: a regression makes
the runs from its culprit on fail more often by at least
:data:`~bisector.base.defaults.NOISY_MIN_CONTRAST`), and names a culprit once "a regression,
and there" reaches the oracle's confidence; "no regression" (its own state and exit code, with
both endpoints' failure rates) once that does; "inconclusive" once
:data:`~bisector.base.defaults.NOISY_UNDECIDED_MAX_RUNS` runs leave a regression itself unsure,
or at the run cap with "no regression" the likelier ("most likely" with its suspects
otherwise). Each probe goes where its run is expected to tell most about that one question (the
endpoints while "no regression" is in doubt, the culprit and its parent in the end game), so
no endpoint runs beside the search and confirmation finds the culprit's and its parent's runs
already made (:func:`bisector.core.confirmation.owed`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from bisector.base import defaults
from bisector.base.kinds import State
from bisector.core import contrast, noisy, sampling
from bisector.core.integrated import Integrated
from bisector.core.joint import Joint
from bisector.core.prior import Prior
from bisector.core.search import Problem, Stop, Verdict
from bisector.run.strategies.base import (
    Adopted,
    Conclusion,
    Decision,
    Round,
    View,
    answer_for,
    in_round_later,
    is_confirmation,
    prior_for,
)
from bisector.store import runs as run_store

# Most commits a "most likely" answer lists (those holding the confidence's share of the mass).
SUSPECTS_MAX = 20
# An endpoint whose runs mostly look wrong runs on, up to this many times its vote, before the
# search stops on it (at 20 % wrong answers a wrong majority of 18 happens once in a thousand).
ENDPOINT_ROUNDS = 6
# A commit skipped this often with no answer is untestable (one skip may be a passing failure).
UNTESTABLE_SKIPS = 2


@dataclass(frozen=True)
class Evidence:
    """What the stored runs say: (position, reported bad) pairs, skips left out."""

    reports: tuple[tuple[int, bool], ...]
    skips: dict[int, int]

    def at(self, position: int) -> list[bool]:
        return [bad for p, bad in self.reports if p == position]


def gather(view: View) -> tuple[Evidence, Adopted]:
    """Every stored search run for the candidates under the key, and those this bisection has
    not logged yet (adopted as reused probes, so ``show`` and ``log`` list every run it used).

    Left out: confirmation runs (they check an answer, they are no evidence for one, and a
    bisection interrupted while confirming must not resume with them), and another
    bisection's skips that were not permanent (an environment that failed to install
    yesterday says nothing about today, so the commit is tried again). This bisection's own
    skips all count: a commit that keeps failing now is stepped around."""
    pos = {sha: i for i, sha in enumerate(view.candidates)}
    logged = run_store.logged_runs(view.store, view.record.id)
    own = run_store.own_runs(view.store, view.record.id)
    reports: list[tuple[int, bool]] = []
    skips: dict[int, int] = {}
    adopted: Adopted = []
    found = run_store.samples(view.store, view.key, list(view.candidates))
    for x in sorted((x for xs in found.values() for x in xs), key=lambda x: x.run.id):
        run, p = x.run, pos.get(x.run.commit_sha)
        if p is None or is_confirmation(x.facts):
            continue
        v = view.rules.judge(run.outcome)
        if v is Verdict.SKIP:
            if run.id not in own and not (run.reusable or x.facts.get("permanent")):
                continue
            skips[p] = skips.get(p, 0) + 1
        else:
            reports.append((p, v is Verdict.BAD))
        if run.id not in logged:
            adopted.append((run_store.Adopted(p, run.commit_sha, run.id, v.value), run.reason))
    return Evidence(tuple(reports), skips), adopted


def endpoints(ev: Evidence, n: int, want: int) -> Stop | tuple[int, ...]:
    """The endpoints that still need runs, or why the search cannot go on.

    Each endpoint runs ``want`` times. A flaky oracle gets a vote, not a single word, and a
    vote of three at 20 % wrong answers is lost one time in ten, so an endpoint whose majority
    looks wrong runs on until it is clearly wrong (three in four of at least twice the vote,
    ``want`` or :data:`~bisector.base.defaults.NOISY_VOTE`) or :data:`ENDPOINT_ROUNDS` times
    the vote still gives a wrong majority; then the search stops the way plain bisection
    would ("good is already bad")."""
    short = []
    for position, wrong_if_bad in ((0, True), (n - 1, False)):
        said, skipped = ev.at(position), ev.skips.get(position, 0)
        # One run each to start is enough where the endpoints look right, as they mostly do;
        # one that looks wrong, or skips, is judged by a vote (fewer than three runs called a
        # regression from 10 % to 55 % failures "no regression" half the time, simulated).
        vote = max(want, defaults.NOISY_VOTE)
        runs = len(said) + skipped
        if skipped >= vote and (not said or (skipped > len(said)
                                             and runs >= ENDPOINT_ROUNDS * vote)):
            # Mostly skips: the endpoint cannot be judged (a runaway loop of skips otherwise);
            # a skip among answers is a passing failure, not that.
            return Stop(Problem.GOOD_UNTESTABLE if position == 0 else Problem.BAD_UNTESTABLE,
                        position)
        wrong = sum(1 for bad in said if bad == wrong_if_bad)
        if runs < want or not said:  # an endpoint needs an answer
            short.append(position)
        elif 2 * wrong > len(said):
            clear = len(said) >= 2 * vote and 4 * wrong >= 3 * len(said)
            if clear or len(said) >= ENDPOINT_ROUNDS * vote:
                if short:  # the good endpoint first: a passing bad one may not end the search
                    return tuple(short)
                return Stop(Problem.GOOD_IS_BAD if position == 0 else Problem.BAD_IS_GOOD,
                            position)
            short.append(position)
    return tuple(short)


def estimated_rates(ev: Evidence, n: int) -> tuple[float, float]:
    """(false positive, false negative) read off every run at the most likely split
    (:meth:`Integrated.rates`), clamped. Read off the endpoints' few runs alone, a rate of
    40 % looked like 45 % or 10 %, and the search then chose its probes badly enough to end
    at its run cap now and then (simulated, ``make bench`` section 14). Before any run
    between the endpoints it is the endpoints' estimate (:func:`noisy.estimate_rates`)."""
    fp, fn = Integrated(n, ev.reports).rates()
    return (min(noisy.RATE_MAX, max(noisy.RATE_MIN, fp)),
            min(noisy.RATE_MAX, max(noisy.RATE_MIN, fn)))


def rates(view: View, ev: Evidence) -> tuple[float, float, str]:
    """(false positive, false negative, where they came from)."""
    meta = view.meta
    est_fp, est_fn = estimated_rates(ev, view.n)
    fp = meta.false_positive if meta.false_positive is not None else est_fp
    fn = meta.false_negative if meta.false_negative is not None else est_fn
    given = meta.false_positive is not None and meta.false_negative is not None
    source = ("from the oracle's metadata" if given else "estimated from every run"
              if meta.false_positive is None and meta.false_negative is None
              else "one from the oracle's metadata, one estimated from every run")

    def clamp(rate: float) -> float:  # a rate near 0.5 would make the run cap unbounded
        return min(noisy.RATE_MAX, max(noisy.RATE_MIN, rate))

    return clamp(fp), clamp(fn), source


def testable(positions: tuple[int, ...], ev: Evidence, n: int) -> tuple[int, ...] | None:
    """The chosen probes with every untestable commit (skipped twice, never answered: it does
    not build, or its environment never installs) moved to the nearest testable one; None when
    no testable commit is left between the endpoints. A skip changes no posterior, so without
    this the search would pick the same commit every round until the run cap."""
    def dead(p: int) -> bool:
        return ev.skips.get(p, 0) >= UNTESTABLE_SKIPS and not ev.at(p)

    out: list[int] = []
    for p in positions:
        if not dead(p) and p not in out:
            out.append(p)
            continue
        for step in range(1, n):
            near = [q for q in (p - step, p + step)
                    if 0 < q < n - 1 and not dead(q) and q not in out]
            if near:
                out.append(near[0])
                break
    return tuple(out) or None


class Noisy:
    def __init__(self, view: View) -> None:
        self.view = view
        self.round: int | None = None

    def ahead(self, r: Round) -> list[tuple[int, float]]:
        """Only the round's own later runs: its next commits hang on samples, not on one
        verdict, and a commit probed again needs nothing made."""
        return in_round_later(self.view, r)

    def decide(self) -> Decision:
        v, meta = self.view, self.view.meta
        if self.round is None:
            self.round = run_store.last_round(v.store, v.record.id)
        n, want = v.n, sampling.endpoint_runs(meta)
        ev, adopted = gather(v)
        informed = self.round or None
        fp, fn, source = rates(v, ev)
        paid = run_store.paid_runs(v.store, v.record.id)
        got, post, cap = step(ev, n, want, meta.confidence, paid, (fp, fn), meta.max_runs,
                              prior_for(v, True), v.width)
        end, p_reg = got.end, got.regression
        if isinstance(end, Stop):
            return Decision(answer_for(v, end), adopted, informed)
        if end is Ending.NO_REGRESSION:
            return Decision(_no_regression(v, ev, p_reg), adopted, informed)
        if end is Ending.INCONCLUSIVE:
            assert p_reg is not None
            return Decision(_inconclusive(v, ev, p_reg), adopted, informed)
        if end is not None:
            assert p_reg is not None
            return Decision(_answer(v, end, post, len(ev.reports), fp, fn, source, p_reg),
                            adopted, informed)
        self.round += 1
        # About what the search costs (the cap is CAP_FACTOR times that: a bound, no estimate).
        expected = round(cap / noisy.CAP_FACTOR)
        return Decision(Round(self.round, got.positions, max(len(got.positions),
                                                             expected - paid)), adopted,
                        informed)


class Ending(enum.Enum):
    NO_REGRESSION = "no regression"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class Planned:
    """What the evidence calls for: runs at ``positions``, or the search's ``end``;
    ``regression``: the probability that the range holds one (None before it is asked)."""

    positions: tuple[int, ...] = ()
    end: Stop | Ending | noisy.Culprit | noisy.GiveUp | None = None
    regression: float | None = None


# Above ruff's limits on purpose: what one step of the search depends on, each named where
# it is known (a run, ``bisect plan``'s simulation, the benches).
def step(ev: Evidence, n: int, want: int, confidence: float, paid: int,  # noqa: PLR0913
         rates: tuple[float, float] | None = None, max_runs: int | None = None,
         prior: Prior | None = None, width: int = 1) -> tuple[Planned, noisy.Posterior, int]:
    """One step of the flaky search from its evidence, the point-rate posterior beside it and
    the run cap.

    The joint posterior (:mod:`bisector.core.joint`, in :func:`plan`) says where to run, when
    to stop and what the answer is; the point-rate posterior, at ``rates`` (else read off every
    run, :func:`estimated_rates`), ranks an unsure answer's suspects and, started from a
    ``prior`` from the failure, steers early runs and K probes. The run cap is ``max_runs``,
    else what the endpoints' cautious rates call for. A run (:meth:`Noisy.decide`), ``bisect
    plan``'s simulated hunts and the benches all step through here."""
    fp, fn = rates or estimated_rates(ev, n)
    post = noisy.Posterior.from_observations(n, fp, fn, ev.reports)
    chooser = post if prior is None else noisy.Posterior.from_observations(
        n, fp, fn, ev.reports, prior)
    cap = sampling.flaky_max_runs(max_runs, n, *noisy.cautious_rates(ev.at(0), ev.at(n - 1)),
                                  confidence)
    return plan(ev, n, want, confidence, post, chooser, cap, paid, width), post, cap


# Above ruff's limits on purpose: the noisy plan's inputs, each named at its one caller.
def plan(ev: Evidence, n: int, want: int, confidence: float, post: noisy.Posterior,  # noqa: PLR0913
         chooser: noisy.Posterior, cap: int, paid: int, width: int) -> Planned:
    """The flaky search's next step from its evidence alone (pure: ``make bench`` drives the
    same function): the endpoints first, then one posterior over "no regression" and every
    culprit (:mod:`bisector.core.joint`): a culprit once "a regression, and there" reaches
    ``confidence``, "no regression" once that does, each run where it tells most."""
    short = endpoints(ev, n, want)
    p_reg: float | None = None
    if isinstance(short, Stop) and short.problem is Problem.BAD_IS_GOOD:
        # A bad endpoint that clearly passes is no answer by itself: a regression from 10 % to
        # 55 % failures shows a passing majority too. Ended by the vote, 38 % of such hunts were
        # called "no regression"; by a regression test at 0.9, 4 %; only by the joint
        # posterior at the confidence asked for (below), 1.5 %, for flake-only ranges paying
        # 40-80 % more runs (simulated, ``make bench`` section 14).
        short = ()
    if isinstance(short, Stop) and short.problem is Problem.GOOD_IS_BAD and \
            not contrast.mostly_fails(ev.at(0), 1 - (1 - confidence) / 10):
        short = ()  # a failing majority of a flaky good endpoint: let the endpoints decide
    if isinstance(short, Stop):
        return Planned(end=short)
    if short:
        return Planned(short)
    # One posterior over "no regression" and every culprit (core/joint.py): the culprit is
    # named once it is this probable, "a regression, and there", a single bar; and each run
    # goes where it tells most about both questions at once. Endpoint runs beside the search
    # and the confirmation's separate runs cost 14 of 38 runs at 1000 commits and 20 %
    # spurious failures; here the endpoints run where they tell the most (mostly in flake-only
    # ranges), the culprit and its parent in the end game (simulated, ``make bench`` 14).
    judge = Joint(n, ev.reports)
    p_reg = judge.regression
    if p_reg <= 1 - confidence:
        return Planned(end=Ending.NO_REGRESSION, regression=p_reg)
    best, probability = judge.best()
    if probability >= confidence:
        return Planned(end=noisy.Culprit(best, probability), regression=p_reg)
    if p_reg < confidence and paid >= defaults.NOISY_UNDECIDED_MAX_RUNS:
        # Whether there is a regression at all is still open: a change below the contrast,
        # or a test failing too often by chance to tell.
        return Planned(end=Ending.INCONCLUSIVE, regression=p_reg)
    if paid >= cap:  # the run cap: the most likely commits, no culprit
        if p_reg < 0.5:  # "no regression" the likelier: no commit is worth naming
            return Planned(end=Ending.INCONCLUSIVE, regression=p_reg)
        return Planned(end=noisy.GiveUp(best, probability), regression=p_reg)
    pick = judge.choose()
    # A prior from the failure (``chooser``) says where to look while no culprit is likely
    # yet; width > 1: the posterior's quantiles beside the joint's own pick.
    if chooser is not post and 0 < pick < n - 1 and probability < 0.5:
        pick = noisy.choose(chooser)[0]
    wanted = (pick,) if width <= 1 else tuple(dict.fromkeys(
        (pick, *noisy.choose(chooser, min(width, n)))))[:width]
    moved = testable(wanted, ev, n)
    if moved is None:  # only untestable commits left: the most likely one, as is
        return Planned(end=noisy.GiveUp(best, probability), regression=p_reg)
    return Planned(moved, regression=p_reg)


def _endpoint_facts(view: View, ev: Evidence) -> dict[str, object]:
    good, bad = ev.at(0), ev.at(view.n - 1)
    return {"good_fails": round(contrast.rate(good), 4), "good_runs": len(good),
            "bad_fails": round(contrast.rate(bad), 4), "bad_runs": len(bad),
            "min_contrast": defaults.NOISY_MIN_CONTRAST}


def _rates_words(view: View, ev: Evidence) -> str:
    good, bad = ev.at(0), ev.at(view.n - 1)
    new = view.rules.terms[1]
    return (f"the {new} endpoint is {new} in {contrast.rate(bad):.0%} of its runs "
            f"({sum(bad)} of {len(bad)}), the good one in {contrast.rate(good):.0%} "
            f"({sum(good)} of {len(good)})")


def _no_regression(view: View, ev: Evidence, p_reg: float | None = None) -> Conclusion:
    """No culprit: the bad endpoint is no worse than the good one (a flaky test, no change)."""
    facts = {**_endpoint_facts(view, ev), "regression_probability":
             None if p_reg is None else round(p_reg, 6)}
    return Conclusion(State.NO_REGRESSION, {"kind": "no regression", "noisy": facts},
                  f"no culprit: {_rates_words(view, ev)}. The oracle is flaky and this range "
                  f"holds no regression (a rise of {defaults.NOISY_MIN_CONTRAST:.0%} or more is "
                  f"ruled out at the confidence asked for)")


def _inconclusive(view: View, ev: Evidence, p_reg: float) -> Conclusion:
    facts = {**_endpoint_facts(view, ev), "regression_probability": round(p_reg, 6)}
    return Conclusion(State.INCONCLUSIVE, {"kind": "inconclusive", "noisy": facts},
                  f"cannot tell whether this range holds a regression: {_rates_words(view, ev)} "
                  f"after {len(ev.reports)} runs (probability of a regression {p_reg:.2f}); a "
                  f"narrower range or a test that fails less often by chance can decide it")


def _answer(view: View, step: noisy.Culprit | noisy.GiveUp, post: noisy.Posterior,
            runs: int, fp: float, fn: float, source: str, p_reg: float) -> Conclusion:
    cands = view.candidates
    noise = {"probability": round(step.probability, 6), "runs": runs,
             "false_positive": round(fp, 4), "false_negative": round(fn, 4),
             "rates": source, "confidence": view.meta.confidence,
             "regression_probability": round(p_reg, 6)}
    if isinstance(step, noisy.Culprit):
        return Conclusion(State.DONE, {"kind": "culprit", "position": step.position,
                                   "noisy": noise},
                      culprit=step.position, posterior=post)
    ranked = post.most_likely(SUSPECTS_MAX, view.meta.confidence)
    return Conclusion(
        State.AMBIGUOUS,
        {"kind": "window", "suspects": [cands[p] for p, _ in ranked],
         "probabilities": [round(q, 6) for _, q in ranked],
         "position": step.position, "noisy": noise},
        f"from {runs} runs the most likely first {view.rules.terms[1]} commit is "
        f"{cands[step.position][:12]} with probability {step.probability:.3f}, below the "
        f"{noise['confidence']} asked for (or only untestable commits were left to probe). "
        f"Every run is stored: a new bisection with the same oracle starts from them with a "
        f"fresh budget of runs")
