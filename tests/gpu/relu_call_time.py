# /// script
# dependencies = []
# [tool.bisector]
# description = "Times torch.nn.functional.relu on a tiny CPU tensor: a Python function's cost"
# threshold = "10%"
# timeout = 120
# needs-gpu = false
# ///
"""Microseconds per call of ``torch.nn.functional.relu`` on an 8-element CPU tensor, as a
BISECTOR_RESULT line: the performance oracle of ``tests/gpu/perf_watch_proof.py``.

A tiny tensor keeps the kernel negligible, so the time is the Python wrapper's and the
dispatcher's: a slowdown planted in ``relu``'s Python body (the proof's culprit) shows in full,
on any box, with or without a GPU. 9 samples, each the fastest of 5 batches of 2,000 calls
(the batch least disturbed by other processes), after a warm-up.
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
for _ in range(CALLS):
    F.relu(x)
samples = []
for _ in range(SAMPLES):
    batches = []
    for _ in range(BATCHES):
        start = time.perf_counter()
        for _ in range(CALLS):
            F.relu(x)
        batches.append(time.perf_counter() - start)
    samples.append(min(batches) / CALLS * 1e6)
print("BISECTOR_RESULT " + json.dumps({"samples": samples, "unit": "us", "metric": "relu_call",
                                       "direction": "lower-is-better",
                                       "torch": torch.__version__}))
