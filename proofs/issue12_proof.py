"""Issue 12 proof: a flaky oracle and a performance oracle, each bisected on real torch by overlays.

On the GPU box (torch + triton installed, no network, no Docker) this builds, for each case, a
git history from the installed ``torch/**/*.py`` tree and bisects it with every probe an overlay
on the installed torch (``--installed-base <root> --offline``), so nothing is built from source:

* ``flaky``: pytorch#147170. ``make_partition`` in
  ``torch/fx/passes/utils/source_matcher_utils.py`` collects ``input_nodes`` in a ``set`` of fx
  Nodes (hashed by address), so their order is arbitrary. If the installed file still has the
  bug (torch 2.11 does), a fix commit makes it a dict used as an ordered set (graph order) and is
  tagged ``fixed``; if it is already fixed, ``fixed`` is the imported tree. The culprit commit
  turns it back into a ``set``. The oracle is a copy of ``oracles/source_partitions_determinism.py``
  with small R and K (R retraces in each of K processes) and ``flaky = true``: at a bad commit it
  sees the bug only some of the time; at a good commit it never reports bad.
* ``perf``: a busy-wait of ``--slowdown-us`` microseconds at the top of the Python function
  ``torch.nn.functional.softmax``. ``fixed`` is the imported tree as installed. The oracle times
  eager ``F.softmax`` on a small CPU tensor (50 samples after warm-up), prints
  ``BISECTOR_RESULT {"samples": [...], "unit": "ms", "direction": "lower-is-better"}``, exits 0,
  and carries ``threshold = "20%"``: bisector's performance mode decides.

Each history: root = installed tree, [fix commit], tag ``fixed``, N harmless commits, the
culprit, N harmless commits. Then ``bisect start --good fixed --bad main --oracle <path>
--profile pytorch --python PY --installed-base <root> --offline --json`` and ``show ID --format
issue``. A case is ok when the named culprit is the planted commit and no source build happened
(the flaky case also needs the noisy search's answer and no "bad" at a good commit). Exit 0 only
when every case is ok; 2 when a recipe does not match the installed source (the relevant lines
are printed so the recipe can be fixed on the box).

Usage: python proofs/issue12_proof.py --workdir DIR [--python PY] [--harmless N]
       [--which flaky|perf|both] [--json OUT] [--pkg-dir DIR --history-only]
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
try:
    from proofs.overlay_proof import (
        RECIPES,
        git,
        harmless_commits,
        import_tree,
        installed_dir,
    )
except ImportError:  # a `tests` package in site-packages shadows this checkout's namespace
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from overlay_proof import (  # type: ignore[no-redef]
        RECIPES,
        git,
        harmless_commits,
        import_tree,
        installed_dir,
    )

SOURCE_MATCHER = "torch/fx/passes/utils/source_matcher_utils.py"
FUNCTIONAL = "torch/nn/functional.py"
HARMLESS = RECIPES["torch"].harmless  # files the harmless commits append a comment to


class RecipeError(Exception):
    """The installed source does not look as the recipe expects; ``lines`` shows what it has."""

    def __init__(self, message: str, lines: str = "") -> None:
        super().__init__(message)
        self.lines = lines


# --------------------------------------------------------------------------------------------
# Recipe (a): pytorch#147170, input_nodes of make_partition from a set (bug) or in graph order
# --------------------------------------------------------------------------------------------

# `input_nodes = set()` (annotated or not) is the bug; the fix keeps insertion order, which is
# graph order because make_partition walks the partition's nodes in graph order.
SET_INIT = re.compile(r"^(?P<ind>[ \t]*)input_nodes(?:[ \t]*:[^=\n]+)?[ \t]*=[ \t]*set\(\)"
                      r"[ \t]*(?:#.*)?$", re.M)
SET_ADD = re.compile(r"\binput_nodes\.add\((?P<arg>[^()\n]+)\)")
# The fixed spellings unfix understands: ours (`input_nodes: dict[Node, None] = {}` with
# `input_nodes[arg] = None`) and the ones the upstream fix PRs use (`= {}`/`= dict()` with
# `input_nodes[arg] = None` or `.setdefault(arg)`; a list with `.append(arg)`).
ORDERED_INIT = re.compile(r"^(?P<ind>[ \t]*)input_nodes(?:[ \t]*:[^=\n]+)?[ \t]*=[ \t]*"
                          r"(?:\{\}|dict\(\)|\[\]|list\(\))[ \t]*(?:#.*)?$", re.M)
ORDERED_ADD = (
    re.compile(r"\binput_nodes\[(?P<arg>[^\[\]\n]+)\][ \t]*=[ \t]*None\b"),
    re.compile(r"\binput_nodes\.setdefault\((?P<arg>[^,()\n]+)(?:,[ \t]*None)?\)"),
    re.compile(r"\binput_nodes\.append\((?P<arg>[^()\n]+)\)"),
)
RETURN_LIST = re.compile(r"\blist\(input_nodes\)")
FIXED_INIT = "input_nodes: dict[Node, None] = {}  # insertion (graph) order, not a set's"


def _function_span(text: str, name: str, top_level: bool = False) -> tuple[int, int] | None:
    """1-based (first, last) line of the first function called ``name`` (module level only
    when ``top_level``), decorators excluded; None when there is none."""
    tree = ast.parse(text)
    nodes = tree.body if top_level else list(ast.walk(tree))
    for node in nodes:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node.lineno, node.end_lineno or node.lineno
    return None


def _relevant(text: str, span: tuple[int, int] | None, word: str) -> str:
    lines = text.splitlines()
    if span is not None:
        first, last = span
        return "\n".join(f"{i:5d}: {lines[i - 1]}" for i in range(first, last + 1))
    hits = [f"{i:5d}: {line}" for i, line in enumerate(lines, 1) if word in line]
    return "\n".join(hits) or f"(no line mentions {word})"


def _edit_span(text: str, span: tuple[int, int], edit: Callable[[str], str]) -> str:
    lines = text.splitlines(keepends=True)
    first, last = span
    body = edit("".join(lines[first - 1:last]))
    return "".join(lines[:first - 1]) + body + "".join(lines[last:])


def _compiles(text: str, where: str) -> None:
    try:
        compile(text, where, "exec", dont_inherit=True)
    except SyntaxError as e:
        raise RecipeError(f"{where}: the edited file does not compile ({e}): the recipe needs "
                          f"updating", _relevant(text, None, "input_nodes")) from None


def source_matcher_state(text: str) -> str:
    """"set" (the bug), "ordered" (fixed, in a spelling unfix knows), or RecipeError."""
    span = _function_span(text, "make_partition")
    if span is None:
        raise RecipeError(f"{SOURCE_MATCHER}: no function make_partition; the recipe needs "
                          f"updating", _relevant(text, None, "input_nodes"))
    part = "\n".join(text.splitlines()[span[0] - 1:span[1]])
    if not RETURN_LIST.search(part):
        raise RecipeError(f"{SOURCE_MATCHER}: make_partition does not return "
                          f"`list(input_nodes)` (sorted? another order?); the recipe needs "
                          f"updating", _relevant(text, span, "input_nodes"))
    if SET_INIT.search(part) and SET_ADD.search(part):
        return "set"
    if ORDERED_INIT.search(part) and any(p.search(part) for p in ORDERED_ADD):
        return "ordered"
    raise RecipeError(f"{SOURCE_MATCHER}: make_partition builds input_nodes neither as "
                      f"`input_nodes = set()` + `input_nodes.add(arg)` nor as a dict/list "
                      f"(`= {{}}`, `= dict()`, `= []` with `[arg] = None`, `.setdefault(arg)`, "
                      f"`.append(arg)`); the recipe needs updating",
                      _relevant(text, span, "input_nodes"))


def fix_source_matcher(repo: Path) -> bool:
    """Make input_nodes keep graph order; False when the file already does (nothing to fix)."""
    path = repo / SOURCE_MATCHER
    if not path.is_file():
        raise RecipeError(f"{SOURCE_MATCHER} is not in the installed torch tree")
    text = path.read_text()
    if source_matcher_state(text) == "ordered":
        return False
    span = _function_span(text, "make_partition")
    assert span is not None

    def edit(part: str) -> str:
        part = SET_INIT.sub(lambda m: f"{m['ind']}{FIXED_INIT}", part)
        return SET_ADD.sub(lambda m: f"input_nodes[{m['arg']}] = None", part)

    out = _edit_span(text, span, edit)
    _compiles(out, SOURCE_MATCHER)
    if source_matcher_state(out) != "ordered":
        raise RecipeError(f"{SOURCE_MATCHER}: the fix left input_nodes a set",
                          _relevant(out, _function_span(out, "make_partition"), "input_nodes"))
    path.write_text(out)
    return True


def unfix_source_matcher(repo: Path) -> bool:
    """Collect input_nodes in a set again: the bug of pytorch#147170."""
    path = repo / SOURCE_MATCHER
    text = path.read_text()
    if source_matcher_state(text) != "ordered":
        raise RecipeError(f"{SOURCE_MATCHER}: input_nodes is already a set at the fixed tag",
                          _relevant(text, _function_span(text, "make_partition"),
                                    "input_nodes"))
    span = _function_span(text, "make_partition")
    assert span is not None

    def edit(part: str) -> str:
        part = ORDERED_INIT.sub(lambda m: f"{m['ind']}input_nodes = set()", part)
        for p in ORDERED_ADD:
            part = p.sub(lambda m: f"input_nodes.add({m['arg'].strip()})", part)
        return part

    out = _edit_span(text, span, edit)
    _compiles(out, SOURCE_MATCHER)
    if source_matcher_state(out) != "set":
        raise RecipeError(f"{SOURCE_MATCHER}: unfix did not turn input_nodes into a set",
                          _relevant(out, _function_span(out, "make_partition"), "input_nodes"))
    path.write_text(out)
    return True


def flaky_oracle(r: int, k: int) -> str:
    """oracles/source_partitions_determinism.py with R, K = r, k and ``flaky = true``."""
    src = (ROOT / "oracles" / "source_partitions_determinism.py").read_text()
    out, n = re.subn(r"(?m)^R, K = \d+, \d+$", f"R, K = {r}, {k}", src)
    if n != 1:
        raise RecipeError("oracles/source_partitions_determinism.py has no line `R, K = 200, 10`"
                          "; update flaky_oracle()")
    out, n = re.subn(r"(?m)^# \[tool\.bisector\]$",
                     "# [tool.bisector]\n# flaky = true", out, count=1)
    if n != 1:
        raise RecipeError("oracles/source_partitions_determinism.py has no `# [tool.bisector]`")
    out = re.sub(r'(?m)^# description = "(.*)"$',
                 lambda m: f'# description = "{m[1]} (flaky copy: R={r}, K={k})"', out, count=1)
    return out


# --------------------------------------------------------------------------------------------
# Recipe (b): a slowdown at the top of the Python function torch.nn.functional.softmax
# --------------------------------------------------------------------------------------------

SLOW_MARK = "_bisector_slow_until"


def plant_slowdown(repo: Path, us: int, statement: str | None = None) -> bool:
    """Insert a busy-wait of ``us`` microseconds before softmax's first statement (after its
    docstring), or ``statement`` there instead (extra GPU work, for issue 31's proof)."""
    path = repo / FUNCTIONAL
    if not path.is_file():
        raise RecipeError(f"{FUNCTIONAL} is not in the installed torch tree")
    text = path.read_text()
    tree = ast.parse(text)
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "softmax"]
    if len(defs) != 1:
        raise RecipeError(f"{FUNCTIONAL}: {len(defs)} module-level `def softmax` (want 1): "
                          f"pick another Python-level function",
                          _relevant(text, None, "softmax"))
    rebound = [n for n in tree.body if isinstance(n, ast.Assign | ast.AnnAssign)
               and any(isinstance(t, ast.Name) and t.id == "softmax"
                       for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))]
    if rebound:
        raise RecipeError(f"{FUNCTIONAL}: `softmax` is rebound at module level (line "
                          f"{rebound[0].lineno}): the def is not what F.softmax calls",
                          _relevant(text, None, "softmax ="))
    fn = defs[0]
    body = fn.body
    first = body[0]
    if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        if len(body) < 2:
            raise RecipeError(f"{FUNCTIONAL}: softmax has only a docstring",
                              _relevant(text, (fn.lineno, fn.end_lineno or fn.lineno), ""))
        first = body[1]
    if first.lineno == fn.lineno or SLOW_MARK in text:
        raise RecipeError(f"{FUNCTIONAL}: softmax is a one-liner or already slowed down",
                          _relevant(text, (fn.lineno, fn.end_lineno or fn.lineno), ""))
    ind = " " * first.col_offset
    if statement is not None:
        block = f"{ind}{statement}  # {SLOW_MARK}: planted slowdown (bisector proof)\n"
    else:
        block = (f"{ind}# Planted slowdown (bisector issue 12 proof): ~{us} us busy-wait a call.\n"
                 f"{ind}import time as _bisector_time\n\n"
                 f"{ind}{SLOW_MARK} = _bisector_time.perf_counter() + {us}e-6\n"
                 f"{ind}while _bisector_time.perf_counter() < {SLOW_MARK}:\n"
                 f"{ind}    pass\n")
    lines = text.splitlines(keepends=True)
    out = "".join(lines[:first.lineno - 1]) + block + "".join(lines[first.lineno - 1:])
    _compiles(out, FUNCTIONAL)
    path.write_text(out)
    return True


PERF_ORACLE = '''\
# /// script
# dependencies = []
# [tool.bisector]
# description = "Eager F.softmax on a 64x1024 CPU tensor, ms per call (issue 12 perf proof)"
# timeout = 300
# threshold = "20%"
# ///
"""Performance oracle: eager (no torch.compile) torch.nn.functional.softmax on a CPU tensor.

Warm-up, then SAMPLES samples, each the mean time of INNER calls in ms, one thread. The last
line is ``BISECTOR_RESULT {"samples": [...], "unit": "ms", "direction": "lower-is-better"}``;
exit 0 (bisector's performance mode compares the samples with the good endpoint's), 125 when
torch cannot be imported.
"""

import json
import statistics
import sys
import time

WARMUP, SAMPLES, INNER = 50, 50, 20


def main():
    try:
        import torch
        import torch.nn.functional as F
    except Exception as e:  # noqa: BLE001
        print(f"skip: cannot import torch: {e}")
        return 125
    torch.set_num_threads(1)
    # Big enough (about 0.1 ms a call) that a run's median is not at the mercy of the
    # dispatcher's few microseconds: run-to-run spread well under the 20 % threshold.
    x = torch.randn(64, 1024)
    for _ in range(WARMUP):
        F.softmax(x, dim=-1)
    samples = []
    for _ in range(SAMPLES):
        t = time.perf_counter()
        for _ in range(INNER):
            F.softmax(x, dim=-1)
        samples.append(max(round((time.perf_counter() - t) * 1000.0 / INNER, 6), 1e-6))
    print(f"torch {torch.__version__} ({torch.__file__}): F.softmax on 64x1024 CPU, median "
          f"{statistics.median(samples):.4f} ms per call over {SAMPLES} samples x {INNER}")
    print("BISECTOR_RESULT " + json.dumps({"samples": samples, "unit": "ms",
                                           "direction": "lower-is-better"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


# --------------------------------------------------------------------------------------------
# Histories and bisections
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    oracle_file: str
    fix: Callable[[Path], bool] | None  # True: committed as the fix and tagged; False: no-op
    plant: Callable[[Path], bool]
    fix_subject: str
    culprit_subject: str


def cases(r: int, k: int, slowdown_us: int) -> dict[str, tuple[Case, str]]:
    """Each case with its oracle's text."""
    return {
        "flaky": (Case("flaky", "source_partitions_flaky.py", fix_source_matcher,
                       unfix_source_matcher,
                       "Keep get_source_partitions input_nodes in graph order (the fix)",
                       "Collect input_nodes in a set (reintroduces pytorch#147170)"),
                  flaky_oracle(r, k)),
        "perf": (Case("perf", "softmax_perf.py", None,
                      lambda repo: plant_slowdown(repo, slowdown_us), "",
                      f"Check softmax inputs first (plants a {slowdown_us} us busy-wait)"),
                 PERF_ORACLE),
    }


def make_history(case: Case, pkg_dir: Path, repo: Path, harmless: int) -> dict[str, str]:
    """root (installed) [-> fix] = fixed -> harmless x N -> culprit -> harmless x N = main."""
    missing = [f for f in HARMLESS if not (pkg_dir.parent / f).is_file()]
    if missing:
        raise RecipeError(f"harmless target(s) missing from the installed tree: {missing}")
    root = import_tree(pkg_dir, repo)
    fixed_by_commit = bool(case.fix and case.fix(repo))
    if fixed_by_commit:
        git(repo, "commit", "-q", "-am", case.fix_subject)
    elif case.name.startswith("perf"):
        # Timings compare like with like: the installed torch imports without the overlay's
        # path entries, so a good endpoint that is the installed tree itself would be a faster
        # baseline than any overlay. One harmless commit makes the good endpoint an overlay too.
        with (repo / HARMLESS[0]).open("a") as f:
            f.write("\n# the good endpoint, as an overlay like every other probe\n")
        git(repo, "commit", "-q", "-am", "Start of the measured range (an overlay)")
        fixed_by_commit = True
    git(repo, "tag", "fixed")

    harmless_commits(repo, HARMLESS, 0, harmless)
    if not case.plant(repo):
        raise RecipeError(f"{case.name}: planting the bug changed nothing")
    git(repo, "commit", "-q", "-am", case.culprit_subject)
    culprit = git(repo, "rev-parse", "HEAD")
    harmless_commits(repo, HARMLESS, harmless, harmless)
    return {"root": root, "fixed": git(repo, "rev-parse", "fixed"), "culprit": culprit,
            "bad": git(repo, "rev-parse", "HEAD"),
            "fixed_is": "a fix commit on the installed tree" if fixed_by_commit
            else "the installed tree"}


def _median(samples: object) -> float | None:
    if isinstance(samples, list) and samples and all(isinstance(x, int | float) for x in samples):
        return round(statistics.median(samples), 6)
    return None


def bisect_case(case: Case, oracle: Path, cdir: Path, shas: dict[str, str], python: str
                ) -> dict[str, object]:
    db = cdir / "bisector.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])}
    t1 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "bisector", "--db", str(db), "start", "--repo",
         str(cdir / "repo"), "--good", "fixed", "--bad", "main", "--oracle", str(oracle),
         "--profile", "pytorch", "--python", python, "--installed-base", shas["root"],
         "--offline", "--json"],
        capture_output=True, text=True, env=env, check=False,
    )
    wall = time.monotonic() - t1
    sys.stderr.write(r.stderr[-6000:])
    (cdir / "start.json").write_text(r.stdout)
    (cdir / "start.stderr").write_text(r.stderr)
    try:
        data = json.loads(r.stdout)
    except json.JSONDecodeError:
        data = None
    if r.returncode != 0 or not isinstance(data, dict) or "probes" not in data:
        return {"ok": False, "rc": r.returncode, "bisect_wall_seconds": round(wall, 1),
                "stdout": r.stdout[-3000:], "stderr": r.stderr[-3000:]}
    issue = subprocess.run(
        [sys.executable, "-m", "bisector", "--db", str(db), "show", str(data["id"]),
         "--format", "issue"], capture_output=True, text=True, env=env, check=False)
    (cdir.parent / f"issue12_{case.name}_issue.md").write_text(issue.stdout or issue.stderr)

    from sqlalchemy import create_engine, text

    eng = create_engine(f"sqlite:///{db}")
    with eng.connect() as c:
        kinds = [row[0] for row in c.execute(text("select kind from artifact"))]
    eng.dispose()
    result = data.get("result") or {}
    probes = [p for p in data["probes"] if not p.get("reused")]
    culprit_pos = result.get("position")
    confirmation = result.get("confirmation")
    culprit_sha = (data.get("culprit") or {}).get("sha")
    out: dict[str, object] = {
        "ok": False, "state": data.get("state"), "message": data.get("message"),
        "culprit": culprit_sha, "expected_culprit": shas["culprit"],
        "culprit_subject": (data.get("culprit") or {}).get("subject"),
        "candidates": data["candidates"], "probes": len(probes),
        "oracle_runs": data.get("oracle_runs"),
        "confirmation_runs": sum(len(x) for x in (
            (confirmation or {}).get("culprit", []), (confirmation or {}).get("parent", []),
            ((confirmation or {}).get("revert") or {}).get("runs", []))),
        "rounds": data.get("rounds"),
        "verdicts": [(p["position"], p["sha"][:12], p["verdict"], p.get("duration_s"))
                     for p in probes],
        "artifact_kinds": {kd: kinds.count(kd) for kd in sorted(set(kinds))},
        "source_builds": kinds.count("source"),
        "result_kind": result.get("kind"), "noisy": result.get("noisy"),
        "confirmation": confirmation, "bisect_wall_seconds": round(wall, 1),
        "shas": shas, "issue_report": str(cdir.parent / f"issue12_{case.name}_issue.md"),
    }
    ok = culprit_sha == shas["culprit"] and "source" not in kinds
    if case.name == "flaky":
        before = [p for p in probes if culprit_pos is not None and p["position"] < culprit_pos]
        after = [p for p in probes if culprit_pos is not None and p["position"] >= culprit_pos]
        good_runs = [x["verdict"] for x in (confirmation or {}).get("parent", [])] + [
            x["verdict"] for x in ((confirmation or {}).get("revert") or {}).get("runs", [])]
        bad_runs = [x["verdict"] for x in (confirmation or {}).get("culprit", [])]
        good_said_bad = (sum(p["verdict"] == "bad" for p in before)
                         + good_runs.count("bad"))
        bad_said_good = (sum(p["verdict"] == "good" for p in after) + bad_runs.count("good"))
        out.update({"good_commits_reported_bad": good_said_bad,
                    "bad_commits_reported_good": bad_said_good,
                    "flakiness_observed": bad_said_good > 0})
        ok = ok and result.get("noisy") is not None and good_said_bad == 0
    else:
        out["perf"] = result.get("perf")
        out["perf_probe_medians_ms"] = [
            (p["position"], p["sha"][:12], p["verdict"],
             _median(((p.get("facts") or {}).get("perf")
                      or (p.get("facts") or {}).get("result") or {}).get("samples")))
            for p in probes]
    out["ok"] = ok
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--python", default=sys.executable,
                    help="The interpreter whose torch is the installed base (default: this).")
    ap.add_argument("--harmless", type=int, default=20,
                    help="Harmless commits before and after the culprit (default 20).")
    ap.add_argument("--which", choices=("flaky", "perf", "both"), default="both")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--flaky-r", type=int, default=3, help="Retraces per process (default 3).")
    ap.add_argument("--flaky-k", type=int, default=1, help="Processes per run (default 1).")
    ap.add_argument("--slowdown-us", type=int, default=200)
    ap.add_argument("--pkg-dir", type=Path, default=None,
                    help="The torch package directory to import (default: --python's torch).")
    ap.add_argument("--history-only", action="store_true",
                    help="Build the histories and write the oracles; do not bisect.")
    a = ap.parse_args()
    a.workdir.mkdir(parents=True, exist_ok=True)
    if not a.history_only and importlib.util.find_spec("sqlalchemy") is None:
        sys.exit("install bisector's dependencies first")
    pkg_dir = a.pkg_dir.resolve() if a.pkg_dir else installed_dir(a.python, "torch")
    names = ["flaky", "perf"] if a.which == "both" else [a.which]
    table = cases(a.flaky_r, a.flaky_k, a.slowdown_us)
    report: dict[str, object] = {"pkg_dir": str(pkg_dir), "harmless": a.harmless,
                                 "flaky_r": a.flaky_r, "flaky_k": a.flaky_k,
                                 "slowdown_us": a.slowdown_us}
    prepared = {}
    for name in names:  # every history first: a recipe that does not match stops before any run
        case, oracle_text = table[name]
        cdir = a.workdir / name
        if cdir.exists():
            shutil.rmtree(cdir)
        cdir.mkdir(parents=True)
        t0 = time.monotonic()
        try:
            shas = make_history(case, pkg_dir, cdir / "repo", a.harmless)
        except RecipeError as e:
            sys.stderr.write(f"\nRECIPE ERROR ({name}): {e}\n{e.lines}\n")
            report[name] = {"ok": False, "recipe_error": str(e), "relevant_lines": e.lines}
            report["ok"] = False
            text_out = json.dumps(report, indent=2, default=str)
            print(text_out)
            if a.json:
                a.json.write_text(text_out)
            sys.exit(2)
        oracle = cdir / case.oracle_file
        oracle.write_text(oracle_text)
        prepared[name] = (case, oracle, cdir, shas, round(time.monotonic() - t0, 1))
        sys.stderr.write(f"== {name}: history in {prepared[name][4]}s, fixed={shas['fixed'][:12]}"
                         f" ({shas['fixed_is']}), culprit={shas['culprit'][:12]}, "
                         f"oracle {oracle}\n")
    for name, (case, oracle, cdir, shas, made) in prepared.items():
        if a.history_only:
            report[name] = {"ok": None, "shas": shas, "oracle": str(oracle),
                            "history_seconds": made}
            continue
        t = time.monotonic()
        res = bisect_case(case, oracle, cdir, shas, a.python)
        res["history_seconds"] = made
        res["case_wall_seconds"] = round(time.monotonic() - t + made, 1)
        report[name] = res
        sys.stderr.write(f"== {name}: ok={res['ok']} in {res['case_wall_seconds']}s\n")
        if a.json:  # after each case: a run cut short still leaves the finished cases
            a.json.write_text(json.dumps(report, indent=2, default=str))
    report["ok"] = (None if a.history_only
                    else all(isinstance(report[n], dict) and report[n].get("ok") for n in names))
    text_out = json.dumps(report, indent=2, default=str)
    print(text_out)
    if a.json:
        a.json.write_text(text_out)
    sys.exit(0 if report["ok"] or a.history_only else 1)


if __name__ == "__main__":
    main()
