# /// script
# dependencies = []
# [tool.bisector]
# description = "Times torch.nn.functional.relu against torch.relu on a tiny CPU tensor"
# threshold = "10%"
# timeout = 120
# needs-gpu = false
# ///
"""The cost of ``torch.nn.functional.relu``'s Python body: its time per call on an 8-element CPU
tensor over that of ``torch.relu`` (the operator it wraps), as a BISECTOR_RESULT line; the
performance oracle of ``proofs/perf_watch_proof.py``.

A tiny tensor keeps the kernel negligible, so a slowdown planted in ``relu``'s Python body (the
proof's culprit) shows in full, on any box, with or without a GPU. A ratio, not a time: on the
lent box one process runs 10 % faster or slower than the next (its cores' clocks), which
moves both timings alike; timed in alternating batches, the ratio keeps only what the wrapper
adds. 9 samples, each the fastest of 5 batches of 2,000 calls of either, after a warm-up.
"""
import json
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except Exception as e:  # a broken install is a skip too
    print(f"skip: cannot import torch: {e}")
    sys.exit(125)

CALLS, BATCHES, SAMPLES = 2_000, 5, 9
x = torch.ones(8)


def batch(f):
    start = time.perf_counter()
    for _ in range(CALLS):
        f(x)
    return time.perf_counter() - start


batch(F.relu), batch(torch.relu)
samples = []
for _ in range(SAMPLES):
    wrapped, op = [], []
    for _ in range(BATCHES):
        wrapped.append(batch(F.relu))
        op.append(batch(torch.relu))
    samples.append(min(wrapped) / min(op))
print("BISECTOR_RESULT " + json.dumps({"samples": samples, "unit": "x torch.relu",
                                       "metric": "relu_over_op",
                                       "direction": "lower-is-better",
                                       "torch": torch.__version__}))
