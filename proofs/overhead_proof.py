"""Where a GPU probe's time goes (issue 21 item 1): one oracle, run every way that differs.

On the GPU box (torch + triton installed, no network) this runs the same compile-heavy oracle
(``oracles/name_mangling.py``: torch.compile of a user Triton kernel, cold Inductor and Triton
caches on every run) once per *variant*, each variant adding one thing bisector's run adds to a
plain ``python oracle.py``:

- ``direct``: the box's python, the oracle in a fresh folder, this environment;
- ``bytecode``: plus ``PYTHONDONTWRITEBYTECODE=1`` and a fresh ``PYTHONPYCACHEPREFIX``;
- ``tmpdir``: plus ``TMPDIR`` in bisector's cache;
- ``reaper``: under ``bisector/infra/scripts/reaper.py``;
- ``run_oracle``: bisector's own :func:`run_oracle` (all of the above at once);
- ``env_direct`` / ``env_bytecode`` / ``env_run_oracle``: the same three with the python of an
  environment bisector made on the installed torch (``--installed-base``: a virtualenv whose
  torch is a tree of symlinked files).

It also times what a probe does outside the oracle: making that environment, collecting its
facts (a torch import), and the manifest check after the run. Prints one JSON object.

Usage: python overhead_proof.py [--python PY] [--repeat N] [--only a,b] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bisector.artifacts.installable import Installable, InstalledBase, find_installed  # noqa: E402
from bisector.executors import local  # noqa: E402
from bisector.infra.proc import REAPER  # noqa: E402
from bisector.oracle.script import load_oracle  # noqa: E402

ORACLE = ROOT / "oracles" / "name_mangling.py"


def _timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int, str]:
    t = time.monotonic()
    r = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    return time.monotonic() - t, r.returncode, (r.stdout + r.stderr)[-300:]


def variant(name: str, python: str, scratch: Path) -> tuple[float, int, str]:
    """One run of the oracle the way ``name`` says; (seconds, exit code, output tail)."""
    run = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=scratch))
    script = run / ORACLE.name
    shutil.copy(ORACLE, script)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    cmd = [python, str(script)]
    if name.endswith("run_oracle"):
        oracle = load_oracle(str(ORACLE))
        t = time.monotonic()
        res = local.run_oracle(python, oracle, "0" * 40, run / "run", {}, gpu=None)
        return time.monotonic() - t, res.exit_code or 0, res.output_tail[-300:]
    if name.endswith("bytecode"):
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONPYCACHEPREFIX"] = str(run / "pycache")
    if name == "tmpdir":
        tmp = run / "tmp"
        tmp.mkdir()
        env["TMPDIR"] = str(tmp)
    if name == "reaper":
        cmd = [sys.executable, "-I", str(REAPER), "proof|run", "--", *cmd]
    if name in ("sh_direct", "sh_reaper"):
        # when the oracle's own process ended, against when the run was over
        cmd = ["sh", "-c", '"$0" "$1"; rc=$?; date +%s.%N >&2; exit $rc', *cmd]
        if name == "sh_reaper":
            cmd = [sys.executable, "-I", str(REAPER), "proof|run", "--", *cmd]
        secs, rc, tail = _timed(cmd, env, run)
        ended = float(tail.strip().splitlines()[-1])
        return secs, rc, f"after the oracle's exit: {time.time() - ended:.2f}s"
    if name == "gpu_env":
        env.update(CUDA_DEVICE_ORDER="PCI_BUS_ID", CUDA_VISIBLE_DEVICES="0")
    return _timed(cmd, env, run)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default="python3")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--only", default="")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    python = shutil.which(a.python) or a.python
    scratch = Path(tempfile.mkdtemp(prefix="overhead-"))
    out: dict[str, object] = {"python": python}
    # An environment bisector makes on the installed torch, timed.
    site, pkgs = find_installed(python, ("torch",))
    inst = Installable(key="overhead-proof", obtained="installed",
                       installed=InstalledBase("0" * 40, python, site, pkgs))
    ex = local.LocalExecutor(python, "torch", offline=True)
    parts: dict[str, float] = {}

    def timing(name: str, fn):  # type: ignore[no-untyped-def]
        def wrapped(*args, **kw):  # type: ignore[no-untyped-def]
            t0 = time.monotonic()
            try:
                return fn(*args, **kw)
            finally:
                parts[name] = round(parts.get(name, 0.0) + time.monotonic() - t0, 2)
        return wrapped

    for fn_name in ("_logged", "_purelib", "link_tree", "collect_facts", "write_manifest"):
        setattr(local, fn_name, timing(fn_name, getattr(local, fn_name)))
    out["make_env_parts_s"] = parts
    shutil.rmtree(ex.env_dir(inst.key, ()), ignore_errors=True)
    t = time.monotonic()
    env_dir = ex.ensure_env(inst, ())
    out["make_env_s"] = round(time.monotonic() - t, 2)
    out["make_env_parts_s"] = dict(parts)
    env_py = str(env_dir / "bin" / "python")
    t = time.monotonic()
    local.collect_facts(env_py, "torch", "installed")
    out["facts_s"] = round(time.monotonic() - t, 2)
    t = time.monotonic()
    local.changed_files(env_dir)
    out["manifest_check_s"] = round(time.monotonic() - t, 2)
    names = ["direct", "bytecode", "tmpdir", "reaper", "sh_direct", "sh_reaper", "gpu_env",
             "run_oracle",
             "env_direct", "env_bytecode", "env_run_oracle"]
    if a.only:
        names = [n for n in names if n in a.only.split(",")]
    runs: dict[str, list[float]] = {}
    for _ in range(a.repeat):
        for n in names:
            py = env_py if n.startswith("env_") else python
            secs, rc, tail = variant(n, py, scratch)
            runs.setdefault(n, []).append(round(secs, 2))
            print(f"{n:16s} {secs:6.1f}s rc={rc}", flush=True)
            if rc not in (0, 1) or n.startswith("sh_"):
                print("   ", tail.replace("\n", " | "), flush=True)
    out["runs"] = runs
    out["median_s"] = {n: round(statistics.median(v), 2) for n, v in runs.items()}
    text = json.dumps(out, indent=1)
    print(text)
    if a.json:
        Path(a.json).write_text(text)
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
