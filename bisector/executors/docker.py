"""The Docker executor: every probe's oracle runs in its own container of the runtime image.

Isolation is the point: the container sees exactly the probed commit's torch and Triton, the
wheel cache and the oracle read-only, no network unless the oracle asks for it, a memory and a
pid limit, and runs as a non-root user. What happens to it is classified the way a local run is,
with two additions only a container has: an OOM kill (``State.OOMKilled``) and a missing image or
a start failure, all SKIP with the reason, never BAD. With several probes at once, each can be
pinned to one GPU (``run(gpu="3")``), so probes never share a device.

Fast environments: one environment per (artifact, oracle dependencies) lives in a cache folder
bind-mounted at ``/data``, made once by a short-lived container with uv, whose cache sits in the
same folder so installs are hardlinks. Cached artifact -> oracle start then costs one container
start (``make bench`` measures it against ``pip install`` in the same image).

No string from the repository or the oracle reaches a shell: the environment container runs a
fixed Python program (:data:`ENV_SCRIPT`) that takes everything as data (a JSON argument and the
overlay's manifest) and refuses overlay paths that could leave site-packages, and the oracle is
started through a fixed argv. Containers and their cleanup are :mod:`bisector.infra.containers`'.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

from bisector.artifacts.installable import Installable
from bisector.artifacts.overlay import overlay_facts, overlay_summary
from bisector.base import defaults, oracle_env
from bisector.base.errors import UsageError
from bisector.base.events import step
from bisector.base.paths import FACTS_SCRIPT, cache_dir
from bisector.core.verdict import classify
from bisector.executors.base import RunResult, env_name, infra_skip, running
from bisector.executors.local import in_use, with_env, with_phases
from bisector.executors.oracle_run import collect_output
from bisector.infra import inuse
from bisector.infra.containers import (
    ContainerFailed,
    client,
    gpu_requests,
    hand_over,
    image_id,
    image_python_tag,
    run_as,
    run_container,
)
from bisector.infra.proc import tail
from bisector.oracle.script import Oracle

# Makes one environment in the container, from a JSON spec in argv[1]: a venv at spec["tmp"],
# the requirements installed with uv, the overlay (if any) laid over site-packages, the facts
# probed, then renamed to spec["final"] (a concurrent maker of the same environment wins the
# rename; ours is dropped). Paths from the overlay's manifest come from the repository: each must
# be relative, without "." or "..", and must resolve inside site-packages. A replaced file is
# unlinked first: with uv's hardlink mode, writing through it would change uv's cache.
ENV_SCRIPT = r"""
import glob, json, os, shutil, subprocess, sys

spec = json.loads(sys.argv[1])
tmp = spec["tmp"]
py = tmp + "/bin/python"

def run(*cmd, **kw):
    print("$", *cmd, flush=True)
    subprocess.run(cmd, check=True, **kw)

def inside(root, rel):
    parts = rel.split("/")
    if not rel or rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError("refusing overlay path " + repr(rel))
    dest = os.path.join(root, *parts)
    real = os.path.realpath(os.path.dirname(dest))
    if real != os.path.realpath(root) and not real.startswith(os.path.realpath(root) + os.sep):
        raise ValueError("refusing overlay path " + repr(rel) + ": it leaves " + root)
    return dest

def drop_bytecode(path):
    stem = os.path.splitext(os.path.basename(path))[0]
    for pyc in glob.glob(os.path.join(glob.escape(os.path.dirname(path)), "__pycache__",
                                      glob.escape(stem) + ".*.pyc")):
        os.unlink(pyc)

def overlay(src):
    with open(os.path.join(src, "overlay.json")) as f:
        manifest = json.load(f)
    out = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True)
    site = out.stdout.strip()
    for rel in manifest["changed"] + manifest.get("generated", []):
        dest = inside(site, rel)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        if os.path.lexists(dest):
            os.unlink(dest)
        shutil.copyfile(inside(os.path.join(src, "files"), rel), dest)
        drop_bytecode(dest)
    for rel in manifest["deleted"]:
        dest = inside(site, rel)
        if os.path.lexists(dest):
            os.unlink(dest)
        drop_bytecode(dest)
    print("overlay:", len(manifest["changed"]), "laid over,", len(manifest["deleted"]), "removed")
    shutil.copyfile(os.path.join(src, "overlay.json"), os.path.join(tmp, "overlay.json"))

try:
    run("uv", "venv", "-q", "--python", "python3", tmp)
    if spec["install"]:
        run("uv", "pip", "install", "-q", "--python", py, "--", *spec["install"])
    if spec["overlay"]:
        overlay(spec["overlay"])
    with open(os.path.join(tmp, "bisector-facts.json"), "w") as f:
        run(py, spec["facts"], spec["import_name"], stdout=f)
    open(os.path.join(tmp, ".bisector-ready"), "w").close()
except (subprocess.CalledProcessError, OSError, ValueError, KeyError) as e:
    print("environment not made:", e, file=sys.stderr)
    shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(1)
try:
    os.rename(tmp, spec["final"])
except OSError:
    shutil.rmtree(tmp, ignore_errors=True)
"""

# Starts the oracle with its output in two files (streamed to disk while it runs), without a
# shell: argv is [stdout file, stderr file, oracle script].
RUN_ORACLE = """
import os, sys
for fd, path in ((1, sys.argv[1]), (2, sys.argv[2])):
    f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(f, fd)
    os.close(f)
os.execv(sys.executable, [sys.executable, sys.argv[3]])
"""


DOCKER_REFUSAL = ("--executor docker runs Python oracle files only: a command oracle (-- CMD) "
                  "or a script with its own #! line needs --executor local")

TREE_REFUSAL = ("nothing to build at this commit (no Python packaging), and --executor docker "
                "runs no oracle in a commit's tree: use --executor local")


def docker_runs(oracle: Oracle) -> bool:
    """Whether this executor can run the oracle: the container starts a Python file with the
    environment's python; a command in the commit's tree (and a script run by its own ``#!``)
    is not implemented here."""
    return oracle.python and not oracle.in_tree


class DockerExecutor:
    name = "docker"
    contained = True

    def __init__(
        self,
        import_name: str | None,
        *,
        image: str = defaults.RUNTIME_IMAGE,
        gpus: str | None = None,
        memory: str = defaults.MEMORY,
        pids: int = defaults.PIDS,
        offline: bool = False,
        labels: dict[str, str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.import_name = import_name
        # The oracle environment: a container inherits nothing of the host's, so only what
        # --env gave (base/oracle_env.py).
        self.env = dict(env or {})
        self.image_name, self.gpus, self.memory, self.pids = image, gpus, memory, pids
        self.offline = offline
        self.labels = dict(labels or {})
        self.data = cache_dir() / "docker"
        self._ready: set[str] = set()
        # One maker per environment: a probe waits for the one a prefetch is making.
        self._making: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)

    @cached_property
    def docker(self) -> Any:
        return client()

    @cached_property
    def image_id(self) -> str:
        return image_id(self.docker, self.image_name)

    @cached_property
    def python_tag(self) -> str:
        return image_python_tag(self.docker, self.image_name) if self.image_id else "unknown"

    def unready(self, oracle: Oracle) -> str | None:
        if not docker_runs(oracle):
            return DOCKER_REFUSAL
        if not self.image_id:
            return (f"image {self.image_name} does not exist: run `make images` (or pass "
                    f"--image)")
        return None

    def fingerprint_facts(self) -> dict[str, Any]:
        """The image digest keys verdicts: a rebuilt image is a new environment. The limits
        too: an oracle that passes under 4096 processes may fail under 64."""
        return with_env({"executor": self.name, "image": self.image_name,
                          "image_id": self.image_id, "python": self.python_tag,
                          "gpus": self.gpus or "none", "memory": self.memory,
                          "pids": self.pids}, self.env)

    def _env_user(self) -> str:
        """Never root (see ``containers.run_as``); the folders it writes are handed over."""
        user, uid = run_as(self.docker, self.image_name)
        hand_over([self.data / "envs", self.data / "uv-cache"], uid, once=True)
        return user

    def _devices(self, gpu: str | None) -> list[Any]:
        """One pinned GPU for this probe, else the configured ``--gpus``."""
        return gpu_requests(gpu if gpu is not None else self.gpus)

    # -- environments ------------------------------------------------------------------------

    def env_name(self, key: str, deps: tuple[str, ...]) -> str:
        return env_name(key, deps, self.image_id)

    def ensure_env(self, inst: Installable, deps: tuple[str, ...], *,
                   gpu: str | None = None) -> str:
        """Make (once) the environment in /data/envs/NAME; returns NAME.

        Raises :class:`ContainerFailed` when the container cannot run, RuntimeError when the
        install in it fails (both: the machine's fault, not the commit's).
        """
        if inst.installed is not None:
            raise UsageError("--installed-base works with the local executor only: the "
                             "container cannot see the host's installed torch")
        name = self.env_name(inst.key, deps)
        with self._making[name]:
            return self._ensure_env(inst, deps, name, gpu)

    def _ensure_env(self, inst: Installable, deps: tuple[str, ...], name: str,
                    gpu: str | None) -> str:
        final = self.data / "envs" / name
        # On disk, not only remembered: gc may have removed it since this process made it.
        if (final / ".bisector-ready").exists():
            self._ready.add(name)
            return name
        (self.data / "envs").mkdir(parents=True, exist_ok=True)
        vols = {str(self.data): {"bind": "/data", "mode": "rw"},
                str(FACTS_SCRIPT): {"bind": "/bisector/facts_probe.py", "mode": "ro"}}
        install: list[str] = []
        if inst.wheel is not None:
            vols[str(inst.wheel.parent)] = {"bind": "/wheels", "mode": "ro"}
            install.append(f"/wheels/{inst.wheel.name}")
        if inst.overlay is not None:
            vols[str(inst.overlay)] = {"bind": "/overlay", "mode": "ro"}
        spec = {"tmp": f"/data/envs/.tmp-{uuid.uuid4().hex[:8]}", "final": f"/data/envs/{name}",
                "install": [*install, *inst.extra, *deps],
                "overlay": "/overlay" if inst.overlay is not None else None,
                "facts": "/bisector/facts_probe.py", "import_name": self.import_name or ""}
        env = {"UV_CACHE_DIR": "/data/uv-cache", "UV_LINK_MODE": "hardlink"}
        if self.offline:
            env["UV_OFFLINE"] = "1"
        # The network only when something must come from an index (an oracle's dependencies,
        # a Triton pin); a wheel and an overlay install from the mounted files alone.
        needs_index = bool(inst.extra or deps) and not self.offline
        step(f"creating an environment for {inst.obtained} in a container of "
             f"{self.image_name} (install, then facts)")
        done = run_container(
            self.docker, self.image_name, ["python3", "-c", ENV_SCRIPT, json.dumps(spec)],
            role="env", labels=self.labels, logs=True, volumes=vols, environment=env,
            user=self._env_user(), network_mode="bridge" if needs_index else "none",
            device_requests=self._devices(gpu),
        )
        log = self.data / "envs" / f"{name}.log"
        log.write_text(done.logs)
        if done.exit_code != 0 or not (final / ".bisector-ready").exists():
            raise RuntimeError(f"environment install failed in {self.image_name}: "
                               f"{tail(log, 6)}")
        self._ready.add(name)
        return name

    def prepare(self, inst: Installable, oracle: Oracle) -> None:
        """Make the environment a probe of ``inst`` will run in, ahead of the probe (the
        prefetch, ``run/prefetch.py``)."""
        self.ensure_env(inst, oracle.meta.dependencies)

    def _env_facts(self, name: str, inst: Installable) -> dict[str, Any]:
        env_dir = self.data / "envs" / name
        facts: dict[str, Any] = json.loads((env_dir / "bisector-facts.json").read_text()
                                           or "{}")
        if (env_dir / "overlay.json").exists():
            facts.update(overlay_facts(overlay_summary(
                json.loads((env_dir / "overlay.json").read_text()))))
        facts["obtained"] = inst.obtained
        facts["image"] = {"name": self.image_name, "id": self.image_id}
        return facts

    # -- the oracle --------------------------------------------------------------------------

    def run(self, *, inst: Installable, oracle: Oracle, commit: str, run_dir: Path,
            gpu: str | None = None) -> RunResult:
        """:meth:`_run`, with what it uses in the cache marked in use (``bisect gc`` leaves it)."""
        env = self.data / "envs" / self.env_name(inst.key, oracle.meta.dependencies)
        with inuse.using(in_use(inst, oracle, commit, env), f"probe of {commit[:12]}"):
            return self._run(inst=inst, oracle=oracle, commit=commit, run_dir=run_dir, gpu=gpu)

    def _run(self, *, inst: Installable, oracle: Oracle, commit: str, run_dir: Path,
             gpu: str | None = None) -> RunResult:
        """Run the oracle once in a fresh container; ``gpu`` pins it to that one GPU.

        Raises :class:`bisector.infra.cancel.Stopped` when the run is being stopped; every other
        failure to run is an infrastructure skip.
        """
        if not docker_runs(oracle):  # refused at start; a hand-edited store gets a skip
            return infra_skip(DOCKER_REFUSAL)
        if inst.tree:  # nothing installed: the commit's tree is all there is to run on
            return infra_skip(TREE_REFUSAL)
        run_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(run_dir, 0o777)  # the oracle runs as the image's non-root user
        out, err = run_dir / "stdout.txt", run_dir / "stderr.txt"
        t0 = time.monotonic()
        try:
            name = self.ensure_env(inst, oracle.meta.dependencies, gpu=gpu)
            facts = self._env_facts(name, inst)
        except ContainerFailed as e:
            return infra_skip(e.reason)
        except (RuntimeError, OSError, ValueError) as e:  # ValueError: unreadable facts JSON
            return infra_skip(str(e)[:500])
        made_s = time.monotonic() - t0
        if gpu is not None:
            facts["gpu_index"] = gpu
        facts["env"] = oracle_env.shown(self.env)
        (run_dir / "oracle").mkdir(exist_ok=True)
        (run_dir / "oracle" / oracle.path.name).write_bytes(oracle.content)
        env = {**self.env, **oracle.meta.env, "BISECTOR_COMMIT": commit,
               "BISECTOR_RUN_DIR": "/run-dir", "PYTHONUNBUFFERED": "1",
               "PYTHONDONTWRITEBYTECODE": "1", "HOME": "/tmp"}
        cmd = [f"/data/envs/{name}/bin/python", "-c", RUN_ORACLE, "/run-dir/stdout.txt",
               "/run-dir/stderr.txt", f"/oracle/{oracle.path.name}"]
        vols = {str(self.data): {"bind": "/data", "mode": "ro"},
                str(run_dir / "oracle"): {"bind": "/oracle", "mode": "ro"},
                str(run_dir): {"bind": "/run-dir", "mode": "rw"},
                str(cache_dir() / "wheels"): {"bind": "/wheels", "mode": "ro"}}
        labels = {**self.labels, "bisector.commit": commit, "bisector.run": uuid.uuid4().hex[:12]}
        step(running(oracle, commit, gpu))
        try:
            done = run_container(
                self.docker, self.image_name, cmd, role="oracle", labels=labels,
                timeout_s=oracle.meta.timeout, volumes=vols, environment=env,
                network_mode="bridge" if oracle.meta.network else "none",
                mem_limit=self.memory, memswap_limit=self.memory, pids_limit=self.pids,
                device_requests=self._devices(gpu), working_dir="/run-dir",
            )
        except ContainerFailed as e:
            return infra_skip(e.reason)
        code = done.exit_code
        if code is not None and code >= 128 and code - 128 in (9, 15):
            code = -(code - 128)  # a signal death, as a local run reports it
        verdict = classify(code, timed_out=done.timed_out, oom_killed=done.oom_killed,
                           timeout_s=oracle.meta.timeout)
        reason = verdict.reason
        if done.oom_killed:
            reason = f"killed for using more than its memory limit {self.memory} (OOM)"
        output_tail, facts = collect_output(out, err, facts)
        return with_phases(RunResult(verdict.outcome, reason, code, done.seconds,
                                     verdict.reusable, out, err, output_tail, facts),
                           environment=made_s)
