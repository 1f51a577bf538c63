"""Issue 35 proof, item 2: bisector names the commit, torch's compiler bisector names the
lowering or pass, on the GPU box's installed torch (no build, no network).

Two histories made from the installed torch's Python tree (every probe an overlay on it):

* ``lowering``: the culprit registers ``aten.argmin``'s inductor lowering with the ``argmax``
  reduction (``torch/_inductor/lowering.py``): compiled argmin returns argmax's indices.
* ``post-grad``: the culprit makes the post-grad pass ``remove_profiler_ops``
  (``torch/_inductor/fx_passes/post_grad.py``) also retarget every ``aten.sin`` node to
  ``aten.cos``: the compiled graph computes cos where eager computes sin.

One oracle for both: ``torch.compile`` of ``(argmin(2x+1, dim=1), sin(x).sum(dim=1))`` on a
CUDA tensor against eager. ``bisect start --good fixed --bad main --installed-base ROOT
--offline``; the JSON keeps the culprit, ``result.compiler_bisector`` and
``result.environment_report``, and the issue text is written beside it.

Usage: python proofs/compiler_pass_proof.py --workdir DIR [--python PY] [--harmless N]
       [--which lowering|post-grad|both] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from proofs.issue12_proof import Case, RecipeError, bisect_case, make_history  # noqa: E402
from proofs.overlay_proof import installed_dir  # noqa: E402

ORACLE = '''\
# /// script
# dependencies = []
# [tool.bisector]
# description = "torch.compile of argmin and sin().sum() against eager (issue 35 proof)"
# timeout = 600
# ///
"""torch.compile of (argmin(2x+1, dim=1), sin(x).sum(dim=1)) on CUDA must match eager."""
import sys

import torch

dev = "cuda" if torch.cuda.is_available() else "cpu"


def f(x):
    return torch.argmin(x * 2 + 1, dim=1), torch.sin(x).sum(dim=1)


torch.manual_seed(0)
x = torch.randn(64, 128, device=dev)
got, want = torch.compile(f)(x), f(x)
if not torch.equal(got[0], want[0]):
    print("torch.compile: argmin differs from eager", got[0][:6].tolist(), want[0][:6].tolist())
    sys.exit(1)
if not torch.allclose(got[1], want[1], atol=1e-3):
    print("torch.compile: sin(x).sum() differs from eager")
    sys.exit(1)
print(f"torch {torch.__version__} on {dev}: compiled matches eager")
'''

LOWERING = "torch/_inductor/lowering.py"
POST_GRAD = "torch/_inductor/fx_passes/post_grad.py"


def _replace_once(repo: Path, path: str, old: str, new: str) -> bool:
    file = repo / path
    text = file.read_text()
    if text.count(old) != 1:
        raise RecipeError(f"{path}: expected exactly one {old.splitlines()[0]!r}",
                          old if old in text else "")
    file.write_text(text.replace(old, new))
    return True


def plant_lowering(repo: Path) -> bool:
    return _replace_once(
        repo, LOWERING,
        'reduce_argmin = register_lowering(aten.argmin)(\n'
        '    make_reduction("argmin", override_return_dtype=torch.int64)',
        'reduce_argmin = register_lowering(aten.argmin)(\n'
        '    make_reduction("argmax", override_return_dtype=torch.int64)')


def plant_post_grad(repo: Path) -> bool:
    old = "    for node in reversed(nodes_to_remove):\n        graph.erase_node(node)\n"
    return _replace_once(repo, POST_GRAD, old, old + (
        "    for node in graph.nodes:\n"
        "        if node.op == \"call_function\" and node.target is "
        "torch.ops.aten.sin.default:\n"
        "            node.target = torch.ops.aten.cos.default\n"))


CASES = {
    "lowering": Case("lowering", "compile_vs_eager.py", None, plant_lowering, "",
                     "Lower argmin with a single reduction (plants argmax)"),
    "post-grad": Case("post-grad", "compile_vs_eager.py", None, plant_post_grad, "",
                      "Drop profiler ops in one sweep (plants sin -> cos)"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--harmless", type=int, default=6)
    ap.add_argument("--which", choices=("lowering", "post-grad", "both"), default="both")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    pkg_dir = installed_dir(a.python, "torch")
    report: dict[str, object] = {"pkg_dir": str(pkg_dir)}
    for name in (["lowering", "post-grad"] if a.which == "both" else [a.which]):
        case = CASES[name]
        cdir = a.workdir / name
        shutil.rmtree(cdir, ignore_errors=True)
        cdir.mkdir(parents=True)
        oracle = cdir / case.oracle_file
        oracle.write_text(ORACLE)
        try:
            shas = make_history(case, pkg_dir, cdir / "repo", a.harmless)
        except RecipeError as e:
            report[name] = {"ok": False, "recipe_error": str(e), "lines": e.lines}
            continue
        out = bisect_case(case, oracle, cdir, shas, a.python)
        data = json.loads((cdir / "start.json").read_text() or "{}")
        result = data.get("result") or {}
        out["compiler_bisector"] = result.get("compiler_bisector")
        env = result.get("environment_report") or {}
        out["environment_report"] = {k: env.get(k) for k in ("reused", "obtained", "error")}
        out["collect_env_head"] = (env.get("text") or "").splitlines()[:12]
        found = (out["compiler_bisector"] or {}).get("found") or {}
        out["ok"] = bool(out["ok"]) and bool(found.get("subsystem"))
        report[name] = out
        print(f"== {name}: culprit {out['culprit'] == shas['culprit']}, compiler bisector "
              f"{found}", file=sys.stderr)
    if a.json:
        a.json.write_text(json.dumps(report, indent=1, default=str))
    sys.exit(0 if all(isinstance(v, dict) and v.get("ok") for k, v in report.items()
                      if k != "pkg_dir") else 1)


if __name__ == "__main__":
    main()
