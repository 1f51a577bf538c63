"""Which worker may run which probe (``queue/routing.py``): a bisection's need against a
worker's offer, by queue name."""

from __future__ import annotations

import pytest

from bisector.queue.routing import LONGEST, Need, Offer, cuda_class

pytestmark = pytest.mark.unit

H200 = "NVIDIA H200"


def _env(python: str = "cp312", gpus: tuple[str, ...] = (H200,),
         executor: str = "local") -> dict[str, object]:
    return {"executor": {"executor": executor, "python": python, "gpu_models": list(gpus)},
            "build": {}}


@pytest.mark.parametrize(("variant", "want"), [
    ("cu126", "cu12"), ("cu128", "cu12"), ("cu130", "cu13"), ("cu118", "cu11"),
    ("cpu", "cpu"), ("rocm6.3", "rocm6.3"), (None, "any")])
def test_a_variant_needs_its_cuda_major(variant: str | None, want: str) -> None:
    assert cuda_class(variant) == want


def test_a_need_is_read_off_the_stored_environment() -> None:
    need = Need.of(_env(), "cu128")
    assert need == Need((H200,), "cp312", "cu12")
    assert need.queue == "probe/nvidia-h200/cp312/cu12"
    assert Need.of(_env(gpus=()), None).queue == "probe/no-gpu/cp312/any"
    # A container brings its own Python: any worker's will do.
    assert Need.of(_env(executor="docker"), "cu128").python == "any"


def test_a_worker_serves_its_gpu_model_its_pythons_and_older_cuda_only() -> None:
    h200 = Offer((H200,), {"cp311": "/usr/bin/python3.11", "cp312": "/opt/py/bin/python3.12"},
                 cuda_major=12)
    assert h200.serves(Need.of(_env(), "cu126"))
    assert h200.serves(Need.of(_env(python="cp311"), "cu128"))
    assert h200.serves(Need.of(_env(), "cu118"))  # an older major: the driver runs it
    assert h200.serves(Need.of(_env(), None))  # a source build
    assert not h200.serves(Need.of(_env(), "cu130"))  # a driver too old for CUDA 13
    assert not h200.serves(Need.of(_env(python="cp313"), "cu128"))
    assert not h200.serves(Need.of(_env(gpus=("NVIDIA H100 80GB HBM3",)), "cu128"))
    assert not h200.serves(Need.of(_env(gpus=()), "cu128"))  # a CPU search: a CPU box


def test_a_box_without_gpu_serves_cpu_searches() -> None:
    cpu = Offer((), {"cp311": "/usr/bin/python3.11"})
    assert cpu.serves(Need.of(_env(python="cp311", gpus=()), None))
    assert cpu.serves(Need.of(_env(python="cp311", gpus=()), "cpu"))
    assert not cpu.serves(Need.of(_env(python="cp311"), "cu128"))
    assert cpu.words() == "no GPU; cp311; no CUDA"


def test_a_long_gpu_name_still_makes_a_channel_postgres_takes() -> None:
    name = "NVIDIA GeForce RTX 4090 Laptop GPU with a very long marketing name"
    need = Need.of(_env(gpus=(name, "NVIDIA RTX A6000")), "cu128")
    assert len(need.queue) <= LONGEST and len("procrastinate_queue_v1#" + need.queue) < 64
    assert Offer((name, "NVIDIA RTX A6000"), {"cp312": "p"}, 12).serves(need)  # any order
    assert not Offer((name,), {"cp312": "p"}, 12).serves(need)


def test_queue_names_read_back_as_their_kind_and_an_offer_as_stored() -> None:
    from bisector.queue.routing import kind

    assert [kind(q) for q in ("probe", "probe/nvidia-h200/cp312/cu12", "build",
                              "build/cp312", "default", None)] == \
        ["probe", "probe", "build", "build", None, None]
    offer = Offer(("NVIDIA H200",), {"cp312": "/opt/py/bin/python3.12"}, 13)
    assert Offer.from_dict(offer.as_dict()) == offer
