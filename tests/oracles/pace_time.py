# /// script
# dependencies = []
# [tool.bisector]
# description = "Times torchlet._pace.work(): a performance oracle for the watch's tests"
# threshold = "20%"
# timeout = 120
# ///
"""Five timings of ``torchlet._pace.work()`` in ms, as a BISECTOR_RESULT line (the synthetic
history's ``slow_at`` commit makes it 3x slower)."""
import json
import sys
import time

try:
    from torchlet import _pace
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(125)

samples = []
for _ in range(5):
    start = time.perf_counter()
    _pace.work()
    samples.append((time.perf_counter() - start) * 1000)
print("BISECTOR_RESULT " + json.dumps({"samples": samples, "unit": "ms",
                                       "metric": "pace", "direction": "lower-is-better"}))
