"""``make bench`` section 15: a bisection against its physical limit, with and without the
prefetch (run/prefetch.py).

The demo's nightly path (torchlet nightlies, overlays on them) served by a local index whose
every wheel download is throttled to BENCH_WHEEL_S seconds (one connection's rate, as a CDN
serves a 1 GB CUDA wheel in about the time an oracle runs), and a deterministic oracle that
takes BENCH_ORACLE_S seconds (the demo's check, then a sleep). The limit of a bisection is its
oracle runs one after the other plus the first probe's obtaining (nothing can hide that one);
the ratio is the wall time of ``bisect start`` over that limit, for ``--prefetch 0`` (each
probe obtains its torch when chosen: the code before the prefetch) and for the default, in the
same run, each from an empty cache, interleaved. Both must name the same culprit with the same
number of oracle runs.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bisector.app.demo import nightlies
from bisector.app.demo.index import IndexServer
from bisector.app.demo.torchlet import generate
from bisector.base import defaults

ORACLE = '''# /// script
# dependencies = []
# [tool.bisector]
# description = "torchlet.norm([3, 4]) must be 5, then {s} s of work"
# timeout = 120
# ///
import sys, time
import torchlet
ok = abs(torchlet.norm([3.0, 4.0]) - 5.0) < 1e-9
time.sleep({s})
sys.exit(0 if ok else 1)
'''


# Above ruff's limits on purpose: one bench row's settings, named at its two calls.
def run_once(tmp: Path, hist_path: Path, good: str, bad: str, index: str, oracle: Path,  # noqa: PLR0913
             prefetch: int | None, tag: str, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """One ``bisect start`` from an empty home: its wall time, culprit, runs and limit."""
    home = tmp / f"prefetch-home-{tag}"
    env = {**os.environ, "BISECTOR_HOME": str(home)}
    for k in ("BISECTOR_CACHE_DIR", "BISECTOR_DB"):
        env.pop(k, None)
    cmd = [sys.executable, "-m", "bisector", "start", "--repo", str(hist_path), "--good", good,
           "--bad", bad, "--nightly-index", index, "--oracle", str(oracle), "--no-confirm",
           "--python", sys.executable, "--json",
           *(["--prefetch", str(prefetch)] if prefetch is not None else []), *extra]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"bisect start failed: {r.stderr.strip().splitlines()[-1:]}")
    d = json.loads(r.stdout)
    ran = [p for p in d["probes"] if not p["reused"] and p.get("phases")]
    oracle_s = sum(float(p["phases"]["oracle"]) for p in ran)
    first = float(ran[0]["phases"]["obtain"]) if ran else 0.0
    hidden = sum(sum((p["facts"].get("ahead") or {}).values()) for p in ran)
    return {"wall": wall, "culprit": d["culprit"]["sha"], "runs": len(ran),
            "limit": oracle_s + first, "hidden": hidden}


def bench_prefetch(tmp: Path, show: Callable[[str, str], None]) -> None:
    wheel_s = float(os.environ.get("BENCH_WHEEL_S", "2"))
    oracle_s = float(os.environ.get("BENCH_ORACLE_S", "2"))
    runs = int(os.environ.get("BENCH_PREFETCH_RUNS", "1"))
    print(f"15. prefetch: the nightly path, each wheel download {wheel_s:g} s, a {oracle_s:g} s "
          f"oracle: wall / (oracle runs + first obtaining), --prefetch 0 vs default")
    hist = generate(tmp / "prefetch-hist", nightly_every=defaults.DEMO_NIGHTLY_EVERY)
    root = tmp / "prefetch-index"
    nightlies.publish(hist, root)
    oracle = tmp / "prefetch_oracle.py"
    oracle.write_text(ORACLE.replace("{s}", f"{oracle_s:g}"))
    days = [nightlies.day(stamp) for _, _, stamp in hist.nightlies]
    got: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    with IndexServer(root) as server:
        server.state.slow_s = wheel_s
        index = server.index_url("nightly-cpu")
        for i in range(runs):  # interleaved: a busy machine weighs on both alike
            for name, prefetch in (("before", 0), ("after", None)):
                got[name].append(run_once(tmp, hist.path, days[1], days[-1], index, oracle,
                                          prefetch, f"{name}-{i}"))
        # Builds in place of downloads: no index, every probe built from source, a build slot
        # beyond the probe's (a build box, or idle cores) for the next round's candidates.
        for i in range(runs):
            for name, prefetch in (("built before", 0), ("built after", None)):
                got.setdefault(name, []).append(run_once(
                    tmp, hist.path, hist.main[0], hist.main[-1], "", oracle, prefetch,
                    f"{name[-5:]}-build-{i}", ("--no-prebuilt", "--build-jobs", "3")))
    ratios = {}
    for name, label in (("before", "--prefetch 0 (each probe obtains when chosen)"),
                        ("after", "default (the next probes made while the oracle runs)"),
                        ("built before", "source builds, --build-jobs 3, --prefetch 0"),
                        ("built after", "source builds, --build-jobs 3, default")):
        rows = got[name]
        ratio = statistics.median(r["wall"] / r["limit"] for r in rows)
        ratios[name] = ratio
        r = rows[0]
        show(label, f"wall {statistics.median(x['wall'] for x in rows):.1f}s, limit "
                    f"{r['limit']:.1f}s ({r['runs']} oracle runs), ratio {ratio:.2f}x; "
                    f"{r['hidden']:.1f}s made ahead")
    for before, after in (("before", "after"), ("built before", "built after")):
        same = {(r["culprit"], r["runs"]) for r in got[before] + got[after]}
        show(f"{after.replace('after', '').strip() or 'downloads'}: same culprit and oracle "
             f"runs both ways", "yes" if len(same) == 1 else f"NO: {same}")
        show(f"target: default <= 1.15x ({after.replace('after', '').strip() or 'downloads'})",
             f"{'met' if ratios[after] <= 1.15 else 'NOT met'} ({ratios[after]:.2f}x; was "
             f"{ratios[before]:.2f}x)")
