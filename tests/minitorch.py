"""A tiny repository laid out like PyTorch for the builder recipe: a ``torch`` package with a C
extension, ``requirements.txt``, a setup.py that takes its version from
``PYTORCH_BUILD_VERSION``, and a ``third_party/mini`` submodule whose header the extension
includes. The regression is a submodule bump: only a build that syncs submodules per commit
finds it.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

SETUP_PY = '''\
import json, os
from setuptools import Extension, setup

# Record what the build was told, as PyTorch's own build does in torch/version.py.
keys = ["USE_CUDA", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "BUILD_TEST", "USE_DISTRIBUTED",
        "USE_CCACHE"]
with open("torch/build_env.json", "w") as f:
    json.dump({k: os.environ.get(k) for k in keys}, f)
with open("torch/version.py", "w") as f:
    f.write(f"__version__ = {os.environ['PYTORCH_BUILD_VERSION']!r}\\n")
setup(name="torch", version=os.environ["PYTORCH_BUILD_VERSION"], packages=["torch"],
      package_data={"torch": ["build_env.json"]},
      ext_modules=[Extension("torch._C", ["torch/csrc/stub.c"],
                             include_dirs=["third_party/mini/include"])])
'''

STUB_C = '''\
#include <Python.h>
#include "mini.h"
static PyObject *value(PyObject *s, PyObject *a) { return PyLong_FromLong(MINI_VALUE); }
static PyMethodDef M[] = {{"value", value, METH_NOARGS, ""}, {0}};
static struct PyModuleDef D = {PyModuleDef_HEAD_INIT, "torch._C", 0, -1, M};
PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&D); }
'''

ORACLE = '''\
"""Good while third_party/mini says 1."""
import sys
import torch._C
sys.exit(0 if torch._C.value() == 1 else 1)
'''


@dataclass(frozen=True)
class MiniTorch:
    path: Path
    main: list[str]  # first-parent commits, oldest first
    culprit: str  # the commit that bumps the submodule to the bad value


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=Mini", "-c", "user.email=mini@example.com",
         "-c", "protocol.file.allow=always", *args],
        cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def make(root: Path, commits: int = 12, bump_at: int = 7) -> MiniTorch:
    lib = root / "mini"
    (lib / "include").mkdir(parents=True)
    _git(root, "init", "-q", "-b", "main", str(lib))
    lib_commits = []
    for value in (1, 2):
        (lib / "include" / "mini.h").write_text(f"#define MINI_VALUE {value}\n")
        _git(lib, "add", "-A")
        _git(lib, "commit", "-q", "-m", f"mini value {value}")
        lib_commits.append(_git(lib, "rev-parse", "HEAD"))
    repo = root / "pytorch"
    (repo / "torch" / "csrc").mkdir(parents=True)
    _git(root, "init", "-q", "-b", "main", str(repo))
    (repo / "setup.py").write_text(SETUP_PY)
    (repo / "requirements.txt").write_text("setuptools>=61\nwheel\n")
    (repo / "torch" / "__init__.py").write_text("from torch import _C\n")
    (repo / "torch" / "csrc" / "stub.c").write_text(STUB_C)
    (repo / ".gitignore").write_text("torch/version.py\ntorch/build_env.json\n")
    _git(repo, "submodule", "add", "-q", str(lib), "third_party/mini")
    _git(repo, "-C", "third_party/mini", "checkout", "-q", lib_commits[0])
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "Initial commit")
    main = [_git(repo, "rev-parse", "HEAD")]
    for i in range(1, commits):
        if i == bump_at:
            _git(repo, "-C", "third_party/mini", "checkout", "-q", lib_commits[1])
            msg = "Update third_party/mini"
        else:
            (repo / "torch" / f"mod{i}.py").write_text(f"X = {i}\n")
            msg = f"Add torch/mod{i}.py"
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", msg)
        main.append(_git(repo, "rev-parse", "HEAD"))
    _git(repo, "tag", "v0.1", main[0])
    return MiniTorch(repo, main, main[bump_at])
