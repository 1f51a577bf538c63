"""What this box offers the queue (:class:`bisector.queue.routing.Offer`): read once when a
worker starts, from ``nvidia-smi`` and the Pythons it can find.

A worker probes with its *own* Python of the version a bisection needs, never the path the
coordinator had: boxes install Python in different places (``/usr/bin/python3.12`` here,
``~/.local/bin/python3.12`` or a uv-managed one there). ``--python PATH`` names them; without
it the worker offers its own interpreter and every ``python3.N`` on its PATH.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Sequence

from bisector.artifacts.build import gpu_inventory, python_tag, python_tag_or_none
from bisector.base.errors import UsageError
from bisector.queue.routing import Offer

MINORS = range(8, 16)  # python3.8 .. python3.15 looked for on PATH


def cuda_major() -> int | None:
    """The newest CUDA major this box's driver runs (``CUDA Version: 12.8`` in
    ``nvidia-smi``'s header); None without a driver."""
    try:
        r = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30,
                           check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"CUDA Version:\s*(\d+)\.", r.stdout)
    return int(m.group(1)) if r.returncode == 0 and m else None


def pythons(given: Sequence[str]) -> dict[str, str]:
    """Tag -> interpreter: those ``given`` (each must run), else this worker's own and every
    ``python3.N`` on PATH; the first of a tag wins."""
    found: dict[str, str] = {}
    if given:
        for path in given:
            tag = python_tag_or_none(path)
            if tag is None:
                raise UsageError(f"--python {path}: it does not run here; give the path of a "
                                 f"Python interpreter (e.g. /usr/bin/python3.12)")
            found.setdefault(tag, path)
        return found
    found[python_tag(sys.executable)] = sys.executable
    for minor in MINORS:
        on_path = shutil.which(f"python3.{minor}")
        if on_path and (tag := python_tag_or_none(on_path)) is not None:
            found.setdefault(tag, on_path)
    return found


def offer(gpu: str | None, given_pythons: Sequence[str]) -> Offer:
    """This worker's offer: the model of GPU ``gpu`` (else of every GPU here), its Pythons
    and its driver's CUDA major."""
    inventory = gpu_inventory()
    if inventory is None:  # no driver: a CPU box (``--gpu`` then only pins CUDA_VISIBLE_DEVICES)
        return Offer((), pythons(given_pythons), None)
    models = sorted({name for idx, name, _ in inventory if gpu is None or idx == gpu})
    if gpu is not None and not models:
        have = ", ".join(idx for idx, _, _ in inventory) or "none"
        raise UsageError(f"--gpu {gpu}: this box has no GPU {gpu} (it has {have}); see "
                         f"nvidia-smi -L")
    return Offer(tuple(models), pythons(given_pythons), cuda_major())
