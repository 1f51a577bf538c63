"""Issue 10's GPU-box proof: the nightly watch on SQLite with no network.

The box has one torch installed. Its Python tree becomes a history (root = the installed tree,
which has pytorch#170398; N harmless commits; the fix; N harmless commits = main), and two
"nightlies" are made from it: virtualenvs whose ``torch`` is the installed one mirrored file by
file (symlinks, as bisector's ``--installed-base`` does), with the files of a history commit
laid over it and ``torch/version.py`` naming that commit. Nightly 1 is the installed torch
itself (only its ``git_version`` differs), nightly 2 the installed torch with the fix.

Steps (each its own ``bisect tick``, as a timer would run them):

- ``setup``: the history, both nightlies, ``bisector.toml``.
- ``shipped``: a tick of the suite ``shipped`` (the shipped oracles against nightly 1).
- ``flip``: a tick of ``nightly`` on nightly 1, then the config points at nightly 2 and a
  tick sees ``name_mangling`` go bad -> good: it starts the find-fix bisection and runs it.

Usage: python proofs/issue10_proof.py STEP --workdir DIR [--harmless N] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from bisector.executors.envfiles import link_tree  # noqa: E402
from proofs.overlay_proof import (  # noqa: E402
    RECIPES,
    git,
    harmless_commits,
    import_tree,
    installed_dir,
)

SHIPPED = ("name_mangling", "recompile_out_variant", "source_partitions_determinism")


def make_history(pkg_dir: Path, repo: Path, harmless: int) -> dict[str, str]:
    """root (installed, with the bug) -> harmless x N -> fix -> harmless x N = main."""
    recipe = RECIPES["torch"]
    root = import_tree(pkg_dir, repo)

    harmless_commits(repo, recipe.harmless, 0, harmless)
    if recipe.fix(repo) == 0:
        sys.exit("the #170398 fix found nothing to change in the installed torch")
    git(repo, "commit", "-q", "-am", "Escape leading __ in generated names (fixes #170398)")
    fix = git(repo, "rev-parse", "HEAD")
    harmless_commits(repo, recipe.harmless, harmless, harmless)
    return {"root": root, "fix": fix, "main": git(repo, "rev-parse", "HEAD")}


def make_nightly(pkg_dir: Path, repo: Path, sha: str, root: str, venv: Path) -> Path:
    """A virtualenv whose torch is the installed one with ``sha``'s changed files over it."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c",
                                "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    link_tree(pkg_dir, site / "torch")
    changed = git(repo, "diff", "--name-only", root, sha, "--", "torch").split()
    for path in [*changed, "torch/version.py"]:
        dest = site / path
        if dest.is_symlink() or dest.exists():
            dest.unlink()
        text = git(repo, "show", f"{sha}:{path}")
        if path == "torch/version.py":
            text = re.sub(r"git_version = .*", f"git_version = '{sha}'", text)
        dest.write_text(text + "\n")
    # The installed torch's own dependencies (triton, nvidia-*, numpy) beside it, as links: a
    # .pth would not do, since bisector's environments add this folder by a .pth of their
    # own and Python reads .pth files only in site folders.
    for entry in pkg_dir.parent.iterdir():
        dest = site / entry.name
        if entry.name != "torch" and not dest.exists() and entry.name != "__pycache__":
            dest.symlink_to(entry)
    return venv / "bin" / "python"


def config(work: Path, shas: dict[str, str], nightly: Path) -> None:
    repo = work / "repo"
    (work / "bisector.toml").write_text(f"""\
[watch]
bisect = true
events = "{work / 'events'}"

[notify]
command = "sh -c 'cat > {work}/last-event.json'"

[[suite]]
name = "shipped"
repo = "{repo}"
oracles = {json.dumps(list(SHIPPED))}
torch = "installed"
python = "{work / 'nightly1' / 'bin' / 'python'}"
profile = "pytorch"

[[suite]]
name = "nightly"
repo = "{repo}"
oracles = ["name_mangling"]
torch = "installed"
python = "{nightly}"
profile = "pytorch"
[suite.bisect]
installed-base = "{shas['main'] if nightly.parent.parent.name == 'nightly2' else shas['root']}"
offline = true
""")


def bisect(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BISECTOR_HOME": str(work / "home")}
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "bisector", *args], capture_output=True,
                       text=True, env=env, check=False)
    print(f"$ bisect {' '.join(args)}  -> exit {r.returncode} in {time.monotonic() - t:.1f}s",
          flush=True)
    sys.stdout.write(r.stdout[-4000:])
    sys.stdout.write(r.stderr[-4000:])
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=["setup", "shipped", "flip"])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--harmless", type=int, default=8)
    ap.add_argument("--python", default="python3")
    args = ap.parse_args()
    work = args.workdir
    tick = ["tick", "--config", str(work / "bisector.toml")]
    if args.step == "setup":
        t = time.monotonic()
        pkg_dir = installed_dir(args.python, "torch")
        shas = make_history(pkg_dir, work / "repo", args.harmless)
        for name, sha in (("nightly1", shas["root"]), ("nightly2", shas["main"])):
            make_nightly(pkg_dir, work / "repo", sha, shas["root"], work / name)
        (work / "shas.json").write_text(json.dumps(shas))
        config(work, shas, work / "nightly1" / "bin" / "python")
        print(f"history and nightlies in {time.monotonic() - t:.1f}s: {shas}")
        for name in ("nightly1", "nightly2"):
            py = work / name / "bin" / "python"
            print(name, subprocess.run([str(py), "-c", "import torch; print(torch.__version__, "
                                        "torch.version.git_version, torch.__file__, "
                                        "torch.cuda.is_available())"],
                                       capture_output=True, text=True).stdout.strip())
        return
    shas = json.loads((work / "shas.json").read_text())
    if args.step == "shipped":
        bisect(work, *tick, "--suite", "shipped")
        bisect(work, "watch", "--json")
        return
    bisect(work, *tick, "--suite", "nightly")  # nightly 1: the installed torch, bad
    config(work, shas, work / "nightly2" / "bin" / "python")
    r = bisect(work, *tick, "--suite", "nightly")  # nightly 2: the fix, good -> a flip
    w = bisect(work, "watch", "--json")
    out = {"tick_exit": r.returncode, "expected_fix": shas["fix"], "shas": shas}
    if w.returncode == 0:
        out["watch"] = json.loads(w.stdout)
    listed = bisect(work, "list", "--json")
    if listed.returncode == 0 and json.loads(listed.stdout):
        bid = json.loads(listed.stdout)[0]["id"]
        shown = bisect(work, "show", str(bid), "--json")
        if shown.returncode == 0:
            d = json.loads(shown.stdout)
            out["bisection"] = {k: d.get(k) for k in ("id", "state", "find_fix", "candidates",
                                                       "oracle_runs", "message")}
            out["bisection"]["culprit"] = (d.get("culprit") or {}).get("sha")
            out["ok"] = out["bisection"]["culprit"] == shas["fix"]
    event = work / "last-event.json"
    if event.exists():
        out["last_event"] = json.loads(event.read_text())
    (work / "issue10_proof.json").write_text(json.dumps(out, indent=1, default=str))
    print(json.dumps({k: out.get(k) for k in ("ok", "bisection", "expected_fix")}, indent=1))


if __name__ == "__main__":
    main()
