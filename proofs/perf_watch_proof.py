"""Issue 22 item 5's GPU proof: the performance watch finds a real slowdown over "nightlies"
made from the installed torch, and the bisection it starts names the commit and confirms it.

On the GPU box (torch + triton installed, no network, SQLite) this:

1. makes a git repository whose root commit is the installed ``torch/**/*.py`` tree, then
   ``(builds - 1) * per_build`` Python-only commits: harmless ones (a comment appended), and one,
   between build ``slow_build - 1`` and build ``slow_build``, that adds a pure-Python loop to
   ``torch.nn.functional.relu`` (a real cost in a function the perf oracle times);
2. makes one "nightly" per build, every ``per_build``-th commit: a virtualenv whose torch is the
   installed one mirrored file by file (symlinks), the build commit's changed files laid over it
   and ``torch/version.py`` naming that commit, with a nightly's version
   (``2.11.0.dev20261101+cu130``: its date and its place in the series);
3. runs one ``bisect tick --no-bisect`` per build, oldest first, with a ``torch = "installed"``
   suite whose python is that build's (the watch's ``installed`` source: the torch a python
   imports, its ``git_version`` its commit) and the perf oracle ``relu_call_time.py``
   (``F.relu`` over ``torch.relu``, threshold 10 %); ``[suite.bisect]`` makes the bisection a
   flip starts lay overlays on that build (``installed-base``, ``offline``), so no probe
   builds anything;
4. then one ``bisect tick``, which runs the slowdown's bisection (with confirmation);
5. prints the series (per build median), the change point (between which builds), the
   bisection's culprit against the planted commit, its confirmation and the wall times, and
   writes JSON, ``bisect watch`` and ``bisect show`` of the bisection into ``--out``.

``--package torchlet`` runs the same code on the synthetic torchlet (an installed torchlet is
built first unless ``--python`` has one): the CPU check of this script. It stays free of
pytest: the GPU box has only bisector's dependencies.

Usage: python proofs/perf_watch_proof.py --package torch --workdir DIR [--out DIR]
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from bisector.executors.envfiles import link_tree  # noqa: E402
from proofs.overlay_proof import git, import_tree, installed_dir  # noqa: E402

FIRST_DAY = dt.date(2026, 11, 1)


@dataclass(frozen=True)
class Recipe:
    """Where the slowdown goes and which oracle times it."""

    oracle: Path
    profile: str
    target: str  # the file, relative to the repository
    function: str  # the function in it that gets slower
    loop: int  # iterations of the planted pure-Python loop, per call
    harmless: tuple[str, ...]  # files harmless commits append a comment to


RECIPES = {
    "torch": Recipe(ROOT / "proofs" / "relu_call_time.py", "pytorch",
                    "torch/nn/functional.py", "relu", 100,
                    ("torch/_inductor/config.py", "torch/nn/modules/linear.py",
                     "torch/_dynamo/utils.py", "torch/utils/data/dataset.py")),
    "torchlet": Recipe(ROOT / "proofs" / "relu_call_time_torchlet.py", "torchlet",
                       "torchlet/nn/functional.py", "relu", 500,
                       ("torchlet/utils.py", "torchlet/ops.py")),
}


def plant_loop(path: Path, function: str, loop: int) -> None:
    """Add ``for _ in range(loop): pass`` as the first statement of ``function``'s body (after
    its docstring): a real, pure-Python cost on every call."""
    text = path.read_text()
    tree = ast.parse(text)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function),
              None)
    if fn is None:
        sys.exit(f"{path} has no top-level function {function!r}: the recipe needs updating")
    body = fn.body
    first = body[1] if (len(body) > 1 and isinstance(body[0], ast.Expr)
                        and isinstance(body[0].value, ast.Constant)
                        and isinstance(body[0].value.value, str)) else body[0]
    lines = text.splitlines(keepends=True)
    at = first.lineno - 1
    indent = " " * first.col_offset
    lines[at:at] = [f"{indent}for _ in range({loop}):  # planted slowdown\n",
                    f"{indent}    pass\n"]
    path.write_text("".join(lines))


def make_history(pkg_dir: Path, repo: Path, recipe: Recipe, builds: int, per_build: int,
                 slow_build: int) -> dict[str, Any]:
    """root (the installed tree) and ``(builds - 1) * per_build`` commits; the planted one is
    the middle commit between build ``slow_build - 1`` and build ``slow_build``."""
    root = import_tree(pkg_dir, repo)
    shas = [root]
    planted_at = (slow_build - 1) * per_build + (per_build + 1) // 2
    planted = ""
    for i in range(1, (builds - 1) * per_build + 1):
        if i == planted_at:
            plant_loop(repo / recipe.target, recipe.function, recipe.loop)
            git(repo, "commit", "-q", "-am",
                f"Check {recipe.function}'s input once more (slows every call)")
            planted = git(repo, "rev-parse", "HEAD")
        else:
            with (repo / recipe.harmless[i % len(recipe.harmless)]).open("a") as f:
                f.write(f"\n# harmless change {i}\n")
            git(repo, "commit", "-q", "-am", f"Harmless Python change {i}")
        shas.append(git(repo, "rev-parse", "HEAD"))
    return {"root": root, "planted": planted, "planted_at": planted_at,
            "builds": shas[::per_build], "commits": len(shas)}


def nightly_version(text: str, sha: str, day: dt.date) -> str:
    """``version.py`` of a nightly of ``sha`` cut on ``day``: ``git_version`` is the commit,
    ``__version__`` gets ``.devYYYYMMDD`` (and a ``+git<sha>`` local part names the commit)."""
    text = re.sub(r"(?m)^git_version\s*(:[^=\n]*)?=.*$", f"git_version = '{sha}'", text)

    def version(m: re.Match[str]) -> str:
        public, plus, local = m["v"].partition("+")
        release = re.match(r"\d+(\.\d+)*", public)
        new = f"{release[0] if release else '0.0.0'}.dev{day:%Y%m%d}"
        if plus:
            parts = [f"git{sha[:len(p) - 3]}" if re.fullmatch(r"git[0-9a-f]{7,40}", p) else p
                     for p in local.split(".")]
            new += "+" + ".".join(parts)
        return f"{m['lhs']}{new}{m['q']}"

    return re.sub(r"""(?m)^(?P<lhs>__version__\s*(:[^=\n]*)?=\s*(?P<q>['"]))(?P<v>[^'"\n]*)"""
                  r"""(?P=q)""", version, text)


def make_nightly(pkg_dir: Path, repo: Path, sha: str, root: str, day: dt.date,
                 venv: Path) -> Path:
    """A virtualenv whose package is the installed one with ``sha``'s changed files over it and
    a nightly's ``version.py``; the installed package's neighbours (triton, numpy, ...) linked
    beside it (a .pth would not do: bisector's environments add this folder by a .pth of their
    own, and Python reads .pth files only in site folders). Its python."""
    name = pkg_dir.name
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c",
                                "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    link_tree(pkg_dir, site / name)
    # The installed bytecode too (a link per .pyc): each nightly's first import then compiles
    # only the files laid over, which Python sees by their own mtime and writes anew.
    for cache in pkg_dir.rglob("__pycache__"):
        dest = site / name / cache.relative_to(pkg_dir)
        dest.mkdir(parents=True, exist_ok=True)
        for pyc in cache.iterdir():
            if not (dest / pyc.name).exists():
                (dest / pyc.name).symlink_to(pyc)
    changed = git(repo, "diff", "--name-only", root, sha, "--", name).split()
    version_py = f"{name}/version.py"
    for path in dict.fromkeys([*changed, version_py]):
        dest = site / path
        if dest.is_symlink() or dest.exists():
            dest.unlink()
        text = git(repo, "show", f"{sha}:{path}") + "\n"
        if path == version_py:
            text = nightly_version(text, sha, day)
        dest.write_text(text)
        stem = Path(path).stem
        for pyc in (dest.parent / "__pycache__").glob(f"{stem}.*.pyc"):
            pyc.unlink()
    for entry in pkg_dir.parent.iterdir():
        dest = site / entry.name
        if entry.name not in (name, "__pycache__") and not dest.exists():
            dest.symlink_to(entry)
    return venv / "bin" / "python"


def installed_torchlet(work: Path) -> str:
    """A virtualenv with torchlet built from a small synthetic history installed (as
    tests/support.py's ``installed_torchlet``): torch's stand-in on a box without torch."""
    # lazy: only --package torchlet builds a package; the GPU box never imports the demo
    import git as gitpython

    from bisector.app.demo.torchlet import generate
    from bisector.artifacts.build import build_wheel
    from bisector.project.profiles import TORCHLET

    hist = generate(work / "torchlet-src", commits=6, culprit=4, broken=(), release_at=None,
                    side_branch_at=None)
    res = build_wheel(gitpython.Repo(hist.path), hist.main[-1], TORCHLET, python=sys.executable)
    if not (res.ok and res.wheel):
        sys.exit(f"building torchlet failed:\n{res.log_tail}")
    venv = work / "installed"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-index", "--no-deps",
                    str(res.wheel)], check=True)
    return str(venv / "bin" / "python")


def write_config(work: Path, recipe: Recipe, python: Path, build_sha: str) -> Path:
    """The watch's configuration for one build: its python, and its commit as the base of the
    overlays a flip's bisection lays (the build's torch is what that python has)."""
    cfg = work / "bisector.toml"
    cfg.write_text(f"""\
[watch]
events = "{work / 'events'}"

[[suite]]
name = "perf"
repo = "{work / 'repo'}"
oracles = ["{recipe.oracle}"]
torch = "installed"
python = "{python}"
profile = "{recipe.profile}"
[suite.bisect]
installed-base = "{build_sha}"
offline = true
""")
    return cfg


def bisect(work: Path, *args: str, log: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BISECTOR_HOME": str(work / "home"), "PYTHONPATH": str(ROOT)}
    env.pop("BISECTOR_CACHE_DIR", None)
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "bisector", *args], capture_output=True,
                       text=True, env=env, check=False, cwd=ROOT)
    line = f"$ bisect {' '.join(args)}  -> exit {r.returncode} in {time.monotonic() - t:.1f}s"
    log.extend([line, r.stdout.rstrip(), r.stderr.rstrip()])
    print(line, flush=True)
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package", choices=sorted(RECIPES), default="torch")
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=None, help="default: WORKDIR/out")
    ap.add_argument("--python", default=None,
                    help="the python with the installed package (default: this one for torch, "
                    "a torchlet built here for torchlet)")
    ap.add_argument("--builds", type=int, default=12)
    ap.add_argument("--per-build", type=int, default=3, help="commits from one build to the next")
    ap.add_argument("--slow-build", type=int, default=6, help="the first slow build (0-based)")
    ap.add_argument("--threshold", default=None,
                    help="the oracle's threshold instead of its own (\"20%%\"): a copy of it "
                    "is watched, for a box noisier than the oracle allows for")
    a = ap.parse_args()
    if not (3 <= a.slow_build <= a.builds - 3 and a.per_build >= 1):
        sys.exit("--slow-build needs 3 builds before it and 3 from it on")
    recipe = RECIPES[a.package]
    work = a.workdir.resolve()
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    out_dir = (a.out or work / "out").resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    log: list[str] = []
    walls: dict[str, float] = {}
    if a.threshold:
        text = re.sub(r'(?m)^# threshold = .*$', f'# threshold = "{a.threshold}"',
                      recipe.oracle.read_text())
        (work / recipe.oracle.name).write_text(text)
        recipe = replace(recipe, oracle=work / recipe.oracle.name)

    t0 = time.monotonic()
    python = a.python or (installed_torchlet(work) if a.package == "torchlet"
                          else sys.executable)
    pkg_dir = installed_dir(python, a.package)
    shas = make_history(pkg_dir, work / "repo", recipe, a.builds, a.per_build, a.slow_build)
    walls["history_s"] = time.monotonic() - t0
    t1 = time.monotonic()
    nightlies = []
    for i, sha in enumerate(shas["builds"]):
        py = make_nightly(pkg_dir, work / "repo", sha, shas["root"],
                          FIRST_DAY + dt.timedelta(days=i), work / f"nightly{i:02d}")
        nightlies.append(py)
    walls["nightlies_s"] = time.monotonic() - t1
    print(f"history of {shas['commits']} commits ({walls['history_s']:.1f}s), "
          f"{len(nightlies)} nightlies ({walls['nightlies_s']:.1f}s); planted "
          f"{shas['planted'][:12]} (commit {shas['planted_at']}), between build "
          f"{a.slow_build - 1} and build {a.slow_build}", flush=True)

    ticks: list[dict[str, Any]] = []
    for i, (py, sha) in enumerate(zip(nightlies, shas["builds"], strict=True)):
        cfg = write_config(work, recipe, py, sha)
        t = time.monotonic()
        r = bisect(work, "tick", "--config", str(cfg), "--no-bisect", log=log)
        said = r.stdout + r.stderr
        ticks.append({"build": i, "commit": sha, "exit": r.returncode,
                      "wall_s": round(time.monotonic() - t, 1),
                      "started": [int(n) for n in re.findall(r"started bisection (\d+)", said)]})
        if r.returncode != 0:
            print(said[-3000:])
    t = time.monotonic()
    final = bisect(work, "tick", "--config", str(work / "bisector.toml"), log=log)
    walls["bisection_tick_s"] = time.monotonic() - t
    walls["ticks_s"] = sum(tk["wall_s"] for tk in ticks)

    watch_txt = bisect(work, "watch", log=log)
    watch = bisect(work, "watch", "--json", log=log)
    (out_dir / "watch.txt").write_text(watch_txt.stdout + watch_txt.stderr)
    (out_dir / "watch.json").write_text(watch.stdout)
    result: dict[str, Any] = {"package": a.package, "python": python, "shas": shas,
                              "ticks": ticks, "final_tick_exit": final.returncode}
    series: dict[str, Any] = {}
    if watch.returncode == 0:
        suites = json.loads(watch.stdout).get("suites") or [{}]
        series = (suites[0].get("series") or [{}])[0]
    points = series.get("points") or []
    steps = series.get("steps") or []
    result["series"] = [{"build": i, "version": p["version"], "commit": p["commit"][:12],
                         "median": round(p["median"], 4), "n": p["n"]}
                        for i, p in enumerate(points)]
    result["steps"] = [{k: s.get(k) for k in ("index", "kind", "change", "p_value", "before",
                                              "after", "bisection", "state", "culprit")}
                       for s in steps]
    step = next((s for s in steps if s.get("kind") == "slowdown"), None)
    bid = step.get("bisection") if step else None
    shown: dict[str, Any] = {}
    if bid is not None:
        sj = bisect(work, "show", str(bid), "--json", log=log)
        sm = bisect(work, "show", str(bid), log=log)
        (out_dir / "show.json").write_text(sj.stdout)
        (out_dir / "show.md").write_text(sm.stdout + sm.stderr)
        if sj.returncode == 0:
            shown = json.loads(sj.stdout)
    culprit = (shown.get("culprit") or {}).get("sha")
    confirmation = (shown.get("result") or {}).get("confirmation")
    confirmed = isinstance(confirmation, dict) and confirmation.get("status") == "confirmed"
    probes = [p for p in shown.get("probes", []) if not p.get("reused")]
    result["bisection"] = {
        "id": bid, "state": shown.get("state"), "message": shown.get("message"),
        "good": shown.get("good"), "bad": shown.get("bad"),
        "candidates": shown.get("candidates"),
        "culprit": culprit, "confirmation": confirmation,
        "oracle_runs": shown.get("oracle_runs", len(probes)),
        "reproduce": shown.get("reproduce"),
        "overlays": sorted({str((p.get("facts") or {}).get("overlay_base", ""))[:12]
                            for p in probes}),
    }
    started_at = [tk["build"] for tk in ticks if tk["started"]]
    result["step_found_at_tick"] = started_at
    result["walls"] = {k: round(v, 1) for k, v in walls.items()}
    result["walls"]["total_s"] = round(time.monotonic() - t0, 1)
    result["ok"] = bool(
        step is not None and step.get("index") == a.slow_build and len(started_at) == 1
        and culprit == shas["planted"] and confirmed)
    (out_dir / "perf_watch_proof.json").write_text(json.dumps(result, indent=1, default=str))
    (out_dir / "ticks.log").write_text("\n".join(log) + "\n")
    shutil.copy(work / "bisector.toml", out_dir / "bisector.toml")
    if (work / "events").is_dir():
        shutil.copytree(work / "events", out_dir / "events", dirs_exist_ok=True)

    print("\nseries (median per build):")
    for p in result["series"]:
        mark = "  <- planted commit lands here" if p["build"] == a.slow_build else ""
        print(f"  build {p['build']:2d} {p['version']:32s} {p['commit']} "
              f"{p['median']:9.4f} {series.get('unit') or ''}{mark}")
    for s in result["steps"]:
        lo = points[s["index"] - 1]["version"] if s["index"] else "?"
        print(f"change point: {s['kind']} {s['change']:+.1%} (p = {s['p_value']:.2g}) between "
              f"build {s['index'] - 1} ({lo}) and build {s['index']} "
              f"({points[s['index']]['version']}); seen at tick of build {started_at}")
    print(f"bisection {bid}: {result['bisection']['state']}, culprit {str(culprit)[:12]} vs "
          f"planted {shas['planted'][:12]}: {'SAME' if culprit == shas['planted'] else 'DIFFERENT'}"
          f"; confirmation: {(confirmation or {}).get('status')}")
    print(f"oracle runs in the bisection: {result['bisection']['oracle_runs']}, overlay bases "
          f"{result['bisection']['overlays']}")
    print("walls:", json.dumps(result["walls"]), "ticks:", [tk["wall_s"] for tk in ticks])
    print("OK" if result["ok"] else "NOT OK")
    sys.exit(0 if result["ok"] else 1)


if __name__ == "__main__":
    main()
