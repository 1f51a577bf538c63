"""Nightlies past the index's listing, found at their direct URL.

PyTorch's nightly index lists only about the 60 newest nightlies, so a range a few months old
(v2.8.0 -> v2.9.1) finds none there and every probe would be a source build of an hour. The
older wheels usually stay downloadable where they were after they leave the listing. The
clone's ``nightly`` branch says which day's nightly was cut from which main commit
(:func:`bisector.project.history.nightlies`), and the wheel's name follows from that day: the base
version in the commit's own version file (``2.9.0a0`` -> ``2.9.0.devYYYYMMDD``), the variant,
and the Python and platform tags. One HEAD request per plausible name says whether it is there.

A wheel found so is then treated exactly as a listed one (:mod:`bisector.artifacts.prebuilt`
reads its ``git_version`` by range requests and follows it through the nightly branch), so a
date whose file a re-triggered nightly overwrote is still placed on the commit it was built
from, never on the one its date suggests. HEAD requests run a few at a time, are bounded per
discovery (dates are asked in an order that spreads a spent budget over the whole range), and
"not there" answers are remembered for the life of the process. Nothing here runs without a
nightly index (``--offline``, ``--nightly-index ''``).
"""

from __future__ import annotations

import re
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Generic, TypeVar
from urllib.parse import quote

import git
from packaging.tags import cpython_tags, platform_tags
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from bisector.artifacts.index import IndexClient, IndexFile
from bisector.project import history
from bisector.project.profiles import Profile

LISTED = "listed"
DIRECT = "direct URL"
HEAD_POOL = 8  # HEAD requests in flight at once: a small pool, polite to the index's host
MAX_HEADS = 600  # per discovery: about 150 pruned dates at 4 names each
MAX_TAGS = 4  # names tried per date; the first that answers 200 ends the date
FIRST_VERSION = re.compile(r"\d+(?:\.\d+)+(?:(?:a|b|rc)\d+)?")
DEFINITIVE = re.compile(r"HTTP (4\d\d)")

R = TypeVar("R")
T = TypeVar("T")


@dataclass(frozen=True)
class Wanted:
    """A nightly of the range that the listing does not name, and the names it may have."""

    day: str  # YYYY-MM-DD, from the nightly branch
    main: str  # the main commit the nightly branch says it was cut from
    position: int
    version: Version
    files: tuple[IndexFile, ...]  # in the order they are asked for


@dataclass(frozen=True)
class Hit(Generic[R]):
    """What the HEAD requests of one date found: the file that answered and what ``read``
    made of it, or why none did (``checked`` False: the budget ran out before this date)."""

    wanted: Wanted
    file: IndexFile | None
    found: R | None
    why: str = ""
    checked: bool = True


def base_version(repo: git.Repo, sha: str, profile: Profile) -> Version | None:
    """The release a commit's nightlies are versioned after: the first version number in the
    profile's version file without its pre-release part, as PyTorch's nightly build takes
    ``version.txt`` up to its ``a`` (``2.9.0a0`` -> ``2.9.0``)."""
    if not profile.base_version_file:
        return None
    try:
        text = str(repo.git.show(f"{sha}:{profile.base_version_file}"))
    except git.GitCommandError:
        return None
    m = FIRST_VERSION.search(text)
    if m is None:
        return None
    try:
        return Version(Version(m.group(0)).base_version)
    except InvalidVersion:
        return None


def tag_suffixes(picked: Iterable[IndexFile], python_tag: str, profile: Profile) -> list[str]:
    """``python-abi-platform`` parts worth a HEAD request, likeliest first: those of the
    listed nightlies this Python installs (newest first: the build image changes rarely), then
    the probed Python's own CPython tags on the profile's platforms, at most :data:`MAX_TAGS`.
    """
    out: list[str] = []
    for f in picked:
        suffix = "-".join(f.filename.removesuffix(".whl").split("-")[-3:])
        if suffix not in out:
            out.append(suffix)
    ver = (int(python_tag[2]), int(python_tag[3:]))
    mine = [t for t in cpython_tags(ver, abis=[python_tag], platforms=list(platform_tags()))
            if t.interpreter == python_tag and t.abi == python_tag]
    for pattern in profile.nightly_platforms:
        for t in mine:
            suffix = str(t)
            if fnmatchcase(t.platform, pattern) and suffix not in out:
                out.append(suffix)
    return out[:MAX_TAGS]


def file_url(name: str, *, index_url: str, listed: Sequence[IndexFile], profile: Profile,
             project: str) -> str:
    """Where a wheel of this index lies: next to the files the listing names (PyTorch's
    listing points at another host than the index's), else where the profile says."""
    wheels = [f for f in listed if f.filename.endswith(".whl")]
    if wheels:
        return f"{wheels[0].url.rsplit('/', 1)[0]}/{quote(name)}"
    return profile.nightly_file_url.format(index=index_url.rstrip("/"),
                                           project=canonicalize_name(project),
                                           filename=quote(name))


# Above ruff's limits on purpose: keywords only: the index, its listing and the range.
def wanted(repo: git.Repo, profile: Profile, *, index_url: str, listed: Sequence[IndexFile],  # noqa: PLR0913
           picked: Mapping[Version, IndexFile], python_tag: str, variant: str | None,
           position: Mapping[str, int], covered: set[int]) -> tuple[list[Wanted], list[str]]:
    """The nightlies of the candidates that the listing does not name (one per candidate not
    ``covered`` by a listed wheel, newest date first), and notes for the user."""
    dist = profile.distribution
    if not profile.base_version_file or not dist:
        return [], []
    days = history.nightlies(repo)
    if not days:
        return [], ["the clone has no nightly branch, so nightlies past the index listing "
                    "cannot be found: git fetch origin nightly:nightly"]
    listed_days = {m.group(1) for v in picked if (m := re.search(r"dev(\d{8})", str(v)))}
    newest = [picked[v] for v in sorted(picked, reverse=True)]
    suffixes = tag_suffixes(newest, python_tag, profile)
    stem = (newest[0].filename.split("-")[0] if newest
            else re.sub(r"[-_.]+", "_", dist))
    out: list[Wanted] = []
    taken = set(covered)
    for day, main in sorted(days.items(), reverse=True):
        pos = position.get(main)
        stamp = day.replace("-", "")
        if pos is None or pos in taken or stamp in listed_days:
            continue
        base = base_version(repo, main, profile)
        if base is None:
            continue
        version = Version(f"{base}.dev{stamp}" + (f"+{variant}" if variant else ""))
        names = [f"{stem}-{version}-{suffix}.whl" for suffix in suffixes]
        files = tuple(IndexFile(n, file_url(n, index_url=index_url, listed=newest or listed,
                                            profile=profile, project=dist), core_metadata=True)
                      for n in names)
        out.append(Wanted(day, main, pos, version, files))
        taken.add(pos)
    return spread(sorted(out, key=lambda w: w.position)), []


def spread(items: Sequence[T]) -> list[T]:
    """Middle first, then the middles of each half, and so on: when the HEAD budget runs out
    part way, the wheels found still cover the whole range, which is what a bisection uses."""
    out: list[T] = []
    todo = deque([(0, len(items))])
    while todo:
        lo, hi = todo.popleft()
        if lo < hi:
            mid = (lo + hi) // 2
            out.append(items[mid])
            todo.extend(((lo, mid), (mid + 1, hi)))
    return out


_ABSENT: dict[str, str] = {}  # url -> why: definite "not there" answers of this process
_ABSENT_LOCK = threading.Lock()


class Heads:
    """The HEAD requests of one discovery: at most ``budget`` sent, and every definite "not
    there" (a 4xx other than 429) kept for the process, since a pruned nightly stays pruned;
    a network error is not kept (it may pass)."""

    def __init__(self, client: IndexClient, budget: int = MAX_HEADS) -> None:
        self.client, self.budget, self.sent = client, budget, 0
        self._lock = threading.Lock()

    def ask(self, url: str) -> tuple[bool | None, str]:
        """(True, "") when the file is there; (False, why) when not; (None, why) unasked."""
        with _ABSENT_LOCK:
            known = _ABSENT.get(url)
        if known is not None:
            return False, known
        with self._lock:
            if self.sent >= self.budget:
                return None, f"not checked: {self.budget} HEAD requests were sent already"
            self.sent += 1
        ok, why = self.client.exists(url)
        m = DEFINITIVE.fullmatch(why)
        if not ok and m and m.group(1) != "429":
            with _ABSENT_LOCK:
                _ABSENT[url] = why
        return ok, why


def probe(client: IndexClient, want: Sequence[Wanted], read: Callable[[IndexFile, Wanted], R],
          budget: int = MAX_HEADS) -> tuple[list[Hit[R]], int]:
    """HEAD each date's names in order until one answers 200, then ``read`` that file (in
    the pool too: reading ``git_version`` is a few range requests); the hits in ``want``'s
    order and how many HEAD requests were sent."""
    heads = Heads(client, budget)

    def one(w: Wanted) -> Hit[R]:
        whys: list[str] = []
        for f in w.files:
            ok, why = heads.ask(f.url)
            if ok is None:
                return Hit(w, None, None, why, checked=False)
            if ok:
                return Hit(w, f, read(f, w))
            whys.append(why)
        return Hit(w, None, None, ", ".join(dict.fromkeys(whys)) or "no name to try")

    if not want:
        return [], 0
    with ThreadPoolExecutor(max_workers=HEAD_POOL, thread_name_prefix="nightly-head") as pool:
        hits = list(pool.map(one, want))
    return hits, heads.sent


def summary(hits: Sequence[Hit[R]], sent: int) -> list[str]:
    """One note on what looking past the listing found, and one if the budget ran out."""
    if not hits:
        return []
    found = sum(h.file is not None for h in hits)
    absent = sorted((h for h in hits if h.checked and h.file is None),
                    key=lambda h: h.wanted.day)
    unchecked = sum(not h.checked for h in hits)
    note = (f"{len(hits)} nightlies of the range are past the index listing: {found} found "
            f"at their direct URL, {len(absent)} not there ({sent} HEAD requests)")
    if absent:
        note += f"; the oldest not there: {absent[0].wanted.day} ({absent[0].why})"
    notes = [note]
    if unchecked:
        notes.append(f"{unchecked} of them were not checked: at most {MAX_HEADS} HEAD "
                     f"requests a discovery, spread over the range")
    return notes
