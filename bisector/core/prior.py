"""A prior over the candidates from the failure itself: where the traceback points.

No git, no I/O. Plain bisection spends ceil(log2 n) probes whatever is known, but the failing
run at the bad endpoint usually says where to look: its traceback names files and functions,
and a commit that changed one of them is far more likely the culprit than one that did not.
This module turns that evidence and each candidate's changed paths into a probability per
candidate (:class:`Prior`); :func:`bisector.core.search.next_step` splits its mass instead of
the commit count, and :class:`bisector.core.noisy.Posterior` starts from it.

The weighting (documented, and the only one):

* the **evidence** is the files of the failing run's traceback frames (``File "...", line N,
  in f`` and pytest's ``path.py:N: in f``), the module of its exception (``torch._dynamo.exc
  .Unsupported`` names ``torch/_dynamo/exc.py``), the functions of those frames, and for a
  command oracle the paths its command names (``test/inductor/test_x.py::test_y``);
* a candidate **scores** :data:`FILE` for each evidence file it changed (paths compared by
  whole trailing components, so ``/venv/.../site-packages/torch/_inductor/ir.py`` is
  ``torch/_inductor/ir.py``), :data:`FUNCTION` more when a hunk it changed there is in a
  function of the frames, :data:`RAISED` more when one is in the function an exception was
  raised in (a traceback's last frame: in two real click bugs the culprit changed that frame,
  while the commits that changed only its callers were big reformattings and merges; see
  docs/benchmarks.md, "On real public bugs"), :data:`DIRECTORY` for an evidence file whose
  directory it changed something else in, and :data:`TAG` once when its subject's tag
  (``[inductor]``) names a directory of the evidence;
* the match mass of a candidate is its score over all scores, and its prior weight
  ``w = (1 - λ) / (n - 1) + λ · match`` with λ = :data:`bisector.base.defaults.PRIOR_WEIGHT`
  (0.5): half the mass stays uniform, so every candidate keeps at least half its plain share.
  For a deterministic oracle the search additionally never leaves the probe budget
  ``ceil(log2 n) + 2`` (see :mod:`bisector.core.search`), whatever the prior says; the uniform
  half is what lets a flaky oracle's posterior recover from evidence that pointed elsewhere,
  and keeps a wrong prior's expected cost close to plain bisection's.

No evidence, or evidence that no candidate matches: no prior (the search is plain bisection).
The weights are piecewise constant over runs of candidates with the same score, which is how
the noisy posterior stores them (one segment per run, 10**6 commits as cheap as 10).
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bisector.base import defaults
from bisector.core.search import Next, Verdict, next_step
from bisector.core.signature import failure_line

FILE = 1.0
FUNCTION = 1.0
RAISED = 1.0
DIRECTORY = 0.25
TAG = 0.25

# ``File "/x/torch/_inductor/ir.py", line 12, in realize``
_FRAME = re.compile(r'File "(?P<path>[^"]+)", line \d+, in (?P<func>[\w<>.]+)')
# pytest's ``torch/_inductor/ir.py:12: in realize`` and ``ir.py:12: RuntimeError``; never a
# warning's location (``pgo.py:538: UserWarning: ...``): a warning is not the failure.
_PYTEST = re.compile(r"^(?P<path>[\w./\\-]+\.\w+):\d+: (?:in (?P<func>\w+)|(?!\w*Warning\b)\w)")
# A path-like word of a command or a log: has a slash or a source-file suffix.
_PATHLIKE = re.compile(r"^[\w.\-/]*(?:/[\w.\-]+|\.(?:py|pyi|cpp|cc|c|h|hpp|cu|cuh|yaml))$")
_TAG = re.compile(r"^\s*\[([^\]]+)\]")
_IGNORED = ("<", "site.py", "runpy.py")


@dataclass(frozen=True)
class Evidence:
    """What the failure names: files (oldest frame first, as a traceback lists them) and the
    functions of the frames in each file."""

    files: tuple[str, ...] = ()
    functions: dict[str, tuple[str, ...]] = field(default_factory=dict)  # file -> functions
    source: str = ""  # where it came from, for `show`
    raised: dict[str, tuple[str, ...]] = field(default_factory=dict)  # file -> raising frames

    def __bool__(self) -> bool:
        return bool(self.files)

    def summary(self) -> dict[str, object]:
        return {"files": list(self.files),
                "functions": sorted({f for fs in self.functions.values() for f in fs}),
                "raised": sorted({f for fs in self.raised.values() for f in fs}),
                "source": self.source}


@dataclass(frozen=True)
class Change:
    """What a candidate changed against the previous candidate: its paths, the functions its
    hunks in evidence files sit in (when they were read), its subject."""

    paths: tuple[str, ...] = ()
    functions: tuple[str, ...] = ()
    subject: str = ""


def _clean(path: str) -> str:
    return path[2:] if path.startswith("./") else path


def read_evidence(text: str, command: Sequence[str] = ()) -> Evidence:
    """The evidence in a failing run's output (its traceback) and a command oracle's words."""
    files: list[str] = []
    funcs: dict[str, list[str]] = {}
    raised: dict[str, list[str]] = {}
    last: tuple[str, str] | None = None  # the latest frame: where the exception was raised

    def add(path: str, func: str | None = None) -> None:
        path = path.replace("\\", "/")
        if not path or path.startswith(_IGNORED) or path.rsplit("/", 1)[-1] in _IGNORED:
            return
        if path in files:
            files.remove(path)  # the later mention wins: nearer the error
        files.append(path)
        if func and not func.startswith("<") and func not in funcs.setdefault(path, []):
            funcs[path].append(func)

    for line in text.splitlines():
        for m in _FRAME.finditer(line):
            add(m["path"], m["func"])
            last = (m["path"].replace("\\", "/"), m["func"])
        # A frame's source lines are indented; the exception's line that ends a traceback is
        # not, so the frame before it is where the exception was raised.
        if last and line[:1].strip() and not _FRAME.search(line) \
                and not line.startswith("Traceback"):
            path, func = last
            if path in funcs and func in funcs[path] and func not in raised.get(path, []):
                raised.setdefault(path, []).append(func)
            last = None
        m2 = _PYTEST.match(line.strip())
        if m2:
            add(m2["path"], m2["func"])
    exc = failure_line(text)
    if exc:  # torch._dynamo.exc.Unsupported: ... -> torch/_dynamo/exc.py
        name = exc.split(":", 1)[0].strip()
        parts = name.split(".")
        if len(parts) >= 3:
            add("/".join(parts[:-1]) + ".py")
    for word in command:
        word = word.split("::", 1)[0]
        if "=" in word and not word.startswith("/"):
            word = word.split("=", 1)[1]
        if _PATHLIKE.match(word) and not word.startswith("-"):
            add(_clean(word))
    source = "traceback" if any(_FRAME.search(ln) for ln in text.splitlines()) else (
        "output" if files and text else "command" if files else "")
    return Evidence(tuple(files), {k: tuple(v) for k, v in funcs.items()}, source,
                    {k: tuple(v) for k, v in raised.items()})


def same_file(a: str, b: str) -> bool:
    """Whether two paths name the same file: one is the other's trailing components, and the
    shorter has two components at least (``ir.py`` alone names too many files) unless the
    two are equal."""
    pa, pb = a.strip("/").split("/"), b.strip("/").split("/")
    if pa == pb:
        return True
    short, long_ = (pa, pb) if len(pa) <= len(pb) else (pb, pa)
    return len(short) >= 2 and long_[-len(short):] == short


def shared_tail(a: str, b: str) -> int:
    """How many trailing path components two paths share: an installed
    ``/venv/.../site-packages/black/parsing.py`` and a src-layout repository's
    ``src/black/parsing.py`` share two (neither is the other's tail, :func:`same_file` is
    false), which is how a traceback's frame is found in such a repository."""
    pa, pb = a.strip("/").split("/"), b.strip("/").split("/")
    k = 0
    while k < min(len(pa), len(pb)) and pa[-1 - k] == pb[-1 - k]:
        k += 1
    return k


def tag_of(subject: str) -> str | None:
    """``[inductor] fix ...`` -> ``inductor``."""
    m = _TAG.match(subject)
    return m.group(1).strip().lower() if m else None


def score(evidence: Evidence, change: Change) -> float:
    """How strongly the evidence points at one candidate (see the module's weighting)."""
    total = 0.0
    dirs_hit: set[str] = set()
    for f in evidence.files:
        hit = [p for p in change.paths if same_file(p, f)]
        if hit:
            total += FILE
            if set(evidence.functions.get(f, ())) & set(change.functions):
                total += FUNCTION
            if set(evidence.raised.get(f, ())) & set(change.functions):
                total += RAISED
            continue
        d = f.rsplit("/", 1)[0] if "/" in f else ""
        if d and d not in dirs_hit and any(
                "/" in p and same_file(p.rsplit("/", 1)[0], d) for p in change.paths):
            dirs_hit.add(d)
            total += DIRECTORY
    tag = tag_of(change.subject)
    if tag:
        words = {w.strip("_").lower() for f in evidence.files for w in f.split("/")[:-1]}
        if tag in words or tag.replace(" ", "_") in words:
            total += TAG
    return total


@dataclass(frozen=True)
class Prior:
    """P(culprit = c) for ``c`` in ``1..n-1``, piecewise constant.

    Segment ``i`` covers culprits ``start(i)..ends[i]``, each with weight ``per[i]``; ``cum[i]``
    is the mass of segments ``0..i``. Masses sum to 1 (up to rounding)."""

    n: int
    ends: tuple[int, ...]
    per: tuple[float, ...]
    matched: int = 0  # candidates the evidence points at (score > 0)
    weight: float = defaults.PRIOR_WEIGHT
    cum: tuple[float, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.ends or self.ends[-1] != self.n - 1:
            raise ValueError("a prior's segments must end at the bad endpoint")
        acc, out, start = 0.0, [], 1
        for end, w in zip(self.ends, self.per, strict=True):
            acc += (end - start + 1) * w
            out.append(acc)
            start = end + 1
        object.__setattr__(self, "cum", tuple(out))

    @classmethod
    def from_weights(cls, weights: Sequence[float], matched: int = 0,
                     weight: float = defaults.PRIOR_WEIGHT) -> Prior:
        """From one weight per culprit position ``1..n-1`` (``weights[0]`` is position 1),
        normalised here; equal neighbours share a segment."""
        total = math.fsum(weights)
        if not weights or total <= 0 or min(weights) < 0:
            raise ValueError("a prior needs positive weights")
        ends: list[int] = []
        per: list[float] = []
        for i, w in enumerate(weights, start=1):
            w /= total
            if per and per[-1] == w:
                ends[-1] = i
            else:
                ends.append(i)
                per.append(w)
        return cls(len(weights) + 1, tuple(ends), tuple(per), matched, weight)

    @classmethod
    def uniform(cls, n: int) -> Prior:
        return cls(n, (n - 1,), (1.0 / (n - 1),))

    def _start(self, i: int) -> int:
        return self.ends[i - 1] + 1 if i else 1

    def mass_upto(self, p: int) -> float:
        """P(c <= p): 0 at the good endpoint, the total at the bad one."""
        if p <= 0:
            return 0.0
        if p >= self.n - 1:
            return self.cum[-1]
        i = bisect_left(self.ends, p)
        before = self.cum[i - 1] if i else 0.0
        return before + (p - self._start(i) + 1) * self.per[i]

    def prob(self, c: int) -> float:
        if not 1 <= c <= self.n - 1:
            return 0.0
        return self.per[bisect_left(self.ends, c)] / self.cum[-1]

    def first_at_least(self, lo: int, hi: int, t: float) -> int:
        """The oldest ``p`` in ``lo..hi`` whose share of the window's mass,
        ``(M(p) - M(lo)) / (M(hi) - M(lo))``, reaches ``t``."""
        base, top = self.mass_upto(lo), self.mass_upto(hi)
        goal = base + t * (top - base)
        a, b = lo, hi
        while a < b:  # a monotone predicate over positions; O(log n) mass queries
            mid = (a + b) // 2
            if self.mass_upto(mid) >= goal:
                b = mid
            else:
                a = mid + 1
        return a

    def segments(self) -> list[tuple[int, float]]:
        """(end, per-element weight) pairs: what the noisy posterior starts from."""
        return list(zip(self.ends, self.per, strict=True))


def build(evidence: Evidence, changes: Sequence[Change],
          weight: float = defaults.PRIOR_WEIGHT) -> Prior | None:
    """The prior for candidates ``0..n-1`` (``changes[i]``: what position ``i`` changed;
    ``changes[0]``, the good endpoint, is ignored), or None when nothing matches."""
    if not 0.0 <= weight < 1.0:
        raise ValueError("the prior's weight must lie in [0, 1)")
    n = len(changes)
    if n < 3 or not evidence:
        return None
    scores = [score(evidence, c) for c in changes[1:]]
    total = math.fsum(scores)
    if total <= 0:
        return None
    base = (1.0 - weight) / (n - 1)
    return Prior.from_weights([base + weight * s / total for s in scores],
                              matched=sum(1 for s in scores if s > 0), weight=weight)


def probes_to(n: int, culprit: int, prior: Prior | None = None, width: int = 1,
              start: Mapping[int, Verdict] | None = None) -> int:
    """Probes a deterministic search makes to find ``culprit`` (endpoints included); with
    ``start`` (the stored verdicts and ``--skip`` marks a run began from), only the probes it
    adds to them: what a plain bisection would have paid with the same store."""
    known: dict[int, Verdict] = dict(start or {})
    while isinstance(step := next_step(n, known, width, prior=prior), Next):
        for p in step.positions:
            known[p] = Verdict.BAD if p >= culprit else Verdict.GOOD
    return len(known) - len(start or {})


def expected_probes(n: int, prior: Prior, width: int = 1,
                    points: int = 32) -> tuple[float, float]:
    """(plain bisection, with the prior): the mean probes of a deterministic search if the
    prior is right, over ``points`` culprits at equal steps of its mass (its quantiles)."""
    culprits = [prior.first_at_least(0, n - 1, (i + 0.5) / points) for i in range(points)]
    culprits = [min(n - 1, max(1, c)) for c in culprits]
    plain = math.fsum(probes_to(n, c, None, width) for c in culprits) / points
    weighted = math.fsum(probes_to(n, c, prior, width) for c in culprits) / points
    return plain, weighted
