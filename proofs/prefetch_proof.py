"""GPU-box proof of the prefetch (run/prefetch.py): the overlay proof history bisected over
torch-sized nightly wheels served by an index on 127.0.0.1 throttled to a realistic rate, with
``--prefetch 0`` (each probe downloads, installs, then runs) and with the default.

1. the overlay proof history (proofs/overlay_proof.py: the installed torch's Python tree,
   the fix of pytorch#170398, ``--harmless`` commits, the commit that brings the bug back, as
   many again);
2. a nightly wheel every ``--nightly-every`` commits: the box's own torch (1.1 GB, its compiled
   libraries), that commit's Python files, ``git_version`` set to the commit, versioned
   ``<base>.devYYYYMMDD+<variant>``; its dependencies (nvidia-*, triton) come from the box's
   site-packages through a ``.pth`` in the wheel, as the box has no network;
3. each mode from an empty home (its own uv cache, Inductor and Triton caches): ``bisect start
   --good fixed --bad main --oracle name_mangling --nightly-index <throttled index>``;
4. per mode: wall time, the oracle runs' time, the first probe's obtaining, the ratio of the
   first over the two others, seconds made ahead, the culprit and the oracle runs.

Usage: python prefetch_proof.py --workdir DIR --mode off|on [--harmless N] [--every K]
       [--wheel-s S] [--json OUT]   (the history and wheels are made once per workdir)
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import subprocess
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

from overlay_proof import RECIPES, git, installed_dir, make_history  # noqa: E402

from bisector.app.demo.index import IndexServer  # noqa: E402


def _dist_info(site: Path) -> Path:
    return next(site.glob("torch-*.dist-info"))


def make_wheel(repo: Path, sha: str, torch_dir: Path, version: str, dest_dir: Path) -> Path:
    """The box's torch as the nightly of ``sha``: its files, with ``sha``'s Python files and a
    version.py naming ``sha``."""
    site = torch_dir.parent
    info = _dist_info(site)
    tag = next(line.split(":", 1)[1].strip() for line in (info / "WHEEL").read_text()
               .splitlines() if line.startswith("Tag:"))
    name = f"torch-{version}-{tag}.whl"
    dest = dest_dir / name
    if dest.exists():
        return dest
    changed = set(git(repo, "diff", "--name-only", "fixed~1", sha).split())
    tmp = dest.with_suffix(".tmp")
    info_name = f"torch-{version}.dist-info"
    records = []
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
        for path in sorted(torch_dir.rglob("*")):
            if path.is_dir() or "__pycache__" in path.parts:
                continue
            arc = f"torch/{path.relative_to(torch_dir).as_posix()}"
            if arc == "torch/version.py":
                continue
            if arc in changed:
                z.writestr(arc, subprocess.run(["git", "-C", str(repo), "show", f"{sha}:{arc}"],
                                               check=True, capture_output=True).stdout)
            else:
                z.write(path, arc)
            records.append(arc)
        text = (torch_dir / "version.py").read_text()
        lines = [f"git_version = '{sha}'" if line.startswith("git_version") else
                 f"__version__ = '{version}'" if line.startswith("__version__") else line
                 for line in text.splitlines()]
        z.writestr("torch/version.py", "\n".join(lines) + "\n")
        records.append("torch/version.py")
        # The box has no network: torch's dependencies are the box's own, found through this.
        z.writestr("bisector-proof-site.pth", f"{site}\n")
        records.append("bisector-proof-site.pth")
        meta = [line for line in (info / "METADATA").read_text().splitlines()
                if not line.startswith("Requires-Dist:")]
        meta = [f"Version: {version}" if line.startswith("Version:") else line for line in meta]
        z.writestr(f"{info_name}/METADATA", "\n".join(meta) + "\n")
        z.writestr(f"{info_name}/WHEEL", (info / "WHEEL").read_text())
        records += [f"{info_name}/METADATA", f"{info_name}/WHEEL", f"{info_name}/RECORD"]
        z.writestr(f"{info_name}/RECORD", "".join(f"{r},,\n" for r in records))
    tmp.rename(dest)
    return dest


def setup(workdir: Path, python: str, harmless: int, every: int) -> dict[str, object]:
    state = workdir / "setup.json"
    if state.exists():
        return json.loads(state.read_text())  # type: ignore[no-any-return]
    t0 = time.monotonic()
    torch_dir = installed_dir(python, "torch")
    shas = make_history(torch_dir, workdir / "repo", RECIPES["torch"], harmless)
    repo = workdir / "repo"
    main = git(repo, "rev-list", "--first-parent", "--reverse", "fixed~1..main").split()
    nightly = main[::every]
    if main[-1] not in nightly:
        nightly.append(main[-1])
    # The box's torch version and variant, as torch says them (2.11.0+cu130).
    said = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", (torch_dir / "version.py").read_text())
    assert said, "torch/version.py names no __version__"
    base, _, variant = said.group(1).partition("+")
    variant = variant or "cpu"
    today = dt.date.today()
    files = workdir / "index" / f"nightly-{variant}" / "files"
    files.mkdir(parents=True, exist_ok=True)
    jobs = []
    with ThreadPoolExecutor(4) as pool:
        for i, sha in enumerate(nightly):
            day = today + dt.timedelta(days=i - len(nightly) // 2)
            version = f"{base}.dev{day:%Y%m%d}+{variant}"
            jobs.append(pool.submit(make_wheel, repo, sha, torch_dir, version, files))
        wheels = [j.result().name for j in jobs]
    got = {"shas": shas, "nightly_commits": nightly, "wheels": wheels, "variant": variant,
           "candidates": len(main), "setup_s": round(time.monotonic() - t0, 1),
           "wheel_bytes": (files / wheels[0]).stat().st_size}
    state.write_text(json.dumps(got, indent=2))
    return got


def bisect(workdir: Path, python: str, mode: str, index: str, variant: str) -> dict[str, object]:
    home = workdir / f"home-{mode}"
    path = os.pathsep.join(x for x in (str(ROOT), os.environ.get("PYTHONPATH", "")) if x)
    env = {**os.environ, "PYTHONPATH": path, "BISECTOR_HOME": str(home),
           "TORCHINDUCTOR_CACHE_DIR": str(home / "inductor"),
           "TRITON_CACHE_DIR": str(home / "triton")}
    env.pop("BISECTOR_CACHE_DIR", None)
    env.pop("BISECTOR_DB", None)
    cmd = [sys.executable, "-m", "bisector", "start", "--repo", str(workdir / "repo"),
           "--good", "fixed", "--bad", "main", "--oracle", "name_mangling", "--profile",
           "pytorch", "--python", python, "--nightly-index", index, "--variant", variant,
           "--release-index", "", "--no-confirm", "--json",
           *(["--prefetch", "0"] if mode == "off" else [])]
    t0, began = time.monotonic(), dt.datetime.now(dt.UTC)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.monotonic() - t0
    ended = dt.datetime.now(dt.UTC)
    (workdir / f"start-{mode}.err").write_text(r.stderr)
    if r.returncode != 0:
        return {"ok": False, "rc": r.returncode, "stderr": r.stderr[-3000:]}
    d = json.loads(r.stdout)
    ran = [p for p in d["probes"] if not p["reused"] and p.get("phases")]
    oracle_s = sum(float(p["phases"]["oracle"]) for p in ran)
    first = float(ran[0]["phases"]["obtain"]) if ran else 0.0
    def at(p: dict[str, object]) -> dt.datetime:
        t = dt.datetime.fromisoformat(str(p["started_at"]))
        return t if t.tzinfo else t.replace(tzinfo=dt.UTC)

    # Wall time outside the probes: before the first (interpreter, index listing, history
    # walk) and after the last (the answer, the reports).
    last = ran[-1] if ran else None
    before = (at(ran[0]) - began).total_seconds() if ran else 0.0
    after = ((ended - at(last)).total_seconds() - sum(last["phases"].values())
             if last else 0.0)
    show = subprocess.run([sys.executable, "-m", "bisector", "show", "last"], env=env,
                          capture_output=True, text=True, check=False)
    (workdir / f"show-{mode}.md").write_text(show.stdout + show.stderr)
    return {"ok": True, "wall_s": round(wall, 1), "culprit": d["culprit"]["sha"],
            "oracle_runs": len(ran), "oracle_s": round(oracle_s, 1),
            "first_obtain_s": round(first, 1), "ratio": round(wall / (oracle_s + first), 3),
            "before_first_probe_s": round(before, 1), "after_last_probe_s": round(after, 1),
            "made_ahead_s": round(sum(sum((p["facts"].get("ahead") or {}).values())
                                      for p in ran), 1),
            "probes": [{"sha": p["sha"][:12], "verdict": p["verdict"], "artifact": p["artifact"],
                        "phases": p["phases"], "ahead": p["facts"].get("ahead")} for p in ran]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--mode", choices=("off", "on"), required=True)
    ap.add_argument("--harmless", type=int, default=8)
    ap.add_argument("--every", type=int, default=4)
    ap.add_argument("--wheel-s", type=float, default=15.0)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    a.workdir.mkdir(parents=True, exist_ok=True)
    made = setup(a.workdir, a.python, a.harmless, a.every)
    with IndexServer(a.workdir / "index") as server:
        server.state.slow_s = a.wheel_s
        got = bisect(a.workdir, a.python, a.mode, server.index_url(f"nightly-{made['variant']}"),
                     str(made["variant"]))
    shas = made["shas"]
    assert isinstance(shas, dict)
    result = {"mode": a.mode, "wheel_s": a.wheel_s, **{k: v for k, v in made.items()
                                                        if k != "shas"},
              "expected_culprit": shas["culprit"], **got}
    result["right"] = got.get("culprit") == shas["culprit"]
    text = json.dumps(result, indent=2)
    print(text)
    if a.json:
        a.json.write_text(text)
    sys.exit(0 if result["right"] else 1)


if __name__ == "__main__":
    main()
