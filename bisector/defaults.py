"""Every default in one place: the CLI's ``--help``, the run configuration, the executors and the
builders all read them from here, so a default can never differ between two of them."""

from __future__ import annotations

import os

RUNTIME_IMAGE = "bisector/runtime:latest"
BUILDER_IMAGE = "bisector/builder:latest"
MEMORY = "16g"  # memory limit of each oracle container
PIDS = 4096  # process limit of each oracle container
BUILD_TIMEOUT_S = 3600.0  # one source build
ORACLE_TIMEOUT_S = 600.0  # an oracle without `timeout` in its metadata
JOBS = 1  # probes at once
BUILD_JOBS = 1  # source builds at once (each already uses every core)
CONTAINER_GRACE_S = 10  # SIGTERM -> SIGKILL for a container past its deadline
PROCESS_GRACE_S = 5.0  # the same for a local process group
# ccache's default 5 GB holds about one PyTorch CUDA configuration; a bisection walks many.
CCACHE_MAXSIZE = os.environ.get("BISECTOR_CCACHE_MAXSIZE", "25G")
# A lease beats while its run lives (also during an hour-long build); one whose beat is older
# than LEASE_STALE_S belongs to a controller that is gone and may be taken over.
LEASE_BEAT_S = float(os.environ.get("BISECTOR_LEASE_BEAT_S", "30"))
LEASE_STALE_S = float(os.environ.get("BISECTOR_LEASE_STALE_S", "600"))
# An oracle's stdout and stderr keep at most this much (head and tail) on disk.
OUTPUT_CAP = 64 * 2**20

# Flaky oracles: the noisy search stops when the most likely culprit is this probable.
NOISY_CONFIDENCE = 0.99
# Each endpoint is run this many times to estimate a flaky oracle's error rates (when its
# metadata gives none and no `repeats`).
NOISY_ENDPOINT_RUNS = 3
# Runs of the good endpoint a performance oracle's samples are compared with.
PERF_BASELINE_RUNS = 3
# Fresh runs of each confirmed commit for a performance oracle (enough for the rank test).
CONFIRM_PERF_RUNS = 3
