"""Overlay proof for issue 4: bisect a history made from an installed package's Python tree.

On the GPU box (torch + triton installed, no network) this:

1. makes a git repository whose first commit is the installed ``torch/**/*.py`` tree;
2. commits the fix of pytorch#170398 (a user kernel named ``__x`` gets a ``k`` prefix where
   Inductor derives its wrapper variable, so no class body can mangle it) and tags it ``fixed``;
3. adds ``--harmless`` Python-only commits, one commit that reintroduces the bug, and as many
   harmless commits again;
4. runs ``bisect start --good fixed --bad main --oracle name_mangling --installed-base <root>
   --offline`` with the installed torch as the prebuilt base, so every probe is an overlay;
5. checks the named culprit is the reintroducing commit and that no source build happened.

tests/integration/test_installed_base.py runs the same procedure (tests/support.py's
``installed_base_history``) on the synthetic ``torchlet`` in CI, so the GPU run exercises nothing
the CPU tests have not; ``--package torchlet`` runs this script on it by hand. This script stays
free of pytest: the GPU box has only bisector's dependencies.

Usage: python overlay_proof.py --package torch --workdir DIR [--python PY] [--json OUT]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Recipe:
    """How to plant and remove a bug in a package's Python files, and the oracle that sees it."""

    oracle: str
    profile: str
    fix: Callable[[Path], int]  # applies the fix under repo/; returns the number of edits
    unfix: Callable[[Path], int]
    harmless: tuple[str, ...]  # files that harmless commits append a comment to


TORCH_BUG = re.compile(r'f"\{original_name\}_\{')
TORCH_FIX = 'f"{(\'k\' + original_name) if original_name.startswith(\'__\') else original_name}_{'


def _sub_tree(repo: Path, folder: str, old: str | re.Pattern[str], new: str) -> int:
    edits = 0
    for path in sorted((repo / folder).rglob("*.py")):
        text = path.read_text()
        if isinstance(old, re.Pattern):
            out, n = old.subn(lambda _m: new, text)
        else:
            n = text.count(old)
            out = text.replace(old, new)
        if n:
            path.write_text(out)
            edits += n
    return edits


RECIPES = {
    "torch": Recipe(
        oracle="name_mangling",
        profile="pytorch",
        fix=lambda r: _sub_tree(r, "torch/_inductor", TORCH_BUG, TORCH_FIX),
        unfix=lambda r: _sub_tree(r, "torch/_inductor", TORCH_FIX, 'f"{original_name}_{'),
        harmless=("torch/_inductor/config.py", "torch/nn/modules/linear.py",
                  "torch/_dynamo/utils.py", "torch/utils/data/dataset.py"),
    ),
    "torchlet": Recipe(
        oracle="torchlet_norm",
        profile="torchlet",
        fix=lambda r: _sub_tree(r, "torchlet", "return _C.dot(xs, xs) ** 0.5 if len(xs) < 2 "
                                "else _C.dot(xs, xs)", "return math.sqrt(_C.dot(xs, xs))"),
        unfix=lambda r: _sub_tree(r, "torchlet", "return math.sqrt(_C.dot(xs, xs))",
                                  "return _C.dot(xs, xs) ** 0.5 if len(xs) < 2 "
                                  "else _C.dot(xs, xs)"),
        harmless=("torchlet/utils.py", "torchlet/nn/functional.py"),
    ),
}


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "Proof Bot", "GIT_AUTHOR_EMAIL": "proof@example.com",
           "GIT_COMMITTER_NAME": "Proof Bot", "GIT_COMMITTER_EMAIL": "proof@example.com"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout.strip()


def installed_dir(python: str, package: str) -> Path:
    code = (f"import importlib.util; s = importlib.util.find_spec({package!r}); "
            f"print(list(s.submodule_search_locations)[0])")
    out = subprocess.run([python, "-c", code], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def import_tree(pkg_dir: Path, repo: Path) -> str:
    """A fresh repository whose one commit is ``pkg_dir``'s ``*.py`` tree; its sha."""
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    name = pkg_dir.name
    for src in pkg_dir.rglob("*.py"):
        if "__pycache__" in src.parts:
            continue
        dest = repo / name / src.relative_to(pkg_dir)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"Import the installed {name} Python tree")
    return git(repo, "rev-parse", "HEAD")


def harmless_commits(repo: Path, files: tuple[str, ...], start: int, count: int) -> None:
    """``count`` commits numbered from ``start``, each appending a comment to one of ``files``
    in turn: commits every proof history puts around the planted one."""
    for i in range(start, start + count):
        with (repo / files[i % len(files)]).open("a") as f:
            f.write(f"\n# harmless change {i}\n")
        git(repo, "commit", "-q", "-am", f"Harmless Python change {i}")


def make_history(pkg_dir: Path, repo: Path, recipe: Recipe, harmless: int) -> dict[str, str]:
    name = pkg_dir.name
    root = import_tree(pkg_dir, repo)
    if recipe.fix(repo) == 0:
        sys.exit(f"the fix for {name} found nothing to change: the recipe needs updating")
    git(repo, "commit", "-q", "-am", "Escape leading __ in generated names (the fix)")
    git(repo, "tag", "fixed")

    harmless_commits(repo, recipe.harmless, 0, harmless)
    if recipe.unfix(repo) == 0:
        sys.exit("reintroducing the bug changed nothing: the recipe needs updating")
    git(repo, "commit", "-q", "-am", "Simplify generated names (reintroduces the bug)")
    culprit = git(repo, "rev-parse", "HEAD")
    harmless_commits(repo, recipe.harmless, harmless, harmless)
    return {"root": root, "fixed": git(repo, "rev-parse", "fixed"), "culprit": culprit,
            "bad": git(repo, "rev-parse", "HEAD")}


def run_proof(package: str, workdir: Path, python: str, harmless: int = 60,
              extra: tuple[str, ...] = (), shas: dict[str, str] | None = None,
              tag: str = "") -> dict[str, object]:
    """Bisect the proof history; ``shas`` reuses a history made by an earlier call, and
    ``tag`` gives this run its own store and caches (``BISECTOR_HOME``), so two runs compare
    cold against cold."""
    recipe = RECIPES[package]
    pkg_dir = installed_dir(python, package)
    t0 = time.monotonic()
    if shas is None:
        shas = make_history(pkg_dir, workdir / "repo", recipe, harmless)
    made = time.monotonic() - t0
    db = workdir / f"bisector{tag}.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if tag:
        env["BISECTOR_HOME"] = str(workdir / f"home{tag}")
        env.pop("BISECTOR_CACHE_DIR", None)
    t1 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "bisector", "--db", str(db), "start", "--repo",
         str(workdir / "repo"), "--good", "fixed", "--bad", "main", "--oracle", recipe.oracle,
         "--profile", recipe.profile, "--python", python, "--installed-base", shas["root"],
         "--offline", "--json", *extra],
        capture_output=True, text=True, env=env, check=False,
    )
    wall = time.monotonic() - t1
    sys.stderr.write(r.stderr[-6000:])
    if r.returncode != 0:
        return {"ok": False, "rc": r.returncode, "stderr": r.stderr[-3000:]}
    data = json.loads(r.stdout)
    probes = [p for p in data["probes"] if not p.get("reused")]
    from sqlalchemy import create_engine, text

    eng = create_engine(f"sqlite:///{db}")
    with eng.connect() as c:
        kinds = [row[0] for row in c.execute(text("select kind from artifact"))]
    return {
        "ok": data["culprit"]["sha"] == shas["culprit"] and "source" not in kinds,
        "package": package, "candidates": data["candidates"], "culprit": data["culprit"],
        "expected_culprit": shas["culprit"], "probes": len(probes),
        "verdicts": [(p["sha"][:12], p["verdict"]) for p in probes],
        "artifact_kinds": kinds, "source_builds": kinds.count("source"),
        "history_seconds": round(made, 1), "bisect_wall_seconds": round(wall, 1),
        "probe_facts": data["probes"][-1].get("facts", {}) if data["probes"] else {},
        # What each probe's own torch said it was (issue 20: an overlay names its commit).
        "git_versions": [(p["sha"][:12], (p.get("facts") or {}).get("torch_git_version")
                          or (p.get("facts") or {}).get("git_version"),
                          (p.get("facts") or {}).get("overlay_base"))
                         for p in probes],
        "prior": (data.get("result") or {}).get("prior"),
        "jobs": data.get("jobs"), "rounds": data.get("rounds"),
        "gpu_per_probe": [(p["round"], p["sha"][:12], p["verdict"], p.get("gpu"),
                           (p.get("facts") or {}).get("gpu_name")
                           or (p.get("facts") or {}).get("gpu")) for p in probes],
        "shas": shas,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package", choices=sorted(RECIPES), default="torch")
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--harmless", type=int, default=60)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--compare-gpus", default=None, metavar="0,1",
                    help="Bisect the same history twice, cold: --jobs 1, then one probe per "
                    "GPU of this list at once; both must name the planted commit.")
    ap.add_argument("--compare-prior", choices=("both", "none", "auto"), default=None,
                    help="Bisect the same history cold with --prior none and/or --prior auto "
                    "(issue 23), without confirmation; each must name the planted commit.")
    a = ap.parse_args()
    a.workdir.mkdir(parents=True, exist_ok=True)
    if importlib.util.find_spec("sqlalchemy") is None:
        sys.exit("install bisector's dependencies first")
    if a.compare_prior:
        modes = ("none", "auto") if a.compare_prior == "both" else (a.compare_prior,)
        runs: dict[str, dict[str, object]] = {}
        shas = None
        for mode in modes:
            runs[f"prior_{mode}"] = got = run_proof(
                a.package, a.workdir, a.python, a.harmless,
                extra=("--prior", mode, "--no-confirm"), tag=f"-{mode}",
                shas=shas if isinstance(shas, dict) else None)
            shas = got.get("shas")
        result = {"ok": all(r.get("ok") for r in runs.values()), **runs}
    elif a.compare_gpus:
        one = run_proof(a.package, a.workdir, a.python, a.harmless,
                        extra=("--jobs", "1"), tag="-jobs1")
        shas = one.get("shas")
        gpus = a.compare_gpus.split(",")
        many = run_proof(a.package, a.workdir, a.python, a.harmless,
                         extra=("--jobs", str(len(gpus)), "--gpus", a.compare_gpus),
                         shas=shas if isinstance(shas, dict) else None,
                         tag=f"-jobs{len(gpus)}")
        result = {"ok": bool(one.get("ok") and many.get("ok")
                             and one["culprit"] == many["culprit"]),
                  "jobs1": one, f"jobs{len(gpus)}": many}
    else:
        result = run_proof(a.package, a.workdir, a.python, a.harmless)
    text = json.dumps(result, indent=2, default=str)
    print(text)
    if a.json:
        a.json.write_text(text)
    sys.exit(0 if result.get("ok") else 1)


if __name__ == "__main__":
    main()
