"""Issue 31 proof, item 1: a performance bisection on a GPU that another load shares part of
the time, decided by paired runs.

A history made from the installed torch's Python tree (every probe an overlay on it, no source
build): harmless commits, then a culprit that adds a copy of the input at the top of
``torch.nn.functional.softmax`` (a second pass over a large CUDA tensor: about twice the GPU
time), then harmless commits. The oracle times ``F.softmax`` on an 8192 x 8192 float32 CUDA
tensor, synchronised, ``threshold = "20%"``. While bisector runs, a load of our own making
shares the same GPU part of the time: a process that runs bf16 matrix products for ``--on``
seconds, rests ``--off`` seconds, and so on, logging when it was on. The JSON gives the answer,
the reference's measured drift, each commit's paired change, the confirmation, and the load's
schedule.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
try:
    from proofs.issue12_proof import Case, RecipeError, bisect_case, make_history, plant_slowdown
    from proofs.overlay_proof import installed_dir
except ImportError:  # a `tests` package in site-packages shadows this checkout's namespace
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from issue12_proof import (  # type: ignore[no-redef]
        Case,
        RecipeError,
        bisect_case,
        make_history,
        plant_slowdown,
    )
    from overlay_proof import installed_dir  # type: ignore[no-redef]

ORACLE = '''\
# /// script
# dependencies = []
# [tool.bisector]
# description = "F.softmax on an 8192x8192 float32 CUDA tensor, ms a call (issue 31 proof)"
# timeout = 300
# threshold = "20%"
# ///
"""Performance oracle: eager torch.nn.functional.softmax on a CUDA tensor, synchronised."""

import json
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:
    print(f"cannot import torch: {e}")
    sys.exit(125)
if not torch.cuda.is_available():
    print("no CUDA device")
    sys.exit(125)
x = torch.randn(8192, 8192, device="cuda")
for _ in range(10):
    F.softmax(x, dim=-1)
torch.cuda.synchronize()
samples = []
for _ in range(10):  # 40 calls a sync: a time slice lost to another process is a small part
    t = time.perf_counter()
    for _ in range(40):
        F.softmax(x, dim=-1)
    torch.cuda.synchronize()
    samples.append(round((time.perf_counter() - t) * 1000.0 / 40, 5))
print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}: median "
      f"{sorted(samples)[len(samples) // 2]} ms a call")
print("BISECTOR_RESULT " + json.dumps({"samples": samples, "unit": "ms",
                                      "direction": "lower-is-better",
                                      "metric": "softmax 8192x8192 fp32 ms/call"}))
'''

LOAD = '''\
import json, sys, time
import torch
on, off, log = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
time.sleep(off)
while True:
    start = time.time()
    while time.time() - start < on:
        for _ in range(20):
            a @ b
        torch.cuda.synchronize()
    with open(log, "a") as f:
        f.write(json.dumps({"on": start, "off": time.time()}) + "\\n")
    time.sleep(off)
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--harmless", type=int, default=2)
    ap.add_argument("--on", type=float, default=40.0, help="Seconds the load runs (default 40).")
    ap.add_argument("--off", type=float, default=40.0, help="Seconds it rests (default 40).")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    if a.workdir.exists():
        shutil.rmtree(a.workdir)
    cdir = a.workdir / "perf-gpu"
    cdir.mkdir(parents=True)
    pkg_dir = installed_dir(a.python, "torch")
    case = Case("perf-gpu", "softmax_cuda_perf.py", None,
                lambda repo: plant_slowdown(repo, 0, "input = input.clone()"), "",
                "Copy softmax's input first (plants a second pass over the tensor)")
    try:
        shas = make_history(case, pkg_dir, cdir / "repo", a.harmless)
    except RecipeError as e:
        sys.exit(f"RECIPE ERROR: {e}\n{e.lines}")
    oracle = cdir / case.oracle_file
    oracle.write_text(ORACLE)
    log = a.workdir / "load.jsonl"
    load = subprocess.Popen([a.python, "-c", LOAD, str(a.on), str(a.off), str(log)],
                            env={**os.environ})
    t0 = time.time()
    try:
        res = bisect_case(case, oracle, cdir, shas, a.python)
    finally:
        load.kill()
        load.wait()
    spans = [json.loads(ln) for ln in log.read_text().splitlines()] if log.exists() else []
    res["load"] = {"on_s": a.on, "off_s": a.off, "started": t0,
                   "spans": [(round(s["on"] - t0, 1), round(s["off"] - t0, 1)) for s in spans]}
    res["ok"] = bool(res.get("culprit") == shas["culprit"] and res.get("state") == "done")
    text = json.dumps(res, indent=2, default=str)
    print(text)
    if a.json:
        a.json.write_text(text)
    sys.exit(0 if res["ok"] else 1)


if __name__ == "__main__":
    main()
