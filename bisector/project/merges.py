"""What a merge brings: the commits a first-parent walk stepped over, for the search inside it.

A first-parent walk of PyTorch's main answers a landed change; when that change is a merge (a
side branch of several commits landed at once) the commit inside it that did it is found by a
second search among the commits the merge brings, bounded by the merge's first parent (good)
and the merge itself (bad). Reads the object database only.
"""

from __future__ import annotations

from collections.abc import Sequence

import git

from bisector.project.history import merge_parents


def merge_brings(repo: git.Repo, merge: str) -> tuple[str, ...]:
    """The candidates of the search inside a merge: its first parent (good: the first-parent
    search said so), then every commit the merge brings (reachable from its other parents, not
    from its first) oldest first in topological order, then the merge itself (bad). Empty when
    ``merge`` is not a merge. ``M^1..M`` rather than ``M^1..M^2``: an octopus's every side is
    searched, and the merge comes last (every commit it brings is its ancestor)."""
    parents = merge_parents(repo, merge)
    if not parents:
        return ()
    out = str(repo.git.rev_list("--reverse", "--topo-order", merge, f"^{parents[0]}"))
    return (parents[0], *out.split())


def same_tree(repo: git.Repo, shas: Sequence[str], like: str) -> set[int]:
    """Indexes of ``shas`` whose tree is ``like``'s: the same files build and judge alike, so
    a commit inside a merge with the merge's own tree (a side branch that had already merged
    main, its last commit) gets the merge's verdict without a run of its own."""
    want = repo.commit(like).tree.hexsha
    return {i for i, sha in enumerate(shas) if repo.commit(sha).tree.hexsha == want}


def side_look(repo: git.Repo, merge: str) -> str | None:
    """The ``bisect start`` that searches a merge's second side on its own (the merge-base of
    its parents as good, the second parent as bad), or None for a commit that is no merge."""
    parents = merge_parents(repo, merge)
    if not parents:
        return None
    try:
        base = str(repo.git.merge_base(parents[0], parents[1])).split()
    except git.GitCommandError:
        base = []
    if not base:
        return None
    return f"bisect start --good {base[0][:12]} --bad {parents[1][:12]}"
