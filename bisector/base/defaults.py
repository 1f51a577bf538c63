"""Every default in one place: the CLI's ``--help``, the run configuration, the executors and the
builders all read them from here, so a default can never differ between two of them."""

from __future__ import annotations

import os

# The variables read below, once, when this module is imported: a process that set one later
# (a test running commands in its own process) would not see it, and must ask for one of its own.
FROM_ENV: set[str] = set()


def _env(name: str, default: str) -> str:
    FROM_ENV.add(name)
    return os.environ.get(name, default)


RUNTIME_IMAGE = "bisector/runtime:latest"
BUILDER_IMAGE = "bisector/builder:latest"
MEMORY = "16g"  # memory limit of each oracle container
PIDS = 4096  # process limit of each oracle container
BUILD_TIMEOUT_S = 3600.0  # one source build
ORACLE_TIMEOUT_S = 600.0  # an oracle without `timeout` in its metadata
JOBS = 1  # probes at once
BUILD_JOBS = 1  # source builds at once (each already uses every core)
# At the culprit, after the answer (run/at_culprit.py): collect_env once per environment, and
# torch's compiler bisector over the oracle (its search runs the oracle about 15-30 times: its
# timeout is the oracle's times this).
COLLECT_ENV_TIMEOUT_S = 180.0
COLLECT_ENV_CHARS = 20_000  # of collect_env's text kept (it is about 5 KB)
COMPILER_BISECT_RUNS = 40
COMPILER_BISECT_MAX_S = 2 * 3600.0  # the whole compiler bisection, however slow the oracle

# Bounds of every number a user gives (cli/options.py): beyond them a value is a typo, and
# unbounded it overflows a list, a thread pool or a PostgreSQL integer with a traceback.
MAX_ID = 2**31 - 1  # a store id (PostgreSQL's INTEGER; SQLite's is wider, one limit for both)
MAX_JOBS = 1024  # probes, builds or compile jobs at once
MAX_PIDS = 2**22  # a container's process limit (Linux's pid_max at most)
MAX_SECONDS = 30 * 86400.0  # any timeout or cost: 30 days (no build or oracle takes longer)
MAX_LIMIT = 100_000  # rows a listing returns
DEMO_NIGHTLY_EVERY = 16  # `bisect demo --nightlies`: one nightly per this many commits on main
CONTAINER_GRACE_S = 10  # SIGTERM -> SIGKILL for a container past its deadline
PROCESS_GRACE_S = 5.0  # the same for a local process group
# ccache's default 5 GB holds about one PyTorch CUDA configuration; a bisection walks many.
CCACHE_MAXSIZE = _env("BISECTOR_CCACHE_MAXSIZE", "25G")
# A lease beats while its run lives (also during an hour-long build); one whose beat is older
# than LEASE_STALE_S belongs to a controller that is gone and may be taken over.
LEASE_BEAT_S = float(_env("BISECTOR_LEASE_BEAT_S", "30"))
LEASE_STALE_S = float(_env("BISECTOR_LEASE_STALE_S", "600"))
# How often a coordinator looks whether `bisect cancel` asked: a cancel stops it this fast.
CANCEL_POLL_S = float(_env("BISECTOR_CANCEL_POLL_S", "1"))
# How long a store call waits for a database server that went away (a restart) before the
# coordinator gives up, saying `bisect resume N`; the wait between tries doubles up to the cap.
STORE_RETRY_S = float(_env("BISECTOR_STORE_RETRY_S", "60"))
STORE_RETRY_CAP_S = 5.0
# A command that only reads (list, show, log, serve...) has SQLite's quick_check read every page
# of a store this small (under ~20 ms); of a larger one, only its header and schema, since
# quick_check costs 0.26 s per 500 MB from the page cache, seconds from disk. A command that may
# write always has it checked whole (store/trouble.py: check_sqlite_file).
SQLITE_FULL_CHECK_BYTES = 32 * 2**20
# An oracle's stdout and stderr keep at most this much (head and tail) on disk.
OUTPUT_CAP = 64 * 2**20
# A report (Markdown, issue, HTML, web page) reads at most this much of any one output: its
# last lines are what a person reads, and every scrubber then runs on a bounded text.
REPORT_TEXT_CHARS = 64 * 2**10

# Flaky oracles: a regression is a bad endpoint failing at least this much more often than the
# good one (in failure rate: 20 % -> 45 %); the search names a culprit only when "a regression,
# and there" is as probable as the oracle's confidence, and answers "no regression" when that
# is (core/joint.py).
NOISY_MIN_CONTRAST = 0.25
# Flaky oracles: the prior weight of "the regression broke the test for good" (it fails every
# run from the culprit on; the flakes only come before it) against "it fails more often, not
# always" (a new race), in the culprit's probability (core/joint.py). Even odds: neither
# is assumed, and one pass after a commit rules the first out there.
NOISY_BROKEN_FOR_GOOD = 0.5
# Runs a flaky search pays while whether there is a regression at all is still unsure, before
# it says "inconclusive" (a change below NOISY_MIN_CONTRAST, or a test failing too often by
# chance to tell). The former search capped each endpoint at 150; the joint one runs mostly
# inside the range, so the cap counts every run. At 300, 2 % of flake-only ranges at 40 %
# spurious failures ended inconclusive (simulated, ``make bench`` section 14); at 600, none of
# 150.
NOISY_UNDECIDED_MAX_RUNS = 600
# Flaky oracles: the noisy search stops when the most likely culprit is this probable.
NOISY_CONFIDENCE = 0.99
# Each endpoint of a flaky oracle's search runs this many times before the search (its
# `repeats` otherwise); an endpoint whose runs look wrong runs on until the vote is clear. One
# each: every later run counts toward the rates and the joint posterior, and three each cost 4
# of 48 runs with the former search (simulated, ``make bench`` section 14).
NOISY_ENDPOINT_RUNS = 1
# Confirmation of a flaky culprit: fresh runs of it and its parent, one of each at a time, while
# their posterior is undecided, up to this many of each (groups of ``repeats`` run whole: 20
# for groups of 4).
NOISY_CONFIRM_RUNS_MAX = 18
# A flaky oracle's vote: the fewest runs a majority verdict rests on (an endpoint that looks
# wrong, the revert confirmation runs). At 20 % wrong answers a vote of three is lost one time
# in ten; one run, one time in five.
NOISY_VOTE = 3
# Runs of the good endpoint a performance oracle's samples are compared with (this bisection's
# own runs).
PERF_BASELINE_RUNS = 3
# The baseline's size when its first PERF_BASELINE_RUNS runs disagree and each run counts once
# (its median): against 8 medians a commit can be decided at 4 runs (p >= 1/495) and a 3-run
# confirmation at all (1/165), where 3 medians would need 8 runs a commit (1/165) and could
# never confirm (1/20). Five runs more, once, instead of four more on every commit.
PERF_SPLIT_BASELINE_RUNS = 8
# Fresh runs of each confirmed commit for a performance oracle (enough for the rank test).
CONFIRM_PERF_RUNS = 3

# The team's object store (artifacts/remote.py): a store that takes connections and never
# answers costs seconds, not minutes. A request waits OBJECT_STORE_CONNECT_S to connect and
# OBJECT_STORE_READ_S for each read of its answer (a download keeps its bytes coming, so a
# multi-GB wheel is not cut by it), and is tried OBJECT_STORE_ATTEMPTS times in all: botocore's
# standard retry mode, the one retry policy (no transfer manager's retries on top). After a
# failure the store is left alone OBJECT_STORE_DOWN_S (one warning a run), then tried again.
OBJECT_STORE_CONNECT_S = 3.0
OBJECT_STORE_READ_S = 10.0
OBJECT_STORE_ATTEMPTS = 2
OBJECT_STORE_DOWN_S = 60.0

# Disk (`bisect gc`): nothing used this recently is removed, whatever the limits say: a wheel a
# build has just published may not have its row yet, and `bisect check` records nothing.
GC_GRACE_S = 600.0
# An in-use mark (infra/inuse.py) of a process on another host sharing the cache cannot be
# checked for life: it keeps what it marks this long after it was taken.
IN_USE_REMOTE_S = 86400.0
# The cache size cap applied after each bisection; None: no cap (BISECTOR_MAX_CACHE sets one).
MAX_CACHE: str | None = None

# Workers (`bisect worker`, PostgreSQL): each beats every WORKER_BEAT_S; one silent for
# WORKER_STALE_S is gone, and its job is handed to another worker (the attempt that was running
# can then write nothing). The coordinator looks at its round's probes every TASK_POLL_S.
WORKER_BEAT_S = float(_env("BISECTOR_WORKER_BEAT_S", "10"))
WORKER_STALE_S = float(_env("BISECTOR_WORKER_STALE_S", "60"))
TASK_POLL_S = float(_env("BISECTOR_TASK_POLL_S", "1"))
# SIGTERM (systemctl stop): a worker finishes its probe for this long, then hands it back.
WORKER_SHUTDOWN_S = 240.0

# The prior from the failure (core/prior.py): the share of the probability mass the evidence
# moves onto the commits it points at; the rest stays uniform (see core/prior.py for why 0.5).
PRIOR_WEIGHT = 0.5
# How often a running bisection's page in `bisect serve` asks whether it moved on (a new probe,
# an end); it reloads itself only then, and stops asking once the bisection is not running.
PAGE_POLL_S = float(_env("BISECTOR_PAGE_POLL_S", "2"))

# Never a silent wait (cli/progress.py). A download tells its progress at most every
# DOWNLOAD_EVENT_S (a 2.5 GB wheel comes in 2,500 chunks). Where stderr is no terminal (a log,
# CI), a step that has run STEP_LINE_AFTER_S gets a line, then one every STEP_LINE_EVERY_S,
# and a download a line with bytes, speed and time left every DOWNLOAD_LINE_S.
DOWNLOAD_EVENT_S = 0.2
STEP_LINE_AFTER_S = float(_env("BISECTOR_STEP_LINE_AFTER_S", "1"))
STEP_LINE_EVERY_S = 60.0
DOWNLOAD_LINE_S = float(_env("BISECTOR_DOWNLOAD_LINE_S", "5"))

# The oracle's environment (base/oracle_env.py): variables with these prefixes change what
# torch, dynamo, inductor, Triton and CUDA do (TORCH_LOGS, TORCHINDUCTOR_FREEZING, ...), so the
# ones a run inherits are recorded, key its verdicts and appear in the reproduce line.
ORACLE_ENV_PREFIXES = ("TORCH_", "TORCHINDUCTOR_", "TORCHDYNAMO_", "TRITON_", "CUDA_",
                       "PYTORCH_")

# The nightly watch's performance series (bisector/core/changepoint.py, app/watch/series.py):
# the significance level of a step (a two-sided rank test over build medians), and how far, in
# builds, a step may move as more nightlies arrive and still be the one already acted on.
WATCH_STEP_ALPHA = 0.01
WATCH_STEP_MOVE_BUILDS = 6

# Preparing the next probes while the oracle runs (run/prefetch.py): how many commits per GPU
# slot are made ahead at once (one per side of a probe: the two midpoints of the two halves),
# never while the cache's disk has less than PREFETCH_FREE_BYTES free (a CUDA nightly and its
# Triton are GBs). A source build is made ahead only on a build slot the round's probes do not
# need (--build-jobs beyond --jobs) and only when chance x build time exceeds the build time
# priced at SPECULATIVE_BUILD_PRICE of the GPU's (cores are cheaper than a GPU that waits):
# with one GPU both halves' midpoints (0.5 each) pay, with three GPUs' twelve candidates (1/4
# each) none does.
PREFETCH_PER_SLOT = int(_env("BISECTOR_PREFETCH_PER_SLOT", "2"))
PREFETCH_FREE_BYTES = 8 * 2**30
SPECULATIVE_BUILD_PRICE = 0.25

# `bisect plan`'s price of one model's run of PyTorch's benchmark script (the oracle of a
# dashboard report, --from-report), before that oracle has run in this store: loading the
# model, compiling it with inductor (cold, most of the time) and timing its iterations. A round
# figure, not a measurement here: a run of the oracle benchmarks every model of its range once
# a round, so it is priced at models x rounds x this (oracle/dashboard.py: benchmark_runs), and
# once it has run in the store its own runs price it instead.
BENCHMARK_MODEL_RUN_S = 120.0
