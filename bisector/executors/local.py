"""The local executor: one uv-made virtualenv per (artifact, oracle dependencies, Python).

Environments are built once and reused whenever the same artifact is probed again (by this or any
later bisection). uv installs from its cache by hardlinking, so even a torch-sized wheel set costs
seconds, not a re-extraction. Environments appear by atomic rename, so an interrupted install
never leaves a half-made environment that a later run would trust.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from bisector.artifacts import pure
from bisector.artifacts.build import python_tag, uv_binary
from bisector.artifacts.cache import file_sha256, scratch_dir
from bisector.artifacts.installable import Installable
from bisector.artifacts.overlay import apply_overlay, overlay_facts
from bisector.artifacts.trees import trees_dir
from bisector.base import oracle_env
from bisector.base.events import step
from bisector.base.paths import cache_dir, uv_cache_dir
from bisector.executors.base import RunResult, env_name, infra_skip, running
from bisector.executors.bytecode import forget, harvest, share
from bisector.executors.envfiles import changed_files, link_tree, write_manifest
from bisector.executors.facts import (
    FACTS_FILE,
    PENDING,
    clean_env,
    collect_facts,
    install_facts_hook,
    installed_package,
    learn_facts,
)
from bisector.executors.oracle_run import run_in_place
from bisector.executors.venvs import forget_skeletons, new_venv, retarget, skeleton_dir
from bisector.infra import cancel, inuse
from bisector.infra.proc import call, tail
from bisector.oracle.script import Oracle


def with_env(facts: dict[str, Any], env: Mapping[str, str] | None) -> dict[str, Any]:
    """An executor's fingerprint facts with its oracle environment (secrets hashed): a run
    with ``TORCH_LOGS=recompiles`` is never reused for one without. Left out when empty, so
    the keys of runs made before there was an oracle environment stay the same."""
    return {**facts, "oracle_env": oracle_env.keyed(env)} if env else facts


class InstallFailed(Exception):
    pass


class LocalExecutor:
    name = "local"
    contained = False

    def __init__(self, python: str, import_name: str | None, offline: bool = False,
                 trees: Callable[[str], Path] | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        self.python = python
        self.import_name = import_name
        self.offline = offline
        self.trees = trees  # a command oracle's working folder per commit (artifacts/trees)
        # The oracle environment (base/oracle_env.py); None: the host's, as it is.
        self.env = env
        # One maker per environment: a probe asking for the one a prefetch is making waits
        # for it instead of making it a second time.
        self._making: defaultdict[Path, threading.Lock] = defaultdict(threading.Lock)

    @property
    def python_tag(self) -> str:
        return python_tag(self.python)

    def unready(self, oracle: Oracle) -> str | None:
        return None  # any oracle: a file, one with its own #!, a command in the tree

    def fingerprint_facts(self) -> dict[str, Any]:
        return with_env({
            "executor": self.name,
            "python": self.python_tag,
            "machine": platform.machine(),
            "system": platform.system(),
        }, self.env)

    def _uv_env(self) -> dict[str, str]:
        env = clean_env()
        env["UV_CACHE_DIR"] = str(uv_cache_dir())
        env.setdefault("UV_LINK_MODE", "hardlink")
        if self.offline:
            env["UV_OFFLINE"] = "1"
        return env

    def env_dir(self, artifact_key: str, deps: tuple[str, ...]) -> Path:
        return cache_dir() / "envs" / env_name(artifact_key, deps, python_tag(self.python))

    def prepare(self, inst: Installable, oracle: Oracle) -> None:
        """Make the environment a probe of ``inst`` will run in, ahead of the probe (the
        prefetch, ``run/prefetch.py``); the probe then finds it made."""
        self.ensure_env(inst, oracle.meta.dependencies)

    def ensure_env(self, inst: Installable, deps: tuple[str, ...]) -> Path:
        """The environment for an installable, made once and reused by every later probe.

        One whose files changed since it was made (an oracle edited its torch, say) is made
        again, and uv's cache entries behind its hardlinks are dropped with it: a changed
        environment is never trusted.
        """
        final = self.env_dir(inst.key, deps)
        with self._making[final]:
            return self._ensure_env(inst, deps, final)

    # Above ruff's limits on purpose: each way making an environment can fail is its own branch,
    # each with its message.
    def _ensure_env(self, inst: Installable, deps: tuple[str, ...], final: Path) -> Path:  # noqa: C901
        if (final / READY).exists():
            if not changed_files(final):
                _mark_used(final)
                return final
            self.discard(final)
        elif final.exists():
            shutil.rmtree(final, ignore_errors=True)  # half made (a kill -9): make it again
        if inst.wheel is not None and inst.sha256 and file_sha256(inst.wheel) != inst.sha256:
            raise InstallFailed(f"the cached wheel {inst.wheel.name} changed since it was "
                                f"stored (sha256 differs): remove it and run again")
        tmp = scratch_dir("env-")
        log = tmp / "install.log"
        uv, env = uv_binary(), self._uv_env()
        venv = tmp / "venv"
        py = str(venv / "bin" / "python")
        try:
            step(f"creating an environment for {inst.obtained}")
            system_site = inst.installed is not None

            def skeleton(where: Path) -> None:  # once per interpreter and oracle dependencies
                _logged([uv, "venv", "-q", *(["--system-site-packages"] if system_site else []),
                         "--python", self.python, str(where)], log, env)
                if deps:
                    step(f"installing the oracle's dependencies {_names(list(deps))}")
                    with _UV_LOCK:
                        _logged([uv, "pip", "install", "-q", "--python",
                                 str(where / "bin" / "python"), "--", *deps], log, env)

            interpreter = new_venv(self.python, venv, system_site, skeleton, deps)
            site = Path(_purelib(py, venv))
            reqs = [*([str(inst.wheel)] if inst.wheel else []), *inst.extra]
            if inst.wheel is not None and reqs == [str(inst.wheel)] and \
                    inst.installed is None and pure.unpack(inst.wheel, site):
                reqs = []  # a pure wheel that needs nothing: unpacked (artifacts/pure.py)
            if reqs:
                step(f"installing {_names(reqs)}")
                with _UV_LOCK:  # never while a discard cleans uv's cache
                    # With the oracle's dependencies (already there, from the skeleton): one
                    # resolution of both, as before, so the probed wheel's requirements never
                    # break them (a downgraded pluggy would fail pytest: every probe "bad").
                    _logged([uv, "pip", "install", "-q", "--python", py, "--", *reqs, *deps],
                            log, env)
            if inst.installed is not None:
                for pkg in inst.installed.packages:
                    link_tree(Path(inst.installed.site) / pkg, site / pkg)
                # The base's own dependencies (triton, numpy, nvidia-*) stay where they are,
                # also when that is another virtualenv: its site-packages goes after ours.
                (site / "bisector-installed-base.pth").write_text(f"{inst.installed.site}\n")
            # Facts only a run can tell (the probed package's or torch's version): the
            # oracle's first run reports them through the hook. An environment with neither
            # (a pure-Python project's) has the interpreter's, known already.
            told = self.import_name is not None or system_site or (site / "torch").is_dir()
            facts: dict[str, Any] = {"obtained": inst.obtained, **(
                {PENDING: True} if told else {**interpreter, "facts_from": "interpreter"})}
            if inst.overlay is not None:
                facts.update(overlay_facts(apply_overlay(inst.overlay, site)))
            if not told and inst.wheel is not None:
                facts.update(installed_package(site, inst.wheel.name))
            if told:
                install_facts_hook(site)
            (venv / FACTS_FILE).write_text(json.dumps(facts, sort_keys=True))
            retarget(venv, str(venv), final)  # its scripts name where it will be
            if deps:  # the skeleton's bytecode of the files still its own (bytecode.share)
                share(skeleton_dir(self.python, system_site, deps) / "lib", venv / "lib",
                      final / "lib")
            write_manifest(venv)
            (venv / READY).write_text("ok\n")
            final.parent.mkdir(parents=True, exist_ok=True)
            try:
                venv.rename(final)
            except OSError:
                if not (final / READY).exists():
                    raise
            return final
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def discard(self, env_dir: Path) -> None:
        """Remove a changed environment, its bytecode and the uv cache entries its files are
        linked to."""
        dists = sorted({d.name.split("-")[0] for d in env_dir.glob("lib/python*/site-packages/"
                                                                  "*.dist-info")})
        shutil.rmtree(env_dir, ignore_errors=True)
        forget(env_dir)
        forget_skeletons()  # its oracle dependencies were links of one of them
        if dists:
            with _UV_LOCK:
                subprocess.run([uv_binary(), "cache", "clean", *dists], env=self._uv_env(),
                               capture_output=True, check=False)

    def run(
        self, *, inst: Installable, oracle: Oracle, commit: str, run_dir: Path,
        gpu: str | None = None,
    ) -> RunResult:
        run_dir.mkdir(parents=True, exist_ok=True)
        deps = oracle.meta.dependencies
        # Marked in use from before it is looked at until the oracle is done: `bisect gc`
        # leaves what a live probe uses (infra/inuse.py).
        with inuse.using(in_use(inst, oracle, commit, self.env_dir(inst.key, deps)),
                         f"probe of {commit[:12] or inst.obtained}"):
            t0 = time.monotonic()
            try:
                venv = self.ensure_env(inst, deps)
            except (InstallFailed, OSError, subprocess.SubprocessError) as e:
                return infra_skip(f"environment install failed: {e}".strip())
            made_s = time.monotonic() - t0
            facts = json.loads((venv / FACTS_FILE).read_text())
            pending = bool(facts.pop(PENDING, False))
            if pending:
                facts["probed"] = self.import_name or ""
            told = run_dir / "facts" if pending else None
            py = str(venv / "bin" / "python")
            step(running(oracle, commit, gpu))
            result = run_in_place(py, oracle, commit, run_dir, facts, gpu, self.trees,
                                  self.env, facts_dir=told, in_tree=inst.tree)
            t1 = time.monotonic()
            if pending:
                if told is None or not any(told.glob("facts-*.json")):
                    step("collecting the environment's facts (its Python imports the package)")
                learned = learn_facts(venv, told, self.import_name)
                result = replace(result, facts={**learned, **result.facts})
            facts_s = time.monotonic() - t1
        result = with_phases(result, environment=made_s, facts=facts_s)
        if deps:  # what the run compiled of the oracle's dependencies serves the next copy
            harvest(venv / "lib", skeleton_dir(self.python, inst.installed is not None,
                                               deps) / "lib")
        touched = changed_files(venv)
        if touched:
            # The oracle edited its own environment: its answer is kept for this run only,
            # and the environment is made again for the next probe.
            self.discard(venv)
            result = replace(result, reusable=False, reason=(
                f"{result.reason}; the oracle changed its environment ({len(touched)} files, "
                f"e.g. {touched[0]}): not reused"))
        return result


def with_phases(result: RunResult, **phases: float) -> RunResult:
    """The run with where its time went (``facts["phases"]``, seconds): the pipeline adds
    obtaining and the overhead; ``show`` and the reports print them."""
    known = dict(result.facts.get("phases") or {})
    known.update({k: round(v, 3) for k, v in phases.items()})
    known.setdefault("oracle", round(result.duration_s, 3))
    return replace(result, facts={**result.facts, "phases": known})


def in_use(inst: Installable, oracle: Oracle, commit: str, env: Path | None) -> list[Path | None]:
    """What a probe uses in the cache: its environment, the wheel's folder or the overlay it
    installs, and the exported tree a command runs in (paths outside the cache are skipped)."""
    return [env, inst.wheel.parent if inst.wheel is not None else None, inst.overlay,
            trees_dir() / commit if commit and (oracle.in_tree or inst.tree) else None]


READY = ".bisector-ready"  # the environment is complete; its mtime: when a probe last used it


def _mark_used(env_dir: Path) -> None:
    """Note a reuse on the readiness marker: ``bisect gc`` removes least recently used
    environments first, and atimes are coarse (relatime) or absent (noatime)."""
    with contextlib.suppress(OSError):  # a read-only cache: the environment is still good
        os.utime(env_dir / READY)


# Installs (several probes at once) and discards of changed environments share uv's cache.
_UV_LOCK = threading.Lock()


def _names(reqs: list[str]) -> str:
    """What an install installs, for its progress line: file names, not paths."""
    names = [Path(r).name if "/" in r else r for r in reqs]
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _logged(cmd: list[str], log: Path, env: dict[str, str]) -> None:
    with log.open("a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        r = call(cmd, env=env, stdout=f, stderr=subprocess.STDOUT)
    if cancel.stopping():
        raise cancel.Stopped("install stopped by the user")
    if r.returncode != 0:
        raise InstallFailed(tail(log, 6))


def _purelib(python: str, venv: Path) -> str:
    """The environment's site-packages: the one uv made (a new virtualenv has exactly one),
    else as its Python says (a Python start saved on every environment)."""
    found = sorted(venv.glob("lib/python3*/site-packages"))
    if len(found) == 1:
        return str(found[0])
    r = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                       capture_output=True, text=True, check=True, env=clean_env())
    return r.stdout.strip()


class SystemExecutor:
    """Runs the oracle with an existing interpreter as is (``bisect check --env system``):
    the quickest answer to "does it reproduce here?", with no environment made."""

    name = "system"
    contained = False

    def __init__(self, python: str, import_name: str | None,
                 trees: Callable[[str], Path] | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        self.python, self.import_name, self.trees = python, import_name, trees
        self.env = env

    @property
    def python_tag(self) -> str:
        return python_tag(self.python)

    def unready(self, oracle: Oracle) -> str | None:
        return None

    def fingerprint_facts(self) -> dict[str, Any]:
        return with_env({"executor": self.name, "python": self.python}, self.env)

    def run(self, *, inst: Installable, oracle: Oracle, commit: str, run_dir: Path,
            gpu: str | None = None) -> RunResult:
        t0 = time.monotonic()
        facts = collect_facts(self.python, self.import_name, inst.obtained)
        facts_s = time.monotonic() - t0
        with inuse.using(in_use(inst, oracle, commit, None), f"probe of {commit[:12]}"):
            return with_phases(run_in_place(self.python, oracle, commit, run_dir, facts, gpu,
                                            self.trees, self.env, in_tree=inst.tree),
                               environment=0.0, facts=facts_s)
