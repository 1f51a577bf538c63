"""``bisect plan``: what a bisection will cost, before anything is spent.

The projection runs the real search (the shipped strategies, app/plan_walk.py, and the same
cost ranking a run uses) against every possible culprit position, or an even sample of them on
long ranges, and adds up per-step costs. So "expected source builds" is not a guess from
counts: it is what the search would do, averaged over where the culprit might be, with the
worst case beside it.

It starts from what a run would start from: every reusable verdict already stored for the
range (a run seeds its search with them before its first probe, so they cost nothing and rule
out every culprit position they contradict). Steps are priced with what they took on this
repository when that was measured, the default of its kind of project otherwise, and
``--cost`` over both (:mod:`bisector.app.costs`); the report says which, because a default
build of an hour is right for PyTorch and wrong by three orders of magnitude for a small
project. An oracle run is priced by that oracle's own runs, never another's: an oracle that has
not run yet is priced by its kind, and a note says so.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bisector.app import plan_perf
from bisector.app.costs import (
    DEFAULT_COSTS,
    describe_source,
    has_compiled_sources,
    human,
    parse_costs,
    price,
    project_costs,
    trees_assemble,
    unrun_note,
    unrun_oracle,
)
from bisector.app.overlap import with_prefetch
from bisector.app.plan_walk import Ranking, Reuse, consistent_culprits, searches, walk
from bisector.artifacts.nightly_urls import DIRECT, LISTED
from bisector.base import defaults
from bisector.base.events import Events, QuietEvents
from bisector.base.kinds import Way
from bisector.core import noisy, paired
from bisector.core.confirmation import owed
from bisector.core.sampling import (
    PLAIN,
    Kind,
    Sampling,
    perf_max_runs,
    sampling_for,
)
from bisector.core.search import Verdict
from bisector.project.profiles import GENERIC, get_profile
from bisector.run.config import Request
from bisector.run.factory import Parts
from bisector.run.hunt import hunt_for
from bisector.run.policy import Policy
from bisector.run.prepare import Prepared, discover, prepare
from bisector.run.prior import FailurePrior, note, planned, projection
from bisector.run.strategies.noisy import Evidence
from bisector.run.strategies.noisy import step as flaky_step
from bisector.run.strategies.plain import stored_verdicts
from bisector.store import durations
from bisector.store import runs as run_store
from bisector.store.db import Store

# Re-exported: the CLI and the tests price through ``bisect plan``'s module.
__all__ = ["DEFAULT_COSTS", "PlanReport", "consistent_culprits", "describe_source", "human",
           "make_plan", "parse_costs", "plan_for", "price", "project_costs", "simulate"]

SAMPLE = 256
# Simulated hunts of a flaky oracle (each one random): fewer, since each is the shipped search,
# a joint posterior a step (0.1-0.25 s a hunt at 200 commits); 24 put the mean within about 2
# runs.
NOISY_SAMPLE = 24
# Runs a performance commit is priced at on average: most commits are far from the threshold
# and decided by their first one or two runs; the worst case is the oracle's ``max-runs``.
# A performance probe takes about core/paired.TYPICAL_PAIRS pairs: its runs and as many of the
# reference's beside them.
PERF_MEAN_RUNS = 2 * paired.TYPICAL_PAIRS


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
    sampling: str = Kind.PLAIN.value  # which search was simulated (see Sampling)
    stored_verdicts: int = 0  # candidates with a reusable verdict of this oracle and environment
    # step -> {"from": "--cost" | "measured" | "default", and for measured "count", "over"}
    cost_sources: dict[str, dict[str, Any]] = field(default_factory=dict)
    # How the index's wheels were found: {"listed": n, "direct URL": m} (an installed base is
    # neither); the index lists only its newest nightlies, older ones are found past it.
    prebuilt_sources: dict[str, int] = field(default_factory=dict)
    prior: dict[str, Any] = field(default_factory=dict)  # which prior a run would use (--prior)
    # The mean with the next probes made while the oracle runs (app/overlap.py); None: a
    # flaky search, or --prefetch 0.
    seconds_prefetch_mean: float | None = None

    @property
    def range_commits(self) -> int:
        """As ``show`` counts the range (``git rev-list --count``): less the good endpoint."""
        return max(0, self.candidates - 1)

    def as_dict(self) -> dict[str, Any]:
        d = self.__dict__.copy()
        d["kinds"] = dict(self.kinds)
        d["range_commits"] = self.range_commits  # show --json's key, the same number
        return d


def _confirmation(provider: Ranking, costs: Mapping[str, float], culprit: int,
                  sampling: Sampling, runs: int | None = None) -> tuple[int, int, float]:
    """(runs, builds, seconds) of confirming ``culprit``: it and its parent again (both already
    installed), then its revert on the bad endpoint, obtained the way the culprit was: an
    overlay when the culprit's change is overlay-safe, else a build (an approximation).
    ``runs``: what a flaky search's confirmation still owes, when it knows."""
    if not sampling.confirm_runs:
        return 0, 0, 0.0
    revert = Way.OVERLAY if provider.kind(culprit) is Way.OVERLAY else Way.BUILD
    # A performance culprit is confirmed paired: parent, culprit, parent, ..., then the revert
    # beside the same parent runs.
    if runs is None:
        runs = (4 * paired.TYPICAL_PAIRS + 1 if sampling.kind is Kind.PERFORMANCE
                else 3 * sampling.confirm_runs)
    return runs, int(revert is Way.BUILD), costs[revert] + runs * costs["oracle"]


def simulate(n: int, provider: Ranking, costs: dict[str, float],
             known: Mapping[int, Verdict] | None = None, sampling: Sampling = PLAIN,
             worst: bool = False) -> list[tuple[int, int, float]]:
    """(oracle runs, source builds, seconds) for each sampled culprit position.

    ``known``: the stored verdicts a run would seed its search with. They are never paid for,
    and only culprit positions consistent with them are sampled. A commit known not to build
    is a skip, as in a run: no oracle run, and the search steps around it. A flaky oracle is
    hunted with :func:`simulate_flaky`; a performance oracle walks the ordinary search after its
    baseline, each probe priced at :data:`PERF_MEAN_RUNS` runs (``worst``: its ``max-runs``).
    """
    if sampling.kind is Kind.FLAKY:
        return simulate_flaky(n, provider, costs, sampling)
    seeded = dict(known or {})
    per_probe, fixed = 1, (0, 0, 0.0)
    if sampling.kind is Kind.PERFORMANCE:
        seeded.setdefault(0, Verdict.GOOD)  # judged by its baseline runs, priced here
        # Paired: each commit's runs come with as many of the reference's (worst: the cap).
        per_probe = 2 * perf_max_runs(sampling.max_runs) if worst else PERF_MEAN_RUNS
        first = provider.kind(0)
        fixed = (1, int(first is Way.BUILD), costs[first] + costs["oracle"])
    if not searches(n, provider.cost, seeded):
        return [(0, 0, 0.0)]  # the stored verdicts already answer: a run only reports them
    culprits = consistent_culprits(n, seeded) or list(range(1, n))
    out = []
    for culprit in culprits[::max(1, len(culprits) // SAMPLE)]:
        runs, builds, seconds = fixed
        probed, named = walk(n, provider, culprit, seeded)
        for _, k in probed:
            seconds += costs[k]
            if k is not Way.BROKEN:
                runs += per_probe
                builds += k is Way.BUILD
                seconds += per_probe * costs["oracle"]
        c_runs, c_builds, c_seconds = (_confirmation(provider, costs, culprit, sampling)
                                       if named else (0, 0, 0.0))
        out.append((runs + c_runs, builds + c_builds, seconds + c_seconds))
    return out


def simulate_perf(n: int, provider: Ranking, costs: Mapping[str, float],
                  model: plan_perf.Model, sampling: Sampling) -> list[tuple[int, int, float]]:
    """(runs, builds, seconds) of each of the performance search's simulated hunts
    (:mod:`bisector.app.plan_perf`: the shipped search over runs with the oracle's noise),
    each commit obtained once however often it runs, as the provider would then, and the
    confirmation a named culprit owes."""
    out = []
    for culprit, seed in plan_perf.hunts(n):
        got = plan_perf.hunt(model, n, culprit, seed, lambda p: provider.kind(p) is Way.BROKEN)
        now, builds, seconds = Reuse(provider), 0, got.runs * costs["oracle"]
        for p in got.obtained:
            k = now.kind(p)
            now.paid(p, k)
            builds, seconds = builds + (k is Way.BUILD), seconds + costs[k]
        c_runs, c_builds, c_seconds = (0, 0, 0.0) if got.named is None else \
            _confirmation(provider, costs, got.named, sampling)
        out.append((got.runs + c_runs, builds + c_builds, seconds + c_seconds))
    return out


def simulate_flaky(n: int, provider: Ranking, costs: Mapping[str, float],
                   sampling: Sampling, seed: int = 0) -> list[tuple[int, int, float]]:
    """(runs, builds, seconds) of :data:`NOISY_SAMPLE` simulated hunts of the flaky search (the
    very ``step`` a run takes, :mod:`bisector.run.strategies.noisy`, rates read off its runs as
    a run reads them) against an oracle that lies at the given rates, to its answer or its run
    cap, and the confirmation that answer owes (:func:`bisector.core.confirmation.owed`, then
    the revert's vote). Each commit is obtained once however often it runs; a commit that does
    not build moves the probe to the nearest one that does, as the run's ``testable`` does.
    Seeded, so a plan is the same every time it is asked."""
    rng = random.Random(seed)
    usable = [p for p in range(1, n - 1) if provider.kind(p) is not Way.BROKEN]
    culprits = list(range(1, n))
    out = []
    for culprit in culprits[::max(1, len(culprits) // NOISY_SAMPLE)]:
        now = Reuse(provider)
        got: dict[int, Way] = {}
        reports: list[tuple[int, bool]] = []
        while True:
            step, _, _ = flaky_step(Evidence(tuple(reports), {}), n, sampling.endpoint_runs,
                                    sampling.confidence, len(reports),
                                    max_runs=sampling.max_runs)
            if step.end is not None or not step.positions:
                break
            for p in step.positions:
                if provider.kind(p) is Way.BROKEN and usable:
                    p = min(usable, key=lambda q: (abs(q - p), q))
                if p not in got:
                    got[p] = now.kind(p)
                    now.paid(p, got[p])
                truth = p >= culprit
                lie = rng.random() < (sampling.fn if truth else sampling.fp)
                reports.append((p, truth != lie))
        kinds = list(got.values())
        c_runs, c_builds, c_seconds = (0, 0, 0.0)
        if isinstance(step.end, noisy.Culprit) and sampling.confirm_runs:
            c = step.end.position
            c_runs, c_builds, c_seconds = _confirmation(
                provider, costs, c, sampling,
                sum(owed(reports, c, c - 1, sampling.confirm_runs)) + defaults.NOISY_VOTE)
        runs = len(reports) + c_runs
        out.append((runs, sum(k is Way.BUILD for k in kinds) + c_builds,
                    sum(costs[k] for k in kinds) + len(reports) * costs["oracle"] + c_seconds))
    return out


# Above ruff's limits on purpose: the plan's inputs, each a keyword at its callers.
def make_plan(  # noqa: PLR0913
    provider: Ranking, n: int, costs: dict[str, float], missing: list[str],
    unmapped: list[str], prebuilt: list[dict[str, Any]], notes: list[str],
    known: Mapping[int, Verdict] | None = None,
    cost_sources: dict[str, dict[str, Any]] | None = None, sampling: Sampling = PLAIN,
    perf: plan_perf.Model | None = None,
) -> PlanReport:
    """``perf``: a performance oracle's threshold and noise; given, its expected figures are
    the shipped search's over simulated runs (:func:`simulate_perf`), not a flat
    :data:`PERF_MEAN_RUNS` a probed commit."""
    kinds: Counter[str] = Counter(provider.kind(p) for p in range(n))
    measured = sampling.kind is Kind.PERFORMANCE and perf is not None
    sims = (simulate_perf(n, provider, costs, perf, sampling) if perf is not None and measured
            else simulate(n, provider, costs, known, sampling))
    if sampling.kind is Kind.PERFORMANCE:  # the worst case prices every probe at the cap
        sims_max = [*simulate(n, provider, costs, known, sampling, worst=True),
                    *(sims if measured else [])]
    else:
        sims_max = sims
    runs = [r for r, _, _ in sims]
    builds = [b for _, b, _ in sims]
    secs = [s for _, _, s in sims]
    notes = [*notes, *_sampling_notes(sampling, perf if measured else None)]
    return PlanReport(
        candidates=n, kinds=kinds, prebuilt=prebuilt, missing=missing, unmapped=unmapped,
        probes_mean=sum(runs) / len(runs), probes_max=max(r for r, _, _ in sims_max),
        builds_mean=sum(builds) / len(builds), builds_max=max(builds),
        seconds_mean=sum(secs) / len(secs), seconds_max=max(s for _, _, s in sims_max),
        costs=costs, notes=notes, stored_verdicts=len(known or {}),
        cost_sources=dict(cost_sources or {}), sampling=sampling.kind.value,
        prebuilt_sources=prebuilt_sources(prebuilt))


def prebuilt_sources(prebuilt: list[dict[str, Any]]) -> dict[str, int]:
    """Wheels named by the index's listing and wheels found past it at their direct URL."""
    counts = Counter(p["source"] for p in prebuilt if "source" in p)
    return {LISTED: counts[LISTED], DIRECT: counts[DIRECT]}


def _sampling_notes(sampling: Sampling, perf: plan_perf.Model | None = None) -> list[str]:
    """What the projection assumed about an oracle that is not right every time."""
    out = []
    if sampling.kind is Kind.FLAKY:
        out.append(f"flaky oracle: priced by {NOISY_SAMPLE} simulated hunts at "
                   f"{sampling.fp:.0%} false positives and {sampling.fn:.0%} false negatives, "
                   f"{sampling.endpoint_runs} runs of each endpoint, confidence "
                   f"{sampling.confidence}; stored runs of this oracle are not counted")
    elif perf is not None:
        out.append(f"performance oracle, paired: priced by {plan_perf.HUNTS} simulated hunts "
                   f"of the shipped search, a change of {plan_perf.CHANGE:g} times the "
                   f"threshold ({perf.threshold:.0%}); {perf.noise.describe()}; at most twice "
                   f"max-runs pairs a commit")
    elif sampling.kind is Kind.PERFORMANCE:
        out.append(f"performance oracle, paired: {PERF_MEAN_RUNS} runs a commit on average "
                   f"({paired.TYPICAL_PAIRS} of its own, as many of the good endpoint's "
                   f"beside them); at most twice max-runs pairs a commit")
    if sampling.confirm_runs and sampling.kind is Kind.PERFORMANCE:
        out.append(f"confirmation included: the culprit paired about {paired.TYPICAL_PAIRS} "
                   f"times beside its parent, then its revert beside the same parent runs "
                   f"(--no-confirm leaves it out)")
    elif sampling.confirm_runs:  # pairs are a performance oracle's alone: not named here
        out.append(f"confirmation included: culprit, parent and revert run "
                   f"{sampling.confirm_runs} time(s) each (--no-confirm leaves it out)")
    return out


def plan_for(store: Store, req: Request, costs: dict[str, float],
             events: Events | None = None, *, policy: Policy) -> PlanReport:
    """``bisect plan``: the projection for a range, from the same parts a run uses.

    ``costs``: the user's ``--cost`` overrides; every other step is priced with what it took
    on this repository, else the default of this kind of project. The search starts from the
    verdicts a run of this request would reuse (same oracle bytes, same environment
    fingerprint), found by the runner's own lookup. ``events`` hears of each wait on an index
    before it starts.
    """
    events = events or QuietEvents()
    p: Prepared = discover(store, prepare(req), events.status)
    cfg, cands = p.config, list(p.span.candidates)
    parts = Parts(store, cfg, cands, QuietEvents(), policy=policy)  # its object store priced
    key = run_store.Key(p.oracle.sha256, p.fingerprint)
    # The judge of failing runs the run would use (run/hunt.py), so what is free is the same.
    hunt = hunt_for(store, key, cands, cfg.rules, p.oracle,
                    any_failure=cfg.request.any_failure, manual=cfg.request.manual)
    known = {pos: v for pos, (_, v, _) in
             stored_verdicts(store, key, cands, cfg.rules, hunt).items()}
    measured: dict[str, tuple[durations.Measured, str]] = {}
    if (build := durations.build_seconds(store, cfg.repo, cfg.profile)) is not None:
        measured[Way.BUILD] = (build, f"{cfg.profile} source builds of this repository")
    # Only this oracle's own runs: another oracle's say nothing of this one (unrun_oracle).
    if (oracle := durations.oracle_seconds(store, p.oracle.sha256)) is not None:
        measured["oracle"] = (oracle, "runs of this oracle")
    for step, m in durations.obtaining_seconds(store, cfg.repo).items():
        measured[step] = (m, f"{step} probes of this repository (all but the oracle run)")
    profile = get_profile(cfg.profile)
    compiled = profile is GENERIC and has_compiled_sources(parts.repos(), p.span.bad_sha)
    assembles = profile.assemble_pure and not compiled and Way.BUILD not in measured and \
        trees_assemble(parts.repos(), [cands[0], cands[-1]])
    project, kind = project_costs(profile, compiled, assembles)
    table, sources = price(costs, measured, project, kind)
    notes = list(p.span.notes)
    if sources["oracle"]["from"] == "default":
        table["oracle"], sources["oracle"] = unrun_oracle(p.oracle.argv, project, kind)
        notes.append(unrun_note(table["oracle"], sources["oracle"]))
    prebuilt = [{"position": pb.position, "commit": pb.wheel.commit, "kind": pb.wheel.kind,
                 "filename": pb.wheel.filename, "source": pb.wheel.source,
                 "sha256_from": pb.wheel.sha256_from} for pb in cfg.prebuilts]
    if cfg.installed:
        sha = cfg.installed.commit
        prebuilt.append({"position": cands.index(sha) if sha in cands else None,
                         "commit": sha, "kind": "installed", "filename": cfg.installed.site})
    found = p.discovery
    meta = p.oracle.meta
    perf = None if meta.threshold is None else plan_perf.Model(
        meta.threshold, plan_perf.noise_of(run_store.samples(store, key, cands)),
        meta.max_runs, cfg.rules.find_fix)
    prior = planned(FailurePrior(cfg.request.prior, parts.repos, cfg.request.command), store,
                    key, cands, cfg.rules, cfg.width)
    report = make_plan(
        parts.provider, len(cands), table,
        missing=[pb.filename for pb in found.missing] if found else [],
        unmapped=[f"{pb.filename}: {pb.reason}" for pb in found.unmapped] if found else [],
        prebuilt=prebuilt, notes=notes, known=known, cost_sources=sources,
        sampling=sampling_for(meta, cfg.request.confirm), perf=perf)
    # Both figures: plain bisection's projection and the prior's (a range before the bad
    # endpoint has run: its failure is the evidence).
    report.prior = {**prior, "projection": projection(prior, len(cands), report.probes_mean)}
    report.notes.append(note(report.prior))
    if report.sampling != Kind.FLAKY.value and cfg.request.prefetch != 0:
        n = len(cands)
        culprits = consistent_culprits(n, known) or list(range(1, n))
        runs = PERF_MEAN_RUNS if report.sampling == Kind.PERFORMANCE.value else 1
        report.seconds_prefetch_mean = with_prefetch(
            report.seconds_mean, lambda c: walk(n, parts.provider, c, known)[0],
            culprits[::max(1, len(culprits) // SAMPLE)], table, runs,
            max(0, cfg.build_jobs - cfg.width), cfg.width)
    return report
