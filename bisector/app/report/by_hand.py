"""The issue's "Reproduce without bisector": the culprit's package got the way its probe got it,
then the oracle, in commands a maintainer runs as they are.

A probe's package came one of four ways, and so does the reproduction: a prebuilt wheel (a
nightly or a release: ``pip install`` that version), an overlay (that wheel, then the commit's
changed Python files laid over the installed package, as PyTorch's ``tools/nightly.py`` lays a
checkout's over a nightly), a source build (check out and build), or an installed torch of the
user's own (check out and build: nobody else has that torch). The oracle then runs from a file
saved as the report names it, or, for a command, in the checkout, with the variables it ran
with (``--env``) set. Only the report's own fields go into the commands: shas checked as
hexadecimal, versions as version strings, and the oracle's words pasteable
(app/report/paste.py: a path inside the clone relative to the checkout's root, no
``<placeholder>`` a shell would read).
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from bisector.app.report import paste
from bisector.app.report.compiler_pass import oracle_words
from bisector.base.kinds import ArtifactKind
from bisector.oracle.command import reads_benchmark
from bisector.oracle.manual import is_manual_source
from bisector.oracle.script import argv_of

_SHA = re.compile(r"[0-9a-f]{7,40}")
_VERSION = re.compile(r"[0-9A-Za-z.+_-]{1,80}")
_WORD = re.compile(r"[A-Za-z0-9_-]{1,40}")


def _wheel(d: dict[str, Any], commit: str) -> dict[str, Any] | None:
    """The prebuilt wheel of the range made from ``commit`` (a nightly or a release)."""
    return next((pb for pb in d.get("prebuilts") or []
                 if str(pb.get("sha") or "").startswith(commit[:12])
                 and _VERSION.fullmatch(str(pb.get("version") or ""))), None)


def _pip(package: str, version: str, index: str | None) -> str:
    """``pip install`` of that version: a nightly (``.dev``) from the nightly index, a release
    from the default one."""
    nightly = "dev" in version
    where = f" --index-url {shlex.quote(index)}" if index and nightly else ""
    pre = " --pre" if nightly else ""
    return f"pip install{pre} {shlex.quote(f'{package}=={version}')}{where}"


def _benchmark_lines(d: dict[str, Any], scrub: paste.Scrub, env: str) -> list[str]:
    """A dashboard oracle (``python -c READER COLUMN WAY RUNS MODELS -- BENCHMARK``,
    oracle/dashboard.py) by hand: the benchmark command for each model, and which column of
    its CSV to compare; [] for any other oracle."""
    argv = argv_of(str((d.get("oracle") or {}).get("source") or ""))
    if argv is None or not reads_benchmark(argv) or len(argv) < 8:
        return []
    column, way, _runs, models = argv[3:7]
    if not (_WORD.fullmatch(column) and _WORD.fullmatch(way)):
        return []
    bench = list(argv[argv.index("--", 3) + 1:])
    lines = []
    for model in models.split(","):
        words = [a.replace("{model}", model).replace("{csv}", f"{model}.csv") for a in bench]
        lines.append(env + paste.join(words, scrub))
    if way == "pass":
        lines.append("# bad when a model's accuracy column is not pass")
    else:
        lines.append(f"# compare the {column} column of each CSV with the same run at the good "
                     f"commit ({way})")
    return lines


def steps(d: dict[str, Any], p: dict[str, Any] | None, saved_as: str, clone: str,
          index: str | None, scrub: paste.Scrub = paste.unchanged,
          env: str = "") -> list[str] | None:
    """The shell lines, or None when the culprit's probe does not say how it got its
    package (a reused verdict of an older store). ``scrub`` rewrites this machine's paths in
    the oracle's words, ``env`` (:func:`bisector.app.report.paste.env`) goes before each run."""
    sha = str((d.get("culprit") or {}).get("sha") or "")
    source = str((d.get("oracle") or {}).get("source") or "")
    if p is None or not p.get("artifact") or not _SHA.fullmatch(sha) \
            or is_manual_source(source):
        return None  # a person judged it: there is no oracle to run
    package = str((d.get("project") or {}).get("package") or "torch")
    kind, facts = p.get("artifact"), p.get("facts") or {}
    run = env + oracle_words(d, saved_as, scrub)
    checkout = [*([f"git clone {shlex.quote(clone)}"] if clone.startswith("https://") else []),
                f"cd {shlex.quote(clone.rstrip('/').rsplit('/', 1)[-1].removesuffix('.git'))}",
                f"git checkout {sha}"]
    base = str((facts.get("overlay") or {}).get("base_commit") or "")
    prebuilt, overlaid = kind == ArtifactKind.PREBUILT, kind == ArtifactKind.OVERLAY
    wheel = _wheel(d, sha if prebuilt else base) if prebuilt or overlaid else None
    if prebuilt and wheel is not None:
        lines = [*(checkout if argv_of(source) is not None else []),  # a command: in the tree
                 f"# the culprit is {wheel['kind']} {wheel['version']} itself",
                 _pip(package, str(wheel["version"]), index)]
    elif overlaid and wheel is not None and _SHA.fullmatch(base):
        site = (f"$(python -c 'import {package}, os; "
                f"print(os.path.dirname({package}.__path__[0]))')")
        lines = [*checkout,
                 f"# {wheel['kind']} {wheel['version']} (built from {base[:12]}), then the "
                 f"commit's changed Python files over it",
                 _pip(package, str(wheel["version"]), index),
                 f"site=$(cd / && {site[2:-1]})",
                 f"git diff --no-renames --name-only --diff-filter=AM {base} {sha} -- "
                 f"'{package}/*.py' | while read -r f; do cp \"$f\" \"$site/$f\"; done",
                 f"git diff --no-renames --name-only --diff-filter=D {base} {sha} -- "
                 f"'{package}/*.py' | while read -r f; do rm -f \"$site/$f\"; done"]
    else:
        build = ("pip install -e . -v --no-build-isolation  # PyTorch's build: "
                 "see its CONTRIBUTING.md" if package == "torch" else "pip install .")
        lines = [*checkout, "git submodule update --init --recursive", build]
    bench = _benchmark_lines(d, scrub, env)
    if bench:
        return lines + bench
    if argv_of(source) is None:  # an oracle file, saved beside the checkout: run from there,
        # where no source tree's torch/ shadows the installed one
        cd = "cd .. && " if any(ln.startswith("git checkout") for ln in lines) else ""
        lines.append(f"{cd}{run}  # exit 0: good, 1: bad")
    else:
        lines.append(f"{run}  # in the checkout; exit 0: good, 1: bad")
    return lines
