"""The prior from the failure (issue 23): evidence, weights, and the weighted search's bound.

The bound is the promise that makes the prior safe to have on by default: whatever the prior
says (right, vague, or all of it on wrong commits), a deterministic search makes at most
ceil(log2 n) + 2 probes, and with K probes a round at most ceil(log_(K+1) n) + 1 rounds.
"""

from __future__ import annotations

import math
import statistics
from random import Random

from hypothesis import given, settings
from hypothesis import strategies as st

from bisector.core import noisy
from bisector.core.prior import (
    DIRECTORY,
    FILE,
    FUNCTION,
    RAISED,
    Change,
    Evidence,
    Prior,
    build,
    read_evidence,
    same_file,
    score,
    shared_tail,
)
from bisector.core.search import Culprit, Next, Verdict, next_step, rounds_budget

G, B = Verdict.GOOD, Verdict.BAD

TRACEBACK = """\
Traceback (most recent call last):
  File "/home/u/repro.py", line 9, in <module>
    f(x)
  File "/venv/lib/python3.11/site-packages/torch/_dynamo/eval_frame.py", line 451, in _fn
    return fn(*args, **kwargs)
  File "/venv/site-packages/torch/_inductor/codegen/triton.py", line 77, in codegen_reduction
    raise AssertionError("bad reduction")
torch._inductor.exc.InductorError: AssertionError: bad reduction
"""


def drive(n: int, culprit: int, prior: Prior | None, width: int = 1) -> tuple[int, int]:
    """(probes, rounds) of a search for ``culprit``; it must find it."""
    known: dict[int, Verdict] = {}
    rounds = 0
    while True:
        step = next_step(n, known, width, prior=prior)
        if not isinstance(step, Next):
            assert step == Culprit(culprit), (step, culprit)
            return len(known), rounds
        rounds += 1
        for p in step.positions:
            assert p not in known
            known[p] = B if p >= culprit else G


def mixed(n: int, points: set[int], weight: float = 0.5) -> Prior:
    """The prior :func:`build` makes when the evidence names ``points`` equally."""
    return Prior.from_weights([(1 - weight) / (n - 1) + (weight / len(points) if c in points
                                                         else 0.0) for c in range(1, n)],
                              matched=len(points))


# -- evidence --------------------------------------------------------------------------------

def test_traceback_gives_files_functions_and_the_exception_module() -> None:
    ev = read_evidence(TRACEBACK)
    assert "/venv/site-packages/torch/_inductor/codegen/triton.py" in ev.files
    assert "torch/_inductor/exc.py" in ev.files  # from the exception's dotted name
    assert ev.files[-1] == "torch/_inductor/exc.py"
    assert ev.source == "traceback"
    assert ("codegen_reduction",) in ev.functions.values()
    assert all("<module>" not in fs for fs in ev.functions.values())


def test_command_paths_and_pytest_frames() -> None:
    ev = read_evidence("torch/_inductor/ir.py:120: in realize\nE   RuntimeError: x\n",
                       ("python", "-m", "pytest", "test/inductor/test_ops.py::test_sum", "-x"))
    assert ev.files == ("torch/_inductor/ir.py", "test/inductor/test_ops.py")
    assert ev.functions["torch/_inductor/ir.py"] == ("realize",)
    assert not read_evidence("all fine\n", ("python", "-c", "print(1)"))


def test_a_warnings_location_is_not_evidence() -> None:
    """Seen on the H100 proof: the name-mangling oracle's output ends with a UserWarning of
    torch/_dynamo/pgo.py, which had pointed the prior at the wrong folder."""
    out = ("bad: reproduced #170398: NameError: name '_Runner__mm_kernel_0' is not defined\n"
           "/x/site-packages/torch/_dynamo/pgo.py:538: UserWarning: dynamo_pgo force disabled\n"
           "  warn_once(\n")
    assert "torch/_dynamo/pgo.py" not in " ".join(read_evidence(out).files)


def test_same_file_compares_whole_trailing_components() -> None:
    assert same_file("/v/site-packages/torch/_inductor/ir.py", "torch/_inductor/ir.py")
    assert not same_file("torch/_inductor/myir.py", "torch/_inductor/ir.py")
    assert not same_file("a/ir.py", "ir.py")  # a bare name names too many files
    assert same_file("ir.py", "ir.py")


def test_the_frame_that_raised_is_evidence_of_its_own() -> None:
    """Each traceback's last frame, where its exception was raised: in a chain (``raise ...
    from e``) every block's; a frame's indented source line does not end it."""
    ev = read_evidence(TRACEBACK)
    assert ev.raised == {"/venv/site-packages/torch/_inductor/codegen/triton.py":
                         ("codegen_reduction",)}
    chained = ("Traceback (most recent call last):\n"
               '  File "/env/site-packages/click/testing.py", line 121, in __next__\n'
               "    line = super().__next__()\n"
               "StopIteration\n\n"
               "The above exception was the direct cause of the following exception:\n\n"
               "Traceback (most recent call last):\n"
               '  File "/env/site-packages/click/core.py", line 1363, in main\n'
               "    rv = self.invoke(ctx)\n"
               '  File "/env/site-packages/click/core.py", line 1226, in invoke\n'
               "    return ctx.invoke(self.callback)\n"
               "click.exceptions.Abort\n")
    ev = read_evidence(chained)
    assert ev.raised == {"/env/site-packages/click/testing.py": ("__next__",),
                         "/env/site-packages/click/core.py": ("invoke",)}
    assert "main" in ev.functions["/env/site-packages/click/core.py"]
    assert ev.summary()["raised"] == ["__next__", "invoke"]
    core = "click/core.py"
    caller = score(ev, Change((core,), ("main",)))
    assert caller == FILE + FUNCTION + DIRECTORY  # click/exceptions.py's folder too
    assert score(ev, Change((core,), ("invoke",))) == caller + RAISED


def test_shared_tail_counts_common_trailing_components() -> None:
    """A src layout: the installed path and the repository's share the package's folder and
    the file, and neither is the other's tail."""
    installed = "/venv/lib/python3.11/site-packages/black/parsing.py"
    assert not same_file(installed, "src/black/parsing.py")
    assert shared_tail(installed, "src/black/parsing.py") == 2
    assert shared_tail(installed, "src/blib2to3/parsing.py") == 1
    assert shared_tail("a/x.py", "b/y.py") == 0


def test_score_file_function_directory_and_tag() -> None:
    ev = read_evidence(TRACEBACK)
    triton = "torch/_inductor/codegen/triton.py"
    assert score(ev, Change((triton,))) == 1.0
    assert score(ev, Change((triton,), ("codegen_reduction",))) == 3.0  # the raising frame
    assert score(ev, Change(("torch/_inductor/codegen/cpp.py",))) == 0.25
    assert score(ev, Change(("docs/x.md",), subject="[inductor] tidy")) == 0.25
    assert score(ev, Change(("docs/x.md",), subject="[distributed] tidy")) == 0.0


def test_build_mixes_with_uniform_and_none_without_a_match() -> None:
    ev = read_evidence(TRACEBACK)
    changes = [Change()] + [Change(("README.md",))] * 9 + [Change(("torch/_inductor/exc.py",))]
    prior = build(ev, changes)
    assert prior is not None and prior.matched == 1 and prior.n == 11
    assert math.isclose(prior.prob(10), 0.5 / 10 + 0.5)
    assert math.isclose(prior.prob(3), 0.5 / 10)
    assert math.isclose(prior.mass_upto(10), 1.0)
    assert len(prior.ends) == 2  # one segment per run of equal weights
    assert build(ev, [Change(("README.md",))] * 11) is None
    assert build(Evidence(), changes) is None


# -- the bound -------------------------------------------------------------------------------

@settings(max_examples=400, deadline=None)
@given(st.integers(2, 5000), st.data())
def test_property_any_prior_keeps_the_probe_bound(n: int, data: st.DataObject) -> None:
    """Random histories, random culprits, random priors: right ones, scattered ones, and
    adversarial ones with all the evidence on wrong commits (even with no uniform share)."""
    culprit = data.draw(st.integers(1, n - 1), label="culprit")
    kind = data.draw(st.sampled_from(["right", "wrong", "random", "extreme"]), label="kind")
    m = data.draw(st.integers(1, min(50, n - 1)), label="points")
    rng = Random(data.draw(st.integers(0, 2**32), label="seed"))
    points = set(rng.sample(range(1, n), m))
    if kind == "right":
        points.add(culprit)
    elif kind in ("wrong", "extreme"):
        points.discard(culprit)
        points = points or {1 + culprit % (n - 1)} - {culprit}
    if kind == "random":
        prior = Prior.from_weights([rng.random() + 1e-9 for _ in range(1, n)])
    elif not points:  # n == 2: nothing else to point at
        prior = Prior.uniform(n)
    else:
        prior = mixed(n, points, 0.999999 if kind == "extreme" else 0.5)
    probes, _ = drive(n, culprit, prior)
    assert probes <= math.ceil(math.log2(n)) + 2


@settings(max_examples=150, deadline=None)
@given(st.integers(2, 3000), st.integers(2, 6), st.data())
def test_property_k_quantiles_keep_the_round_bound(n: int, k: int, data: st.DataObject) -> None:
    culprit = data.draw(st.integers(1, n - 1))
    rng = Random(data.draw(st.integers(0, 2**32)))
    points = set(rng.sample(range(1, n), min(n - 1, data.draw(st.integers(1, 20)))))
    if data.draw(st.booleans()):
        points.discard(culprit)
    prior = mixed(n, points or {culprit})
    _, rounds = drive(n, culprit, prior, width=k)
    assert rounds <= rounds_budget(n, k) + 1  # + the endpoints' round


def test_k_picks_are_the_prior_quantiles_when_the_budget_allows() -> None:
    prior = Prior.from_weights([1.0] * 50 + [9.0] * 10 + [1.0] * 39)  # mass around 51..60
    step = next_step(101, {0: G, 100: B}, width=3, prior=prior)
    assert isinstance(step, Next) and len(step.positions) == 3
    plain = next_step(101, {0: G, 100: B}, width=3)
    assert isinstance(plain, Next) and plain.positions == (25, 50, 75)
    assert all(45 <= p <= 62 for p in step.positions[1:]), step  # drawn to the heavy part


def test_good_priors_save_probes_and_wrong_ones_cost_little() -> None:
    rng = Random(7)
    rows: dict[str, tuple[list[int], list[int]]] = {"right": ([], []), "wrong": ([], [])}
    for _ in range(300):
        n = rng.randint(50, 5000)
        c = rng.randint(1, n - 1)
        for kind, (with_prior, plain) in rows.items():
            points = set(rng.sample(range(1, n), 5)) - {c}
            if kind == "right":
                points = set(list(points)[:4]) | {c}
            with_prior.append(drive(n, c, mixed(n, points))[0])
            plain.append(drive(n, c, None)[0])
    right, wrong = rows["right"], rows["wrong"]
    assert statistics.mean(right[0]) < 0.75 * statistics.mean(right[1])
    assert statistics.mean(wrong[0]) <= statistics.mean(wrong[1]) + 0.5


def test_cost_with_a_prior_stays_inside_the_budget() -> None:
    n, c = 700, 233
    prior = mixed(n, {233, 400})
    known: dict[int, Verdict] = {}
    while True:
        step = next_step(n, known, cost=lambda p: 0 if p % 10 == 0 else 3, prior=prior)
        if not isinstance(step, Next):
            break
        for p in step.positions:
            known[p] = B if p >= c else G
    assert step == Culprit(c) and len(known) <= math.ceil(math.log2(n)) + 2


# -- the noisy posterior ---------------------------------------------------------------------

def test_noisy_posterior_starts_from_the_prior() -> None:
    prior = mixed(1000, {700})
    post = noisy.Posterior(1000, 0.1, 0.1, prior=prior)
    assert math.isclose(post.prob(700), prior.prob(700))
    assert math.isclose(post.mass_at_or_before(699), prior.mass_upto(699))
    post.observe(500, True)  # a lie at 500 shifts, it does not erase
    assert post.prob(700) > 0


def test_a_flaky_search_steered_by_a_prior_right_or_wrong_names_the_right_culprit() -> None:
    """The prior says where the flaky search looks, never what it believes: right or wrong,
    every hunt names the true culprit at the confidence asked for, and a wrong prior costs
    runs within reason (the shipped search, rates unknown, 10 % lies both ways)."""
    from bench.prior import flaky_hunt

    n, c = 1000, 617
    runs: dict[str, list[int]] = {}
    for label, prior in (("right", mixed(n, {c})), ("wrong", mixed(n, {300})),
                         ("none", None)):
        lies = Random(3)
        for _ in range(6):
            got, paid = flaky_hunt(n, c, prior, lies)
            assert isinstance(got, noisy.Culprit) and got.position == c, label
            assert got.probability >= noisy.DEFAULT_CONFIDENCE
            runs.setdefault(label, []).append(paid)
    plain = statistics.mean(runs["none"])
    assert statistics.mean(runs["wrong"]) < 1.5 * plain, runs
    assert statistics.mean(runs["right"]) < 1.2 * plain, runs
