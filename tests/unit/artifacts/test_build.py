"""Build bookkeeping: ccache statistics, failure lines, keys and build variables."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from bisector.artifacts.build import (
    HostBuilder,
    build_key,
    detect_cuda_arch,
)
from bisector.artifacts.build_logs import (
    describe_stats,
    failed_tail,
    failure_summary,
    parse_ccache_log,
)
from bisector.artifacts.export import LeftEmpty, uninitialised_hint
from bisector.base.errors import UsageError
from bisector.project.profiles import GENERIC, PYTORCH, TORCHLET
from bisector.run.config import Request
from bisector.run.prepare import parse_build_env, resolve_cuda_arch

STATS_LOG = """\
# /src/a.c
cache_miss
direct_cache_miss
local_storage_miss
preprocessed_cache_miss
# /src/b.c
direct_cache_hit
local_storage_hit
# /src/c.c
preprocessed_cache_hit
direct_cache_miss
"""


def test_ccache_log_counts_each_call_once() -> None:
    assert parse_ccache_log(STATS_LOG) == {"hits": 2, "misses": 1}
    assert parse_ccache_log("") == {"hits": 0, "misses": 0}
    assert describe_stats({"ccache": {"hits": 2, "misses": 1}}) == "ccache 2/3 hits (67%)"
    assert describe_stats({"ccache": {"hits": 0, "misses": 0}}) == "ccache: no compile finished"
    assert describe_stats({}) == ""


def test_failure_summary_names_the_compiler_error_not_the_command(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    log.write_text("running build_ext\n"
                   "ccache gcc -O2 -Werror=format-security -c csrc/_C.c -o _C.o\n"
                   "csrc/_C.c:1:2: error: #error this commit does not build\n"
                   "error: Failed to build `/src`\n")
    assert failure_summary(log) == "csrc/_C.c:1:2: error: #error this commit does not build"
    log.write_text("ModuleNotFoundError: No module named 'yaml'\nerror: command failed\n")
    assert failure_summary(log) == "ModuleNotFoundError: No module named 'yaml'"
    assert failure_summary(tmp_path / "none.log") == "no output"


def test_max_jobs_is_not_part_of_the_key_but_the_cuda_arch_is() -> None:
    py = sys.executable
    more_jobs = replace(PYTORCH, build_env={**PYTORCH.build_env, "MAX_JOBS": "64"})
    assert build_key(PYTORCH, "a" * 40, py)[0] == build_key(more_jobs, "a" * 40, py)[0]
    sm90 = build_key(PYTORCH, "a" * 40, py, HostBuilder(py, "9.0"))[0]
    sm80 = build_key(PYTORCH, "a" * 40, py, HostBuilder(py, "8.0"))[0]
    assert sm90 != sm80
    distributed = replace(PYTORCH, build_env={**PYTORCH.build_env, "USE_DISTRIBUTED": "1"})
    assert build_key(distributed, "a" * 40, py)[0] != build_key(PYTORCH, "a" * 40, py)[0]


def test_cuda_arch_only_where_the_build_uses_it() -> None:
    opts = Request(repo=Path("."), good="a", bad="b", oracle="x")
    assert resolve_cuda_arch(TORCHLET, replace(opts, cuda_arch="9.0")) is None
    assert resolve_cuda_arch(PYTORCH, replace(opts, cuda_arch="9.0")) == "9.0"
    # This machine's GPUs, or without an NVIDIA driver the profile's default list.
    assert resolve_cuda_arch(PYTORCH, opts) == (detect_cuda_arch() or PYTORCH.default_cuda_arch)


def test_build_env_pairs() -> None:
    assert parse_build_env(("USE_DISTRIBUTED=1", "X=")) == {"USE_DISTRIBUTED": "1", "X": ""}
    for bad in ("USE_DISTRIBUTED", "=1", "A B=1"):
        with pytest.raises(UsageError, match="NAME=VALUE"):
            parse_build_env((bad,))


def test_only_worktree_builds_have_a_new_key() -> None:
    """Generic builds made from a bare export (setuptools_scm's LookupError among them,
    recorded as "does not build" for good) are not reused by worktree builds; the PyTorch-like
    profiles, which never build in a worktree, keep their keys and their caches."""
    py = sys.executable
    generic = build_key(GENERIC, "a" * 40, py)[1]
    assert generic["checkout"] == "git-worktree"
    assert all("checkout" not in build_key(p, "a" * 40, py)[1] for p in (PYTORCH, TORCHLET))


def test_uninitialised_submodules_are_named_with_the_command_that_fetches_them() -> None:
    assert uninitialised_hint("/c", [("tests/data", "tests/data")]) == (
        "submodule tests/data is not initialised in the clone: "
        "run `git -C /c submodule update --init tests/data`")
    nested = uninitialised_hint("/my clone", [("a", "a"), ("b/c", "b")])
    assert nested == ("submodules a, b/c are not initialised in the clone: "
                      "run `git -C '/my clone' submodule update --init --recursive a b`")
    many = uninitialised_hint("/c", [(f"third_party/m{i}", f"third_party/m{i}")
                                     for i in range(40)])
    assert many.startswith("submodules third_party/m0, third_party/m1, third_party/m2 and 37 "
                           "more are not initialised")
    assert many.endswith("run `git -C /c submodule update --init --recursive`")


def test_an_empty_submodule_is_blamed_only_when_the_log_names_it() -> None:
    """A failed build with submodules left empty: put down to them only when its log names
    one (its path, or the last part of it: an include of ``pybind11/...``); otherwise the
    log's own error is the diagnosis (issue 35: a CMake 4 policy error was reported as a
    nested submodule the build never used)."""
    empty = LeftEmpty.of("/c", [("third_party/pybind11", "third_party/pybind11"),
                                ("third_party/fbgemm/third_party/asmjit", "third_party/fbgemm")])
    assert empty.named_in("fatal error: pybind11/pybind11.h: No such file or directory")
    assert empty.named_in("add_subdirectory given source third_party/fbgemm which is not")
    assert not empty.named_in("CMake Error at CMakeLists.txt:1 (cmake_minimum_required):\n"
                              "  Compatibility with CMake < 3.5 has been removed")
    assert "submodules third_party/pybind11" in empty.hint


def test_a_failed_builds_tail_leads_with_what_broke(tmp_path: Path) -> None:
    """The line that says what broke, when the last lines of the log do not hold it."""
    log = tmp_path / "build.log"
    log.write_text("CMake Error at CMakeLists.txt:1: policy CMP0000 removed\n"
                   + "".join(f"-- noise {i}\n" for i in range(40)))
    shown = failed_tail(log).splitlines()
    assert shown[0] == "CMake Error at CMakeLists.txt:1: policy CMP0000 removed"
    assert shown[1] == "..." and shown[-1] == "-- noise 39" and len(shown) == 17
    short = tmp_path / "short.log"
    short.write_text("x\nsrc/a.c:3: error: boom\ny\n")
    assert failed_tail(short) == "x\nsrc/a.c:3: error: boom\ny"  # already in the tail
