"""Prebuilt wheels mapped to commits: releases by tag, nightlies by their ``git_version``.

A release wheel ``torch==2.9.1`` is the commit the tag ``v2.9.1`` names. A nightly wheel
``torch-2.9.0.dev20250801+cu128`` carries ``git_version`` in ``torch/version.py``; for PyTorch
that is a commit of the ``nightly`` branch whose subject says which main commit it was cut
from, so we follow it. Only ``version.py`` is read (by range requests), never the whole wheel,
and each mapping is cached in the store, so the next bisection lists an index in one request.

A nightly past the index's retention window is detected here, before any probe: it is reported
as missing and never chosen, so the search cannot plan around a wheel it cannot download.
Nightlies the listing no longer names are looked for at their direct URL
(:mod:`bisector.artifacts.nightly_urls`) and, once found, mapped the same way.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import date
from email.parser import Parser

import git
from packaging.tags import Tag, compatible_tags, cpython_tags, platform_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from bisector.artifacts import nightly_urls
from bisector.artifacts.index import IndexClient, IndexFile, IndexProblem
from bisector.project.profiles import Profile

NIGHTLY_DATE = re.compile(r"\.dev(\d{8})")
GIT_VERSION = re.compile(r"""git_version\s*=\s*['"]([0-9a-fA-F]{7,40}|Unknown)['"]""")


@dataclass
class Prebuilt:
    """One wheel of the index and, when known, the main-line commit it was built from."""

    kind: str  # "release" | "nightly"
    filename: str
    url: str
    version: str
    sha256: str | None
    commit: str | None = None
    git_version: str | None = None
    requires: list[str] = field(default_factory=list)
    status: str = "ok"  # ok | missing | unmapped
    reason: str = ""
    # How it was found: named by the index's listing, or past it at its direct URL.
    source: str = nightly_urls.LISTED
    # Where the sha256 it is checked against comes from: the index, or (when the index gives
    # none, as PyTorch's nightly links do not) the download itself, which then proves nothing
    # beyond that the bytes arrived whole.
    sha256_from: str = ""

    def __post_init__(self) -> None:
        if not self.sha256_from:
            self.sha256_from = "index" if self.sha256 else "download"

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping[str, object]) -> Prebuilt:
        return cls(**d)  # type: ignore[arg-type]


def supported_tags(python_tag: str) -> set[Tag]:
    """Tags a CPython of ``python_tag`` (e.g. ``cp312``) on this platform installs."""
    ver = (int(python_tag[2]), int(python_tag[3:]))
    plats = list(platform_tags())
    return set(cpython_tags(ver, platforms=plats)) | set(
        compatible_tags(ver, interpreter=python_tag, platforms=plats)
    )


def pick_wheels(
    files: Iterable[IndexFile], distribution: str, python_tag: str, variant: str | None
) -> dict[Version, IndexFile]:
    """Per version, the wheel this Python and platform install, in the CUDA variant asked for."""
    want = canonicalize_name(distribution)
    tags = supported_tags(python_tag)
    out: dict[Version, IndexFile] = {}
    for f in files:
        if f.yanked or not f.filename.endswith(".whl"):
            continue
        try:
            name, version, _build, wtags = parse_wheel_filename(f.filename)
        except InvalidWheelFilename:
            continue
        if name != want or not (wtags & tags):
            continue
        if variant is not None and version.local not in (None, variant):
            continue
        if variant is None and version.local is not None:
            continue
        out[version] = f
    return out


def triton_requirement(repo: git.Repo, sha: str, profile: Profile, nightly: bool) -> str | None:
    """The Triton a commit pins: ``pytorch-triton==V+git<sha8>`` on main, ``triton==V`` else."""
    if len(profile.triton_pins) < 2 or not profile.triton_release_dist:
        return None
    try:
        pin = repo.git.show(f"{sha}:{profile.triton_pins[0]}").strip()
        ver = repo.git.show(f"{sha}:{profile.triton_pins[1]}").strip()
    except git.GitCommandError:
        return None
    if nightly and profile.triton_nightly_dist:
        return f"{profile.triton_nightly_dist}=={ver}+git{pin[:8]}"
    return f"{profile.triton_release_dist}=={ver}"


def triton_of(requires: Iterable[str]) -> str | None:
    """The Triton requirement among a wheel's ``Requires-Dist`` lines, markers dropped."""
    for req in requires:
        head = req.split(";")[0].strip()
        if re.match(r"(pytorch[-_])?triton\b", head):
            return head
    return None


def requires_dist(metadata: str) -> list[str]:
    return list(Parser().parsestr(metadata).get_all("Requires-Dist") or [])


@dataclass(frozen=True)
class Discovery:
    """What an index offers for a range: usable wheels by candidate position, and the rest."""

    by_position: dict[int, Prebuilt]
    missing: list[Prebuilt]
    unmapped: list[Prebuilt]
    fresh: list[Prebuilt]  # mappings learned now, for the store's cache
    notes: list[str] = field(default_factory=list)  # what looking past the listing found


class Discoverer:
    """Lists indexes and maps their wheels onto a candidate list."""

    def __init__(
        self,
        repo: git.Repo,
        profile: Profile,
        python_tag: str,
        variant: str | None,
        cached: Mapping[str, Prebuilt] | None = None,
        client_for: Callable[[str], IndexClient] = IndexClient,
        say: Callable[[str], None] = lambda text: None,
    ) -> None:
        self.repo, self.profile, self.python_tag, self.variant = repo, profile, python_tag, variant
        self.cached = dict(cached or {})
        self.client_for = client_for
        # Told before each step that waits on the network: a listing of a remote index, the
        # range reads of many wheels, hundreds of HEAD requests take seconds to minutes.
        self.say = say

    def discover(
        self, candidates: list[str], *, nightly_index: str | None, release_index: str | None,
        dates: tuple[date, date] | None = None,
    ) -> Discovery:
        position = {sha: i for i, sha in enumerate(candidates)}
        found: dict[int, Prebuilt] = {}
        missing: list[Prebuilt] = []
        unmapped: list[Prebuilt] = []
        fresh: list[Prebuilt] = []
        notes: list[str] = []
        dist = self.profile.distribution
        if not dist:
            return Discovery({}, [], [], [])
        for kind, url in (("release", release_index), ("nightly", nightly_index)):
            if not url:
                continue
            client = self.client_for(url)
            self.say(f"listing {dist} on the {kind} index {client.project_url(dist)}")
            listed = client.files(dist)
            wheels = pick_wheels(listed, dist, self.python_tag, self.variant)
            todo = [(v, f) for v, f in sorted(wheels.items()) if _wanted(kind, v, dates)]
            unread = sum(f.url not in self.cached for _, f in todo)
            if unread:
                self.say(f"reading the commit of {unread} {kind} wheel(s) not seen before "
                         f"(a few range requests each)")
            for version, f in todo:
                pb = self.cached.get(f.url)
                checked = pb is None  # a fresh mapping has just been HEAD-checked by _map
                if pb is None:
                    pb = self._map(client, kind, f, version)
                    if pb.commit is not None:
                        fresh.append(pb)
                if pb.status == "missing":
                    missing.append(pb)  # expired before we could even read its commit
                    continue
                if pb.commit is None:
                    unmapped.append(pb)
                    continue
                pos = position.get(pb.commit)
                if pos is None:
                    continue
                if not checked:
                    ok, why = client.exists(f.url)
                    if not ok:
                        pb.status, pb.reason = "missing", f"{why}: expired from the index"
                        missing.append(pb)
                        continue
                pb.status, pb.reason, pb.source = "ok", "", nightly_urls.LISTED
                if not pb.requires:
                    pb.requires = requires_dist(client.metadata(f))
                # A release and a nightly of one commit: either serves; keep the first found.
                found.setdefault(pos, pb)
            if kind == "nightly":
                notes += self._past_listing(client, listed, wheels, position, found, unmapped,
                                            fresh)
        return Discovery(found, missing, unmapped, fresh, notes)

    def _past_listing(self, client: IndexClient, listed: list[IndexFile],
                      wheels: dict[Version, IndexFile], position: Mapping[str, int],
                      found: dict[int, Prebuilt], unmapped: list[Prebuilt],
                      fresh: list[Prebuilt]) -> list[str]:
        """The range's nightlies the listing no longer names, at their direct URL, placed as
        listed ones are (their own ``git_version`` decides the commit)."""
        want, notes = nightly_urls.wanted(
            self.repo, self.profile, index_url=client.base_url, listed=listed, picked=wheels,
            python_tag=self.python_tag, variant=self.variant, position=position,
            covered=set(found))
        if want:
            self.say(f"looking for {len(want)} nightlies of the range past the index listing "
                     f"(HEAD requests at their direct URL)")
        hits, sent = nightly_urls.probe(
            client, want, lambda f, w: self._read_direct(client, f, w.version))
        for hit in hits:
            pb = hit.found
            if pb is None:
                continue
            if pb.commit is None and pb.git_version and pb.status == "ok":
                pb.commit = self._main_commit(pb)  # git, in this thread
                if pb.commit is not None:
                    fresh.append(pb)
            if pb.commit is None:
                unmapped.append(pb)
                continue
            pos = position.get(pb.commit)
            if pos is not None:
                found.setdefault(pos, pb)
        return notes + nightly_urls.summary(hits, sent)

    def _read_direct(self, client: IndexClient, f: IndexFile, version: Version) -> Prebuilt:
        """A wheel that answered HEAD at its direct URL: its mapping from the store's cache,
        else its ``git_version`` (range requests), and its requirements. Runs in the HEAD
        pool, so it touches HTTP only."""
        pb = self.cached.get(f.url)
        if pb is None or pb.commit is None:
            pb = Prebuilt(kind="nightly", filename=f.filename, url=f.url,
                          version=str(version), sha256=None, source=nightly_urls.DIRECT)
            self._read_git_version(client, pb)
        else:
            pb.status, pb.reason = "ok", ""
        # Only the recorded Triton pin needs them; the wheel's own dependencies still install.
        if pb.status == "ok" and not pb.requires:
            import httpx  # lazy: only once an index is asked (a tenth of a second to import)

            with contextlib.suppress(IndexProblem, httpx.HTTPError):
                pb.requires = requires_dist(client.metadata(f))
        return pb

    def _map(self, client: IndexClient, kind: str, f: IndexFile, version: Version) -> Prebuilt:
        pb = Prebuilt(kind=kind, filename=f.filename, url=f.url, version=str(version),
                      sha256=f.hashes.get("sha256"))
        ok, why = client.exists(f.url)
        if not ok:
            pb.status, pb.reason = "missing", f"{why}: expired from the index"
            return pb
        if kind == "release":
            tag = self.profile.release_tag.format(version=version.public)
            try:
                pb.commit = str(self.repo.git.rev_parse("--verify", "--quiet",
                                                        f"{tag}^{{commit}}")).strip()
            except git.GitCommandError:
                pb.status, pb.reason = "unmapped", f"no tag {tag} in the repository"
            return pb
        self._read_git_version(client, pb)
        if pb.git_version:
            pb.commit = self._main_commit(pb)
        return pb

    def _read_git_version(self, client: IndexClient, pb: Prebuilt) -> None:
        """The wheel's own ``git_version`` (a few range requests), or why it has none."""
        member = self.profile.version_file or f"{self.profile.import_name}/version.py"
        try:
            text = client.read_member(pb.url, lambda n: n == member).decode(errors="replace")
        except IndexProblem as e:
            pb.status, pb.reason = "unmapped", e.message
            return
        m = GIT_VERSION.search(text)
        if not m or m.group(1) == "Unknown":
            pb.status, pb.reason = "unmapped", f"{member} carries no git_version"
            return
        pb.git_version = m.group(1)

    def _main_commit(self, pb: Prebuilt) -> str | None:
        sha = pb.git_version or ""
        try:
            full = str(self.repo.git.rev_parse("--verify", "--quiet", f"{sha}^{{commit}}")).strip()
        except git.GitCommandError:
            pb.status = "unmapped"
            pb.reason = (f"commit {sha[:12]} is not in the repository: "
                         f"git fetch origin nightly (and main) first")
            return None
        subject = str(self.repo.git.show("-s", "--format=%s", full))
        m = re.search(self.profile.nightly_subject, subject)
        if m is None:
            return full  # built straight from a main-line commit
        try:
            return str(self.repo.git.rev_parse("--verify", "--quiet",
                                               f"{m.group(1)}^{{commit}}")).strip()
        except git.GitCommandError:
            pb.status = "unmapped"
            pb.reason = f"main commit {m.group(1)[:12]} is not in the repository: git fetch"
            return None


def _wanted(kind: str, version: Version, dates: tuple[date, date] | None) -> bool:
    """A nightly is a dev release near the range's dates; a release is a final one."""
    if kind == "nightly":
        return version.is_devrelease and not (dates and not _date_near(version, dates))
    return not version.is_prerelease


def _date_near(version: Version, dates: tuple[date, date]) -> bool:
    """Nightlies are dated; skip reading those far outside the range's commit dates."""
    m = NIGHTLY_DATE.search(str(version))
    if not m:
        return True
    d = date(int(m.group(1)[:4]), int(m.group(1)[4:6]), int(m.group(1)[6:]))
    return (dates[0] - d).days <= 3 and (d - dates[1]).days <= 3
