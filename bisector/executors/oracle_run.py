"""One oracle run, wherever its environment came from: in a fresh copy of the commit's tree (a
command) or a scratch folder (an oracle file), under the reaper, with the oracle environment's
variables, the run's own temporary folder and the kept bytecode folder, classified by its exit;
and the oracle's structured result (``BISECTOR_RESULT {json}``) read from its output. The local
executors and ``bisect check --env system`` run oracles through here; the Docker executor reads
results the same way (:func:`collect_output`).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bisector.artifacts.cache import scratch_dir
from bisector.artifacts.export import ExportError
from bisector.artifacts.trees import run_tree
from bisector.base import oracle_env
from bisector.core.verdict import classify
from bisector.executors.base import RunResult, infra_skip
from bisector.executors.bytecode import bytecode_dir, forget
from bisector.executors.command_path import foreign_program
from bisector.executors.facts import clean_env
from bisector.infra.owner import owner_id
from bisector.infra.proc import cap_output, reaped, reaper_env, run_logged, tail
from bisector.oracle.command import program
from bisector.oracle.dashboard import through_file
from bisector.oracle.script import Oracle


# Above ruff's limits on purpose: one oracle run's inputs, passed on to run_oracle.
def run_in_place(  # noqa: PLR0913
    python: str, oracle: Oracle, commit: str, run_dir: Path, facts: dict[str, Any],
    gpu: str | None, trees: Callable[[str], Path] | None,
    env: Mapping[str, str] | None = None, facts_dir: Path | None = None, in_tree: bool = False,
) -> RunResult:
    """:func:`run_oracle` where it belongs: a command in a fresh copy of the commit's tree
    (one that cannot be exported is a skip retried later), an oracle file in a scratch
    folder, unless ``in_tree``: a commit with nothing installed (``Installable.tree``), whose
    tree is all an oracle file can look at, so it runs there too, cwd at its root."""
    if not (oracle.in_tree or in_tree):
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


# Above ruff's limits on purpose: one oracle run's inputs, documented one by one.
def run_oracle(  # noqa: PLR0913
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
    if not oracle.in_tree:
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
    # A dashboard oracle's models go to its reader through a file, never the arguments.
    argv = through_file(program(oracle, python, script), run_dir)
    if oracle.in_tree:  # another environment's pytest, or none: a skip saying why
        found = shutil.which(python) or python
        why = foreign_program(argv[0], env.get("PATH", ""), Path(found).parent.parent, work)
        if why:
            return infra_skip(why)
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
        res = run_logged(reaped(argv, mark), cwd=work,
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
