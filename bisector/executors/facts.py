"""An environment's facts (Python, the probed package's version and commit, torch, the GPU):
what every verdict made in it is recorded with.

Asking an environment's Python costs a second import of the package, seconds for torch, on
every new environment (an overlay is one per probe). So an environment is made with a facts
hook instead (infra/scripts/facts_probe.py, installed as a module a ``.pth`` line imports) and
its first oracle run reports what it imported when it exits; only when it did not (the oracle
never imported the package, or died) is the Python asked. Either way the answer is stored
beside the environment and read by every later probe of it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

from bisector.base.paths import FACTS_SCRIPT
from bisector.infra.proc import call

# Variables that would let the host's environment leak into the probed one.
SCRUB = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP", "CONDA_PREFIX")


def clean_env() -> dict[str, str]:
    """This process's environment minus what would leak the host's Python into a probe."""
    return {k: v for k, v in os.environ.items() if k not in SCRUB}


def learn_facts(venv: Path, told: Path | None, import_name: str | None) -> dict[str, Any]:
    """An environment's facts, kept with it: those its oracle run reported when it exited
    (``told``: the folder the facts hook wrote to), else asked of its Python (a second
    import of the package, seconds for torch). Only the first probe of an environment
    pays either: the answer is stored beside it."""
    path = venv / FACTS_FILE
    known: dict[str, Any] = json.loads(path.read_text())
    if not known.pop(PENDING, False):
        return known
    # With no package named, the facts name torch when the environment has it; a pure
    # project's environment has none, and what its run told (Python, platform) is all there is.
    torch = any(venv.glob("lib/python*/site-packages/torch"))
    learned = richest_facts(told, import_name, torch) if told is not None else None
    how = "run" if learned is not None else "asked"
    if learned is None:
        learned = collect_facts(str(venv / "bin" / "python"), import_name,
                                str(known.get("obtained", "")))
    # What a run's variables were is the run's, not the environment's: each run records its
    # own (executors/oracle_run.run_oracle), never those of the run that happened to come first.
    learned = {k: v for k, v in learned.items() if k != "env"}
    facts = {**learned, **known, "facts_from": how}
    if "facts_error" not in facts:
        # A temporary name of this writer's own: two probes of one environment at once (K
        # slots, or two bisections sharing the cache) each learn the same facts, and with one
        # shared name the second rename found nothing and failed the probe.
        fd, tmp = tempfile.mkstemp(prefix="bisector-facts.", suffix=".tmp", dir=venv)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(facts, sort_keys=True))
        os.replace(tmp, path)
    return facts


FACTS_FILE = "bisector-facts.json"
PENDING = "facts_pending"  # made without asking its Python: the first run reports the facts
FACTS_HOOK = "_bisector_facts"


def install_facts_hook(site: Path) -> None:
    """The facts script as a module of the environment, imported at every start by a
    ``.pth`` line: a Python started with ``BISECTOR_FACTS_DIR`` set writes its facts when it
    exits (infra/scripts/facts_probe.py). Part of the manifest like any installed file."""
    shutil.copyfile(FACTS_SCRIPT, site / f"{FACTS_HOOK}.py")
    (site / f"{FACTS_HOOK}.pth").write_text(f"import {FACTS_HOOK}\n")


def richest_facts(folder: Path, import_name: str | None,
                  torch: bool = True) -> dict[str, Any] | None:
    """Of the facts the run's processes wrote, the ones that name the probed package (else
    torch when no package is named and ``torch`` is installed), a GPU first; None when none
    does."""
    best: tuple[int, int, dict[str, Any]] | None = None
    for path in sorted(folder.glob("facts-*.json")):
        try:
            facts = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if not isinstance(facts, dict):
            continue
        if import_name and facts.get("package") != import_name:
            continue
        if not import_name and torch and "torch" not in facts:
            continue
        rank = (int("gpu" in facts), len(facts))
        if best is None or rank > best[:2]:
            best = (*rank, facts)
    return best[2] if best is not None else None


def collect_facts(python: str, import_name: str | None, obtained: str) -> dict[str, Any]:
    """Ask the environment's own Python what it has (see facts_probe.py)."""
    env = clean_env()
    r = call([python, str(FACTS_SCRIPT), import_name or ""], env=env, timeout_s=300)
    try:
        facts: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        facts = {"facts_error": (r.stderr or r.stdout)[-500:]}
    facts["obtained"] = obtained
    return facts


def installed_package(site: Path, wheel_name: str) -> dict[str, str]:
    """The probed distribution's name and version as its environment holds them (its
    ``.dist-info``, an overlay's version line included), read without importing it: the facts
    of an environment whose interpreter alone is asked (a pure-Python project's), where a
    report once read "version: N/A"."""
    dist = wheel_name.split("-", 1)[0].lower()
    for info in sorted(site.glob("*.dist-info")):
        if info.name.split("-", 1)[0].lower() != dist:
            continue
        try:
            meta = HeaderParser().parsestr((info / "METADATA").read_text(errors="replace"))
        except OSError:
            continue
        if meta["Name"] and meta["Version"]:  # not "package": that names what it imports
            return {"distribution": str(meta["Name"]).strip(),
                    "distribution_version": str(meta["Version"]).strip()}
    return {}
