"""Generate a synthetic, torch-like project history with a planted regression.

The project ("torchlet") has what makes PyTorch bisection hard in miniature: a compiled ``_C``
extension, a ``version.py`` carrying ``git_version`` that the build fills in, Python
submodules, release tags on release branches (one with a cherry-pick), a merged side branch that
first-parent walking must step over, commits whose build fails, and one commit that plants a
regression in Python (or, for artifact tests, in C). The demo, the integration tests and the
benchmark all use this one generator, so what the demo shows is what the tests check.

History is written with ``git fast-import``: 200 commits take well under a second and the
100k-commit benchmark history a few seconds.
"""

from __future__ import annotations

import random
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from bisector.app.demo.torchlet_files import (
    AREAS,
    AUTHORS,
    BENCH_PY,
    BROKEN_MARK,
    C_BAD_LOOP,
    C_GOOD_LOOP,
    C_SOURCE,
    EPOCH,
    IMPORT_BREAK,
    INIT_PY,
    NN_FUNCTIONAL,
    NN_INIT,
    OPS_BAD,
    OPS_GOOD,
    OPS_PY,
    PACE_FAST_S,
    PACE_PY,
    PACE_SLOW_S,
    PYPROJECT,
    SETUP_PY,
    UTILS_PY,
    VERSION_PY,
)


@dataclass
class SyntheticHistory:
    """What was generated, so tests know the right answer without bisecting."""

    path: Path
    main: list[str]  # first-parent chain of main, oldest first
    culprit: str
    fix: str | None = None
    broken: set[str] = field(default_factory=set)
    side: list[str] = field(default_factory=list)  # commits of the merged side branch
    tags: dict[str, str] = field(default_factory=dict)  # tag -> commit it points at
    # (nightly-branch commit, main commit it was cut from, YYYYMMDD), oldest first
    nightlies: list[tuple[str, str, str]] = field(default_factory=list)


class _Stream:
    """Builds a fast-import stream; marks are 1-based commit counters."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.mark = 0
        self.clock = EPOCH

    def _data(self, text: str) -> None:
        raw = text.encode()
        self.parts.append(b"data %d\n" % len(raw) + raw + b"\n")

    def commit(
        self,
        ref: str,
        message: str,
        files: dict[str, str],
        author: tuple[str, str],
        parent: int | None,
        merge: int | None = None,
        deleted: tuple[str, ...] = (),
    ) -> int:
        self.mark += 1
        self.clock += 4 * 3600  # nightlies (daily) then fall every few commits, as PyTorch's
        name, email = author
        head = (
            f"commit {ref}\nmark :{self.mark}\n"
            f"author {name} <{email}> {self.clock} +0000\n"
            f"committer {name} <{email}> {self.clock} +0000\n"
        )
        self.parts.append(head.encode())
        self._data(message)
        if parent is not None:
            self.parts.append(f"from :{parent}\n".encode())
        if merge is not None:
            self.parts.append(f"merge :{merge}\n".encode())
        for path in deleted:
            self.parts.append(f"D {path}\n".encode())
        for path, content in files.items():
            self.parts.append(f"M 100644 inline {path}\n".encode())
            self._data(content)
        return self.mark

    def tag(self, name: str, mark: int, message: str) -> None:
        self.clock += 60
        self.parts.append(
            f"tag {name}\nfrom :{mark}\ntagger Release Bot <release@example.com> "
            f"{self.clock} +0000\n".encode()
        )
        self._data(message)


def _message(rng: random.Random, subject: str, pr: int) -> str:
    area = rng.choice(AREAS)
    return (
        f"[{area}] {subject} (#{pr})\n\n"
        f"Summary of the change.\n\n"
        f"Pull Request resolved: https://github.com/pytorch/pytorch/pull/{pr}\n"
        f"Approved by: https://github.com/reviewer\n"
    )


def _run_fast_import(path: Path, stream: _Stream) -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    subprocess.run(
        ["git", "-C", str(path), "fast-import", "--quiet", "--force"],
        input=b"".join(stream.parts),
        check=True,
    )
    subprocess.run(["git", "-C", str(path), "checkout", "-q", "-f", "main"], check=True)


# Above ruff's limits on purpose: the synthetic history's knobs and its commits in order, read top
# to bottom.
def generate(  # noqa: C901, PLR0912, PLR0913, PLR0915
    path: Path,
    *,
    commits: int = 240,
    culprit: int = 157,
    broken: tuple[int, ...] = (60, 61, 151),
    regression_in: str = "python",
    release_at: tuple[int, int] | None = (20, 230),
    side_branch_at: int | None = 100,
    fixed_at: int | None = None,
    seed: int = 170398,
    nightly_every: int | None = None,
    c_churn: tuple[int, ...] = (),
    triton_bump_at: int | None = None,
    delete_at: int | None = None,
    culprit_subject: str = "Simplify the norm computation",
    slow_at: int | None = None,
    broken_import: tuple[int, int] | None = None,
    benchmark: bool = False,
) -> SyntheticHistory:
    """Write a history of ``commits`` first-parent commits on main into ``path``.

    ``culprit`` (index on main) plants the regression; each index in ``broken`` makes a commit
    whose build fails (fixed by the next commit unless that one is listed too). With
    ``release_at=(a, b)`` the release branches ``release/0.1`` (tag ``v0.1.0``) and
    ``release/0.2`` (tag ``v0.2.0``) fork from main at those indices, as PyTorch's do.

    ``nightly_every=k`` cuts a ``nightly`` branch the way PyTorch's trigger-nightly action
    does: every k-th main commit gets a nightly commit with the same tree, the previous nightly
    as parent, and the subject ``YYYY-MM-DD nightly release (<main sha>)``. ``c_churn`` commits
    change the C source harmlessly (they need a source build, never an overlay);
    ``triton_bump_at`` changes the Triton pin files. ``slow_at`` plants a slowdown for
    performance oracles: ``torchlet._pace.work()`` sleeps 20 ms up to that commit and 60 ms
    from it on (the module exists only in histories that ask for it, so others keep their
    commits); with ``benchmark`` PyTorch's benchmark script times it (``--from-report``).
    ``broken_import=(a, b)``: from commit a to b (excluded) importing
    ``torchlet.nn.functional`` raises a SyntaxError (the package itself still imports).
    """
    if not 0 < culprit < commits:
        raise ValueError("culprit must be an index inside the history, after the root")
    if culprit in broken:
        raise ValueError("the culprit commit must build")
    rng = random.Random(seed)
    s = _Stream()
    files = {
        "pyproject.toml": PYPROJECT,
        "setup.py": SETUP_PY,
        "README.md": "# torchlet\n\nA synthetic project for bisector's demo and tests.\n",
        "csrc/_C.c": C_SOURCE.replace("@LOOP@", C_GOOD_LOOP),
        "torchlet/__init__.py": INIT_PY,
        "torchlet/version.py": VERSION_PY,
        "torchlet/ops.py": OPS_PY.replace("@NORM@", OPS_GOOD),
        "torchlet/utils.py": UTILS_PY,
        "torchlet/nn/__init__.py": NN_INIT,
        "torchlet/nn/functional.py": NN_FUNCTIONAL,
        "ci/triton.txt": "5f40dc89506d67ab8e7aa2b7c8cf1351f8b22f31\n",
        "ci/triton_version.txt": "3.4.0\n",
    }
    if slow_at is not None:
        files["torchlet/_pace.py"] = PACE_PY.format(delay=PACE_FAST_S)
        if benchmark:  # PyTorch's benchmark script's command line and CSV (--from-report)
            files["benchmarks/dynamo/torchbench.py"] = BENCH_PY
    marks: list[int] = []
    side_marks: list[int] = []
    release_marks: dict[str, int] = {}
    broken_set = set(broken)
    culprit_mark = 0
    pr = 140000
    for i in range(commits):
        pr += rng.randint(1, 40)
        author = rng.choice(AUTHORS)
        changed: dict[str, str] = {}
        deleted: tuple[str, ...] = ()
        if i == 0:
            changed = dict(files)
            msg = "Initial commit of torchlet\n"
        elif i == culprit:
            if regression_in == "python":
                changed["torchlet/ops.py"] = OPS_PY.replace("@NORM@", OPS_BAD)
            else:
                changed["csrc/_C.c"] = files["csrc/_C.c"].replace(C_GOOD_LOOP, C_BAD_LOOP)
            if BROKEN_MARK in files["csrc/_C.c"]:  # the culprit must build
                changed["csrc/_C.c"] = changed.get("csrc/_C.c", files["csrc/_C.c"]).replace(
                    BROKEN_MARK, ""
                )
            msg = _message(rng, culprit_subject, pr)
        elif fixed_at is not None and i == fixed_at:
            changed["torchlet/ops.py"] = OPS_PY.replace("@NORM@", OPS_GOOD)
            changed["csrc/_C.c"] = files["csrc/_C.c"].replace(C_BAD_LOOP, C_GOOD_LOOP)
            msg = _message(rng, "Fix the norm regression", pr)
        elif i in broken_set:
            c = files["csrc/_C.c"]
            if BROKEN_MARK not in c:
                changed["csrc/_C.c"] = BROKEN_MARK + c
            else:
                changed["README.md"] = files["README.md"] + f"\nNote {i}.\n"
            msg = _message(rng, f"Refactor the C kernel registry, part {i}", pr)
        elif release_at is not None and i == release_at[0] + 3:
            # The fix that release/0.1 cherry-picks, so `git cherry` has something to find.
            changed["torchlet/_fixes.py"] = "FIXED = True\n"
            msg = _message(rng, "Add the fixes module", pr)
        elif BROKEN_MARK in files["csrc/_C.c"]:
            changed["csrc/_C.c"] = files["csrc/_C.c"].replace(BROKEN_MARK, "")
            msg = _message(rng, "Fix the build of the C kernel", pr)
        elif i == slow_at:
            changed["torchlet/_pace.py"] = PACE_PY.format(delay=PACE_SLOW_S)
            msg = _message(rng, "Make the pacing loop more careful", pr)
        elif i in c_churn:
            changed["csrc/_C.c"] = files["csrc/_C.c"] + f"/* tuning note {i} */\n"
            msg = _message(rng, f"Tune the C kernel, step {i}", pr)
        elif i == delete_at:
            deleted = ("torchlet/_fixes.py",)
            files.pop("torchlet/_fixes.py", None)
            msg = _message(rng, "Remove the fixes module", pr)
        elif i == triton_bump_at:
            changed["ci/triton.txt"] = "7416ffcb92cdbe98d9f97e4e6f95247e46dfc9fd\n"
            changed["ci/triton_version.txt"] = "3.5.0\n"
            msg = _message(rng, "Update the Triton pin", pr)
        else:
            target = rng.choice(["torchlet/utils.py", "torchlet/nn/functional.py", "README.md"])
            if target.endswith(".py"):
                changed[target] = files[target] + f"\n\ndef helper_{i}(x):\n    return x + {i}\n"
            else:
                changed[target] = files[target] + f"\n- change {i}\n"
            msg = _message(rng, f"Small harmless change number {i}", pr)
        if broken_import is not None and i in broken_import:
            now = changed.get("torchlet/nn/functional.py", files["torchlet/nn/functional.py"])
            changed["torchlet/nn/functional.py"] = (now + IMPORT_BREAK if i == broken_import[0]
                                                    else now.replace(IMPORT_BREAK, ""))
        files.update(changed)
        parent = marks[-1] if marks else None
        merge = None
        if side_branch_at is not None and i == side_branch_at:
            # A merged side branch (ghstack-like): its commits are not first-parent candidates.
            base = marks[-1]
            sfiles: dict[str, str] = {}
            for k in range(3):
                sfiles = {f"torchlet/side_{k}.py": f"VALUE = {k}\n"}
                side_marks.append(
                    s.commit(
                        "refs/heads/side",
                        f"Side branch work {k}\n",
                        sfiles,
                        author,
                        side_marks[-1] if side_marks else base,
                    )
                )
            merge = side_marks[-1]
            for k in range(3):
                changed[f"torchlet/side_{k}.py"] = f"VALUE = {k}\n"
                files[f"torchlet/side_{k}.py"] = f"VALUE = {k}\n"
            msg = "Merge branch 'side'\n"
        m = s.commit("refs/heads/main", msg, changed, author, parent, merge, deleted)
        marks.append(m)
        if i == culprit:
            culprit_mark = m
        if release_at is not None and i in release_at:
            release_marks[f"{i}"] = m
    tags: dict[str, int] = {}
    if release_at is not None:
        a, b = release_at
        # release/0.1: a version bump and a cherry-pick of a main fix, then the tag.
        r1 = s.commit(
            "refs/heads/release/0.1",
            "Bump version to 0.1.0\n",
            {"torchlet/version.py": VERSION_PY.replace("0.1.0a0", "0.1.0")},
            AUTHORS[0],
            release_marks[f"{a}"],
        )
        r2 = s.commit(
            "refs/heads/release/0.1",
            "[release/0.1] Add fixes module (cherry-pick)\n",
            {"torchlet/_fixes.py": "FIXED = True\n"},
            AUTHORS[1],
            r1,
        )
        tags["v0.1.0"] = r2
        r3 = s.commit(
            "refs/heads/release/0.2",
            "Bump version to 0.2.0\n",
            {"torchlet/version.py": VERSION_PY.replace("0.1.0a0", "0.2.0")},
            AUTHORS[0],
            release_marks[f"{b}"],
        )
        tags["v0.2.0"] = r3
        for name, mark in tags.items():
            s.tag(name, mark, f"torchlet {name[1:]}\n")
    _run_fast_import(path, s)
    sha_of = _marks_to_shas(path, [*marks, *side_marks, *tags.values()])
    main = [sha_of[m] for m in marks]
    nightlies = _cut_nightlies(path, main, nightly_every) if nightly_every else []
    return SyntheticHistory(
        path=path,
        main=main,
        culprit=sha_of[culprit_mark],
        fix=main[fixed_at] if fixed_at is not None else None,
        broken={main[i] for i in broken},
        side=[sha_of[m] for m in side_marks],
        tags={name: sha_of[m] for name, m in tags.items()},
        nightlies=nightlies,
    )


def _cut_nightlies(path: Path, main: list[str], every: int) -> list[tuple[str, str, str]]:
    """The ``nightly`` branch as PyTorch's trigger-nightly action writes it (commit-tree)."""
    import datetime as dt

    out: list[tuple[str, str, str]] = []
    parent: str | None = None
    last: dt.date | None = None
    for day, i in enumerate(range(0, len(main), every)):
        ct = int(subprocess.run(["git", "-C", str(path), "show", "-s", "--format=%ct", main[i]],
                                check=True, capture_output=True, text=True).stdout)
        when = dt.datetime.fromtimestamp(ct, dt.UTC).date() + dt.timedelta(days=1)
        if last is not None and when <= last:
            when = last + dt.timedelta(days=1)  # one nightly a day, as on the real index
        last = when
        stamp = when.strftime("%Y%m%d")
        cmd = ["git", "-C", str(path), "commit-tree", f"{main[i]}^{{tree}}",
               "-m", f"{when.isoformat()} nightly release ({main[i]})"]
        if parent:
            cmd[4:4] = ["-p", parent]
        env = {"GIT_AUTHOR_NAME": "PyTorch MergeBot", "GIT_AUTHOR_EMAIL": "bot@example.com",
               "GIT_COMMITTER_NAME": "PyTorch MergeBot", "GIT_COMMITTER_EMAIL": "bot@example.com",
               "GIT_AUTHOR_DATE": f"{EPOCH + 86400 * (day + 1)} +0000",
               "GIT_COMMITTER_DATE": f"{EPOCH + 86400 * (day + 1)} +0000", "PATH": _path()}
        parent = subprocess.run(cmd, check=True, capture_output=True, text=True,
                                env=env).stdout.strip()
        out.append((parent, main[i], stamp))
    subprocess.run(["git", "-C", str(path), "update-ref", "refs/heads/nightly", str(parent)],
                   check=True)
    return out


def _path() -> str:
    import os

    return os.environ.get("PATH", "/usr/bin:/bin")


def _marks_to_shas(path: Path, marks: list[int]) -> dict[int, str]:
    """Resolve marks by walking refs: fast-import only reports marks through a file."""
    out = subprocess.run(
        ["git", "-C", str(path), "rev-list", "--reverse", "--all", "--date-order",
         "--format=%H %ct"],
        check=True, capture_output=True, text=True,
    ).stdout
    # Each commit has a unique committer time (hours apart), and marks were made in order.
    by_time: dict[int, str] = {}
    for line in out.splitlines():
        if line.startswith("commit "):
            continue
        sha, ct = line.split()
        by_time[int(ct)] = sha
    ordered = [by_time[t] for t in sorted(by_time)]
    return {m: ordered[m - 1] for m in marks}


def generate_linear(path: Path, commits: int) -> list[str]:
    """A long linear history of tiny commits, for planning benchmarks (returns nothing heavy)."""
    s = _Stream()
    parent: int | None = None
    for i in range(commits):
        parent = s.commit(
            "refs/heads/main", f"commit {i}\n", {"counter.txt": f"{i}\n"}, AUTHORS[i % 6], parent
        )
    _run_fast_import(path, s)
    return []
