"""A pure-Python project named ``torch`` whose history breaks one "inductor lowering": the test
world of what runs at a culprit (run/at_culprit.py) where no real torch can be installed.

Its ``torch._inductor.compiler_bisector`` speaks the real one's protocol as far as bisector
uses it: ``python -m torch._inductor.compiler_bisector run CMD`` runs CMD with
``TORCH_COMPILE_BACKEND``/``TORCH_BISECT_BACKEND``/``TORCH_BISECT_SUBSYSTEM``/
``TORCH_BISECT_MAX``, bisects the applications of the ``lowerings`` subsystem and prints
``Bisection complete: BisectionResult(...)``; ``CompilerBisector.disable_subsystem`` with its
``subsystem_call_counter``, ``bisection_enabled`` and ``BACKENDS`` is what the lowering calls
and what bisector's hook wraps. Its ``torch.utils.collect_env`` has ``get_env_info`` and
``pretty_str``. The real ones run in the GPU proof (proofs/compiler_pass_proof.py).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "torch"
version = "2.99.0"

[tool.setuptools.packages.find]
include = ["torch*"]
"""

INIT = '''\
"""A stand-in torch: compile() runs a fixed graph through the inductor lowerings."""
__version__ = "2.99.0"


def compile(fn):
    from torch import _inductor

    return _inductor.compiled(fn)
'''

INDUCTOR = '''\
import os

from torch._inductor import lowering


def compiled(fn):
    def run(xs):
        backend = os.environ.get("TORCH_BISECT_BACKEND") or "inductor"
        return fn(xs) if backend != "inductor" else lowering.lower(fn(None), xs)

    return run
'''

LOWERING = '''\
from torch._inductor.compiler_bisector import CompilerBisector


class Node:
    def __init__(self, name, target):
        self.op, self.name, self.target = "call_function", name, target

    def __repr__(self):
        return self.name


def _argmin(xs):
    return min(range(len(xs)), key=xs.__getitem__)


LOWERINGS = {"aten.sum.default": sum, "aten.max.default": max,
             "aten.argmin.default": _argmin}
EAGER = {"aten.sum.default": sum, "aten.max.default": max,
         "aten.argmin.default": lambda xs: min(range(len(xs)), key=xs.__getitem__)}


def lower(graph, xs):
    out = []
    for name in graph:
        n = Node(name.split(".")[1], name)
        fallback = CompilerBisector.disable_subsystem("inductor", "lowerings", lambda: repr(n))
        out.append((EAGER if fallback else LOWERINGS)[name](xs))
    return out
'''

BISECTOR = '''\
"""The compiler bisector's command line, as far as bisector uses it."""
import collections
import os
import subprocess
import sys


class BisectSubsystem:
    def __init__(self, name):
        self.name = name


BACKENDS = {"eager": [], "aot_eager": [], "inductor": [BisectSubsystem("lowerings")]}
subsystem_call_counter = collections.Counter()


class CompilerBisector:
    bisection_enabled = bool(os.environ.get("TORCH_BISECT_BACKEND"))

    @classmethod
    def disable_subsystem(cls, backend, subsystem, debug_info=None):
        if not cls.bisection_enabled or os.environ.get("TORCH_BISECT_BACKEND") != backend \\
                or os.environ.get("TORCH_BISECT_SUBSYSTEM") != subsystem:
            return False
        count = subsystem_call_counter[subsystem]
        subsystem_call_counter[subsystem] += 1
        return count > int(os.environ.get("TORCH_BISECT_MAX", "-1"))


def run(cmd):
    def ok(**env):
        return subprocess.run(cmd, env={**os.environ, **env}).returncode == 0

    for backend in ("eager", "aot_eager", "inductor"):
        if not ok(TORCH_COMPILE_BACKEND=backend, TORCH_BISECT_BACKEND=backend):
            break
    else:
        print("\\nBisection complete: no issue found")
        return
    both = {"TORCH_BISECT_BACKEND": backend, "TORCH_BISECT_SUBSYSTEM": "lowerings"}
    if not ok(**both, TORCH_BISECT_MAX="-1"):
        print(f"\\nBisection complete: BisectionResult(backend={backend!r}, subsystem=None, "
              f"bisect_number=None, debug_info=None)")
        return
    low, high = 0, 8
    while low < high:
        mid = (low + high) // 2
        if ok(**both, TORCH_BISECT_MAX=str(mid)):
            low = mid + 1
        else:
            high = mid
    print(f"Binary search completed. The bisect number is {low}. Debug info: not found")
    print(f"\\nBisection complete: BisectionResult(backend={backend!r}, "
          f"subsystem='lowerings', bisect_number={low}, debug_info=None)")


if __name__ == "__main__":
    sys.exit(run(sys.argv[2:]) if sys.argv[1:2] == ["run"] else 1)
'''

COLLECT_ENV = '''\
import collections
import sys

Info = collections.namedtuple("Info", "torch_version python_version pip_version pip_packages")


def get_env_info():
    import torch

    return Info(torch.__version__, sys.version.split()[0], "pip3", None)


def pretty_str(info):
    return (f"PyTorch version: {info.torch_version}\\nIs debug build: False\\n"
            f"Python version: {info.python_version}\\n\\nVersions of relevant libraries:\\n"
            + "\\n".join(f"[pip3] {p}" for p in (info.pip_packages or "").splitlines()))
'''

ORACLE = '''\
"""argmin of a list through torch.compile (the stand-in's inductor) against eager."""
import sys

import torch

GRAPH = ["aten.sum.default", "aten.max.default", "aten.argmin.default"]


def graph(xs):
    if xs is None:
        return GRAPH
    return [sum(xs), max(xs), min(range(len(xs)), key=xs.__getitem__)]


xs = [3, 1, 4, 1, 5, 9, 2, 6]
got, want = torch.compile(graph)(xs), graph(xs)
if got != want:
    print(f"torch._inductor lowered it wrong: {got} != {want}", file=sys.stderr)
    sys.exit(1)
'''

# The culprit: argmin's lowering picks the largest element.
BROKEN = "def _argmin(xs):\n    return max(range(len(xs)), key=xs.__getitem__)\n"


@dataclass(frozen=True)
class CompileWorld:
    path: Path
    good: str
    culprit: str
    bad: str
    oracle: Path


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=Lowering", "-c",
                           "user.email=lowering@example.com", *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout.strip()


def make_compile_world(root: Path, harmless: int = 4, bisector: bool = True) -> CompileWorld:
    """The history (``bisector``: False for a torch without the compiler bisector)."""
    repo = root / "torch-lowerings"
    files = {"pyproject.toml": PYPROJECT, "torch/__init__.py": INIT,
             "torch/_inductor/__init__.py": INDUCTOR, "torch/_inductor/lowering.py": LOWERING,
             "torch/_inductor/compiler_bisector.py": BISECTOR,
             "torch/utils/__init__.py": "", "torch/utils/collect_env.py": COLLECT_ENV}
    if not bisector:  # the lowering's call becomes a no-op without the module
        files.pop("torch/_inductor/compiler_bisector.py")
        files["torch/_inductor/lowering.py"] = LOWERING.replace(
            "from torch._inductor.compiler_bisector import CompilerBisector\n",
            "class CompilerBisector:\n    disable_subsystem = staticmethod(lambda *a: False)\n")
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "A torch with three lowerings")
    good = _git(repo, "rev-parse", "HEAD")

    def harmless_commits(first: int) -> None:
        for i in range(first, first + harmless):
            with (repo / "torch" / "__init__.py").open("a") as f:
                f.write(f"# harmless change {i}\n")
            _git(repo, "commit", "-q", "-am", f"Harmless change {i}")

    harmless_commits(0)
    low = repo / "torch/_inductor/lowering.py"
    text = low.read_text()
    start = text.index("def _argmin(xs):")
    end = text.index("\n\n", start)
    low.write_text(text[:start] + BROKEN.rstrip("\n") + text[end:])
    _git(repo, "commit", "-q", "-am", "Lower argmin with one reduction pass")
    culprit = _git(repo, "rev-parse", "HEAD")
    harmless_commits(harmless)
    oracle = root / "argmin_compiled.py"
    oracle.write_text(ORACLE)
    return CompileWorld(repo, good, culprit, _git(repo, "rev-parse", "HEAD"), oracle)
