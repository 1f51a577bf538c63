"""Source builds: export a commit's exact tree (artifacts/export.py) and build a wheel from it.

The user's working tree is never touched. For profiles whose projects may ask git for their
version (``Profile.git_checkout``: the generic one) the build folder is a throwaway detached
worktree of the clone (artifacts/worktree.py), so setuptools_scm, hatch-vcs, versioneer and
``git describe`` find the commit and its tags.

A failed build is not an error of the bisection: it is recorded (with its log) and the commit
becomes a SKIP, and the failure is remembered so no later bisection pays for the same broken
build again.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Protocol

import git

from bisector.artifacts.assemble import Assembled, assemble
from bisector.artifacts.assemble import write as write_assembled
from bisector.artifacts.build_logs import describe_stats, failed_tail, failure_summary
from bisector.artifacts.cache import artifact_key, file_sha256, publish, scratch_dir, wheel_dir
from bisector.artifacts.export import ExportError, LeftEmpty, export_tree
from bisector.artifacts.worktree import WorktreeError, detached_worktree, read_index
from bisector.base.paths import logs_dir
from bisector.infra import cancel
from bisector.infra.proc import run_logged, tail
from bisector.project.profiles import Profile


@dataclass(frozen=True)
class BuildResult:
    key: str
    commit: str
    ok: bool
    wheel: Path | None
    log_path: Path
    log_tail: str
    duration_s: float
    settings: dict[str, Any]
    stats: dict[str, Any] = field(default_factory=dict)  # e.g. ccache hits of this build
    # Why the build could not run (engine down, image missing, timed out): a skip that says
    # nothing about the commit, so it is never remembered as "does not build".
    infra: str | None = None
    cached: bool = False  # found in the content-addressed cache, not built now


@dataclass(frozen=True)
class BuildRun:
    """How one build command ended, wherever it ran."""

    returncode: int | None
    timed_out: bool
    duration_s: float
    stats: dict[str, Any] = field(default_factory=dict)
    infra: str | None = None


class Builder(Protocol):
    """Where a build command runs: this machine, or the builder container.

    ``settings`` is what about the place can change the wheel (the Python it is built for, the
    builder image, the GPU architectures): it is part of the artifact key, so a wheel built one
    way is never served for a build asked for another way.
    """

    where: str
    # Builds run in containers (a controller killed mid-build leaves one behind).
    contained: bool

    @property
    def python_tag(self) -> str:
        """The Python the wheels are built for (``cp312``)."""
        ...

    def unready(self) -> str | None:
        """What this place lacks to build at all (a missing image), one line naming the fix;
        None when it can."""
        ...

    def settings(self) -> dict[str, Any]: ...

    def places(self, src: Path, out: Path) -> dict[str, str]: ...

    # Above ruff's limits on purpose: the Builder protocol's run, keywords only.
    def run(self, cmd: list[str], env: dict[str, str], *, src: Path, out: Path, work: Path,  # noqa: PLR0913
            log: Path, timeout_s: float, commit: str,
            on_line: Callable[[str], None] | None = None) -> BuildRun:
        """Run the build, its output to ``log``; ``on_line`` is told the log's newest line
        while it runs (a live display of a build that can take an hour)."""
        ...


class HostBuilder:
    """Builds with ``python`` on this machine, in the exported tree (the embedded default)."""

    where = "host"
    contained = False

    def __init__(self, python: str, cuda_arch: str | None = None) -> None:
        self.python, self.cuda_arch = python, cuda_arch

    @property
    def python_tag(self) -> str:
        return python_tag(self.python)

    def unready(self) -> str | None:
        return None

    def settings(self) -> dict[str, Any]:
        extra = {"cuda_arch": self.cuda_arch} if self.cuda_arch else {}
        return {"python": self.python_tag, **extra}

    def places(self, src: Path, out: Path) -> dict[str, str]:
        return {"src": str(src), "out": str(out), "python": self.python,
                "uv": uv_binary(), "cuda_arch": self.cuda_arch or "",
                "max_jobs": str(os.cpu_count() or 1)}

    # Above ruff's limits on purpose: the Builder protocol's run, keywords only.
    def run(self, cmd: list[str], env: dict[str, str], *, src: Path, out: Path, work: Path,  # noqa: PLR0913
            log: Path, timeout_s: float, commit: str,
            on_line: Callable[[str], None] | None = None) -> BuildRun:
        full = {**os.environ, **env}
        full.pop("VIRTUAL_ENV", None)
        res = run_logged(cmd, cwd=src, env=full, stdout_path=log, timeout_s=timeout_s,
                         on_line=on_line)
        if cancel.stopping():  # killed because the user stopped: says nothing about the commit
            raise cancel.Stopped("build stopped by the user")
        infra = None
        if res.timed_out:
            infra = f"build timed out after {timeout_s:.0f}s"
        elif res.returncode is not None and res.returncode < 0:
            infra = f"the build was killed by signal {-res.returncode}"  # the machine's doing
        return BuildRun(res.returncode, res.timed_out, res.duration_s, infra=infra)


def build_settings(profile: Profile, python: str,
                   builder: Builder | None = None) -> dict[str, Any]:
    env = {k: v for k, v in profile.build_env.items() if k not in profile.unkeyed_env}
    # A build in a worktree can make another wheel (its version from git), and a commit recorded
    # as "does not build" without one (setuptools_scm's LookupError) must be tried again.
    checkout = {"checkout": "git-worktree"} if profile.git_checkout else {}
    # In the key: with assembling turned off, a tree once assembled is built for real.
    assembled = {"assemble": "pure"} if profile.assemble_pure else {}
    return {
        "profile": profile.name,
        "command": list(profile.build_command),
        "env": dict(sorted(env.items())),
        **checkout,
        **assembled,
        **(builder or HostBuilder(python)).settings(),
    }


@cache
def python_tag(python: str) -> str:
    """The interpreter's version, e.g. ``cp311`` (``cp313t`` free-threaded): a wheel is only
    good for that Python."""
    code = ("import sys, sysconfig; print(f'cp{sys.version_info[0]}{sys.version_info[1]}'"
            " + ('t' if sysconfig.get_config_var('Py_GIL_DISABLED') else ''))")
    if python == sys.executable or _our_binary(python):
        import sysconfig

        free = "t" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""
        return f"cp{sys.version_info.major}{sys.version_info.minor}{free}"
    import subprocess

    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def _our_binary(python: str) -> bool:
    """Is ``python`` the very binary this process runs on, reached through a link (a venv's
    ``bin/python``, pyenv's ``versions/3.11.7/bin/python3``)? Its tag is this process's own
    then, and asking it costs a Python start (0.05-0.15 s) before a bisection's first probe.
    A wrapper script is not the binary: it is asked."""
    found = python if os.sep in python else shutil.which(python)
    ours = {sys.executable, getattr(sys, "_base_executable", "") or sys.executable}
    return found is not None and os.path.realpath(found) in {os.path.realpath(p) for p in ours}


def python_tag_or_none(python: str) -> str | None:
    """:func:`python_tag`, or None for a path that does not run as a Python here."""
    import subprocess

    try:
        return python_tag(python)
    except (OSError, subprocess.CalledProcessError):
        return None


def gpu_inventory() -> list[tuple[str, str, str]] | None:
    """(index, name, compute capability) of this machine's NVIDIA GPUs; None without a driver."""
    import subprocess

    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=index,name,compute_cap",
                            "--format=csv,noheader"], capture_output=True, text=True,
                           timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    out = []
    for line in r.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3:  # a name may hold a comma: index first, capability last
            out.append((parts[0], ",".join(parts[1:-1]).strip(), parts[-1]))
    return out


def detect_cuda_arch(gpus: str | None = None) -> str | None:
    """Compute capabilities of this machine's GPUs (``9.0``, or ``8.0;9.0``), as
    TORCH_CUDA_ARCH_LIST wants them; only those of ``gpus`` (``0,1``) when given; None without
    an NVIDIA driver. Building for the GPU the probes run on keeps a build to one arch."""
    inventory = gpu_inventory()
    if inventory is None:
        return None
    wanted = None if gpus in (None, "", "all") else set(str(gpus).split(","))
    caps = {cap for idx, _, cap in inventory if cap and (wanted is None or idx in wanted)}
    return ";".join(sorted(caps, key=lambda c: tuple(int(x) for x in c.split(".")))) or None


def build_key(profile: Profile, commit: str, python: str,
              builder: Builder | None = None) -> tuple[str, dict[str, Any]]:
    settings = build_settings(profile, python, builder)
    return artifact_key("source", commit, settings), settings


# Above ruff's limits on purpose: keywords only; the public build entry point of tests and the
# provider.
def build_wheel(  # noqa: PLR0913
    repo: git.Repo,
    commit: str,
    profile: Profile,
    *,
    python: str,
    timeout_s: float = 3600.0,
    version: str | None = None,
    builder: Builder | None = None,
    on_line: Callable[[str], None] | None = None,
    preface: str | None = None,
) -> BuildResult:
    """Build ``commit``; ``version`` overrides the ``+git<sha>`` one (a nightly's ``.devDATE``);
    ``on_line`` is told the build log's newest line while it runs; ``preface`` is a note the
    log starts with. The worktree of a
    ``git_checkout`` profile is unregistered before this returns, whatever happened."""
    builder = builder or HostBuilder(python)
    key, settings = build_key(profile, commit, python, builder)
    if version is not None:
        key = artifact_key("source", commit, {**settings, "version": version})
    log_path = logs_dir() / "builds" / f"{key}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    work = scratch_dir(f"build-{commit[:10]}-")
    src, out = work / "src", work / "out"
    out.mkdir()
    try:
        with contextlib.ExitStack() as stack:
            try:
                if profile.git_checkout:
                    stack.enter_context(detached_worktree(repo, commit, src))
                src.mkdir(exist_ok=True)
                skipped = export_tree(repo, commit, src)
                if profile.git_checkout:
                    read_index(src, commit)
            except (ExportError, WorktreeError) as e:  # the clone's state, not the commit's:
                log_path.write_text(f"bisector: error: {e}\n")  # retried once fixed
                return BuildResult(key, commit, False, None, log_path, tail(log_path, 15), 0.0,
                                   settings, infra=str(e))
            clone = str(repo.working_tree_dir or repo.git_dir)
            empty = LeftEmpty.of(clone, skipped) if skipped else None
            return _run_build(commit, profile, builder, version, key, settings, work, log_path,
                              empty, timeout_s=timeout_s, on_line=on_line, preface=preface)
    finally:
        shutil.rmtree(work, ignore_errors=True)


# Above ruff's limits on purpose: what one build needs, passed on from build_wheel.
def _run_build(commit: str, profile: Profile, builder: Builder,  # noqa: PLR0913
               version: str | None, key: str, settings: dict[str, Any], work: Path,
               log_path: Path, empty: LeftEmpty | None, *, timeout_s: float,
               on_line: Callable[[str], None] | None, preface: str | None = None) -> BuildResult:
    """Version file, command, the build itself, its log and publication of the wheel.

    ``empty``: submodules the export left empty, said in the log, and the reason of a failed
    build whose log names one (retried, never "does not build": the clone lacks what it
    needs). A failed build's own tail leads with the line that says what broke
    (``failure_summary``), which a tail of its last lines can miss.
    """
    src, out = work / "src", work / "out"
    version = version or profile.version_for(commit)
    if profile.version_file and profile.version_template:
        (src / profile.version_file).write_text(
            profile.version_template.format(version=version, sha=commit)
        )
    subst = {**builder.places(src, out), "version": version}
    cmd = [part.format(**subst) for part in profile.build_command]
    if cmd[:2] == ["uv", "build"]:
        cmd = [subst["uv"], "build", "--python", subst["python"], *cmd[2:]]
    env = {k: v.format(**subst) for k, v in profile.build_env.items()}
    note = f"bisector: note: left empty in the export: {empty.hint}\n" if empty else ""
    note += f"bisector: note: {preface}\n" if preface else ""
    log_path.write_text(f"{note}$ {' '.join(cmd)}\n")
    res = builder.run(cmd, env, src=src, out=out, work=work, log=work / "build.log",
                      timeout_s=timeout_s, commit=commit, on_line=on_line)
    infra = res.infra
    built_log = ""
    with log_path.open("a") as f:
        if (work / "build.log").exists():
            built_log = (work / "build.log").read_text(errors="replace")
            f.write(built_log)
        if res.infra:
            f.write(f"\nbisector: {res.infra}\n")
        if "ccache" in res.stats:
            f.write(f"\nbisector: {describe_stats(res.stats)}\n")
        wheels = sorted(out.glob("*.whl"))
        ok = res.returncode == 0 and not res.timed_out and len(wheels) == 1
        if not ok and infra is None and empty:
            # Retried either way (the clone lacks what it may need), but blamed on the empty
            # submodules only when the log names one; otherwise the log's own error first.
            f.flush()
            infra = (f"the build failed and {empty.hint}" if empty.named_in(built_log) else
                     f"the build failed ({failure_summary(log_path)}); also, {empty.hint}")
            f.write(f"\nbisector: {infra}\n")
    if not ok:
        return BuildResult(key, commit, False, None, log_path, failed_tail(log_path),
                           res.duration_s, settings, res.stats, infra)
    (out / SUMS).write_text(f"{file_sha256(wheels[0])}  {wheels[0].name}\n")
    final = publish(out, key)
    wheel = final / wheels[0].name
    return BuildResult(key, commit, True, wheel, log_path, tail(log_path, 5),
                       res.duration_s, settings, res.stats)


def uv_binary() -> str:
    """The uv binary that came with bisector (the ``uv`` package), else one on PATH."""
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if not found:
            raise FileNotFoundError("uv is not installed: pip install uv") from None
        return found


def wheel_digest(path: Path) -> tuple[str, int]:
    return file_sha256(path), path.stat().st_size


SUMS = "SHA256SUMS"  # beside each built wheel: what it was when it was published


def cached_build(key: str, commit: str, settings: dict[str, Any]) -> BuildResult | None:
    """A wheel already in the content-addressed cache (built for another store), if any."""
    wheels = sorted(wheel_dir(key).glob("*.whl"))
    if len(wheels) != 1:
        return None
    sums = wheel_dir(key) / SUMS
    recorded = sums.read_text().split()[0] if sums.exists() else None
    if recorded is None or file_sha256(wheels[0]) != recorded:
        shutil.rmtree(wheel_dir(key), ignore_errors=True)  # changed since it was built
        return None
    return BuildResult(key, commit, True, wheels[0], logs_dir() / "builds" / f"{key}.log",
                       "", 0.0, settings, cached=True)


def obtain_wheel(
    repo: git.Repo, commit: str, profile: Profile, *, python: str, timeout_s: float = 3600.0,
    on_build: Callable[[], None] | None = None, builder: Builder | None = None,
    on_line: Callable[[str], None] | None = None,
) -> BuildResult:
    """The commit's wheel from the content-addressed cache, or built now (``on_build`` is told,
    then ``on_line`` the build log's newest line as it goes)."""
    key, settings = build_key(profile, commit, python, builder)
    cached = cached_build(key, commit, settings)
    if cached is not None:
        return cached
    why = ""
    if profile.assemble_pure:
        made = assemble(repo, commit)
        if made.filename is not None:
            return _assembled(made, key, commit, settings)
        why = made.declined
    if on_build is not None:
        on_build()
    return build_wheel(repo, commit, profile, python=python, timeout_s=timeout_s,
                       builder=builder, on_line=on_line,
                       preface=f"built, not assembled: {why}" if why else None)


def _assembled(made: Assembled, key: str, commit: str, settings: dict[str, Any]) -> BuildResult:
    """Publish a wheel assembled from the tree as the commit's build, with a log saying so."""
    t0 = time.monotonic()
    out = scratch_dir(f"assemble-{commit[:10]}-")
    try:
        wheel = write_assembled(made, out)
        (out / SUMS).write_text(f"{file_sha256(wheel)}  {wheel.name}\n")
        final = publish(out, key)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    log_path = logs_dir() / "builds" / f"{key}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_text(f"bisector: {wheel.name} assembled from the tree of {commit}: a "
                        "pure-Python project whose wheel needs no build backend "
                        "(bisector/artifacts/assemble.py)\n")
    return BuildResult(key, commit, True, final / wheel.name, log_path, tail(log_path, 5),
                       time.monotonic() - t0, settings, {"assembled": True})
