# /// script
# dependencies = []
# [tool.bisector]
# description = "pytorch#170398: user Triton kernel named __x under torch.compile -> NameError _Runner__x"
# needs-gpu = true
# timeout = 900
# env = { TORCHINDUCTOR_FORCE_DISABLE_CACHES = "1" }
# ///
"""Oracle for pytorch/pytorch#170398 (name mangling of dunder user Triton kernels).

Inductor names a user kernel ``f"{name}_{n}"`` and, with graph partitions on (the OSS default
since 2.9), emits the wrapper's ``call`` inside ``class Runner:``. Python mangles ``__mm_kernel_0``
in a class body to ``_Runner__mm_kernel_0``, hence ``NameError``.

Exit 0 (good): the dunder kernel and the plain control kernel both compile and compute right.
Exit 1 (bad): the dunder kernel fails with the mangled-name NameError.
Exit 125 (skip): no CUDA/Triton, the plain control kernel fails too, or the dunder kernel fails in
some other way (a different bug: this oracle cannot answer for it).
Fresh Inductor and Triton caches per run, so no compiled artifact leaks between commits.
"""

import os
import sys
import tempfile
import traceback

SKIP, BAD, GOOD = 125, 1, 0
_cache = tempfile.mkdtemp(prefix="oracle-name-mangling-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(_cache, "inductor")
os.environ["TRITON_CACHE_DIR"] = os.path.join(_cache, "triton")
os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")

try:
    import torch
    import triton
    import triton.language as tl
except Exception as e:  # noqa: BLE001
    print(f"skip: cannot import torch/triton: {e}")
    sys.exit(SKIP)


@triton.jit
def __mm_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


@triton.jit
def plain_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


def attempt(kernel):
    """Call ``kernel`` inside a compiled function; None on success, else the exception."""
    def fn(x):
        y = torch.empty_like(x)
        n = x.numel()
        kernel[(triton.cdiv(n, 256),)](x, y, n, BLOCK=256)
        return y + 1.0

    torch._dynamo.reset()
    try:
        x = torch.randn(1000, device="cuda")
        out = torch.compile(fn, fullgraph=True)(x)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, x * 2.0 + 1.0)
        return None
    except Exception as e:  # noqa: BLE001
        return e


def main():
    if not torch.cuda.is_available():
        print("skip: CUDA is not available")
        return SKIP
    print(f"torch {torch.__version__} git {torch.version.git_version[:12]} triton "
          f"{triton.__version__} on {torch.cuda.get_device_name()}; graph_partition="
          f"{getattr(torch._inductor.config, 'graph_partition', 'n/a')}")
    plain = attempt(plain_kernel)
    if plain is not None:
        print(f"skip: the plain control kernel fails too: {type(plain).__name__}: {plain}")
        return SKIP
    print("plain OK")
    dunder = attempt(__mm_kernel)
    if dunder is None:
        print("dunder OK")
        return GOOD
    text = "".join(traceback.format_exception_only(type(dunder), dunder)).strip()
    if isinstance(dunder, NameError) or "NameError" in text:
        if "_Runner__" in text:
            print(f"bad: reproduced #170398: {text.splitlines()[-1][:300]}")
            return BAD
    print(f"skip: the dunder kernel fails in another way: {text[-500:]}")
    return SKIP


if __name__ == "__main__":
    sys.exit(main())
