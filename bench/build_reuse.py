"""``make bench`` section 7: build once, overlay many.

A generated history with no prebuilt wheel anywhere and a Python regression, C changes spread
through it. Before source-built wheels served as overlay bases, every probe of such a range was
a source build (nothing else could give an installable torch); now a build serves every later
commit whose difference to it is overlay-safe. Measured on a real bisection (real builds, real
environments), so the ratio is source builds paid over probes made, in the same run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import select

from bisector.app.demo.torchlet import generate
from bisector.store import models as m
from bisector.store.db import open_store


def bench_build_reuse(tmp: Path, show: Callable[[str, str], None]) -> None:
    print("7. source builds on a range with no prebuilt wheels, a Python regression, C changes "
          "at 3 places")
    commits = int(os.environ.get("BENCH_REUSE_COMMITS", "120"))
    hist = generate(tmp / "reuse", commits=commits, culprit=commits * 2 // 3, broken=(),
                    seed=7117, release_at=None, side_branch_at=None,
                    c_churn=(commits // 5, commits // 2, commits * 4 // 5))
    home = tmp / "reuse-home"
    env = {**os.environ, "BISECTOR_HOME": str(home)}
    env.pop("BISECTOR_CACHE_DIR", None)
    env.pop("BISECTOR_DB", None)
    r = subprocess.run([sys.executable, "-m", "bisector", "start", "--repo", str(hist.path),
                        "--good", hist.main[0], "--bad", hist.main[-1], "--oracle",
                        "torchlet_norm", "--no-confirm", "--json"], env=env,
                       capture_output=True, text=True, check=False)
    if r.returncode != 0:
        show("bisection", f"failed: {r.stderr.strip().splitlines()[-1:]}")
        return
    d = json.loads(r.stdout)
    with open_store(str(home / "data" / "bisector.db"), create=False).session() as s:
        kinds = [a.kind for a in s.scalars(select(m.Artifact))]
    probes, builds = int(d["oracle_runs"]), kinds.count("source")
    right = d["culprit"]["sha"] == hist.culprit
    show(f"probes ({commits} commits; before: each one a source build)", f"{probes}")
    show("source builds now (the rest overlays on them)",
         f"{builds} ({kinds.count('overlay')} overlays) -> ratio {builds / probes:.2f}x"
         f"{'' if right else ' WRONG CULPRIT'}")
