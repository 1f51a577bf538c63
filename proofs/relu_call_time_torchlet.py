# /// script
# dependencies = []
# [tool.bisector]
# description = "torchlet.nn.functional.relu against the same code inline (CPU stand-in)"
# threshold = "50%"
# timeout = 120
# ///
"""``torchlet.nn.functional.relu``'s time per call on 64 floats over that of the same list
comprehension defined here, as a BISECTOR_RESULT line: ``proofs/perf_watch_proof.py
--package torchlet`` runs the GPU proof's procedure on the synthetic torchlet with it
(``relu_call_time.py`` is torch's, and says why a ratio). 9 samples, each the fastest of 5
alternating batches of 1,000 calls of either. Its threshold is 50 %, not torch's 10 %: on a
shared CPU box the clocks change within a run, samples of one run then spread from half to
twice the median, and a commit is good only when its runs are clearly below the baseline plus
the threshold; the planted step is 3x."""
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


def reference(xs):
    return [x if x > 0 else 0.0 for x in xs]


def batch(f):
    start = time.perf_counter()
    for _ in range(CALLS):
        f(xs)
    return time.perf_counter() - start


batch(F.relu), batch(reference)
samples = []
for _ in range(SAMPLES):
    wrapped, inline = [], []
    for _ in range(BATCHES):
        wrapped.append(batch(F.relu))
        inline.append(batch(reference))
    samples.append(min(wrapped) / min(inline))
print("BISECTOR_RESULT " + json.dumps({"samples": samples, "unit": "x inline",
                                       "metric": "relu_over_inline",
                                       "direction": "lower-is-better"}))
