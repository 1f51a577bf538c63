"""Issue 33 on a GPU box: what a worker there offers the queue, read from the real
``nvidia-smi`` (its GPU model and its driver's CUDA major) and its Pythons, and whether the
probes of a bisection started on that box (its GPU models, Python, and the installed torch's
variant) go to it, while those of another GPU model do not."""

from __future__ import annotations

import json
import sys

from bisector.artifacts.build import gpu_inventory, python_tag
from bisector.queue.routing import Need
from bisector.worker.offer import offer


def main() -> None:
    import torch

    variant = torch.__version__.partition("+")[2] or None
    inventory = gpu_inventory() or []
    models = sorted({name for _, name, _ in inventory})
    mine = offer("0", ())
    need = Need.of({"executor": {"executor": "local", "python": python_tag(sys.executable),
                                 "gpu_models": models}}, variant)
    other = Need.of({"executor": {"executor": "local", "python": python_tag(sys.executable),
                                  "gpu_models": ["NVIDIA A100-SXM4-80GB"]}}, variant)
    newer = Need(need.gpus, need.python, f"cu{(mine.cuda_major or 0) + 1}")
    print(json.dumps({
        "inventory": inventory, "torch": torch.__version__,
        "offer_gpu0": mine.as_dict(), "offer_words": mine.words(),
        "offer_queues": mine.queues(),
        "need": need.words(), "need_queue": need.queue, "served": mine.serves(need),
        "other_gpu_need": other.queue, "other_served": mine.serves(other),
        "newer_cuda_need": newer.queue, "newer_served": mine.serves(newer),
    }, indent=1))


if __name__ == "__main__":
    main()
