"""Run by bisector at a bisection's culprit, in the culprit's environment: PyTorch's own
compiler bisector (``python -m torch._inductor.compiler_bisector run CMD``) over the
bisection's oracle, then one more run of the oracle that names the node at fault.

The compiler bisector turns backends (eager, aot_eager, aot_eager_decomp_partition, inductor)
and their subsystems (passes, lowerings, decompositions, config switches) off until the oracle
passes, and bisects the applications of the subsystem that mattered. Its ``run`` mode keeps
the node's description in the process that lowered it, which is the oracle's, so it prints
"Debug info: not found"; the last run here, with ``TORCH_BISECT_MAX`` at the application it
found, records that node through a ``sitecustomize`` of its own.

Standard library only: it runs in an environment bisector does not own. bisector appends the
oracle to run (``INNER``) below and reads the one ``BISECTOR_RESULT`` line this prints; the
fields are checked again there. Exit 0 whatever the compiler bisector found: the result says.
"""

from __future__ import annotations

import ast
import base64
import contextlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MODULE = "torch._inductor.compiler_bisector"
DONE = re.compile(r"^Bisection complete: (.*)$", re.MULTILINE)
FIELD = re.compile(r"(backend|subsystem|bisect_number|debug_info)=('(?:[^'\\]|\\.)*'"
                   r"|\"(?:[^\"\\]|\\.)*\"|None|-?\d+)")
TAIL = 60  # lines of the compiler bisector's own output kept in the result
# Each oracle run the compiler bisector makes goes through this: one line noted, then the
# oracle itself in its place (its exit is the answer).
# It runs in a scratch folder (so ``python -m`` never imports a source tree's torch) and goes
# back into the oracle's own folder; SIGALRM, which survives exec, is the run's timeout.
COUNT = ("import os, signal, sys\nw = os.environ.get('BISECTOR_COUNT_FILE')\nif w:\n"
         "    open(w, 'a').write('run\\n')\n"
         "os.chdir(os.environ['BISECTOR_ORACLE_CWD'])\n"
         "signal.alarm(int(os.environ.get('BISECTOR_RUN_TIMEOUT', '0')))\n"
         "os.execvp(sys.argv[1], sys.argv[1:])\n")
LOG_READ = 200_000  # of the compiler bisector's log read back, from its end

# Installed in the last run's interpreter: notes the node of the application found.
HOOK = '''\
import importlib.abc, importlib.machinery, json, os, sys

_WANT = "torch._inductor.compiler_bisector"


def _patch(module):
    cls, counter = module.CompilerBisector, module.subsystem_call_counter
    backend, subsystem = os.environ["TORCH_BISECT_BACKEND"], os.environ["TORCH_BISECT_SUBSYSTEM"]
    number, out = int(os.environ["TORCH_BISECT_MAX"]), os.environ["BISECTOR_NODE_FILE"]
    original = cls.disable_subsystem.__func__

    def disable_subsystem(klass, b, s, debug_info=None):
        if b == backend and s == subsystem and debug_info is not None \\
                and counter[s] == number and cls.bisection_enabled:
            found = {"node": str(debug_info())[:500]}
            for cell in getattr(debug_info, "__closure__", None) or ():
                try:
                    value = cell.cell_contents
                except ValueError:
                    continue
                if hasattr(value, "op") and hasattr(value, "target"):
                    found["target"] = str(value.target)[:300]
                    found["op"] = str(value.op)[:40]
            with open(out, "w") as f:
                json.dump(found, f)
        return original(klass, b, s, debug_info)

    cls.disable_subsystem = classmethod(disable_subsystem)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != _WANT:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _patch(module)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _Finder())
'''


def inner_argv(work: Path) -> list[str]:
    """The oracle as a command: a command oracle's argv, else its file written here."""
    if INNER.get("argv"):
        return [str(a) for a in INNER["argv"]]
    script = work / str(INNER["name"])
    script.write_bytes(base64.b64decode(str(INNER["file"])))
    if INNER.get("python", True):
        return [sys.executable, str(script)]
    script.chmod(0o755)
    return [str(script)]


def parse(text: str) -> dict[str, Any] | None:
    """The fields of the last ``Bisection complete: BisectionResult(...)`` line; {} for
    "no issue found"; None when there is no such line."""
    found = DONE.findall(text)
    if not found:
        return None
    line = found[-1].strip()
    if not line.startswith("BisectionResult("):
        return {}
    out: dict[str, Any] = {}
    for name, value in FIELD.findall(line):
        try:
            out[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[name] = None
    return out


def bisect_kind(backend: str, subsystem: str) -> str:
    """``bisect`` for a subsystem applied many times (passes, lowerings), ``switch`` for a
    config change, ``unknown`` when this torch does not say."""
    try:
        from torch._inductor import compiler_bisector as cb  # type: ignore[import-not-found]
    except Exception:  # any failure to import: the kind stays unknown
        return "unknown"
    for sub in cb.BACKENDS.get(backend, []):
        if sub.name == subsystem:
            return "bisect" if isinstance(sub, cb.BisectSubsystem) else "switch"
    return "unknown"


def node_at(argv: list[str], env: dict[str, str], work: Path, found: dict[str, Any]) -> None:
    """One more run with the application found as the last one enabled: the node it lowered
    (or the pass it ran) is written by the hook; the run must fail there, as the search said."""
    hook_dir, node_file = work / "hook", work / "node.json"
    hook_dir.mkdir(exist_ok=True)
    (hook_dir / "sitecustomize.py").write_text(HOOK)
    run_env = {**env, "TORCH_BISECT_BACKEND": found["backend"],
               "TORCH_BISECT_SUBSYSTEM": found["subsystem"],
               "TORCH_BISECT_MAX": str(found["bisect_number"]),
               "TORCH_COMPILE_BACKEND": found["backend"],
               "BISECTOR_NODE_FILE": str(node_file),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(hook_dir),
                                                           env.get("PYTHONPATH")]))}
    timeout = float(INNER.get("timeout") or 0) or None
    try:
        r = subprocess.run(argv, env=run_env, capture_output=True, check=False,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        found["check_exit"] = None
        return
    found["check_exit"] = r.returncode
    if node_file.is_file():
        with contextlib.suppress(ValueError):
            found["node"] = json.loads(node_file.read_text())


def _installed_only() -> None:
    """Never import the torch of the folder this runs in (a command oracle's source tree,
    whose ``torch/`` has no compiled parts): the environment's installed one is probed."""
    here = os.path.realpath(os.getcwd())
    sys.path[:] = [p for p in sys.path if p and os.path.realpath(p) != here]


def main() -> int:
    _installed_only()
    result: dict[str, Any] = {"available": importlib.util.find_spec(MODULE) is not None}
    try:
        import torch  # type: ignore[import-not-found]

        result["torch"] = str(torch.__version__)
    except Exception as e:  # reported, never raised
        result["torch_error"] = f"{type(e).__name__}: {e}"[:300]
    if not result["available"]:
        print("BISECTOR_RESULT " + json.dumps({"compiler_bisector": result}))
        return 0
    work = Path(tempfile.mkdtemp(prefix="compiler-bisect-"))
    argv = inner_argv(work)
    counter = work / "runs"
    env = dict(os.environ)
    env["TORCHINDUCTOR_CACHE_DIR"] = str(work / "inductor")  # its state files live there
    env["BISECTOR_COUNT_FILE"] = str(counter)
    env["BISECTOR_ORACLE_CWD"] = os.getcwd()
    env["BISECTOR_RUN_TIMEOUT"] = str(INNER.get("timeout") or 0)
    t0 = time.monotonic()
    log = work / "log.txt"
    scratch = work / "run"
    scratch.mkdir()
    with log.open("wb") as f:
        r = subprocess.run([sys.executable, "-m", MODULE, "run", sys.executable, "-c", COUNT,
                            *argv], env=env, stdout=f, stderr=subprocess.STDOUT, check=False,
                           cwd=scratch)
    with log.open("rb") as f:
        f.seek(max(0, f.seek(0, 2) - LOG_READ))
        text = f.read().decode(errors="replace")
    sys.stdout.write(text[-20000:].rstrip("\n") + "\n")
    result["seconds"] = round(time.monotonic() - t0, 1)
    result["runs"] = len(counter.read_text().splitlines()) if counter.is_file() else 0
    result["exit"] = r.returncode
    result["log_tail"] = "\n".join(ln[:300] for ln in text.splitlines()[-TAIL:])
    found = parse(text)
    if found is None:
        result["error"] = "the compiler bisector ended without a result line"
    else:
        result["found"] = found
        if found.get("backend") and found.get("subsystem") and isinstance(
                found.get("bisect_number"), int):
            found["kind"] = bisect_kind(found["backend"], found["subsystem"])
            if found["kind"] == "bisect":
                env.pop("BISECTOR_COUNT_FILE")
                node_at(argv, env, work, found)
    print("BISECTOR_RESULT " + json.dumps({"compiler_bisector": result}))
    return 0


INNER: dict[str, Any] = {}  # filled in by bisector below
