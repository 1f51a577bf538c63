"""Which worker may run which probe: a queue per environment.

A verdict is keyed by the environment where its probe ran (``store/runs.py``), and a search
that mixed two GPU models, or a worker's Python 3.11 with the coordinator's 3.12, would weigh
runs of two environments as one. So a bisection states what its probes need (:class:`Need`:
the GPU models of the box that started it, the Python its probes run, the CUDA major its
torch variant was built for), each worker advertises what it has (:class:`Offer`), and a probe
job goes to a queue named after the need (``probe/nvidia-h200/cp312/cu12``), which only the
workers offering that environment listen to. Procrastinate takes a fixed list of queues per
worker, so a worker's list is the product of what it offers; it stays short (its GPU model,
its Pythons, the CUDA majors its driver runs).

CUDA majors, not variants: since CUDA 11 a driver runs every minor release of its major and of
the majors before it (NVIDIA's minor version compatibility), so ``cu126`` and ``cu128`` need
the same driver, and a driver for CUDA 13 runs both. Pure: the worker's side that reads
``nvidia-smi`` and finds Pythons is ``worker/offer.py``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import product
from typing import Any

PROBE = "probe"  # the one queue of workers that predate environments, and of `--queue probe`
BUILD = "build"  # likewise for builds
NO_GPU = "no-gpu"
ANY = "any"  # no variant (a source build), or a container bringing its own Python
OLDEST_CUDA = 11  # the first major with minor version compatibility
# Procrastinate notifies "procrastinate_queue_v1#QUEUE", and PostgreSQL refuses a channel
# name of 64 bytes or more.
LONGEST = 40


def kind(queue: str | None) -> str | None:
    """``probe`` or ``build`` for one of bisector's queues (plain, or one per environment:
    ``probe/nvidia-h200/cp312/cu12``, ``build/cp312``); None for any other."""
    head = (queue or "").split("/", 1)[0]
    return head if head in (PROBE, BUILD) else None


def slug(text: str) -> str:
    """``NVIDIA H200`` -> ``nvidia-h200``: a queue name part (Procrastinate's are text)."""
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-") or "unknown"


def cuda_class(variant: str | None) -> str:
    """``cu128`` -> ``cu12``; ``cpu``, ``rocm6.3`` as they are; None (built from source
    with the builder's toolkit) -> ``any``."""
    if not variant:
        return ANY
    m = re.fullmatch(r"cu(\d+?)(\d)", variant)
    if m:
        return f"cu{m.group(1)}"
    return slug(variant)


@dataclass(frozen=True)
class Need:
    """What every probe of one bisection needs of the worker that runs it."""

    gpus: tuple[str, ...]  # the GPU models of the box that started it; () without one
    python: str  # ``cp312``; ``any`` when a container brings its own
    cuda: str  # :func:`cuda_class` of its variant

    @classmethod
    def of(cls, environment: Mapping[str, Any], variant: str | None) -> Need:
        """From a bisection's stored environment (``run/prepare.py``) and its variant."""
        facts = environment.get("executor") or {}
        contained = facts.get("executor") == "docker"
        python = str(facts.get("python") or ANY)
        return cls(tuple(sorted(facts.get("gpu_models") or ())),
                   ANY if contained or not re.fullmatch(r"cp\d+t?", python) else python,
                   cuda_class(variant))

    @property
    def queue(self) -> str:
        """``probe/nvidia-h200/cp312/cu12``; a digest of that past :data:`LONGEST` (the
        queue's name is a PostgreSQL NOTIFY channel's tail, under 64 bytes in all)."""
        gpu = "+".join(slug(g) for g in self.gpus) or NO_GPU
        name = f"{PROBE}/{gpu}/{self.python}/{self.cuda}"
        if len(name) <= LONGEST:
            return name
        return f"{PROBE}/{hashlib.sha256(name.encode()).hexdigest()[:20]}"

    @property
    def build_queue(self) -> str:
        """``build/cp312``: a build ahead of a probe needs a box with that Python, whatever
        its GPU (``build/any`` when the builder image brings its own)."""
        return f"{BUILD}/{self.python}"

    def words(self) -> str:
        """``NVIDIA H200, cp312, cu12``: for a line saying who may run it."""
        return ", ".join([" + ".join(self.gpus) or "no GPU", self.python, self.cuda])


@dataclass(frozen=True)
class Offer:
    """What one worker can run: its GPU models (those of ``--gpu N``, else the box's), its
    Pythons by tag, and the newest CUDA major its driver runs (None without a driver)."""

    gpus: tuple[str, ...]
    pythons: Mapping[str, str] = field(default_factory=dict)  # tag -> interpreter path
    cuda_major: int | None = None

    def cuda_classes(self) -> list[str]:
        """What its driver runs: every CUDA major up to its own, the CPU wheels, and ``any``
        (source builds, whose toolkit the builder image chose). ROCm variants are not offered
        yet: a ROCm bisection finds no worker and probes in-process (or waits, saying so,
        with ``--enqueue``)."""
        majors = range(OLDEST_CUDA, (self.cuda_major or 0) + 1)
        return [*(f"cu{m}" for m in majors), "cpu", ANY]

    def queues(self) -> list[str]:
        """Every probe queue this worker takes jobs from."""
        pythons = [*sorted(self.pythons), ANY]
        return [Need(tuple(sorted(self.gpus)), py, cuda).queue
                for py, cuda in product(pythons, self.cuda_classes())]

    def build_queues(self) -> list[str]:
        """Every build queue this box takes jobs from: one per Python it has, ``any``."""
        return [f"{BUILD}/{py}" for py in [*sorted(self.pythons), ANY]]

    def serves(self, need: Need) -> bool:
        return need.queue in self.queues()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Offer:
        """The offer a worker stored (:meth:`as_dict`)."""
        return cls(tuple(d.get("gpus") or ()), dict(d.get("pythons") or {}), d.get("cuda"))

    def as_dict(self) -> dict[str, Any]:
        return {"gpus": list(self.gpus), "pythons": dict(self.pythons),
                "cuda": self.cuda_major}

    def words(self) -> str:
        """``NVIDIA H200; cp311, cp312; CUDA 12 and older``."""
        cuda = f"CUDA {self.cuda_major} and older" if self.cuda_major else "no CUDA"
        return "; ".join([" + ".join(self.gpus) or "no GPU",
                          ", ".join(sorted(self.pythons)) or "no Python", cuda])
