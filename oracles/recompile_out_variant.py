# /// script
# dependencies = []
# [tool.bisector]
# description = "pytorch#135859: torch.topk/max with out= recompile per shape, functional forms do not"
# timeout = 600
# ///
"""Oracle for pytorch/pytorch#135859 (recompilations with ``out=`` variants). Runs on CPU.

The same function is compiled twice, once writing through ``out=`` and once functional, and
both are called on 6 batch sizes (under the default recompile limit of 8). Dynamo's frame
counters say how often each was compiled.

Direction: exit 1 (bad) when the ``out=`` version compiles more often than the functional one,
which is the long-standing bug (``aten.topk.values`` / ``aten.max.dim_max`` lacked meta
functions, so FakeTensor specialised the out tensors' sizes). Its use is finding the fix:
``bisect start --good <old, broken> --bad <new, fixed> --oracle recompile_out_variant --find-fix``.
Exit 0 when both compile equally often; 125 when torch cannot be imported.
"""

import sys

try:
    import torch
    from torch._dynamo.testing import CompileCounter
except Exception as e:  # noqa: BLE001
    print(f"skip: cannot import torch: {e}")
    sys.exit(125)


def count(fn_out, fn_fun, make_out):
    torch._dynamo.reset()
    co, cf = CompileCounter(), CompileCounter()
    g_out = torch.compile(fn_out, backend=co)
    g_fun = torch.compile(fn_fun, backend=cf)
    for n in range(4, 10):
        x = torch.randn(n, 16)
        g_out(x, *make_out(n))
        g_fun(x)
    return co.frame_count, cf.frame_count


def topk_out(x, v, i):
    torch.topk(x, 3, dim=1, out=(v, i))
    return v, i


def topk_fun(x):
    return torch.topk(x, 3, dim=1)


def max_out(x, v, i):
    torch.max(x, 1, out=(v, i))
    return v, i


def max_fun(x):
    return torch.max(x, 1)


def main():
    cases = {
        "topk": (topk_out, topk_fun, lambda n: (torch.empty(n, 3), torch.empty(n, 3,
                                                                                dtype=torch.long))),
        "max": (max_out, max_fun, lambda n: (torch.empty(n), torch.empty(n, dtype=torch.long))),
    }
    bad = []
    for name, (f_out, f_fun, make) in cases.items():
        n_out, n_fun = count(f_out, f_fun, make)
        print(f"{name}: frames with out= {n_out}, functional {n_fun}")
        if n_out > n_fun:
            bad.append(name)
    print(f"torch {torch.__version__} git {torch.version.git_version[:12]}")
    if bad:
        print(f"bad: out= variants recompile more: {', '.join(bad)}")
        return 1
    print("good: out= variants compile as often as the functional forms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
