# /// script
# dependencies = []
# [tool.bisector]
# description = "Template: time a torch.compile'd function; samples as a BISECTOR_RESULT line"
# timeout = 900
# ///
"""Performance oracle template: copy it, replace ``workload()``, keep the output format.

It compiles the workload, warms it up, then times ``SAMPLES`` runs (CUDA events on a GPU,
``perf_counter`` on CPU) and prints one structured last line::

    BISECTOR_RESULT {"metric": "...", "unit": "ms", "samples": [...], "median": ...}

Add ``threshold = "5%"`` to ``[tool.bisector]`` (in a copy) and bisector judges each commit by
its samples against the good endpoint's (Mann–Whitney U, sampling more until it decides; see
the README's "Performance oracles"). Without a threshold the exit code decides, following
``BISECTOR_PERF_MAX_MS``: when set, exit 1 if the median exceeds it, else 0. Exit 125 when the
environment cannot run the workload.
"""

import json
import os
import statistics
import sys
import time

WARMUP, SAMPLES = 5, 30

try:
    import torch
except Exception as e:  # noqa: BLE001
    print(f"skip: cannot import torch: {e}")
    sys.exit(125)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def workload():
    """Return (callable, args). Replace with the code whose speed regressed."""
    def f(a, b):
        return torch.nn.functional.gelu(a @ b).sum(dim=-1)

    n = 2048 if DEVICE == "cuda" else 256
    return torch.compile(f), (torch.randn(n, n, device=DEVICE), torch.randn(n, n, device=DEVICE))


def time_ms(fn, args):
    if DEVICE == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end)
    t = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - t) * 1000.0


def main():
    fn, args = workload()
    for _ in range(WARMUP):
        fn(*args)
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    samples = [round(time_ms(fn, args), 4) for _ in range(SAMPLES)]
    median = statistics.median(samples)
    print("BISECTOR_RESULT " + json.dumps({
        "metric": "workload_time", "unit": "ms", "device": DEVICE, "samples": samples,
        "median": median, "warmup": WARMUP, "torch": torch.__version__,
    }))
    limit = os.environ.get("BISECTOR_PERF_MAX_MS")
    return 1 if limit and median > float(limit) else 0


if __name__ == "__main__":
    sys.exit(main())
