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
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from bisector.artifacts import pure
from bisector.artifacts.build import python_tag, uv_binary
from bisector.artifacts.cache import file_sha256, scratch_dir
from bisector.artifacts.export import ExportError
from bisector.artifacts.installable import Installable
from bisector.artifacts.overlay import apply_overlay, overlay_facts
from bisector.artifacts.trees import run_tree, trees_dir
from bisector.base import oracle_env
from bisector.base.events import step
from bisector.base.paths import cache_dir, uv_cache_dir
from bisector.core.verdict import classify
from bisector.executors.base import RunResult, env_name, infra_skip, running
from bisector.executors.bytecode import bytecode_dir, forget
from bisector.executors.envfiles import changed_files, link_tree, write_manifest
from bisector.executors.facts import (
    FACTS_FILE,
    PENDING,
    clean_env,
    collect_facts,
    install_facts_hook,
    learn_facts,
)
from bisector.executors.venvs import new_venv
from bisector.infra import cancel, inuse
from bisector.infra.owner import owner_id
from bisector.infra.proc import call, cap_output, reaped, reaper_env, run_logged, tail
from bisector.oracle.command import is_command, program
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

    def __init__(self, python: str, import_name: str | None, offline: bool = False,
                 trees: Callable[[str], Path] | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        self.python = python
        self.import_name = import_name
        self.offline = offline
        self.trees = trees  # a command oracle's working folder per commit (artifacts/trees)
        # The oracle environment (base/oracle_env.py); None: the host's, as it is.
        self.env = env

    def fingerprint_facts(self) -> dict[str, Any]:
        return with_env({
            "executor": self.name,
            "python": python_tag(self.python),
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

    def ensure_env(self, inst: Installable, deps: tuple[str, ...]) -> Path:
        """The environment for an installable, made once and reused by every later probe.

        One whose files changed since it was made (an oracle edited its torch, say) is made
        again, and uv's cache entries behind its hardlinks are dropped with it: a changed
        environment is never trusted.
        """
        final = self.env_dir(inst.key, deps)
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
            interpreter = new_venv(self.python, venv, system_site, lambda where: _logged(
                [uv, "venv", "-q", *(["--system-site-packages"] if system_site else []),
                 "--python", self.python, str(where)], log, env))
            site = Path(_purelib(py, venv))
            reqs = [*([str(inst.wheel)] if inst.wheel else []), *inst.extra, *deps]
            if inst.wheel is not None and reqs == [str(inst.wheel)] and \
                    inst.installed is None and pure.unpack(inst.wheel, site):
                reqs = []  # a pure wheel that needs nothing: unpacked (artifacts/pure.py)
            if reqs:
                step(f"installing {_names(reqs)}")
                with _UV_LOCK:  # never while a discard cleans uv's cache
                    _logged([uv, "pip", "install", "-q", "--python", py, "--", *reqs], log,
                            env)
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
            if told:
                install_facts_hook(site)
            (venv / FACTS_FILE).write_text(json.dumps(facts, sort_keys=True))
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
                                  self.env, facts_dir=told)
            t1 = time.monotonic()
            if pending:
                if told is None or not any(told.glob("facts-*.json")):
                    step("collecting the environment's facts (its Python imports the package)")
                learned = learn_facts(venv, told, self.import_name)
                result = replace(result, facts={**learned, **result.facts})
            facts_s = time.monotonic() - t1
        result = with_phases(result, environment=made_s, facts=facts_s)
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
            trees_dir() / commit if commit and is_command(oracle) else None]


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


def run_in_place(
    python: str, oracle: Oracle, commit: str, run_dir: Path, facts: dict[str, Any],
    gpu: str | None, trees: Callable[[str], Path] | None,
    env: Mapping[str, str] | None = None, facts_dir: Path | None = None,
) -> RunResult:
    """:func:`run_oracle` where it belongs: a command in a fresh copy of the commit's tree
    (one that cannot be exported is a skip retried later), an oracle file in a scratch
    folder."""
    if not is_command(oracle):
        return run_oracle(python, oracle, commit, run_dir, facts, gpu, env=env,
                          facts_dir=facts_dir)
    try:
        tree = trees(commit) if trees is not None and commit else None
    except (ExportError, OSError) as e:
        return infra_skip(f"the commit's tree for the command could not be exported: {e}")
    with run_tree(tree) as cwd:
        return run_oracle(python, oracle, commit, run_dir, facts, gpu, cwd=cwd, env=env,
                          facts_dir=facts_dir)


def bin_first(env: dict[str, str], python: str) -> None:
    """The environment's ``bin`` (the folder of its python, as spelled: a virtualenv's
    python is a link) first on PATH, so ``python``, ``pytest`` and a ``#!/usr/bin/env python3``
    are the probed environment's."""
    found = python if os.path.isabs(python) else shutil.which(python)
    if found:
        env["PATH"] = os.pathsep.join([os.path.dirname(found), env.get("PATH", os.defpath)])


def run_oracle(
    python: str, oracle: Oracle, commit: str, run_dir: Path, facts: dict[str, Any],
    gpu: str | None = None, cwd: Path | None = None, env: Mapping[str, str] | None = None,
    facts_dir: Path | None = None,
) -> RunResult:
    """Run the oracle with ``python`` (a file with a foreign ``#!`` as that line says, a
    command as given) in ``cwd`` (default: a scratch directory) and classify it.

    ``gpu`` pins the run to one GPU (``CUDA_VISIBLE_DEVICES``): K probes at once, one per GPU.
    ``env`` is the oracle environment (base/oracle_env.py): it replaces the host's
    behaviour-changing variables; None keeps the host's. Either way the run's ``facts["env"]``
    says what it ran with (the environment's facts were read when it was made, maybe under
    another shell).
    ``facts_dir``: where the environment's facts hook writes what the run imported.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    script = run_dir / oracle.path.name
    if not is_command(oracle):
        script.write_bytes(oracle.content)
        if not oracle.python:
            script.chmod(0o755)  # run by its own #! line
    host = clean_env()
    given = oracle_env.inherited(host) if env is None else dict(env)
    facts = {**facts, "env": oracle_env.shown(given)}
    env = oracle_env.apply(host, given)
    bin_first(env, python)
    env.update(oracle.meta.env)
    env.update({
        "BISECTOR_COMMIT": commit,
        "BISECTOR_RUN_DIR": str(run_dir),
        "PYTHONUNBUFFERED": "1",
    })
    if facts_dir is not None:
        facts_dir.mkdir(parents=True, exist_ok=True)
        env["BISECTOR_FACTS_DIR"] = str(facts_dir)
        env["BISECTOR_FACTS_PACKAGE"] = str(facts.get("probed") or "")
    if gpu is not None:
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # the numbering nvidia-smi and --gpus use
        env["CUDA_VISIBLE_DEVICES"] = gpu
        facts = {**facts, "gpu_index": gpu}
    out, err = run_dir / "stdout.txt", run_dir / "stderr.txt"
    work = cwd or run_dir / "work"
    work.mkdir(exist_ok=True)
    mark = f"{owner_id()}|{run_dir.name}"
    # Temporary files of the run (tempfile's, inductor's default cache under it, Triton's
    # unless the oracle names its own) live in bisector's cache and go with the run: no
    # compiled kernel of one commit is ever found by another, and /tmp does not fill up.
    tmp = scratch_dir("oracle-tmp-")
    env.setdefault("TRITON_CACHE_DIR", str(tmp / "triton"))
    env["TMPDIR"] = str(tmp)
    # Bytecode in bisector's one folder for it (executors/bytecode.py), never beside the
    # sources: a .pyc planted in site-packages' __pycache__ is never read. Written, so the
    # run's other Pythons (Inductor's compile workers import torch too) do not each compile
    # torch's sources again: that cost ~1.5 s a GPU probe (issue 21).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(bytecode_dir())
    try:
        res = run_logged(reaped(program(oracle, python, script), mark), cwd=work,
                         env=reaper_env(env),
                         stdout_path=out, stderr_path=err, timeout_s=oracle.meta.timeout)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        forget(tmp, work, run_dir)  # what existed for this run alone
    cap_output(out)
    cap_output(err)
    c = classify(res.returncode, timed_out=res.timed_out, timeout_s=oracle.meta.timeout)
    output_tail, facts = collect_output(out, err, facts)
    return RunResult(c.outcome, c.reason, res.returncode, res.duration_s, c.reusable,
                     out, err, output_tail, facts)


def collect_output(out: Path, err: Path, facts: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The tail kept in the store, and the facts plus the oracle's structured result if any."""
    output_tail = "\n".join(x for x in (tail(out, 10), tail(err, 10)) if x)
    result = structured_result(out)
    return output_tail, ({**facts, "result": result} if result is not None else facts)


RESULT_PREFIX = "BISECTOR_RESULT "


def structured_result(stdout: Path) -> dict[str, Any] | None:
    """The oracle's last ``BISECTOR_RESULT {json}`` line (metrics, samples), if it printed one."""
    found: dict[str, Any] | None = None
    if not stdout.exists():
        return None
    prefix = RESULT_PREFIX.encode()
    with stdout.open("rb") as f:
        while line := f.readline(1 << 20):  # bounded: a newline-free flood is read in pieces
            whole = line.endswith(b"\n") or len(line) < 1 << 20  # or the file's last line
            while not line.endswith(b"\n") and (more := f.readline(1 << 20)):
                line = more  # the rest of an over-long line: skipped
            if not (whole and line.startswith(prefix)):
                continue
            text = line[len(prefix):].decode(errors="replace")
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                value = {"unparsed": text.strip()[:2000]}
            found = value if isinstance(value, dict) else {"value": value}
    return found


class SystemExecutor:
    """Runs the oracle with an existing interpreter as is (``bisect check --env system``):
    the quickest answer to "does it reproduce here?", with no environment made."""

    name = "system"

    def __init__(self, python: str, import_name: str | None,
                 trees: Callable[[str], Path] | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        self.python, self.import_name, self.trees = python, import_name, trees
        self.env = env

    def fingerprint_facts(self) -> dict[str, Any]:
        return with_env({"executor": self.name, "python": self.python}, self.env)

    def run(self, *, inst: Installable, oracle: Oracle, commit: str, run_dir: Path,
            gpu: str | None = None) -> RunResult:
        t0 = time.monotonic()
        facts = collect_facts(self.python, self.import_name, inst.obtained)
        facts_s = time.monotonic() - t0
        with inuse.using(in_use(inst, oracle, commit, None), f"probe of {commit[:12]}"):
            return with_phases(run_in_place(self.python, oracle, commit, run_dir, facts, gpu,
                                            self.trees, self.env),
                               environment=0.0, facts=facts_s)
