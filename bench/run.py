"""``make bench``: every figure is a ratio against a baseline measured in the same run.

1. Oracle runs used by the search vs the ideal ceil(log2 n), over random culprits; rounds with
   K probes at once vs ceil(log_(K+1) n) + 1; the demo's wall time with --jobs 2 vs --jobs 1.
2. Planning a 100k-commit range (bisector's history walk) vs ``git rev-list --count``.
3. From a cached ~1 GB wheel set to the oracle's first line: bisector's uv environments (a
   fresh environment from uv's warm cache, and a reused one) vs ``python -m venv`` +
   ``pip install`` of the same wheels; and the same inside a container of the runtime image.
5. A one-file C change built in the builder container with the repository's ccache volume
   warm, vs its parent built from an empty volume.
6. A lying oracle: right-culprit rate and oracle runs of plain bisection, majority-of-3 and the
   noisy posterior search, over simulated hunts (BENCH_NOISY_HUNTS per setting).
7. Build once, overlay many: source builds vs probes on a range with no prebuilt wheels
   (bench/build_reuse.py; BENCH_REUSE_COMMITS).
8. A prior from the failure: probes with the prior vs plain bisection on the same culprits, over
   simulated priors of varying quality, and the bound ceil(log2 n) + 2 (bench/prior.py;
   BENCH_PRIOR_HUNTS).
9. A small pure-Python project: a first bisection with a command oracle vs ``git bisect run``
   with the same oracle (bench/small_project.py; BENCH_SMALL_RUNS).
10. A GPU probe vs its oracle run directly: read from the recorded H100 proof
   (bench/gpu_overhead.py, oracles/proof/2026-11-25-probe-overhead/).
11. Change points over nightlies: detection rate, false alarms per 100 builds and delay of the
   watch's detector against a fixed X %-against-the-previous-build rule, on simulated series
   (bench/changepoints.py; BENCH_CP_SERIES; alone: make bench-changepoints).
12. An instant CLI: ``bisect --help``, ``bisect list`` on an empty store and a TAB completion vs
   ``python -c "import click"``; ``bisect list`` on a BENCH_STORE_MB store vs on an empty one
   of the same schema (bench/cli_start.py; BENCH_CLI_RUNS).
13. Performance on a drifting, bimodal machine: right / wrong-done / unsure rates and oracle
   runs of the shipped search (a t-test after every pair, the bisection's scale) against the
   Wilcoxon rule it replaced, on the same simulated hunts (bench/perf_drift.py;
   BENCH_PERF_HUNTS, 5000 a row; BENCH_PERF_BEFORE_HUNTS, 1000 of them for the replaced rule).
14. A flaky oracle over flake-only ranges, real regressions, a 60/40 mix and regressions that
   only raise the failure rate: right / wrong /
   unsure and oracle runs (confirmation included) against the Z-channel floor
   (bench/flaky_regression.py; BENCH_FLAKY_HUNTS, 500 a row).
15. Prefetch: the demo's nightly path over an index throttled to BENCH_WHEEL_S a wheel, a
   BENCH_ORACLE_S oracle: wall time / (oracle runs + the first probe's obtaining), with
   --prefetch 0 (today's order) and the default, same culprit and runs (bench/prefetch.py).
16. Read commands on a store of BENCH_READ_BISECTIONS (1,000) bisections: ``list``, ``show``,
   ``log`` vs ``python -c "import click"``, idle and loaded; a probe's own overhead
   (bench/read_commands.py).
17. A repository with no Python packaging (a 40-commit C project): a first bisection with the
   command oracle ``sh check.sh`` (compile, run) vs ``git bisect run`` with the same oracle
   (bench/tree_project.py; BENCH_TREE_RUNS, BENCH_TREE_FUNCS).
18. Questions of past bisections on a team's store (BENCH_QUERY_BISECTIONS, 100,000 bisections,
   BENCH_QUERY_RUNS, 20 runs each), SQLite and PostgreSQL: every `bisect list` filter,
   `--disagree`, `bisect commit` and the web list page vs ``SELECT count(*)`` of the same
   table; goal each <= 300 ms (bench/queries_at_scale.py).

``python -m bench.run --only planning`` (repeatable) runs only the named sections: probes,
rounds, demo, planning, env, builder, noisy, reuse, prior, small, gpu-overhead, changepoints, cli,
perf-drift, flaky-regression, prefetch, reads, tree, queries.

Sizes can be lowered for a quick look: BENCH_COMMITS, BENCH_WHEEL_MB, BENCH_C_FILES,
BENCH_NOISY_HUNTS. Sections can be picked by name: ``python -m bench.run cli prior`` (``make
bench SECTIONS="cli"``); ``python -m bench.run --list`` names them.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import hashlib
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from base64 import urlsafe_b64encode
from collections.abc import Callable
from pathlib import Path

import git

from bench.build_reuse import bench_build_reuse
from bench.changepoints import bench_changepoints
from bench.cli_start import bench_cli
from bench.flaky_regression import bench_flaky_regression
from bench.gpu_overhead import bench_gpu_overhead
from bench.perf_drift import bench_perf_drift
from bench.prefetch import bench_prefetch
from bench.prior import bench_prior
from bench.queries_at_scale import bench_queries
from bench.read_commands import bench_reads
from bench.small_project import bench_small_project
from bench.tree_project import bench_tree_project
from bisector.app.demo.torchlet import generate_linear
from bisector.artifacts.build_logs import describe_stats
from bisector.artifacts.installable import Installable
from bisector.core.search import Culprit, Next, Verdict, next_step
from bisector.executors.local import LocalExecutor
from bisector.project import history


def line(name: str, value: str) -> None:
    print(f"  {name:<58} {value}")


def bench_probes() -> None:
    print("1. oracle runs vs ceil(log2 n) (random culprits, no skips)")
    rng = random.Random(1)
    for n in (10, 100, 1_000, 10_000, 100_000):
        counts = []
        for _ in range(200):
            culprit = rng.randint(1, n - 1)
            known: dict[int, Verdict] = {}
            while True:
                step = next_step(n, known)
                if not isinstance(step, Next):
                    break
                for p in step.positions:
                    known[p] = Verdict.BAD if p >= culprit else Verdict.GOOD
            assert step == Culprit(culprit)
            counts.append(len(known))
        ideal = math.ceil(math.log2(n))
        line(f"n={n:>7}: runs mean {statistics.mean(counts):5.2f}, max {max(counts):3d}",
             f"ceil(log2 n)={ideal:3d} -> max/(ceil(log2 n)+2) = "
             f"{max(counts) / (ideal + 2):.2f}, mean/ceil(log2 n) = "
             f"{statistics.mean(counts) / ideal:.2f}")


def bench_rounds() -> None:
    """Rounds of K probes at once (multisection) vs the promise ceil(log_(K+1) n) + 1.

    A round is one call of the search, exactly as the runner makes them: the first round is
    the two endpoints (one after the other when K = 1), then K split points per round.
    """
    print("1b. rounds with K probes at once vs ceil(log_(K+1) n) + 1 (random culprits)")
    rng = random.Random(2)
    for k in (1, 2, 4, 8):
        for n in (10, 1_000, 100_000):
            worst = 0
            total = 0
            tries = 100
            for _ in range(tries):
                culprit = rng.randint(1, n - 1)
                known: dict[int, Verdict] = {}
                rounds = 0
                while True:
                    step = next_step(n, known, width=k)
                    if not isinstance(step, Next):
                        break
                    rounds += 1
                    for p in step.positions:
                        known[p] = Verdict.BAD if p >= culprit else Verdict.GOOD
                assert step == Culprit(culprit)
                worst, total = max(worst, rounds), total + rounds
            bound = math.ceil(math.log(n) / math.log(k + 1) - 1e-9) + 1
            line(f"K={k} n={n:>7}: rounds mean {total / tries:5.2f}, max {worst:3d}",
                 f"bound {bound:3d} -> max/bound = {worst / bound:.2f}")


def bench_demo_jobs(tmp: Path) -> None:
    """The bundled demo end to end (builds, environments, oracles) with 1 and 2 probes at once,
    each from an empty cache, on this machine."""
    print("1c. bisect demo wall time: --jobs 2 vs --jobs 1 (cold caches, same run)")
    times = {}
    for jobs in (1, 2):
        home = tmp / f"demo-{jobs}"
        env = {**os.environ, "BISECTOR_HOME": str(home)}
        env.pop("BISECTOR_CACHE_DIR", None)
        env.pop("BISECTOR_DB", None)
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "bisector", "demo", "--jobs", str(jobs)],
                           env=env, capture_output=True, text=True, check=False)
        times[jobs] = time.perf_counter() - t0
        if r.returncode != 0:
            line(f"--jobs {jobs}", f"failed: {r.stderr.strip().splitlines()[-1:]}")
            return
        line(f"--jobs {jobs}", f"{times[jobs]:.1f}s")
    line("--jobs 2 / --jobs 1", f"ratio {times[2] / times[1]:.2f}x")


def bench_planning(tmp: Path) -> None:
    commits = int(os.environ.get("BENCH_COMMITS", "100000"))
    print(f"2. planning a {commits}-commit range vs git rev-list --count")
    path = tmp / "linear"
    t = time.perf_counter()
    generate_linear(path, commits)
    line("generate the history (git fast-import)", f"{time.perf_counter() - t:.2f}s")
    repo = git.Repo(path)
    root = repo.git.rev_list("--max-parents=0", "HEAD").strip()

    def best(fn: object, k: int = 3) -> float:
        times = []
        for _ in range(k):
            t0 = time.perf_counter()
            fn()  # type: ignore[operator]
            times.append(time.perf_counter() - t0)
        return min(times)

    base = best(lambda: subprocess.run(["git", "-C", str(path), "rev-list", "--count",
                                        f"{root}..main"], check=True, capture_output=True))
    ours = best(lambda: history.resolve_range(repo, root, "main"))
    span = history.resolve_range(repo, root, "main")
    line(f"git rev-list --count ({len(span.candidates) - 1} commits)", f"{base * 1000:.0f} ms")
    line("bisector resolve_range (resolve, ancestry, first-parent list)",
         f"{ours * 1000:.0f} ms -> ratio {ours / base:.2f}x")


def _make_wheel(path: Path, name: str, mb: int) -> Path:
    """A valid, installable wheel of ``mb`` MiB of incompressible data (stored, not deflated)."""
    whl = path / f"{name}-1.0-py3-none-any.whl"
    records = []
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_STORED) as z:
        def add(arc: str, data: bytes) -> None:
            z.writestr(arc, data)
            digest = urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            records.append(f"{arc},sha256={digest},{len(data)}")
        add(f"{name}/__init__.py", b"LOADED = True\n")
        chunk = 16
        for i in range(max(1, mb // chunk)):
            add(f"{name}/lib/part{i:03d}.so", os.urandom(chunk << 20))
        di = f"{name}-1.0.dist-info"
        add(f"{di}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode())
        add(f"{di}/WHEEL", b"Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: true\n"
                           b"Tag: py3-none-any\n")
        records.append(f"{di}/RECORD,,")
        z.writestr(f"{di}/RECORD", "\n".join(records) + "\n")
    return whl


def bench_env(tmp: Path) -> None:
    mb = int(os.environ.get("BENCH_WHEEL_MB", "1024"))
    print(f"3. cached {mb} MiB wheel set -> oracle start")
    wheels_dir = tmp / "wheels"
    wheels_dir.mkdir()
    t = time.perf_counter()
    wheels = [_make_wheel(wheels_dir, f"heavy{i}", mb // 4) for i in range(4)]
    line("make 4 wheels of incompressible data", f"{time.perf_counter() - t:.1f}s")
    oracle = tmp / "oracle.py"
    oracle.write_text("import heavy0, heavy3\nprint('oracle started', heavy0.LOADED)\n")
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}

    def run(cmd: list[str]) -> None:
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)

    # bisector's own code path: LocalExecutor.ensure_env (uv venv + uv pip install from uv's
    # cache by hardlinks + facts collection), then the oracle, in a private cache directory.
    os.environ["BISECTOR_CACHE_DIR"] = str(tmp / "bisector-cache")
    executor = LocalExecutor(sys.executable, "heavy0")
    deps = tuple(str(w) for w in wheels[1:])

    def ours(key: str) -> float:
        t0 = time.perf_counter()
        venv = executor.ensure_env(Installable(key, "bench", wheel=wheels[0]), deps)
        run([str(venv / "bin" / "python"), str(oracle)])
        return time.perf_counter() - t0

    cold = ours("artifact-a")  # fills uv's cache: what the first probe of a wheel set pays
    warm = ours("artifact-b")  # another environment from the warm cache (hardlinks)
    reuse = ours("artifact-b")  # the environment exists: bisector's usual case on a re-probe

    t0 = time.perf_counter()
    run([sys.executable, "-m", "venv", str(tmp / "pip-env")])
    run([str(tmp / "pip-env" / "bin" / "python"), "-m", "pip", "install", "-q",
         "--no-index", "--disable-pip-version-check", *map(str, wheels)])
    run([str(tmp / "pip-env" / "bin" / "python"), str(oracle)])
    baseline = time.perf_counter() - t0
    line("baseline: python -m venv + pip install + oracle start", f"{baseline:.2f}s")
    line("bisector env, first one (cold uv cache)", f"{cold:.2f}s -> ratio "
         f"{cold / baseline:.3f}x")
    line("bisector env, new one from warm uv cache (hardlinks)",
         f"{warm:.2f}s -> ratio {warm / baseline:.3f}x")
    line("bisector's reused per-artifact environment", f"{reuse:.2f}s -> ratio "
         f"{reuse / baseline:.3f}x")
    bench_docker_env(tmp, wheels, oracle)


def bench_docker_env(tmp: Path, wheels: list[Path], oracle_path: Path) -> None:
    """The same wheel set into a container of the runtime image: DockerExecutor's environment
    volume (uv, hardlinks) against pip install inside the same image, oracle start included."""
    from bisector.base.defaults import RUNTIME_IMAGE as DEFAULT_IMAGE
    from bisector.executors.docker import DockerExecutor
    from bisector.infra.containers import client
    from bisector.oracle.script import load_oracle

    print(f"4. cached wheel set -> oracle start inside a container of {DEFAULT_IMAGE}")
    try:
        c = client()
        c.images.get(DEFAULT_IMAGE)
    except Exception as e:
        line("skipped", f"no engine or image ({str(e)[:60]}): run `make images`")
        return
    ex = DockerExecutor("heavy0", memory="4g")
    oracle = load_oracle(str(oracle_path))
    deps = tuple(str(w) for w in wheels[1:])

    # The extra wheels reach the container through /data (the executor's bind mount).
    (ex.data / "bench-wheels").mkdir(parents=True, exist_ok=True)
    extra = []
    for w in deps:
        shutil.copy(w, ex.data / "bench-wheels" / Path(w).name)
        extra.append(f"/data/bench-wheels/{Path(w).name}")

    def ours(key: str) -> float:
        inst = Installable(key, "bench", wheel=wheels[0], extra=tuple(extra))
        t0 = time.perf_counter()
        res = ex.run(inst=inst, oracle=oracle, commit="bench", run_dir=tmp / f"run-{key}-"
                     f"{time.monotonic_ns()}")
        assert res.exit_code == 0, res
        return time.perf_counter() - t0

    cold = ours("docker-a")
    warm = ours("docker-b")
    reuse = ours("docker-b")
    os.chmod(oracle_path.parent, 0o755)  # the image runs as a non-root user
    vols = {str(wheels[0].parent): {"bind": "/w", "mode": "ro"},
            str(oracle_path.parent): {"bind": "/o", "mode": "ro"}}
    t0 = time.perf_counter()
    c.containers.run(DEFAULT_IMAGE, ["sh", "-c", "python3 -m venv /tmp/v && /tmp/v/bin/pip "
                                     "install -q --no-index --disable-pip-version-check "
                                     "/w/*.whl && /tmp/v/bin/python /o/" + oracle_path.name],
                     volumes=vols, remove=True, network_mode="none")
    baseline = time.perf_counter() - t0
    line("baseline: container with python -m venv + pip install + oracle", f"{baseline:.2f}s")
    line("bisector docker env, first one (cold uv cache)", f"{cold:.2f}s -> ratio "
         f"{cold / baseline:.3f}x")
    line("bisector docker env, new one from warm uv cache (hardlinks)",
         f"{warm:.2f}s -> ratio {warm / baseline:.3f}x")
    line("bisector docker, reused environment (one container start)",
         f"{reuse:.2f}s -> ratio {reuse / baseline:.3f}x")


def _c_project(path: Path, files: int) -> list[str]:
    """A git repository with a C extension of ``files`` sources; commit 2 changes one file."""
    (path / "src").mkdir(parents=True)
    (path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "benchc"\nversion = "0.1"\n[tool.setuptools]\npackages = []\n')
    (path / "setup.py").write_text(
        "import glob\nfrom setuptools import Extension, setup\n"
        "setup(ext_modules=[Extension('benchc', sorted(glob.glob('src/*.c')))])\n")
    body = "\n".join(f"double f{{i}}_{j}(double x) {{ double y = x; "
                     f"for (int k = 0; k < {j + 3}; k++) y = y * 1.0001 + k / (x + {j + 1}.0); "
                     f"return y; }}" for j in range(200))
    for i in range(files):
        (path / "src" / f"m{i}.c").write_text(body.replace("{i}", str(i)))
    (path / "src" / "m0.c").write_text(
        (path / "src" / "m0.c").read_text() + "\n#include <Python.h>\n"
        "static struct PyModuleDef D = {PyModuleDef_HEAD_INIT, \"benchc\", 0, -1, 0};\n"
        "PyMODINIT_FUNC PyInit_benchc(void) { return PyModule_Create(&D); }\n")
    repo = git.Repo.init(path, initial_branch="main")
    repo.git.add("-A")
    repo.git.commit("-q", "-m", "all sources", "--author", "B <b@example.com>")
    first = repo.head.commit.hexsha
    with (path / "src" / "m1.c").open("a") as f:
        f.write("\ndouble changed(double x) { return x + 1; }\n")
    repo.git.commit("-q", "-am", "change one file", "--author", "B <b@example.com>")
    return [first, repo.head.commit.hexsha]


def bench_builder_ccache(tmp: Path) -> None:
    """A commit that changes one C file, built in the builder container after its parent (the
    repository's ccache volume warm) vs the parent's own build from an empty volume."""
    from bisector.artifacts.build import build_wheel
    from bisector.artifacts.docker_build import DockerBuilder, repository_id
    from bisector.base.defaults import BUILDER_IMAGE
    from bisector.infra.containers import client
    from bisector.project.profiles import Profile

    files = int(os.environ.get("BENCH_C_FILES", "40"))
    print(f"5. source build in {BUILDER_IMAGE}: one changed C file of {files}, ccache volume warm")
    try:
        client().images.get(BUILDER_IMAGE)
    except Exception as e:
        line("skipped", f"no engine or image ({str(e)[:60]}): run `make images`")
        return
    shas = _c_project(tmp / "cproj", files)
    repo = git.Repo(tmp / "cproj")
    prof = Profile(name="bench-c", distribution="benchc", import_name="benchc")
    b = DockerBuilder(repository_id(repo), requires=prof.build_requires)
    with contextlib.suppress(Exception):
        client().volumes.get(b.volume).remove(force=True)
    try:
        runs = [build_wheel(repo, sha, prof, python=sys.executable, builder=b) for sha in shas]
    finally:
        with contextlib.suppress(Exception):
            client().volumes.get(b.volume).remove(force=True)
    assert all(r.ok for r in runs), runs[-1].log_tail
    cold, warm = runs
    line("baseline: parent commit, empty ccache volume", f"{cold.duration_s:.2f}s "
         f"({describe_stats(cold.stats)})")
    line("child commit, same volume", f"{warm.duration_s:.2f}s -> ratio "
         f"{warm.duration_s / cold.duration_s:.3f}x ({describe_stats(warm.stats)})")


# -- 6. a lying oracle ------------------------------------------------------------------------

NoisyRow = dict[str, tuple[float, float]]


def _noisy_setting(setting: tuple[int, float, int]) -> NoisyRow:
    """Every strategy on one (n, wrong rate): the same culprits for all, each its own seeded
    oracle. NOISY runs twice: at 0.99, and at the accuracy majority-of-3 actually reached (the
    like-for-like cost comparison: same accuracy, fewer or more runs)."""
    from bisector.core.simulate import Strategy, hunt

    n, rate, hunts = setting
    seed = n * 1000 + round(rate * 100)
    culprits = random.Random(seed).choices(range(1, n), k=hunts)

    def measure(strategy: Strategy, confidence: float = 0.99) -> tuple[float, float]:
        rng = random.Random(seed + 1)
        found = [hunt(strategy, n, c, rate, rng, confidence) for c in culprits]
        right = sum(f == c for (f, _), c in zip(found, culprits, strict=True)) / hunts
        return right, statistics.mean(runs for _, runs in found)

    row = {s.value: measure(s) for s in Strategy}
    row["noisy@maj3"] = measure(Strategy.NOISY, row["majority3"][0])
    return row


def bench_noisy() -> None:
    """Section 6; runnable alone: ``python -c "from bench.run import bench_noisy; bench_noisy()"``.
    Settings run in parallel processes (the search is pure Python and CPU-bound)."""
    from concurrent.futures import ProcessPoolExecutor

    hunts = int(os.environ.get("BENCH_NOISY_HUNTS", "1000"))
    print(f"6. lying oracle: right-culprit rate / mean oracle runs, {hunts} hunts per setting")
    settings = [(n, rate, hunts) for rate in (0.1, 0.2, 0.3) for n in (100, 1_000, 10_000)]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=min(len(settings), os.cpu_count() or 1)) as pool:
        rows = list(pool.map(_noisy_setting, settings))
    print(f"  {'n':>6} {'wrong':>5} | {'plain':>12} | {'majority-3':>12} | {'noisy@0.99':>12}"
          f" | {'noisy@maj-3 accuracy':>20} | noisy@0.99 runs / maj-3 runs")
    for (n, rate, _), row in zip(settings, rows, strict=True):
        cells = [f"{row[k][0]:6.1%} {row[k][1]:5.1f}" for k in ("plain", "majority3", "noisy")]
        same = row["noisy@maj3"]
        print(f"  {n:>6} {rate:>5.0%} | " + " | ".join(cells) +
              f" | {same[0]:6.1%} {same[1]:5.1f} ({same[1] / row['majority3'][1]:4.2f}x)"
              f" | {row['noisy'][1] / row['majority3'][1]:.2f}x")
    goal = min(row["noisy"][0] for (_, rate, _), row in zip(settings, rows, strict=True)
               if rate == 0.2)
    # A hunt count gives the rate only within sampling error: P(this few right | truly 99 %).
    right = round(goal * hunts)
    p_value = sum(math.comb(hunts, i) * 0.99**i * 0.01 ** (hunts - i) for i in range(right + 1))
    verdict = "met" if goal >= 0.99 else ("within sampling error" if p_value > 0.05 else "NOT met")
    line("goal: noisy >= 99 % right at 20 % wrong answers",
         f"{verdict} (lowest {goal:.1%}; P(as low | 99 %) = {p_value:.2f})")
    line("the noisy@maj-3 column: runs at majority-of-3's own accuracy (x: vs its runs)",
         f"section took {time.perf_counter() - t0:.1f}s")


# Section names for ``--only``, in the order ``make bench`` runs them.
SECTIONS: dict[str, Callable[[Path], None]] = {
    "probes": lambda tmp: bench_probes(),
    "rounds": lambda tmp: bench_rounds(),
    "demo": bench_demo_jobs,
    "planning": bench_planning,
    "env": bench_env,
    "builder": bench_builder_ccache,
    "noisy": lambda tmp: bench_noisy(),
    "reuse": lambda tmp: bench_build_reuse(tmp, line),
    "prior": lambda tmp: bench_prior(),
    "small": lambda tmp: bench_small_project(tmp, line),
    "gpu-overhead": lambda tmp: bench_gpu_overhead(line),
    "changepoints": lambda tmp: bench_changepoints(),
    "cli": lambda tmp: bench_cli(line),
    "perf-drift": lambda tmp: bench_perf_drift(line),
    "flaky-regression": lambda tmp: bench_flaky_regression(line),
    "prefetch": lambda tmp: bench_prefetch(tmp, line),
    "reads": lambda _tmp: bench_reads(line),
    "tree": lambda tmp: bench_tree_project(tmp, line),
    "queries": lambda tmp: bench_queries(tmp, line),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="SECTION",
                        help=f"run only these sections: {', '.join(SECTIONS)}")
    parser.add_argument("--only", action="append", default=[], metavar="SECTION",
                        help="the same, one at a time (repeatable)")
    parser.add_argument("--list", action="store_true", help="name the sections")
    args = parser.parse_args(argv)
    if args.list:
        print(" ".join(SECTIONS))
        return
    chosen = [*args.names, *args.only] or list(SECTIONS)
    unknown = [n for n in chosen if n not in SECTIONS]
    if unknown:
        sys.exit(f"error: no bench section {unknown[0]!r}; pick from: {' '.join(SECTIONS)}")
    # bisector as pip installs it: its bytecode compiled. An editable install compiles
    # nothing, and where PYTHONDONTWRITEBYTECODE is set (CI here) every command would compile
    # all of bisector again, a fifth of a second no installed copy pays.
    compileall.compile_dir(str(Path(__file__).resolve().parent.parent / "bisector"), quiet=1)
    tmp = Path(tempfile.mkdtemp(prefix="bisector-bench-"))
    try:
        for name in SECTIONS:
            if name in chosen:
                SECTIONS[name](tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
