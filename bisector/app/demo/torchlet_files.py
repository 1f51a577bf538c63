"""The files of the synthetic torch-like project ("torchlet") and the people who commit them.

Kept apart from the history generator (``torchlet.py``) so each module does one job: this one
is data, the generator writes history with it.
"""

from __future__ import annotations

AUTHORS = [
    ("Ada Lovelace", "ada@example.com"),
    ("Grace Hopper", "grace@example.com"),
    ("Alan Turing", "alan@example.com"),
    ("Edsger Dijkstra", "edsger@example.com"),
    ("Barbara Liskov", "barbara@example.com"),
    ("Donald Knuth", "don@example.com"),
]
AREAS = ["inductor", "dynamo", "nn", "ops", "utils", "docs", "ci"]
EPOCH = 1_735_689_600  # 2025-01-01T00:00:00Z

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "torchlet"
dynamic = ["version"]
description = "A tiny torch-like package made by bisector's synthetic history generator"
requires-python = ">=3.9"

[tool.setuptools]
packages = ["torchlet", "torchlet.nn"]
"""

SETUP_PY = '''\
"""Reads the version the build wrote into torchlet/version.py, as PyTorch's setup.py does."""
import re
from pathlib import Path

from setuptools import Extension, setup

text = Path("torchlet/version.py").read_text()
version = re.search(r'__version__ = "([^"]+)"', text).group(1)
setup(version=version, ext_modules=[Extension("torchlet._C", ["csrc/_C.c"])])
'''

VERSION_PY = '''\
__version__ = "0.1.0a0"
git_version = "Unknown"
'''

C_GOOD_LOOP = "for (Py_ssize_t i = 0; i < n; i++) {"
C_BAD_LOOP = "for (Py_ssize_t i = 1; i < n; i++) {"

C_SOURCE = """\
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* dot(xs, ys): the compiled kernel the Python side builds on. */
static PyObject *dot(PyObject *self, PyObject *args) {
    PyObject *xs, *ys;
    if (!PyArg_ParseTuple(args, "OO", &xs, &ys)) return NULL;
    Py_ssize_t n = PySequence_Size(xs);
    if (n < 0 || n != PySequence_Size(ys)) {
        PyErr_SetString(PyExc_ValueError, "dot: sizes differ");
        return NULL;
    }
    double acc = 0.0;
    @LOOP@
        PyObject *a = PySequence_GetItem(xs, i), *b = PySequence_GetItem(ys, i);
        acc += PyFloat_AsDouble(a) * PyFloat_AsDouble(b);
        Py_DECREF(a); Py_DECREF(b);
    }
    return PyFloat_FromDouble(acc);
}

static PyMethodDef methods[] = {
    {"dot", dot, METH_VARARGS, "dot product"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", NULL, -1, methods};

PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&module); }
"""

INIT_PY = '''\
"""torchlet: a tiny torch-like package."""
from torchlet import _C
from torchlet.ops import add, dot, norm
from torchlet.version import __version__, git_version

__all__ = ["_C", "__version__", "add", "dot", "git_version", "norm"]
'''

OPS_GOOD = "    return math.sqrt(_C.dot(xs, xs))\n"
OPS_BAD = "    return _C.dot(xs, xs) ** 0.5 if len(xs) < 2 else _C.dot(xs, xs)\n"

OPS_PY = '''\
"""Elementwise and reduction ops."""
import math

from torchlet import _C


def add(xs, ys):
    return [a + b for a, b in zip(xs, ys)]


def dot(xs, ys):
    return _C.dot(list(xs), list(ys))


def norm(xs):
    xs = list(xs)
@NORM@'''

NN_INIT = '''\
"""Neural-network helpers."""
from torchlet.nn.functional import relu

__all__ = ["relu"]
'''

NN_FUNCTIONAL = '''\
"""Stateless functions."""


def relu(xs):
    return [x if x > 0 else 0.0 for x in xs]
'''

UTILS_PY = '''\
"""Small helpers that harmless commits grow."""
'''

BROKEN_MARK = "#error this commit does not build\n"
# What ``generate(broken_import=...)`` appends to nn/functional.py: it builds, but importing
# the module raises a SyntaxError.
IMPORT_BREAK = "\n\ndef _registry(:\n    pass\n"

# A workload whose speed a history can change (``generate(slow_at=...)``): what the watch's
# performance tests time, a step of 3x that no machine's noise imitates.
PACE_FAST_S, PACE_SLOW_S = 0.02, 0.06
PACE_PY = """\
\"\"\"A workload whose duration is the build's (the watch's performance tests time it).\"\"\"
import time

DELAY = {delay}


def work():
    time.sleep(DELAY)
"""

# PyTorch's benchmark script, as far as ``bisect start --from-report`` runs it: the same
# command line and CSV columns (``generate(slow_at=..., benchmark=True)``); each model's speedup
# is the pacing loop's intended time over its measured one (1.0 before ``slow_at``, 1/3 after).
BENCH_PY = """\
\"\"\"benchmarks/dynamo/torchbench.py of torchlet: PyTorch's command line and CSV.\"\"\"
import argparse
import csv
import os
import time

from torchlet import _pace

p = argparse.ArgumentParser()
for flag in ("--performance", "--accuracy", "--training", "--inference", "--amp",
             "--bfloat16", "--float16", "--float32"):
    p.add_argument(flag, action="store_true")
p.add_argument("--backend", default="inductor")
p.add_argument("--device", default="cuda")
p.add_argument("--only", required=True)
p.add_argument("--output", required=True)
a = p.parse_args()
t0 = time.perf_counter()
_pace.work()
took = time.perf_counter() - t0
fields = (["dev", "name", "batch_size", "accuracy"] if a.accuracy else
          ["dev", "name", "batch_size", "speedup", "abs_latency", "compilation_latency",
           "compression_ratio"])
row = {"dev": a.device, "name": a.only, "batch_size": 1, "accuracy": "pass",
       "speedup": round({fast} / took, 4), "abs_latency": round(took * 1000, 3),
       "compilation_latency": 1.0, "compression_ratio": 1.0}
new = not os.path.exists(a.output)
with open(a.output, "a", newline="") as f:
    w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
    if new:
        w.writeheader()
    w.writerow(row)
""".replace("{fast}", repr(PACE_FAST_S))
