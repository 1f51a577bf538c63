"""Walk a repository's history with GitPython: resolve refs and list the candidate commits.

Release tags of PyTorch sit on release branches, not on main. When good is not an ancestor of
bad we do what ``git bisect`` does: test their merge-base as the good endpoint and tell the user,
listing the commits only the good side has (cherry-picks among them are marked), because a fix
that reached the release branch only as a cherry-pick is invisible to the main-line search.

The user's working tree is never touched: everything here reads the object database.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import git

from bisector.base import escape
from bisector.base.errors import RepoError
from bisector.project.pr import pr_of


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    subject: str
    author: str
    author_email: str
    date: str
    pr_number: int | None
    pr_url: str | None


@dataclass(frozen=True)
class Range:
    """The search space: ``candidates[0]`` is the good endpoint, ``candidates[-1]`` the bad one."""

    good_ref: str
    bad_ref: str
    good_sha: str
    bad_sha: str
    candidates: tuple[str, ...]
    merge_base_used: bool
    notes: tuple[str, ...] = field(default=())

    @property
    def effective_good(self) -> str:
        return self.candidates[0]


def open_repo(path: str | Path) -> git.Repo:
    p = Path(path).expanduser()
    if not p.exists():
        raise RepoError(f"{p} does not exist: pass --repo with the path of a git clone")
    try:
        return git.Repo(p, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise RepoError(
            f"{p} is not a git repository: pass --repo with the path of a git clone"
        ) from None


# ``2025-01-10``, ``nightly:2025-01-10`` or ``nightly:2.9.0.dev20250110``: a nightly by date.
DATE_REF = re.compile(r"^(?:nightly:)?(\d{4})-(\d{2})-(\d{2})$")
NIGHTLY_VERSION_REF = re.compile(r"^nightly:(?:[0-9][0-9.]*\.)?dev(\d{4})(\d{2})(\d{2})"
                                 r"(?:\+[A-Za-z0-9.]+)?$")
# PyTorch's trigger-nightly action: one commit a day on ``nightly``, cut from a main commit.
NIGHTLY_LINE = re.compile(r"^(\d{4}-\d{2}-\d{2}) nightly release \(([0-9a-fA-F]{40})\)")
NIGHTLY_BRANCHES = ("nightly", "origin/nightly", "upstream/nightly")


def nightly_date(ref: str) -> str | None:
    """The ``YYYY-MM-DD`` a date or ``nightly:`` ref names, else None (an ordinary ref)."""
    m = DATE_REF.match(ref) or NIGHTLY_VERSION_REF.match(ref)
    return "-".join(m.groups()) if m else None


def nightlies(repo: git.Repo) -> dict[str, str]:
    """Date -> the main-line commit that day's nightly was cut from, read from the first
    nightly branch the clone has (subjects ``YYYY-MM-DD nightly release (<sha>)``)."""
    for branch in NIGHTLY_BRANCHES:
        try:
            out = str(repo.git.log("--first-parent", "--format=%s", branch, "--"))
        except git.GitCommandError:
            continue
        found: dict[str, str] = {}
        for line in out.splitlines():
            m = NIGHTLY_LINE.match(line)
            if m:
                found.setdefault(m.group(1), m.group(2))
        return found
    return {}


def resolve_nightly(repo: git.Repo, day: str, ref: str, role: str) -> str:
    """The main-line commit of the nightly of ``day``, named by ``ref`` (a date or a nightly
    version), with a one-line error naming the nearest dates that do exist."""
    dates = nightlies(repo)
    if not dates and not ref.startswith("nightly:"):
        return day_commit(repo, day, ref, role)
    if not dates:
        raise RepoError(f"--{role} {ref}: the clone has no nightly branch to find that date "
                        f"in; git fetch origin nightly:nightly (or give a tag or sha)")
    sha = dates.get(day)
    if sha is None:
        before = max((d for d in dates if d < day), default=None)
        after = min((d for d in dates if d > day), default=None)
        near = " and ".join(x for x in (before, after) if x) or "none"
        raise RepoError(f"--{role} {ref}: no nightly of {day} on the nightly branch (nearest: "
                        f"{near}); pick one of those dates, or git fetch origin nightly")
    return resolve(repo, sha, role)


def day_commit(repo: git.Repo, day: str, ref: str, role: str) -> str:
    """A project without nightlies: the state of its main line at the end of ``day`` (UTC),
    the newest first-parent commit of HEAD committed by then, as ``git bisect`` users write
    ``git rev-list -1 --first-parent --before=DAY HEAD``."""
    try:
        out = str(repo.git.rev_list("-1", "--first-parent", f"--before={day}T23:59:59Z",
                                    "HEAD", "--")).strip()
    except git.GitCommandError:
        out = ""
    if not out:
        raise RepoError(f"--{role} {ref}: HEAD has no commit on or before {day}: give a later "
                        f"date, or a tag or sha")
    return out


def resolve(repo: git.Repo, ref: str, role: str) -> str:
    """Full sha of a tag, branch, or (abbreviated) sha; peels annotated tags to the commit.
    A date (``2025-01-10``) or ``nightly:VERSION`` is the main commit of that day's nightly."""
    if not ref or ref.startswith("-"):
        raise RepoError(f"--{role} {ref!r} is not a ref: give a tag, branch or commit sha")
    if (day := nightly_date(ref)) is not None:
        return resolve_nightly(repo, day, ref, role)
    try:
        return str(repo.git.rev_parse("--verify", "--quiet", f"{ref}^{{commit}}")).strip()
    except git.GitCommandError:
        raise RepoError(
            f"unknown {role} ref {ref!r} in {repo.working_dir}: "
            f"check the name (git tag -l, git branch -a) or fetch it first"
        ) from None


def is_ancestor(repo: git.Repo, a: str, b: str) -> bool:
    """Is ``a`` an ancestor of ``b`` (or ``b`` itself)? A git failure other than "no" is
    raised."""
    try:
        repo.git.merge_base("--is-ancestor", a, b)
        return True
    except git.GitCommandError as e:
        if e.status == 1:
            return False
        raise


def _rev_list(repo: git.Repo, *args: str) -> list[str]:
    out = str(repo.git.rev_list(*args))
    return out.split() if out else []


def resolve_range(
    repo: git.Repo, good_ref: str, bad_ref: str, *, first_parent: bool = True,
    find_fix: bool = False,
) -> Range:
    """Resolve both refs and list the candidates oldest to newest.

    First-parent by default because that is how artifacts are produced on PyTorch's main: every
    first-parent commit is a landed PR with its own CI build and nightly lineage; commits inside
    merged side branches were never built as such. ``first_parent=False`` gives
    ``--ancestry-path`` in topological order.
    """
    good = resolve(repo, good_ref, "good")
    bad = resolve(repo, bad_ref, "bad")
    dated: list[str] = []
    if nightly_date(good_ref) or nightly_date(bad_ref):
        cut = "is the nightly of {}, cut from" if nightlies(repo) else \
            "is the last first-parent commit of HEAD on {} (UTC; no nightly branch here):"
        dated = [f"--{role} {ref} {cut.format(nightly_date(ref))} {sha[:12]}"
                 for role, ref, sha in (("good", good_ref, good), ("bad", bad_ref, bad))
                 if nightly_date(ref) is not None]
    if good == bad:
        raise RepoError(
            f"good and bad are the same commit ({good[:12]}): "
            f"give a good ref older than the bad one"
        )
    notes: list[str] = [*dated, *replacement_note(repo)]
    walk = ["--reverse", *(["--first-parent"] if first_parent else
                           ["--ancestry-path", "--topo-order"])]
    # The common case (good an ancestor of bad) costs one walk of the history: the list
    # itself, whose oldest commit has good as its parent. Asking git first whether good is an
    # ancestor would walk the whole range a second time (without a commit-graph, as long as
    # the list); only when the list does not prove it does the release-branch case pay for
    # the ancestry checks, the merge-base and a second list.
    chain = _rev_list(repo, *walk, bad, f"^{good}")
    lower, merge_base_used = good, False
    if not (chain and _starts_at(repo, chain[0], good, first_parent)) and \
            not is_ancestor(repo, good, bad):
        lower, more = _merge_base_side(repo, good_ref, bad_ref, good, bad, find_fix)
        merge_base_used = True
        notes += more
        chain = _rev_list(repo, *walk, bad, f"^{lower}")
    if not chain or chain[-1] != bad:
        raise RepoError(
            f"no commits between {good_ref} and {bad_ref} on the chosen path: "
            f"try without --first-parent or check the refs"
        )
    return Range(
        good_ref=good_ref,
        bad_ref=bad_ref,
        good_sha=good,
        bad_sha=bad,
        candidates=(lower, *chain),
        merge_base_used=merge_base_used,
        notes=tuple(notes),
    )


def replacement_note(repo: git.Repo) -> list[str]:
    """A line when the clone has ``refs/replace/*``: bisector never honours them (git, which
    bisector runs with ``GIT_NO_REPLACE_OBJECTS``, would probe another commit's tree under a
    sha), so the user learns why this answer may differ from a plain ``git bisect``'s."""
    refs = str(repo.git.for_each_ref("--format=%(refname)", "refs/replace/")).split()
    if not refs:
        return []
    one = escape.line(refs[0].removeprefix("refs/replace/")[:12])
    more = f" and {len(refs) - 1} more" if len(refs) > 1 else ""
    return [f"the clone has replace refs ({one}{more}; git replace -l lists them): ignored, "
            f"each commit is probed with its own tree (git bisect would honour them)"]


def _starts_at(repo: git.Repo, oldest: str, good: str, first_parent: bool) -> bool:
    """Whether the oldest commit of a walk stands on ``good`` (its first parent, or any
    parent on the ancestry path): then good is an ancestor of bad, proven by one
    ``rev-parse`` instead of a second walk."""
    try:
        parents = str(repo.git.rev_parse(f"{oldest}^@")).split()
    except git.GitCommandError:
        return False
    return (parents[:1] == [good]) if first_parent else good in parents


def _merge_base_side(repo: git.Repo, good_ref: str, bad_ref: str, good: str, bad: str,
                     find_fix: bool = False) -> tuple[str, list[str]]:
    """Good is not an ancestor of bad (a release tag on its release branch): their
    merge-base, tested as the good endpoint as ``git bisect`` does, and notes on what only
    the good side has. Refused when bad is the ancestor (a fix hunt) or nothing is shared."""
    if is_ancestor(repo, bad, good) and find_fix:
        raise RepoError(
            f"--bad {bad_ref} ({bad[:12]}) is older than --good {good_ref} ({good[:12]}): with "
            f"--find-fix, --good is the older, broken ref and --bad the newer, fixed one: "
            f"swap them")
    if is_ancestor(repo, bad, good):
        raise RepoError(
            f"bad {bad_ref} ({bad[:12]}) is an ancestor of good {good_ref} ({good[:12]}): "
            f"if the newer commit is the good one you are looking for a fix; "
            f"swap the refs and pass --find-fix"
        )
    bases = _safe_merge_bases(repo, good, bad)
    if not bases:
        raise RepoError(
            f"{good_ref} and {bad_ref} share no history (unrelated histories): "
            f"pick two refs of the same project"
        )
    base = bases[0]
    only_good = _rev_list(repo, f"{base}..{good}")
    picks = _cherry_picked(repo, bad, good)
    notes = [
        f"good {good_ref} ({good[:12]}) is not an ancestor of bad {bad_ref} ({bad[:12]}), "
        f"as with release tags on release branches; testing their merge-base "
        f"{base[:12]} as the good endpoint, as git bisect does"
    ]
    if only_good:
        notes.append(
            f"{len(only_good)} commit(s) exist only on the good side "
            f"({len(picks)} of them cherry-picked onto the bad side too); "
            f"a fix that exists only there is not searched"
        )
    return base, notes


def _safe_merge_bases(repo: git.Repo, a: str, b: str) -> list[str]:
    try:
        return str(repo.git.merge_base("--all", a, b)).split()
    except git.GitCommandError as e:
        if e.status == 1:
            return []
        raise


def _cherry_picked(repo: git.Repo, upstream: str, head: str) -> list[str]:
    """Commits of ``head`` whose patch already exists on ``upstream`` (git cherry's '-')."""
    out = str(repo.git.cherry(upstream, head))
    return [line[2:] for line in out.splitlines() if line.startswith("- ")]


def merge_parents(repo: git.Repo, sha: str) -> list[str]:
    """The parents of ``sha`` when it is a merge, else ``[]``."""
    parents = [p.hexsha for p in repo.commit(sha).parents]
    return parents if len(parents) > 1 else []


def unwalked_side(repo: git.Repo, culprit: str,
                  walked: Callable[[], set[str]]) -> str | None:
    """A note when the culprit is a merge with a parent outside the walk (``--ancestry-path``
    keeps only descendants of good, so a merge from a side that never had good is the first
    bad commit of the walk while the change was made on that side, never tested), with the
    bisection that would look there; None otherwise. ``walked`` (the candidates) is asked
    only for a merge: a report page asks this often."""
    try:
        parents = merge_parents(repo, culprit)
        walked_ = walked() if parents else set()
        outside = [p for p in parents if p not in walked_]
        if not outside:
            return None
        side, inside = outside[0], [p for p in parents if p in walked_]
        bases = _safe_merge_bases(repo, side, inside[0]) if inside else []
    except (ValueError, git.BadName, git.GitCommandError):  # a clone made shallow since
        return None
    look = f"bisect start --good {bases[0][:12]} --bad {side[:12]}" if bases else \
        f"a bisection ending at --bad {side[:12]}"
    return (f"the culprit {culprit[:12]} is a merge whose parent {side[:12]} is not in the "
            f"walk (not a descendant of --good): the change may have been made on that side, "
            f"which this bisection never tested (its confirmation ran the parent in the "
            f"walk); to look there: {look}")


def printable(text: str) -> str:
    """One line from a repository with control characters (terminal escapes, bells, newlines)
    made visible: a commit subject can never drive the user's terminal."""
    return escape.line(text)


def commit_info(repo: git.Repo, sha: str) -> CommitInfo:
    c = repo.commit(sha)
    message = str(c.message)
    subject = message.splitlines()[0] if message else ""
    pr_number, pr_url = pr_of(message)
    return CommitInfo(
        sha=c.hexsha,
        subject=printable(subject),
        author=printable(str(c.author.name)),
        author_email=printable(str(c.author.email)),
        date=c.authored_datetime.isoformat(),
        pr_number=pr_number,
        pr_url=pr_url,
    )


# The forms of a GitHub remote: https (credentials allowed), ssh://, git:// and scp-like.
_GITHUB_REMOTE = re.compile(
    r"(?:(?:https?|ssh|git)://(?:[^@/\s]+@)?github\.com(?::\d+)?/|(?:[\w.-]+@)?github\.com:)"
    r"(?P<owner>[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)/(?P<name>[A-Za-z0-9_.-]+?)"
    r"(?:\.git)?/?", re.IGNORECASE)


def github_slug(repo: git.Repo) -> str | None:
    """owner/name of the ``origin`` remote when it is a repository on github.com, for links
    in reports. The whole URL must match: ``https://evil.example/github.com/a/b`` is not
    GitHub, and the name is restricted to what GitHub allows, so a slug can go into a URL or
    a Markdown link as it is."""
    try:
        url = repo.remotes.origin.url
    except (AttributeError, ValueError):
        return None
    m = _GITHUB_REMOTE.fullmatch(url.strip())
    if m is None or m.group("name") in (".", ".."):
        return None
    return f"{m.group('owner')}/{m.group('name')}"


def pr_link(slug: str | None, number: int | None, claimed: str | None) -> str | None:
    """The pull request's link, only on the repository's own forge: a commit message's
    trailer may name any host (``Pull Request resolved: https://evil.example/pull/1``) or
    another repository; then there is no link, the number stays as text."""
    if not slug or number is None:
        return None
    own = f"https://github.com/{slug}/pull/{number}"
    if claimed is not None and claimed.rstrip("/").lower() != own.lower():
        return None
    return own
