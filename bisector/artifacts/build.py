"""Source builds: export a commit with ``git archive`` and build a wheel from it.

The user's working tree is never touched. A failed build is not an error of the bisection: it is
recorded (with its log) and the commit becomes a SKIP, and the failure is remembered so no later
bisection pays for the same broken build again.
"""

from __future__ import annotations

import io
import os
import shutil
import sys
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import git

from bisector.artifacts.cache import artifact_key, file_sha256, publish, scratch_dir, wheel_dir
from bisector.proc import run_logged, tail
from bisector.profiles import Profile
from bisector.settings import logs_dir


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


def build_settings(profile: Profile, python: str) -> dict[str, Any]:
    return {
        "profile": profile.name,
        "command": list(profile.build_command),
        "env": dict(sorted(profile.build_env.items())),
        "python": python_tag(python),
    }


@cache
def python_tag(python: str) -> str:
    """The interpreter's version, e.g. ``cp311``: a wheel is only good for that Python."""
    if python == sys.executable:
        return f"cp{sys.version_info.major}{sys.version_info.minor}"
    import subprocess

    out = subprocess.run(
        [python, "-c", "import sys; print(f'cp{sys.version_info[0]}{sys.version_info[1]}')"],
        capture_output=True, text=True, check=True,
    )
    return out.stdout.strip()


def export_tree(repo: git.Repo, sha: str, dest: Path) -> None:
    buf = io.BytesIO()
    repo.archive(buf, treeish=sha, format="tar")
    buf.seek(0)
    with tarfile.open(fileobj=buf) as tar:
        tar.extractall(dest, filter="data")


def build_key(profile: Profile, commit: str, python: str) -> tuple[str, dict[str, Any]]:
    settings = build_settings(profile, python)
    return artifact_key("source", commit, settings), settings


def build_wheel(
    repo: git.Repo,
    commit: str,
    profile: Profile,
    *,
    python: str,
    timeout_s: float = 3600.0,
) -> BuildResult:
    key, settings = build_key(profile, commit, python)
    log_path = logs_dir() / "builds" / f"{key}.log"
    work = scratch_dir(f"build-{commit[:10]}-")
    src, out = work / "src", work / "out"
    src.mkdir()
    out.mkdir()
    try:
        export_tree(repo, commit, src)
        version = profile.version_for(commit)
        if profile.version_file and profile.version_template:
            (src / profile.version_file).write_text(
                profile.version_template.format(version=version, sha=commit)
            )
        subst = {"out": str(out), "src": str(src), "python": python, "version": version}
        cmd = [part.format(**subst) for part in profile.build_command]
        if cmd[:2] == ["uv", "build"]:
            cmd = [uv_binary(), "build", "--python", python, *cmd[2:]]
        env = {**os.environ, **{k: v.format(**subst) for k, v in profile.build_env.items()}}
        env.pop("VIRTUAL_ENV", None)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text(f"$ {' '.join(cmd)}\n")
        res = run_logged(cmd, cwd=src, env=env, stdout_path=work / "build.log", timeout_s=timeout_s)
        with log_path.open("a") as f:
            f.write((work / "build.log").read_text(errors="replace"))
            if res.timed_out:
                f.write(f"\nbisector: build timed out after {timeout_s:.0f}s\n")
        wheels = sorted(out.glob("*.whl"))
        ok = res.returncode == 0 and not res.timed_out and len(wheels) == 1
        if not ok:
            return BuildResult(key, commit, False, None, log_path, tail(log_path, 15),
                               res.duration_s, settings)
        final = publish(out, key)
        wheel = final / wheels[0].name
        return BuildResult(key, commit, True, wheel, log_path, tail(log_path, 5),
                           res.duration_s, settings)
    finally:
        shutil.rmtree(work, ignore_errors=True)


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


def cached_build(key: str, commit: str, settings: dict[str, Any]) -> BuildResult | None:
    """A wheel already in the content-addressed cache (built for another store), if any."""
    wheels = sorted(wheel_dir(key).glob("*.whl"))
    if len(wheels) != 1:
        return None
    return BuildResult(key, commit, True, wheels[0], logs_dir() / "builds" / f"{key}.log",
                       "", 0.0, settings)


GENERIC_ERRORS = ("error: failed to build", "error: command", "error: subprocess-exited")


def failure_summary(log_path: Path) -> str:
    """The line of a build log that says what broke: the first specific ``error:`` line."""
    text = log_path.read_text(errors="replace") if log_path.exists() else ""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        low = ln.lower()
        if "error" in low and not low.startswith(GENERIC_ERRORS):
            return ln[:200]
    return lines[-1][:200] if lines else "no output"


def obtain_wheel(
    repo: git.Repo, commit: str, profile: Profile, *, python: str, timeout_s: float = 3600.0,
    on_build: Callable[[], None] | None = None,
) -> BuildResult:
    """The commit's wheel from the content-addressed cache, or built now (``on_build`` is told)."""
    key, settings = build_key(profile, commit, python)
    cached = cached_build(key, commit, settings)
    if cached is not None:
        return cached
    if on_build is not None:
        on_build()
    return build_wheel(repo, commit, profile, python=python, timeout_s=timeout_s)
