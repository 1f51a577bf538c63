"""Source builds inside the builder image, with a compiler cache shared across commits.

The container gets the commit's exported tree at ``/src`` (never the user's working tree), an
empty ``/out`` for the wheel, and a named ccache volume per repository at ``/ccache``. When the
tree is a worktree of the clone (the generic profile: projects that ask git for their version)
what git needs of the clone (objects, refs, the worktree's admin folder, a minimal config) is
mounted read-only at its own path, where the worktree's ``.git`` file points. The
build environment is made at one fixed path (``/tmp/build-env``) from the profile's build
requirements, so compiler command lines are byte-identical from commit to commit and a commit
that changes one C++ file recompiles one file. Each build writes its own ccache stats log,
read afterwards for the hit rate of that build alone (the volume's global counters would mix
builds that ran at the same time).

A build that could not run (the engine unreachable, the image missing, a build timeout) is an
infrastructure error: reported as a skip but never remembered as "this commit does not build".
The container's lifecycle (deadline, Ctrl-C, removal) is :mod:`bisector.infra.containers`', the same
as every other container's.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any

import git

from bisector.artifacts.build import BuildRun
from bisector.artifacts.build_logs import parse_ccache_log
from bisector.artifacts.worktree import container_git_mounts
from bisector.base import defaults
from bisector.base.paths import cache_dir
from bisector.infra.containers import (
    ContainerFailed,
    client,
    docker,
    hand_over,
    host_ca_bundle,
    image_id,
    image_python_tag,
    run_as,
    run_container,
)
from bisector.infra.proc import follow, tail

BUILD_ENV = "/tmp/build-env"

# A worktree build's git runs as the build user on the clone's read-only git data, owned by the
# host user: git would refuse it as "dubious ownership" (safe.directory is honoured from the
# command line's configuration, which these variables are), and need not try to write.
GIT_IN_CONTAINER = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory",
                    "GIT_CONFIG_VALUE_0": "*", "GIT_OPTIONAL_LOCKS": "0"}


def repository_id(repo: git.Repo) -> str:
    """The root commit: the same for every clone of a repository, so clones share a cache."""
    roots = repo.git.rev_list("--max-parents=0", "HEAD").split()
    return sorted(roots)[0] if roots else "unknown"


class DockerBuilder:
    where = "docker"
    contained = True

    def __init__(
        self,
        repo_id: str,
        *,
        image: str = defaults.BUILDER_IMAGE,
        cuda_arch: str | None = None,
        max_jobs: int | None = None,
        offline: bool = False,
        requires: tuple[str, ...] = (),
        labels: dict[str, str] | None = None,
    ) -> None:
        self.repo_id, self.image, self.cuda_arch = repo_id, image, cuda_arch
        self.max_jobs = max_jobs or os.cpu_count() or 1
        self.offline, self.requires = offline, requires
        self.labels = dict(labels or {})
        self._volume_ready = False

    @cached_property
    def docker(self) -> Any:
        return client()

    @cached_property
    def image_id(self) -> str:
        return image_id(self.docker, self.image)

    def unready(self) -> str | None:
        if not self.image_id:
            return (f"builder image {self.image} does not exist: run `make images` (or pass "
                    f"--builder-image)")
        return None

    @cached_property
    def python_tag(self) -> str:
        return image_python_tag(self.docker, self.image) if self.image_id else "unknown"

    @property
    def volume(self) -> str:
        return f"bisector-ccache-{self.repo_id[:12]}"

    def settings(self) -> dict[str, Any]:
        """The builder image's identity is part of the key: a new compiler, a new wheel."""
        extra = {"cuda_arch": self.cuda_arch} if self.cuda_arch else {}
        return {"python": self.python_tag,
                "builder": {"where": "docker", "image": self.image, "image_id": self.image_id},
                **extra}

    def places(self, src: Path, out: Path) -> dict[str, str]:
        return {"src": "/src", "out": "/out", "python": f"{BUILD_ENV}/bin/python", "uv": "uv",
                "cuda_arch": self.cuda_arch or "", "max_jobs": str(self.max_jobs)}

    @cached_property
    def _run_as(self) -> tuple[str, int]:
        return run_as(self.docker, self.image)

    @property
    def user(self) -> str:
        """Builds run the commit's code: never as root (``containers.run_as``)."""
        return self._run_as[0]

    def ensure_volume(self) -> str:
        """The repository's ccache volume, made once and owned by the build user (also one
        made by an older bisector, or for another user: handed over once per process)."""
        if self._volume_ready:
            return self.volume
        made = False
        try:
            self.docker.volumes.get(self.volume)
        except docker.errors.NotFound:
            self.docker.volumes.create(self.volume, labels={"bisector.ccache": self.repo_id})
            made = True
        uid = self.user.split(":")[0]
        done = run_container(
            self.docker, self.image,
            ["sh", "-c", f'test "$(stat -c %u /ccache)" = {uid} || chown -R {self.user} /ccache'],
            role="setup", timeout_s=600, logs=True, user="0", network_mode="none",
            volumes={self.volume: {"bind": "/ccache", "mode": "rw"}})
        if done.exit_code != 0:
            if made:  # not handed over: drop it, so the next build makes it again
                with contextlib.suppress(Exception):
                    self.docker.volumes.get(self.volume).remove(force=True)
            raise ContainerFailed(f"the ccache volume {self.volume} could not be handed to "
                                  f"the build user: {done.logs.strip()[-200:]}")
        self._volume_ready = True
        return self.volume

    # Above ruff's limits on purpose: the Builder protocol's run, keywords only.
    def run(self, cmd: list[str], env: dict[str, str], *, src: Path, out: Path, work: Path,  # noqa: PLR0913
            log: Path, timeout_s: float, commit: str,
            on_line: Callable[[str], None] | None = None) -> BuildRun:
        meta = work / "meta"
        meta.mkdir(exist_ok=True)
        # /meta/phase tells a failed set-up (no index, say: the machine's fault) from a failed
        # build (the commit's).
        script = [
            "set -e",
            "exec > /meta/build.log 2>&1",
            "echo setup > /meta/phase",
            f"uv venv -q --python python3 {BUILD_ENV}",
        ]
        if self.requires:
            script.append(f"uv pip install -q --python {BUILD_ENV}/bin/python "
                          f"{shlex.join(self.requires)}")
        script += ["echo build > /meta/phase", f"echo '$ {shlex.join(cmd)}'",
                   f"exec {shlex.join(cmd)}"]
        uv_cache = cache_dir() / "docker" / "uv-cache"
        uv_cache.mkdir(parents=True, exist_ok=True)
        uid = self._run_as[1]
        hand_over([src, out, meta], uid)
        hand_over([uv_cache], uid, once=True)
        vols = {str(src): {"bind": "/src", "mode": "rw"},
                str(out): {"bind": "/out", "mode": "rw"},
                str(meta): {"bind": "/meta", "mode": "rw"},
                str(uv_cache): {"bind": "/uv-cache", "mode": "rw"}}
        # No build isolation unless the profile asks for it (the generic one): an isolated
        # build env has a random path, which in -I flags makes every compile a ccache miss.
        full_env = {"UV_NO_BUILD_ISOLATION": "1", **env,
                    "CCACHE_DIR": "/ccache", "CCACHE_BASEDIR": "/src",
                    "CCACHE_NOHASHDIR": "1", "CCACHE_STATSLOG": "/meta/ccache-stats.log",
                    "CCACHE_MAXSIZE": defaults.CCACHE_MAXSIZE,
                    "UV_CACHE_DIR": "/uv-cache", "UV_LINK_MODE": "copy", "HOME": "/tmp"}
        if self.offline:
            full_env["UV_OFFLINE"] = "1"
        ca = host_ca_bundle()
        if ca is not None and not self.offline:
            vols[str(ca)] = {"bind": "/etc/bisector/ca.crt", "mode": "ro"}
            full_env["SSL_CERT_FILE"] = "/etc/bisector/ca.crt"
        git_mounts = container_git_mounts(src, work)  # a worktree build (git_checkout)
        for host, inside in git_mounts:
            vols[str(host)] = {"bind": str(inside), "mode": "ro"}
        if git_mounts:
            full_env.update(GIT_IN_CONTAINER)
        labels = {**self.labels, "bisector.commit": commit}
        try:
            vols[self.ensure_volume()] = {"bind": "/ccache", "mode": "rw"}
            # The container writes its log to the bind-mounted /meta: followed from here.
            with follow(meta / "build.log", on_line):
                done = run_container(
                    self.docker, self.image, ["sh", "-c", "\n".join(script)], role="build",
                    labels=labels, timeout_s=timeout_s, volumes=vols, environment=full_env,
                    user=self.user, working_dir="/src",
                    network_mode="none" if self.offline else "bridge")
        except ContainerFailed as e:
            if e.image_missing:
                return BuildRun(None, False, 0.0,
                                infra=f"builder image {self.image} is missing: run `make images`")
            return BuildRun(None, False, 0.0, infra=e.reason)
        except docker.errors.DockerException as e:  # the ccache volume could not be made
            return BuildRun(None, False, 0.0, infra=f"build container could not be created: {e}")
        code, timed_out = done.exit_code, done.timed_out
        if (meta / "build.log").exists():
            shutil.copyfile(meta / "build.log", log)
        stats_log = meta / "ccache-stats.log"
        stats = {"ccache": parse_ccache_log(stats_log.read_text(errors="replace")
                                            if stats_log.exists() else "")}
        infra = f"build timed out after {timeout_s:.0f}s" if timed_out else None
        phase = (meta / "phase").read_text().strip() if (meta / "phase").exists() else "setup"
        if code != 0 and not timed_out and phase == "setup":
            last = tail(meta / "build.log", 1) or tail(log, 1) or "no output"
            infra = f"the build environment could not be set up: {last[:200]}"
        return BuildRun(code, timed_out, done.seconds, stats, infra=infra)

