"""Issue 20, class 4 on a real torch: an overlay says the commit it probes.

On a machine with torch installed (the GPU box) this:

1. makes a git repository whose root commit is the installed ``torch/**/*.py`` tree (with the
   installed ``torch/version.py``, as the wheel generated it);
2. commits one harmless Python change on top (the "later commit");
3. lays that commit over the installed torch exactly as a bisection does (``overlay.check``,
   ``make_overlay`` with the installed torch as base, the local executor's environment with
   ``--system-site-packages``), offline;
4. checks, in that environment, that ``torch.version.git_version`` is the later commit, that
   a ``+git<sha>`` local version part (a source build's) names it too, that the recorded facts
   name the base apart (``overlay_base``, ``artifact``), and that the installed torch's own
   ``version.py`` is unchanged.

tests/adversarial/test_overlay_truth.py checks the same on the synthetic torchlet in CI. This
script is imported by no test and stays free of pytest (the GPU box has only bisector's
dependencies).

Usage: python proofs/overlay_version_proof.py --workdir DIR [--python PY] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bisector.artifacts import overlay  # noqa: E402
from bisector.artifacts.installable import Installable, InstalledBase, find_installed  # noqa: E402
from bisector.executors.local import LocalExecutor  # noqa: E402
from bisector.project.profiles import PYTORCH, TORCHLET  # noqa: E402


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "proof", "GIT_AUTHOR_EMAIL": "proof@localhost",
           "GIT_COMMITTER_NAME": "proof", "GIT_COMMITTER_EMAIL": "proof@localhost"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout.strip()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--package", choices=("torch", "torchlet"), default="torch",
                    help="torchlet: the same procedure on the synthetic package, by hand")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    work: Path = a.workdir
    shutil.rmtree(work, ignore_errors=True)
    os.environ["BISECTOR_HOME"] = str(work / "home")
    os.environ["BISECTOR_CACHE_DIR"] = str(work / "cache")
    pkg = a.package
    profile = PYTORCH if pkg == "torch" else TORCHLET
    site, packages = find_installed(a.python, (pkg,))
    if not packages:
        print(f"error: {a.python} has no {pkg} installed: pass --python of one that has",
              file=sys.stderr)
        return 2
    torch_dir = Path(site) / pkg
    installed_version = (torch_dir / "version.py").read_text()
    repo = work / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    for src in torch_dir.rglob("*.py"):
        if "__pycache__" not in src.parts:
            dest = repo / pkg / src.relative_to(torch_dir)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"Import the installed {pkg} Python tree")
    base = git(repo, "rev-parse", "HEAD")
    harmless = next(repo / pkg / n for n in ("functional.py", "utils.py")
                    if (repo / pkg / n).exists())
    with harmless.open("a") as f:
        f.write("\n# a harmless later change\n")
    git(repo, "commit", "-q", "-am", "A harmless later change")
    target = git(repo, "rev-parse", "HEAD")

    import git as gitpython  # lazy: the script's import order keeps ROOT first on sys.path

    r = gitpython.Repo(repo)
    inst = Installable(f"installed-{base[:12]}", f"installed {pkg} at {base[:12]}",
                       installed=InstalledBase(base, a.python, site, packages))
    result = overlay.check(r, base, target, profile)
    assert result.ok, result.reason
    path = overlay.make_overlay(r, inst.key, base, target, result, profile, base=inst)
    probe = Installable(overlay.overlay_key(inst.key, target, profile),
                        f"overlay of {target[:12]} on installed {base[:12]}",
                        installed=inst.installed, overlay=path)
    env = LocalExecutor(a.python, pkg, offline=True).ensure_env(probe, ())
    facts = json.loads((env / "bisector-facts.json").read_text())
    said = subprocess.run(
        [str(env / "bin" / "python"), "-I", "-c",
         f"import {pkg}, {pkg}.version as v; print(v.git_version); print({pkg}.__version__)"],
        check=True, capture_output=True, text=True, cwd="/").stdout.split()
    out = {"base": base, "target": target, "printed_git_version": said[0],
           "printed_version": said[1], "facts_git_version": facts.get("git_version"),
           "overlay_base": facts.get("overlay_base"), "artifact": facts.get("artifact"),
           "installed_version_py_unchanged":
               (torch_dir / "version.py").read_text() == installed_version}
    print(json.dumps(out, indent=1))
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    ok = (said[0] == target and facts.get("git_version") == target
          and facts.get("overlay_base") == base
          and ("+git" not in said[1] or said[1].endswith(f"+git{target[:7]}"))
          and out["installed_version_py_unchanged"])
    print("overlay version proof:", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
