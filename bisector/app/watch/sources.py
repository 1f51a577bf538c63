"""The newest torch of a suite, as (version, main commit), and an environment to run it in.

Four sources, all mapped to the main-line commit a bisection would start from:

- ``nightly``: the highest ``.devYYYYMMDD`` version an index lists for the suite's Python and
  variant; its ``version.py`` says ``git_version`` (a commit of the ``nightly`` branch whose
  subject names the main commit, as in ``artifacts/prebuilt.py``). Only that one file is read,
  by range requests, and the mapping is kept in the store's prebuilt cache, so a tick with
  nothing new costs one index listing;
- ``release``: the highest final version; its commit is the tag the profile names (``v2.9.1``);
- ``installed``: the torch the suite's Python imports (its ``git_version``);
- ``wheel``: a wheel file (or the highest version among a glob's), its ``version.py`` read.

A wheel from an index is downloaded once into the content-addressed cache under the same key
the provider uses, so the bisection a flip starts finds it (and its environment) ready.

Builds are ordered by what they are, never by when a tick saw them: the main commit's place on
the main line (``position``: its ancestors, ``git rev-list --count``; ``precedes`` asks git
``merge-base --is-ancestor`` first), then the PEP 440 version (a nightly's date, local parts such
as ``+git1a2b3c4`` segment by segment). So among a glob's self-built wheels the newest commit
wins, whatever its hash says as text, and a nightly withdrawn from the index is older than the
one already judged, not new.
"""

from __future__ import annotations

import glob
import re
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path

import git
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import Version

from bisector.artifacts.build import python_tag
from bisector.artifacts.cache import wheel_file_key
from bisector.artifacts.index import IndexClient, IndexFile, IndexProblem
from bisector.artifacts.installable import Installable
from bisector.artifacts.obtained import Obtained, Recipe
from bisector.artifacts.prebuilt import GIT_VERSION, Prebuilt, pick_wheels
from bisector.base.errors import RepoError, UsageError
from bisector.base.events import Events
from bisector.executors.base import Executor
from bisector.executors.facts import collect_facts
from bisector.project import history
from bisector.project.profiles import Profile
from bisector.run.factory import env_executor, obtain_prebuilt
from bisector.run.policy import Policy
from bisector.store.artifacts import ArtifactStore
from bisector.store.db import Store
from bisector.store.watch import ResultRecord, parse_version


@dataclass(frozen=True)
class Torch:
    """One torch a suite can run: what it is, which main commit, where it comes from."""

    kind: str  # nightly | release | installed | wheel
    version: str
    commit: str
    source: str  # the wheel's URL or path, or the interpreter
    git_version: str | None = None
    wheel: Prebuilt | None = None  # from an index
    path: Path | None = None  # a local wheel file
    position: int | None = None  # the main commit's place on the main line (``position``)


@dataclass(frozen=True)
class Place:
    """Where a suite's torch comes from, resolved against its repository and profile."""

    kind: str
    repo: git.Repo
    profile: Profile
    python: str
    variant: str | None
    index: str | None = None
    wheel: str | None = None


def newest(store: Store, place: Place) -> Torch:
    """The newest torch of ``place`` (IndexProblem, UsageError or RepoError: one line)."""
    if place.kind == "installed":
        torch = _installed(place)
    elif place.kind == "wheel":
        return _wheel_file(place)
    else:
        torch = _from_index(store, place)
    return replace(torch, position=position(place.repo, torch.commit))


def position(repo: git.Repo, sha: str) -> int | None:
    """``sha``'s place on its line: how many commits it has (itself included), so a
    descendant always counts more than its ancestors (None: not in the clone)."""
    try:
        return int(str(repo.git.rev_list("--count", sha)).strip())
    except (git.GitCommandError, ValueError):
        return None


def _ancestor(repo: git.Repo, a: str, b: str) -> bool:
    try:
        repo.git.merge_base("--is-ancestor", a, b)
        return True
    except git.GitCommandError:
        return False


def precedes(repo: git.Repo, torch: Torch, judged: ResultRecord) -> bool:
    """Whether ``torch`` is an older build than ``judged`` (a nightly withdrawn from the index
    after a newer one was judged): its commit an ancestor of the judged one, or the same commit
    with a lower version; commits on no common line compare by position, then version."""
    other = judged.key.commit_sha
    if torch.commit == other:
        return parse_version(torch.version) < parse_version(judged.key.torch_version)
    if _ancestor(repo, torch.commit, other):
        return True
    if _ancestor(repo, other, torch.commit):
        return False
    return ((torch.position or -1, parse_version(torch.version))
            < (judged.position or -1, parse_version(judged.key.torch_version)))


def _from_index(store: Store, place: Place) -> Torch:
    dist = place.profile.distribution
    assert place.index is not None and dist is not None
    client = IndexClient(place.index)
    tag = python_tag(place.python)
    wheels = pick_wheels(client.files(dist), dist, tag, place.variant)
    nightly = place.kind == "nightly"
    fit = {v: f for v, f in wheels.items()
           if (v.is_devrelease if nightly else not v.is_prerelease)}
    if not fit:
        raise IndexProblem(f"{place.index} lists no {place.kind} {dist} wheel for {tag} "
                           f"{place.variant or '(no variant)'} on this platform: check the "
                           f"suite's index, variant and python")
    version, f = max(fit.items())
    arts = ArtifactStore(store)
    cached = arts.prebuilt_cache().get(f.url)
    if cached is not None and cached.get("commit"):
        pb = Prebuilt.from_json(cached)
    else:
        pb = _map(client, place, f, version)
        arts.remember_prebuilts([pb.to_json()])
    assert pb.commit is not None
    return Torch(place.kind, str(version), pb.commit, f.url, pb.git_version, wheel=pb)


def _map(client: IndexClient, place: Place, f: IndexFile, version: Version) -> Prebuilt:
    pb = Prebuilt(kind=place.kind, filename=f.filename, url=f.url, version=str(version),
                  sha256=f.hashes.get("sha256"))
    if place.kind == "release":
        tag = place.profile.release_tag.format(version=version.public)
        pb.commit = _rev(place.repo, tag, f"the tag {tag} of release {version} is not in "
                         f"{place.repo.working_dir}: git fetch --tags there")
        return pb
    member = place.profile.version_file or f"{place.profile.import_name}/version.py"
    text = client.read_member(f.url, lambda n: n == member).decode(errors="replace")
    pb.git_version = _git_version(text, f"{f.filename}'s {member}")
    pb.commit = main_commit(place.repo, pb.git_version, place.profile)
    return pb


def _git_version(text: str, what: str) -> str:
    m = GIT_VERSION.search(text)
    if not m or m.group(1) == "Unknown":
        raise UsageError(f"{what} carries no git_version: the watch cannot tell its commit; "
                         f"watch another torch")
    return m.group(1)


def _rev(repo: git.Repo, ref: str, problem: str) -> str:
    try:
        return str(repo.git.rev_parse("--verify", "--quiet", f"{ref}^{{commit}}")).strip()
    except git.GitCommandError:
        raise RepoError(problem) from None


def main_commit(repo: git.Repo, git_version: str, profile: Profile) -> str:
    """The main-line commit behind a ``git_version``: a nightly-branch commit names it in its
    subject (PyTorch's trigger-nightly action), anything else is that commit itself."""
    where = repo.working_dir
    full = _rev(repo, git_version, f"commit {git_version[:12]} is not in {where}: "
                f"git -C {where} fetch origin nightly main")
    subject = str(repo.git.show("-s", "--format=%s", full))
    m = re.search(profile.nightly_subject, subject)
    if m is None:
        return full
    return _rev(repo, m.group(1), f"main commit {m.group(1)[:12]} is not in {where}: "
                f"git -C {where} fetch origin main")


def _installed(place: Place) -> Torch:
    facts = collect_facts(place.python, place.profile.import_name, "installed")
    version = str(facts.get("package_version") or "")
    gv = str(facts.get("git_version") or "")
    if not version or not re.fullmatch(r"[0-9a-fA-F]{7,40}", gv):
        why = facts.get("package_error") or facts.get("facts_error") or "no git_version"
        raise UsageError(f"{place.python} has no usable {place.profile.import_name} "
                         f"({why}): install it there or fix the suite's python")
    return Torch("installed", version, main_commit(place.repo, gv, place.profile),
                 place.python, gv)


def _wheel_file(place: Place) -> Torch:
    """The newest of the wheels ``place.wheel`` names, by its commit (``precedes``'s order),
    not by its version string: ``+git<sha>`` local versions of self-built wheels sort by hash."""
    assert place.wheel is not None
    found: dict[Version, Path] = {}
    for name in glob.glob(place.wheel) or ([place.wheel] if Path(place.wheel).is_file()
                                            else []):
        try:
            found[parse_wheel_filename(Path(name).name)[1]] = Path(name)
        except InvalidWheelFilename:
            continue
    if not found:
        raise UsageError(f"wheel = {place.wheel!r} names no wheel file: fix the path or build "
                         f"the wheel first")
    torches: list[Torch] = []
    problems: list[UsageError | RepoError] = []
    for v, path in sorted(found.items()):
        try:
            torches.append(_one_wheel(place, v, path))
        except (UsageError, RepoError) as e:
            problems.append(e)  # another project's wheel in the glob: the others still count
    if not torches:
        raise problems[0]
    return max(torches, key=lambda t: (t.position or -1, parse_version(t.version)))


def _one_wheel(place: Place, v: Version, path: Path) -> Torch:
    member = place.profile.version_file or f"{place.profile.import_name}/version.py"
    try:
        with zipfile.ZipFile(path) as zf:
            text = zf.read(member).decode(errors="replace")
    except (OSError, KeyError, zipfile.BadZipFile) as e:
        raise UsageError(f"{path} has no readable {member} ({e}): give a wheel of the "
                         f"suite's project") from None
    gv = _git_version(text, f"{path.name}'s {member}")
    commit = main_commit(place.repo, gv, place.profile)
    return Torch("wheel", str(v), commit, str(path), gv, path=path,
                 position=position(place.repo, commit))


def environment(store: Store, torch: Torch, place: Place, events: Events | None = None, *,
                policy: Policy) -> tuple[Installable, Executor]:
    """What to install and who runs it: the system interpreter as it is for an installed
    torch, otherwise a uv virtualenv of the wheel. A nightly comes through the same chain of
    sources as a bisection's probe (``artifacts/sources.py``): the local cache, the team's
    object store, then the index (downloaded once, hash-checked, uploaded to the store),
    under the same artifact key, never built."""
    import_name = place.profile.import_name
    if torch.kind == "installed":
        return (Installable("system", f"installed torch of {place.python}"),
                env_executor(place.python, import_name, system=True))
    executor = env_executor(place.python, import_name)
    if torch.path is not None:
        key, digest = wheel_file_key(torch.path)
        return Installable(key, f"wheel {torch.path.name}", wheel=torch.path,
                           sha256=digest), executor
    assert torch.wheel is not None
    got = obtain_prebuilt(store, place.repo, torch.commit, torch.wheel,
                          Recipe(place.profile, place.python), events, policy=policy)
    if not isinstance(got, Obtained):
        raise IndexProblem(f"{torch.wheel.filename}: {got.reason}")
    return got.installable, executor


def open_repo(path: Path) -> git.Repo:
    """The suite's clone (RepoError, one line, when it is not a git repository)."""
    return history.open_repo(path)
