# /// script
# dependencies = []
# [tool.bisector]
# description = "Times torchlet.nn.functional.relu: the CPU stand-in of relu_call_time.py"
# threshold = "50%"
# timeout = 120
# ///
"""Microseconds per call of ``torchlet.nn.functional.relu`` on 64 floats, as a BISECTOR_RESULT
line: ``tests/gpu/perf_watch_proof.py --package torchlet`` runs the GPU proof's procedure on
the synthetic torchlet with it (``relu_call_time.py`` is torch's). 9 samples, each the fastest
of 5 batches of 1,000 calls. Its threshold is 50 %, not torch's 10 %: on a shared CPU box a
run's speed jumps between two levels (2x apart), and a commit is good only when its runs are
clearly faster than the baseline plus the threshold; the planted step is 3x."""
import json
import sys
import time

try:
    from torchlet.nn import functional as F
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(125)

CALLS, BATCHES, SAMPLES = 1_000, 5, 9
xs = [float(i - 32) for i in range(64)]
for _ in range(CALLS):
    F.relu(xs)
samples = []
for _ in range(SAMPLES):
    batches = []
    for _ in range(BATCHES):
        start = time.perf_counter()
        for _ in range(CALLS):
            F.relu(xs)
        batches.append(time.perf_counter() - start)
    samples.append(min(batches) / CALLS * 1e6)
print("BISECTOR_RESULT " + json.dumps({"samples": samples, "unit": "us", "metric": "relu_call",
                                       "direction": "lower-is-better"}))
