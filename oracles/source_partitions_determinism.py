# /// script
# dependencies = []
# [tool.bisector]
# description = "pytorch#147170: get_source_partitions input_nodes order must be graph order, every run"
# timeout = 900
# ///
"""Oracle for pytorch/pytorch#147170 (``get_source_partitions`` order is non-deterministic).
Runs on CPU.

``make_partition`` builds ``input_nodes`` from a ``set`` of fx Nodes, which hash by address, so
the order follows where objects happened to be allocated. The oracle traces a graph whose
gather node has two inputs (``detach``, ``expand``), marks it with ``source_fn_stack`` (the key
``get_source_partitions`` reads), and asks for the partition R times in each of K fresh
processes with different hash seeds, allocating objects between retraces to move addresses.

Exit 1 (bad) when any trial is out of graph order or more than one ordering appears; exit 0 when
every trial is in graph order; 125 when torch cannot be imported. With R*K = 2000 trials the
chance of a false "good" while the bug is present is about 0.5**2000.
"""

import json
import os
import random
import subprocess
import sys

R, K = 200, 10


def child(seed):
    import torch
    import torch.fx
    from torch.fx.passes.utils.source_matcher_utils import get_source_partitions

    class M(torch.nn.Module):
        def forward(self, x, idx):
            return torch.gather(x.detach(), 1, idx.expand(4, 3))

    rng = random.Random(seed)
    keep = []
    orders = []
    out_of_order = 0
    for _ in range(R):
        gm = torch.fx.symbolic_trace(M())
        for node in gm.graph.nodes:
            if node.op == "call_function" and node.target is torch.gather:
                node.meta["source_fn_stack"] = [("gather_1", torch.gather)]
        parts = get_source_partitions(gm.graph, [torch.gather])
        part = parts[torch.gather][0]
        names = [n.name for n in part.input_nodes]
        position = {n.name: i for i, n in enumerate(gm.graph.nodes)}
        if names != sorted(names, key=position.__getitem__):
            out_of_order += 1
        orders.append(names)
        keep.append([object() for _ in range(rng.randint(1, 64))])  # move later addresses
        if len(keep) > 20:
            keep.pop(rng.randrange(len(keep)))
    print(json.dumps({"orders": sorted({tuple(o) for o in orders}),
                      "out_of_order": out_of_order}))


def main():
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        print(f"skip: cannot import torch: {e}")
        return 125
    seen, out_of_order = set(), 0
    for k in range(K):
        env = dict(os.environ, PYTHONHASHSEED=str(k + 1))
        r = subprocess.run([sys.executable, __file__, "--child", str(k)], env=env,
                           capture_output=True, text=True, check=False)
        if r.returncode != 0:
            print(f"skip: trial process failed: {r.stderr[-500:]}")
            return 125
        data = json.loads(r.stdout.strip().splitlines()[-1])
        seen.update(tuple(o) for o in data["orders"])
        out_of_order += data["out_of_order"]
    print(f"torch {torch.__version__}: {R * K} trials, orderings seen {sorted(seen)}, "
          f"out of graph order {out_of_order}")
    if out_of_order or len(seen) > 1:
        print("bad: input_nodes order is not deterministic graph order")
        return 1
    print("good: always in graph order")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(int(sys.argv[2]))
    else:
        sys.exit(main())
